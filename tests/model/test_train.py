"""The training loop: exact resume after SIGKILL, divergence handling, config errors, metrics.csv."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import model.core.transformer as transformer_mod
from model.train import main, model_config
from model.training.checkpoint import read_latest
from model.training.train_config import TrainConfig
from workbench.files import details_path

ROOT = Path(__file__).resolve().parents[2]


def _args(shards: Path, out: Path, *extra: str) -> list[str]:
    return ["--params", "none", "--data", str(shards), "--out-dir", str(out),
            "--preset", "nano", "--model.context-length", "16", "--batch-size", "4", "--warmup-steps", "3",
            "--eval-interval", "10", "--eval-batches", "2", "--log-interval", "5", "--device", "cpu", *extra]


def _run(args: list[str], **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "model.train", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


def _final_weights(run: Path) -> dict:
    latest = read_latest(run)
    return torch.load(run / latest["file"], weights_only=True)["model"]


@pytest.mark.slow
def test_sigkill_then_resume_matches_uninterrupted_run(shards, tmp_path):
    steps = ["--max-steps", "400", "--ckpt-interval", "5", "--keep-last", "3", "--threads", "1", "--deterministic"]
    reference = _run(_args(shards, tmp_path / "ref", *steps))
    assert reference.wait(timeout=300) == 0, reference.stderr.read().decode()

    killed_run = tmp_path / "killed"
    victim = _run(_args(shards, killed_run, *steps))
    deadline = time.monotonic() + 120
    while read_latest(killed_run).get("step", 0) < 20:
        assert victim.poll() is None, "run finished before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.005)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    killed_at = read_latest(killed_run)["step"]
    assert killed_at < 400

    # Also corrupt the newest checkpoint: resume must fall back to the one before it.
    newest = killed_run / read_latest(killed_run)["file"]
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    resumed = _run(_args(shards, killed_run, *steps, "--resume"))
    assert resumed.wait(timeout=300) == 0, resumed.stderr.read().decode()
    assert "resumed from" in resumed.stderr.read().decode()

    ref, got = _final_weights(tmp_path / "ref"), _final_weights(killed_run)
    assert ref.keys() == got.keys()
    for name in ref:
        assert torch.equal(ref[name], got[name]), name

    with open(killed_run / "metrics.csv") as fh:
        logged = [int(row["step"]) for row in csv.DictReader(fh)]
    assert logged == sorted(set(logged)) and logged[-1] == 400  # no duplicated rows after the resume


def test_training_learns_and_writes_contract_files(shards, tmp_path, capsys):
    run = tmp_path / "run"
    summary_path = tmp_path / "metrics" / "train.json"
    assert main(_args(shards, run, "--max-steps", "60", "--lr", "3e-3", "--metrics", str(summary_path))) == 0
    summary = json.loads(details_path(summary_path).read_text())
    assert summary["val_loss"] < summary["unigram_entropy"] - 1.0  # the pattern is learnable
    config = json.loads((run / "config.json").read_text())
    assert config["model"]["d_model"] == 64 and config["model"]["vocab_size"] == 64  # complete: the checkpoints' form
    train_cfg = TrainConfig.from_dict(config["train"])  # the run's settings as given: the model's shape left to nano
    assert (train_cfg.preset, train_cfg.model.d_model, train_cfg.model.context_length) == ("nano", None, 16)
    assert model_config(train_cfg, 64).to_dict() == config["model"]
    with open(run / "metrics.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == ["step", "tokens", "loss", "val_loss", "lr", "grad_norm", "tokens_per_s", "mfu"]
    assert int(rows[-1]["step"]) == 60 and rows[-1]["val_loss"]
    assert "unigram entropy" in capsys.readouterr().out


def test_nan_loss_stops_with_last_good_checkpoint(shards, tmp_path, monkeypatch, capsys):
    real = transformer_mod.cross_entropy
    calls = {"n": 0}

    def poisoned(logits, targets):
        calls["n"] += 1
        loss = real(logits, targets)
        return loss * float("nan") if calls["n"] > 12 else loss

    monkeypatch.setattr(transformer_mod, "cross_entropy", poisoned)
    run = tmp_path / "run"
    code = main(_args(shards, run, "--max-steps", "50", "--ckpt-interval", "5", "--eval-interval", "100",
                      "--max-bad-steps", "2"))
    assert code == 1
    err = capsys.readouterr().err
    assert "diverged" in err and "max_bad_steps=2" in err and "ckpt-00000010.pt" in err
    assert read_latest(run)["step"] == 10  # checkpoints before the NaN are intact


def test_skip_budget_tolerates_a_few_bad_steps(shards, tmp_path, monkeypatch):
    real = transformer_mod.cross_entropy
    calls = {"n": 0}

    def flaky(logits, targets):
        calls["n"] += 1
        loss = real(logits, targets)
        return loss * float("inf") if calls["n"] in (5, 9) else loss

    monkeypatch.setattr(transformer_mod, "cross_entropy", flaky)
    summary = tmp_path / "summary.json"
    assert main(_args(shards, tmp_path / "run", "--max-steps", "20", "--eval-interval", "100",
                      "--metrics", str(summary))) == 0
    assert json.loads(details_path(summary).read_text())["bad_steps"] == 2


@pytest.mark.parametrize("extra, field", [
    (["--model.n-heads", "3"], "n_heads"),
    (["--batch-size", "0"], "batch_size"),
    (["--schedule", "linear"], "schedule"),
    (["--preset", "huge"], "huge"),
    (["--model.context-length", "30000"], "context_length"),
    (["--eval-batches", "-1"], "eval_batches"),
])
def test_bad_config_is_one_line_error_naming_the_field(shards, tmp_path, capsys, extra, field):
    assert main(_args(shards, tmp_path / "run", "--max-steps", "2", *extra)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and field in err and "\n" not in err


def test_missing_shard_names_the_file(tmp_path, capsys):
    assert main(_args(tmp_path / "nowhere", tmp_path / "run")) == 2
    assert "meta.json" in capsys.readouterr().err


def test_existing_run_needs_resume(shards, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(_args(shards, run, "--max-steps", "5")) == 0
    assert main(_args(shards, run, "--max-steps", "5")) == 2
    assert "--resume" in capsys.readouterr().err
    assert main(_args(shards, run, "--max-steps", "5", "--resume")) == 0  # nothing left to do


def test_metrics_file_holds_the_flat_headline(shards, tmp_path):
    metrics = tmp_path / "metrics" / "train.json"
    assert main(_args(shards, tmp_path / "run", "--max-steps", "10", "--metrics", str(metrics))) == 0
    headline = json.loads(metrics.read_text())
    assert set(headline) == {"params", "tokens", "flops", "loss", "val_loss", "tokens_per_s", "seconds"}  # no mfu: CPU
    details = json.loads(details_path(metrics).read_text())
    assert details["val_loss"] == headline["val_loss"] and details["train_loss"] == headline["loss"]


def test_unknown_train_key_in_params_file_is_an_error(shards, tmp_path, capsys):
    params = tmp_path / "params.yaml"
    params.write_text("train:\n  max_stepz: 3\n")
    assert main(["--params", str(params), "--data", str(shards), "--out-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "max_stepz" in err and "'train'" in err and str(params) in err


def test_eval_batches_0_scores_every_window_of_the_validation_split():
    """Against a loop written here: each non-overlapping window's mean token loss (F.cross_entropy), averaged over
    windows; the last, partial batch counts by its size. The same windows whatever the seed."""
    import contextlib

    import numpy as np
    import torch.nn.functional as F

    from model.core.config import ModelConfig
    from model.core.transformer import TransformerLM
    from model.train import evaluate
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(vocab_size=64, context_length=16, d_model=16, n_layers=1, n_heads=2, d_ff=32))
    val = np.random.default_rng(0).integers(0, 64, 16 * 7 + 9).astype(np.uint16)
    expected = []
    with torch.no_grad():
        for w in range(7):
            x = torch.tensor(val[w * 16:(w + 1) * 16], dtype=torch.long)
            y = torch.tensor(val[w * 16 + 1:(w + 1) * 16 + 1], dtype=torch.long)
            expected.append(F.cross_entropy(model(x[None])[0], y).item())
    for seed in (0, 1):
        cfg = TrainConfig(model={"context_length": 16}, batch_size=3, eval_batches=0, seed=seed)
        got = evaluate(model, val, cfg, "cpu", contextlib.nullcontext)
        assert got == pytest.approx(float(np.mean(expected)), rel=1e-5)
    assert model.training  # evaluate restores the mode it found
