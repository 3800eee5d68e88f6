"""Kill-safety of the alignment loop: a run stopped after any step and run again with the same settings ends with
the weights (torch.equal) and metrics rows of an uninterrupted run, having redone at most one checkpoint interval;
a finished run is not trained or reported twice; a bad newest checkpoint falls back to the one before in one line,
none loading is one line and exit 2 (``--restart`` starts over); a prompt + token limit beyond the context and a full
disk are one line, exit 2. The subprocess SIGKILL matrix is tests/reliability."""

from __future__ import annotations

import copy
import errno
import json

import pandas as pd
import pytest
import torch

from alignment import loop
from alignment.dpo import DPOConfig, train_dpo
from alignment.grpo import GRPOConfig, train_grpo
from alignment.rft import RFTConfig, train_rft
from alignment.sft import SFTConfig, main, train_sft
from alignment.tasks.digits import digit_splits, solution
from model.training.checkpoint import load_latest, read_latest
from tests.alignment.helpers import ByteHFTokenizer, save_nano_run

TIME_COLUMNS = ("seconds", "rollout_seconds", "train_seconds")


@pytest.fixture()
def base_run(tmp_path):
    return save_nano_run(tmp_path, context_length=192)


class Killed(Exception):
    """Stands for SIGKILL: the run stops between a step's work and its metrics row."""


def kill_after(monkeypatch, step: int) -> None:
    """The next run stops after training ``step`` (its row, and anything after it, never written)."""
    real = loop.write_metrics_row

    def write_row(path, columns, row, new):
        if row.get("step", row.get("round")) == step:
            monkeypatch.setattr(loop, "write_metrics_row", real)
            raise Killed
        real(path, columns, row, new)

    monkeypatch.setattr(loop, "write_metrics_row", write_row)


def count_a(response: str, item: dict) -> dict:
    share = response.count("a") / max(1, len(response))
    return {"reward": share, "format_reward": 0.0, "answer_reward": share}


def half_right(prompts, seed):  # RFT's sampler: every other question right, so every round trains
    right = {item["question"]: solution(item) for item in digit_splits(40, 0, 0)[0]}
    questions = [p.split("User: ")[1].split("\n")[0] for p in prompts]
    out = [right[q] if i % 2 == 0 else " 0 </think> <answer> 0 </answer>" for i, q in enumerate(questions)]
    return out, [False] * len(out)


def trainer_run(name: str, run, tok, out):
    """(a function running trainer ``name`` into ``out``, the step it is killed after): 6 steps (RFT: rounds until
    its budget, about 6), a checkpoint every 2, killed after step 5 (one step past a checkpoint)."""
    common = dict(model=str(run), tokenizer=str(tok), out_dir=str(out), seed=0, ckpt_interval=2, n_test=2)
    if name == "sft":
        cfg = SFTConfig(**common, task="arithmetic", n_train=24, lr=3e-3, warmup_steps=2, batch_size=4, steps=6,
                        eval_interval=3, max_new_tokens=8)
        return (lambda: train_sft(cfg)), 5
    if name == "dpo":
        cfg = DPOConfig(**common, task="arithmetic", n_train=16, beta=0.5, lr=3e-3, warmup_steps=2, batch_size=4,
                        steps=6, eval_interval=3, max_new_tokens=4)
        return (lambda: train_dpo(cfg)), 5
    if name == "grpo":
        cfg = GRPOConfig(**common, n_train=16, steps=6, lr=1e-3, rollout_batch_size=8, group_size=4,
                         train_batch_size=8, grad_accum=2, max_new_tokens=6, eval_interval=3)
        return (lambda: train_grpo(cfg, reward_fn=count_a)), 5
    cfg = RFTConfig(**common, task="digits", n_train=40, token_budget=2500, rollout_batch_size=8, group_size=4,
                    batch_size=4, lr=1e-3, eval_interval=3, max_new_tokens=40)
    return (lambda: train_rft(cfg, sample_fn=half_right)), 5


def final_weights(out) -> dict:
    return load_latest(out)[1]["model"]


def metrics(out) -> pd.DataFrame:
    frame = pd.read_csv(out / "metrics.csv")
    return frame.drop(columns=[c for c in TIME_COLUMNS if c in frame])


@pytest.mark.parametrize("name", ["sft", "dpo", "grpo", "rft"])
def test_a_killed_run_continues_to_the_uninterrupted_weights(name, base_run, tmp_path, monkeypatch, capsys):
    run, tok = base_run
    whole, _ = trainer_run(name, run, tok, tmp_path / "whole")
    expected = whole()
    rerun, kill = trainer_run(name, run, tok, tmp_path / "killed")
    kill_after(monkeypatch, kill)
    with pytest.raises(Killed):
        rerun()
    assert read_latest(tmp_path / "killed")["step"] == 4  # the last checkpoint before the kill
    capsys.readouterr()
    got = rerun()
    assert "from ckpt-00000004.pt" in capsys.readouterr().err  # redid steps 5.., one interval at most
    want, have = final_weights(tmp_path / "whole"), final_weights(tmp_path / "killed")
    assert want.keys() == have.keys() and all(torch.equal(want[k], have[k]) for k in want)
    pd.testing.assert_frame_equal(metrics(tmp_path / "whole"), metrics(tmp_path / "killed"))
    assert got["steps"] == expected["steps"] and got.get("accuracy") == expected.get("accuracy")
    assert not list((tmp_path / "killed").glob(".*.tmp"))


def sft_argv(run, tok, out, *more) -> list[str]:
    return ["--model", str(run), "--tokenizer", str(tok), "--task", "arithmetic", "--n-train", "24", "--n-test", "2",
            "--steps", "4", "--eval-interval", "0", "--ckpt-interval", "2", "--max-new-tokens", "8", "--batch-size",
            "4", "--out-dir", str(out), "--params", "none", *more]


def test_a_finished_run_is_not_trained_or_reported_twice(base_run, tmp_path, capsys):
    run, tok = base_run
    out, report = tmp_path / "sft", tmp_path / "report.csv"
    assert main(sft_argv(run, tok, out, "--report", str(report))) == 0
    first = read_latest(out)
    capsys.readouterr()
    assert main(sft_argv(run, tok, out, "--report", str(report))) == 0
    captured = capsys.readouterr()
    assert "nothing to train" in captured.err and "sft: 4 steps" in captured.out
    assert read_latest(out) == first and len(pd.read_csv(report)) == 1


def test_a_corrupt_newest_checkpoint_falls_back_in_one_line(base_run, tmp_path, caplog):
    run, tok = base_run
    out = tmp_path / "sft"
    exact = ("--steps", "6", "--threads", "1", "--deterministic")  # as a user checks a resumed run bit for bit
    assert main(sft_argv(run, tok, out, *exact)) == 0
    files = [c["file"] for c in read_latest(out)["checkpoints"]]
    assert files == ["ckpt-00000006.pt", "ckpt-00000004.pt"]  # keep_last 2
    expected = final_weights(out)
    raw = (out / files[0]).read_bytes()
    (out / files[0]).write_bytes(raw[: len(raw) // 2])
    caplog.clear()
    assert main(sft_argv(run, tok, out, *exact)) == 0  # from step 4: steps 5-6 again
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "ckpt" in r.getMessage()]
    assert len(warnings) == 1 and files[0] in warnings[0] and "\n" not in warnings[0]
    assert all(torch.equal(expected[k], v) for k, v in final_weights(out).items())


def test_every_checkpoint_corrupt_is_one_line_and_restart_starts_over(base_run, tmp_path, capsys):
    run, tok = base_run
    out = tmp_path / "sft"
    assert main(sft_argv(run, tok, out)) == 0
    for path in out.glob("ckpt-*.pt"):
        path.write_bytes(path.read_bytes()[:100])
    capsys.readouterr()
    assert main(sft_argv(run, tok, out)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error:") and "--restart" in err[-1]
    assert main(sft_argv(run, tok, out, "--restart")) == 0
    assert read_latest(out)["step"] == 4 and load_latest(out) is not None


def test_max_new_tokens_beyond_the_context_is_one_line(base_run, tmp_path, capsys):
    run, tok = base_run  # a 192-token model; GRPO's old built-in default asked for 1024 new tokens
    assert main(sft_argv(run, tok, tmp_path / "sft", "--max-new-tokens", "1024")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "context of 192 tokens" in err[0] and "--max-new-tokens" in err[0]
    assert not list((tmp_path / "sft").glob("ckpt-*.pt"))


def test_a_full_disk_is_one_line_and_the_rerun_continues(base_run, tmp_path, monkeypatch, capsys):
    run, tok = base_run
    out = tmp_path / "sft"
    real_save = torch.save

    def full(state, fh, *args, **kwargs):
        if state.get("step") == 4:
            raise OSError(errno.ENOSPC, "No space left on device", str(out / ".ckpt-00000004.pt.x.tmp"))
        real_save(state, fh, *args, **kwargs)

    monkeypatch.setattr(torch, "save", full)
    assert main(sft_argv(run, tok, out)) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "No space left on device" in errors[0] and str(out) in errors[0]
    assert read_latest(out)["step"] == 2 and not list(out.glob(".*.tmp"))  # the earlier checkpoint intact
    monkeypatch.setattr(torch, "save", real_save)
    assert main(sft_argv(run, tok, out)) == 0
    assert read_latest(out)["step"] == 4


def test_rft_reports_the_rounds_it_ran(base_run, tmp_path, capsys):
    run, tok = base_run
    train, _ = trainer_run("rft", run, tok, tmp_path / "rft")
    summary = train()
    rounds = len(pd.read_csv(tmp_path / "rft" / "metrics.csv"))
    assert summary["steps"] == summary["rounds"] == rounds < 1000
    assert json.loads((tmp_path / "rft" / "latest").read_text())["step"] == rounds


def test_a_hugging_face_model_continues_to_the_uninterrupted_weights(tmp_path, monkeypatch):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=257, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
                                      eos_token_id=256, pad_token_id=256, bos_token_id=None)
    start = transformers.LlamaForCausalLM(config)

    def run(out):
        cfg = SFTConfig(model="hf", task="arithmetic", n_train=16, n_test=2, steps=6, ckpt_interval=2, batch_size=4,
                        lr=1e-2, warmup_steps=0, eval_interval=0, max_new_tokens=4, out_dir=str(out))
        return train_sft(cfg, copy.deepcopy(start), ByteHFTokenizer())

    run(tmp_path / "whole")
    kill_after(monkeypatch, 5)
    with pytest.raises(Killed):
        run(tmp_path / "killed")
    assert read_latest(tmp_path / "killed")["step"] == 4 and not (tmp_path / "killed" / "hf").exists()
    summary = run(tmp_path / "killed")
    assert summary["checkpoint"] == str(tmp_path / "killed" / "hf")
    want, got = (transformers.LlamaForCausalLM.from_pretrained(tmp_path / name / "hf").state_dict()
                 for name in ("whole", "killed"))
    assert all(torch.equal(want[k], got[k]) for k in want)
