"""params.yaml's sweep and train run stay one experiment (issue 19): the held-out `train` run is trained like the
sweep's runs (same family, context, batch, schedule and learning-rate rule) on at least 8x the largest budget."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from model.train import model_config
from model.training.train_config import TrainConfig
from scaling.sweep import SweepConfig, plan_runs, shape_lr, sweep_section

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
    sweep = SweepConfig.from_dict(sweep_section(PARAMS))
    train = TrainConfig(**params["train"])
    runs_train = TrainConfig(**sweep.train)
    for field in ("batch_size", "warmup_steps", "schedule", "decay_fraction", "decay_shape", "weight_decay",
                  "eval_batches"):
        assert getattr(train, field) == getattr(runs_train, field), field
    for field in ("context_length", "attention"):
        assert getattr(train.model, field) == getattr(runs_train.model, field), field
    shape = model_config(train, params["tokenizer"]["vocab_size"])
    assert {layers for _, layers, _ in sweep.shapes} == {shape.n_layers}
    assert (shape.d_model, shape.n_layers, shape.n_heads) in sweep.shapes  # N inside the sampled range
    expected = shape_lr(sweep, shape.d_model) or {"lr": sweep.train["lr"], "min_lr": sweep.train["min_lr"]}
    assert train.lr == pytest.approx(expected["lr"]) and train.min_lr == pytest.approx(expected["min_lr"])


def test_cooldown_branches_span_8x_per_width_and_bracket_the_train_run(tmp_path, params):
    """Issue 34: every width whose longest run has room for 8x inside the step window (>= 8 x min_run_steps steps)
    spans >= 8x in tokens per parameter, and together the runs bracket the train run's D/N; the wider ones (d48,
    d64: 249 and 152 steps at the largest budget) are there to bracket the largest budgets' optimum."""
    meta = tmp_path / "meta.json"
    meta.write_text(f'{{"vocab_size": {params["tokenizer"]["vocab_size"]}, "dtype": "uint16"}}')
    sweep = SweepConfig.from_dict(sweep_section(PARAMS) | {"data": str(tmp_path)})
    assert sweep.branches
    runs, _ = plan_runs(sweep)
    ratios: dict[int, list[float]] = {}
    longest: dict[int, int] = {}
    for run in runs:
        width = run.train.model.d_model
        ratios.setdefault(width, []).append(run.tokens / run.params)
        longest[width] = max(longest.get(width, 0), run.steps)
    spans = {d: max(r) / min(r) for d, r in ratios.items() if longest[d] >= 8 * sweep.min_run_steps}
    assert len(spans) >= 4 and all(span >= 8 for span in spans.values()), spans
    train = TrainConfig(**params["train"])
    n = model_config(train, params["tokenizer"]["vocab_size"]).param_count()
    train_ratio = train.total_steps * train.tokens_per_step / n
    every = [x for r in ratios.values() for x in r]
    assert min(every) < train_ratio < max(every)
    per_budget: dict[float, int] = {}
    for run in runs:
        per_budget[run.budget] = per_budget.get(run.budget, 0) + 1
    assert sum(k >= 3 for k in per_budget.values()) >= 8  # approach 2's budgets (3+ sizes each)
