"""params.yaml's sweep and train run stay one experiment (issue 19): the held-out `train` run is trained like the
sweep's runs (same family, context, batch, schedule and learning-rate rule) on at least 8x the largest budget."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from model.train import model_config
from model.train_config import TrainConfig
from scaling.sweep import SweepConfig, plan_runs, shape_lr

PARAMS = Path(__file__).resolve().parents[2] / "params.yaml"


@pytest.fixture(scope="module")
def params() -> dict:
    return yaml.safe_load(PARAMS.read_text())


def test_train_run_is_at_least_8x_the_largest_sweep_budget(params):
    vocab = params["tokenizer"]["vocab_size"]
    train = TrainConfig(**params["train"])
    n = model_config(train, vocab).param_count()  # N as the sweep counts it (6N, embeddings included)
    flops = 6 * n * train.total_steps * train.tokens_per_step
    assert params["sweep"]["flops_per_token"] == "6N"
    assert flops >= 8 * max(float(c) for c in params["sweep"]["budgets"])


def test_train_run_is_trained_like_the_sweep(params):
    sweep = SweepConfig.from_dict(params["sweep"])
    train = TrainConfig(**params["train"])
    for field in ("context_length", "batch_size", "warmup_steps", "schedule", "weight_decay", "attention"):
        assert getattr(train, field) == getattr(TrainConfig(**sweep.train), field), field
    shape = model_config(train, params["tokenizer"]["vocab_size"])
    assert {layers for _, layers, _ in sweep.shapes} == {shape.n_layers}
    assert (shape.d_model, shape.n_layers, shape.n_heads) in sweep.shapes  # N inside the sampled range
    expected = shape_lr(sweep, shape.d_model) or {"lr": sweep.train["lr"], "min_lr": sweep.train["min_lr"]}
    assert train.lr == pytest.approx(expected["lr"]) and train.min_lr == pytest.approx(expected["min_lr"])


def test_every_budget_keeps_at_least_4_shapes(tmp_path, params):
    meta = tmp_path / "meta.json"
    meta.write_text(f'{{"vocab_size": {params["tokenizer"]["vocab_size"]}, "dtype": "uint16"}}')
    runs, _ = plan_runs(SweepConfig.from_dict(params["sweep"] | {"data": str(tmp_path)}))
    per_budget = {}
    for run in runs:
        per_budget.setdefault(run.budget, []).append(run)
    assert len(per_budget) >= 4
    assert all(len(r) >= 4 for r in per_budget.values())
