"""DPO loop: one step's loss equals -log σ(β·margin) from log-probs summed by a naive per-token log_softmax loop
(not alignment.core.policy), a few dozen steps on a nano model raise the implicit reward margin of the training pairs
(measured with the same naive loop against the untouched starting weights) while the reference stays frozen,
metrics.csv and the checkpoint load back, a pairs file with a bad line trains, the CLI runs and rejects bad input."""

from __future__ import annotations

import copy
import json
import math

import pandas as pd
import pytest
import torch

import alignment.dpo as dpo
from alignment.dpo import DPOConfig, main, train_dpo
from alignment.tasks.data import load_pairs
from alignment.tasks.datasets import DataWarning
from model.core.config import ModelConfig
from model.core.transformer import TransformerLM
from model.training.checkpoint import load_model, save_checkpoint
from tests.alignment.helpers import ByteHFTokenizer, byte_tokenizer

EOS = 256
COLUMNS = ["step", "lr", "loss", "reward_accuracy", "reward_margin", "chosen_reward", "rejected_reward",
           "logp_chosen", "logp_rejected", "grad_norm", "val_pref_accuracy", "val_margin", "val_accuracy",
           "val_format_rate", "seconds"]


def nano(seed: int) -> TransformerLM:
    torch.manual_seed(seed)
    return TransformerLM(ModelConfig.from_preset("nano", vocab_size=257, context_length=192))


@pytest.fixture()
def runs(tmp_path):
    """(policy run, reference run with other weights, tokenizer folder)."""
    for name, seed in (("base", 0), ("other", 1)):
        model = nano(seed)
        save_checkpoint(tmp_path / name, 0, {"model": model.state_dict(), "model_config": model.cfg.to_dict()})
    tok = tmp_path / "tok"
    tok.mkdir()
    byte_tokenizer().save(tok / "vocab.json", tok / "merges.txt")
    return tmp_path / "base", tmp_path / "other", tok


def naive_logp(model, prompt: str, response: str) -> float:
    """Σ log p(response bytes + EOS | prompt), one sequence at a time, token by token, in float64."""
    p, r = list(prompt.encode()), list(response.encode()) + [EOS]
    ids = torch.tensor([p + r])
    with torch.no_grad():
        logits = model(ids[:, :-1])[0].double()  # (T-1, V)
    total = 0.0
    for j, token in enumerate(r):
        row = logits[len(p) - 1 + j]
        total += float(row[token] - torch.logsumexp(row, dim=0))
    return total


def naive_margins(policy, reference, pairs, beta: float) -> list[float]:
    return [beta * ((naive_logp(policy, x["prompt"], x["chosen"]) - naive_logp(reference, x["prompt"], x["chosen"]))
                    - (naive_logp(policy, x["prompt"], x["rejected"])
                       - naive_logp(reference, x["prompt"], x["rejected"]))) for x in pairs]


def small_cfg(run, tok, out, **kw) -> DPOConfig:
    base = dict(model=str(run), tokenizer=str(tok), task="arithmetic", n_train=16, n_test=4, beta=0.5, lr=3e-3,
                warmup_steps=2, batch_size=8, steps=24, eval_interval=12, max_new_tokens=4, out_dir=str(out), seed=0)
    return DPOConfig(**{**base, **kw})


@pytest.mark.parametrize("field,value", [("beta", 0.0), ("beta", -0.1), ("beta", float("nan")), ("lr", 0.0),
                                         ("steps", 0), ("batch_size", 0), ("eval_interval", -1),
                                         ("template", "no placeholder"), ("task", "chess")])
def test_config_rejects_bad_values_naming_the_field(field, value):
    with pytest.raises(ValueError, match=f"dpo.{field}"):
        DPOConfig(model="m", **{field: value})


def test_config_task_none_needs_pairs():
    with pytest.raises(ValueError, match="dpo.pairs"):
        DPOConfig(model="m", task="none")


def test_one_step_loss_matches_naive_dpo_loss(runs, tmp_path):
    run, other, tok = runs
    beta = 0.3
    # batch_size == n_train: step 1's microbatch is exactly the 4 training pairs; a different reference model
    # makes the margins non-zero before any update.
    cfg = small_cfg(run, tok, tmp_path / "one", reference=str(other), n_train=4, n_test=0, batch_size=4, steps=1,
                    beta=beta, task="arithmetic")
    train, _, _ = load_pairs(cfg)
    policy, reference = load_model(run), load_model(other)
    assert all(len((x["prompt"] + x["rejected"]).encode()) + 1 < 192 for x in train)  # nothing is cut
    margins = naive_margins(policy, reference, train, beta)
    expected_loss = sum(math.log1p(math.exp(-m)) for m in margins) / len(margins)  # -log σ(m)
    train_dpo(cfg)
    row = pd.read_csv(tmp_path / "one" / "metrics.csv").iloc[0]
    print(f"loss {row['loss']:.6f} expected {expected_loss:.6f}, margins {margins}")
    assert abs(expected_loss - math.log(2)) > 1e-3  # the reference really differs
    assert row["loss"] == pytest.approx(expected_loss, rel=1e-4, abs=1e-5)
    assert row["reward_margin"] == pytest.approx(sum(margins) / len(margins), rel=1e-4, abs=1e-5)
    assert row["reward_accuracy"] == pytest.approx(sum(m > 0 for m in margins) / len(margins))
    chosen = [naive_logp(policy, x["prompt"], x["chosen"]) for x in train]
    assert row["logp_chosen"] == pytest.approx(sum(chosen) / len(chosen), rel=1e-4)


def test_dpo_learns_keeps_reference_frozen_and_checkpoint_loads(runs, tmp_path, monkeypatch):
    run, _, tok = runs
    cfg = small_cfg(run, tok, tmp_path / "dpo")
    copies = []
    real_deepcopy = copy.deepcopy

    def spy(obj, *args):
        out = real_deepcopy(obj, *args)
        copies.append(out)
        return out

    monkeypatch.setattr(dpo.copy, "deepcopy", spy)
    model, start = load_model(run), load_model(run)
    summary = train_dpo(cfg, model, byte_tokenizer())
    reference = next(c for c in copies if isinstance(c, TransformerLM))  # deepcopy recurses: find the model
    for name, p in start.state_dict().items():  # the default reference: the starting weights, frozen
        assert torch.equal(reference.state_dict()[name], p), name
    assert not any(p.requires_grad for p in reference.parameters()) and not reference.training
    assert any(not torch.equal(model.state_dict()[n], p) for n, p in start.state_dict().items())

    metrics = pd.read_csv(tmp_path / "dpo" / "metrics.csv")
    assert list(metrics.columns) == COLUMNS and list(metrics["step"]) == list(range(1, 25))
    assert metrics["val_pref_accuracy"].notna().sum() == 2  # steps 12 and 24
    first, last = metrics.iloc[0], metrics.iloc[-4:]
    print(metrics[["step", "loss", "reward_accuracy", "reward_margin"]].to_string())
    assert first["loss"] == pytest.approx(math.log(2), abs=1e-5)  # policy == reference at step 1
    assert last["reward_accuracy"].mean() > first["reward_accuracy"] and last["reward_accuracy"].mean() >= 0.75
    assert last["reward_margin"].mean() > first["reward_margin"] + 0.1

    # independent measurement: naive margins of the saved checkpoint against the starting weights
    reloaded = load_model(tmp_path / "dpo")
    ids = torch.randint(0, 257, (2, 40))
    with torch.no_grad():
        assert torch.equal(reloaded(ids), model.eval()(ids))
    train, test, _ = load_pairs(cfg)
    train_margins = naive_margins(reloaded, start, train, cfg.beta)
    assert sum(m > 0 for m in train_margins) / len(train) >= 0.75 and sum(train_margins) > 0
    test_margins = naive_margins(reloaded, start, test, cfg.beta)
    assert summary["pref_accuracy"] == pytest.approx(sum(m > 0 for m in test_margins) / len(test))
    assert summary["margin"] == pytest.approx(sum(test_margins) / len(test), rel=1e-3, abs=1e-4)
    assert summary["task"] == "arithmetic" and summary["n"] == 4 and 0 <= summary["accuracy"] <= 1
    assert summary["checkpoint"].endswith("ckpt-00000024.pt")


def test_pairs_file_with_a_bad_line_trains(runs, tmp_path):
    run, _, tok = runs
    lines = [json.dumps({"prompt": f"Q{i}: say yes.\n", "chosen": " yes", "rejected": " no"}) for i in range(8)]
    lines.append("{not json")  # the bad line
    lines.append(json.dumps({"chosen": "\n\nHuman: hi\n\nAssistant: hello!",
                             "rejected": "\n\nHuman: hi\n\nAssistant: go away"}))  # hh-rlhf dialogue
    lines.append(json.dumps({"prompt": "odd \ud800 text \u0000", "chosen": "x" * 600, "rejected": "\udfff"}))
    lines.append(json.dumps({"prompt": "P", "chosen": " fine", "rejected": " bad"}))
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cfg = small_cfg(run, tok, tmp_path / "pairs", task="none", pairs=str(path), steps=3, batch_size=4,
                    eval_interval=0)
    with pytest.warns(DataWarning, match=r"skipped 1 bad record.*pairs.jsonl:9"):
        train, test, items = load_pairs(cfg)
    assert len(train) == 9 and len(test) == 2 and items == []  # 11 good pairs: the last ceil(10%) held out
    assert test[-1]["prompt"] == "P" and train[8]["prompt"].endswith("Assistant:")
    with pytest.warns(DataWarning):
        summary = train_dpo(cfg)  # the 600-byte response is cut at the context (192)
    metrics = pd.read_csv(tmp_path / "pairs" / "metrics.csv")
    assert metrics["loss"].notna().all() and metrics["loss"].map(math.isfinite).all()
    assert summary["pref_n"] == 2 and 0 <= summary["pref_accuracy"] <= 1 and summary["accuracy"] is None


def test_cli_bad_input_exits_2_with_one_line(runs, tmp_path, capsys):
    run, _, tok = runs
    for extra in (["--beta", "-1"], ["--beta", "0"], ["--pairs", str(tmp_path / "missing.jsonl")],
                  ["--reference", str(tmp_path / "nope")]):
        capsys.readouterr()
        argv = ["--model", str(run), "--tokenizer", str(tok), "--out-dir", str(tmp_path / "bad"),
                "--params", "none", *extra]
        assert main(argv) == 2, extra
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: "), err
    assert not (tmp_path / "bad").exists()


def test_cli_tiny_run_and_report(runs, tmp_path, capsys):
    run, _, tok = runs
    report = tmp_path / "alignment.csv"
    argv = ["--params", "none", "--model", str(run), "--tokenizer", str(tok), "--n-train", "8",
            "--n-test", "2", "--steps", "2",
            "--batch-size", "2", "--grad-accum", "2", "--max-new-tokens", "4", "--out-dir", str(tmp_path / "cli"),
            "--report", str(report)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("dpo: 2 steps, held-out accuracy") and "held-out preference accuracy" in out
    assert pd.read_csv(report)["stage"].tolist() == ["dpo"]
    assert json.loads((tmp_path / "cli" / "config.json").read_text())["dpo"]["beta"] == 0.1
    assert load_model(tmp_path / "cli").cfg.vocab_size == 257


def test_hf_llama_trains_and_saves_pretrained(tmp_path):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=257, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
                                      eos_token_id=EOS, pad_token_id=EOS, bos_token_id=None)
    model = transformers.LlamaForCausalLM(config)
    start = copy.deepcopy(model)
    cfg = DPOConfig(model="hf", n_train=8, n_test=2, steps=3, batch_size=4, lr=1e-2, max_new_tokens=4,
                    out_dir=str(tmp_path / "hf_dpo"))
    summary = train_dpo(cfg, model, ByteHFTokenizer())
    assert summary["checkpoint"].endswith("hf") and summary["n"] == 2 and summary["pref_n"] == 2
    loaded = transformers.LlamaForCausalLM.from_pretrained(tmp_path / "hf_dpo" / "hf").eval()
    ids = torch.randint(0, 257, (1, 20))
    with torch.no_grad():
        assert torch.allclose(loaded(ids).logits, model.eval()(ids).logits, atol=1e-6)
        assert not torch.allclose(start.eval()(ids).logits, model(ids).logits)
