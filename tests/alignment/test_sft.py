"""SFT loop: a few dozen steps on a nano model lower the response NLL of the training pairs (measured with a
plain log_softmax reference, not the loop's own numbers), metrics.csv and the checkpoint load back, the
CLI runs and rejects bad configs."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
import torch

from alignment.loop import parse_stage_config
from alignment.sft import SFTConfig, main, train_sft
from alignment.tasks.arithmetic import carry_slip, sft_example
from alignment.tasks.data import demonstrations, load_task
from alignment.tasks.rewards import r1_zero_reward_fn
from model.training.checkpoint import load_model
from tests.alignment.helpers import save_nano_run


@pytest.fixture()
def base_run(tmp_path):
    return save_nano_run(tmp_path, context_length=192)


def reference_nll(model, pairs) -> float:
    """Mean over pairs of the summed NLL of response bytes + EOS, by log_softmax over the full sequence."""
    total = 0.0
    with torch.no_grad():
        for prompt, response in pairs:
            p, r = list(prompt.encode()), list(response.encode()) + [256]
            ids = torch.tensor([p + r])
            logp = torch.log_softmax(model(ids[:, :-1]).double(), dim=-1)[0]  # (T-1, V)
            total -= sum(float(logp[len(p) - 1 + j, t]) for j, t in enumerate(r))
    return total / len(pairs)


def small_cfg(run, tok, out, **kw) -> SFTConfig:
    base = dict(model=str(run), tokenizer=str(tok), task="arithmetic", n_train=24, n_test=4, lr=3e-3, warmup_steps=2,
                batch_size=8, grad_accum=2, steps=30, eval_interval=15, max_new_tokens=24, out_dir=str(out), seed=0)
    return SFTConfig(**{**base, **kw})


def test_sft_lowers_training_loss_and_checkpoint_loads(base_run, tmp_path):
    run, tok = base_run
    cfg = small_cfg(run, tok, tmp_path / "sft")
    train, _ = load_task(cfg)
    pairs = [sft_example(item, "short") for item in train]
    before = reference_nll(load_model(run).eval(), pairs)
    summary = train_sft(cfg)
    after_model = load_model(tmp_path / "sft")  # save_checkpoint format, read by model.training.checkpoint
    after = reference_nll(after_model, pairs)
    print(f"reference NLL before {before:.2f} after {after:.2f}")
    assert after < 0.8 * before, (before, after)
    metrics = pd.read_csv(tmp_path / "sft" / "metrics.csv")
    assert list(metrics["step"]) == list(range(1, 31))
    assert metrics["val_accuracy"].notna().sum() == 2  # steps 15 and 30
    assert metrics["loss"].iloc[-5:].mean() < metrics["loss"].iloc[:5].mean()
    assert summary["task"] == "arithmetic" and summary["n"] == 4 and 0 <= summary["accuracy"] <= 1


def test_sft_cli_and_report(base_run, tmp_path):
    run, tok = base_run
    report = tmp_path / "alignment.csv"
    argv = ["--model", str(run), "--tokenizer", str(tok), "--n-train", "8", "--n-test", "2", "--steps", "2",
            "--batch-size", "4", "--max-new-tokens", "8", "--out-dir", str(tmp_path / "cli"), "--report", str(report),
            "--params", "none", "--metrics", str(tmp_path / "m" / "sft.json")]
    assert main(argv) == 0
    assert pd.read_csv(report)["stage"].tolist() == ["sft"]
    assert load_model(tmp_path / "cli").cfg.vocab_size == 257
    assert json.loads((tmp_path / "m" / "details" / "sft.json").read_text())["n"] == 2


def test_sft_cli_bad_input_exits_2(base_run, tmp_path, capsys):
    run, tok = base_run
    for argv in (["--model", str(tmp_path / "nope"), "--tokenizer", str(tok)],
                 ["--model", str(run), "--tokenizer", str(tok), "--steps", "0"],
                 ["--model", str(run), "--tokenizer", str(tok), "--task", "chess"]):
        capsys.readouterr()
        assert main(argv + ["--out-dir", str(tmp_path / "bad"), "--params", "none"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ")


@pytest.mark.parametrize("field,value", [("lr", 0.0), ("teacher_slip", 1.5), ("batch_size", 0),
                                         ("template", "no placeholder"), ("eval_interval", -1),
                                         ("normalize_constant", 0.0)])
def test_config_rejects_bad_values_naming_the_field(field, value):
    with pytest.raises(ValueError, match=f"sft.{field}"):
        SFTConfig(model="m", **{field: value})


def test_params_section_gives_defaults_and_flags_win(base_run, tmp_path):
    run, tok = base_run
    params = tmp_path / "params.yaml"
    params.write_text(f"sft:\n  model: {run}\n  steps: 7\n  lr: 0.5\n")
    cfg = parse_stage_config(SFTConfig, "sft", ["--params", str(params), "--lr", "0.25"])
    assert (cfg.model, cfg.steps, cfg.lr, cfg.batch_size) == (str(run), 7, 0.25, SFTConfig.batch_size)
    params.write_text("sft:\n  stepz: 7\n")
    with pytest.raises(ValueError, match="unknown key.*stepz"):
        parse_stage_config(SFTConfig, "sft", ["--params", str(params)])


def test_none_flag_overrides_a_params_value(tmp_path):
    """``--metrics none`` clears the params.yaml path (it used to write a file named 'none')."""
    params = tmp_path / "params.yaml"
    params.write_text("sft:\n  model: m\n  metrics: metrics/sft.json\n  report: reports/a.csv\n")
    cfg = parse_stage_config(SFTConfig, "sft", ["--params", str(params), "--metrics", "none"])
    assert (cfg.metrics, cfg.report) == (None, "reports/a.csv")
    cfg = parse_stage_config(SFTConfig, "sft", ["--params", str(params), "--metrics", "m.json"])
    assert cfg.metrics == "m.json"


def test_demonstrations_follow_the_configured_teacher():
    cfg = SFTConfig(model="m", task="arithmetic", n_train=300, n_test=0, digits=1, held_out="wording",
                    teacher_slip=1.0)
    train, _ = load_task(cfg)
    correct = [r1_zero_reward_fn(response, item["answer"])["reward"] == 1.0
               for (_, response), item in zip(demonstrations(cfg, train), train)]
    assert correct == [carry_slip(item) is None for item in train] and 0 < sum(correct) < len(train)
    clean = SFTConfig(model="m", task="arithmetic", n_train=300, n_test=0, digits=1, held_out="wording")
    assert all(r1_zero_reward_fn(r, item["answer"])["reward"] == 1.0
               for (_, r), item in zip(demonstrations(clean, train), train))


def test_help_shows_params_values_and_required_fields(tmp_path, capsys):
    params = tmp_path / "params.yaml"
    params.write_text("sft:\n  steps: 7\n")
    with pytest.raises(SystemExit) as done:
        main(["--params", str(params), "--help"])
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps help lines
    assert done.value.code == 0
    assert re.search(r"--steps STEPS [^-]*\(default: 7\)", text) and "(default: required)" in text


def test_a_rerun_removes_what_a_killed_checkpoint_write_left(base_run, tmp_path):
    run, tok = base_run
    out = tmp_path / "sft"
    out.mkdir()
    stale = out / ".ckpt-00000004.pt.k1ll3d.tmp"  # a SIGKILL while the last run wrote its checkpoint
    stale.write_bytes(b"\0" * 4096)
    train_sft(small_cfg(run, tok, out, steps=2, eval_interval=2))
    assert not stale.exists() and not list(out.glob(".*.tmp"))


def test_a_folder_holding_another_run_is_refused_in_one_line(base_run, tmp_path, capsys):
    run, tok = base_run
    out = tmp_path / "sft"
    train_sft(small_cfg(run, tok, out, steps=4, eval_interval=4))
    capsys.readouterr()
    code = main(["--model", str(run), "--tokenizer", str(tok), "--task", "arithmetic", "--n-train", "24",
                 "--n-test", "4", "--steps", "2", "--out-dir", str(out), "--params", "none"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "holds another run" in err[0] and "steps 4 (given 2)" in err[0]
    assert json.loads((out / "latest").read_text())["step"] == 4  # the first run is left as it was
