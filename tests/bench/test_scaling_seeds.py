"""bench.experiments.scaling_seeds: the errors it records are each method's prediction over the `train` seed's
measured loss, and the spread rows are the seeds' standard deviations, both checked against numbers computed here."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench.experiments import scaling_seeds
from scaling.fit import FitConfig
from scaling.laws.parametric import ParametricLaw

LAW = ParametricLaw(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28)


def sweep(path, shift):
    rows = []
    for flops in np.geomspace(1e18, 1e21, 4):
        for n in np.exp(np.log(LAW.n_opt(flops)) + np.linspace(-1.2, 1.2, 5)):
            d = flops / (6 * n)
            rows.append({"run_id": f"C{flops:.0e}_{n:.0f}", "params": n, "tokens": d, "flops": flops,
                         "loss": float(LAW.loss(n, d)) + shift})
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def summary(path, n, d, loss):
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"params": n, "tokens": d, "val_loss": loss, "flops": 6 * n * d}))
    return path


def test_errors_are_against_each_train_seed_and_the_mean_sweep_sits_between(tmp_path):
    paths = [sweep(tmp_path / "s0.csv", 0.02), sweep(tmp_path / "s1.csv", -0.02)]
    n, d = 3e9, 6e10
    truth = float(LAW.loss(n, d))
    summaries = {0: summary(tmp_path / "t0" / "summary.json", n, d, truth),
                 1: summary(tmp_path / "t1" / "summary.json", n, d, truth * 1.01)}
    cfg = FitConfig(target_flops=(1e22,), bootstrap=0)
    fits = [scaling_seeds.fit_sweep([p], summaries, cfg) for p in paths]
    mean = scaling_seeds.fit_sweep(paths, summaries, cfg)
    for fit in (*fits, mean):
        for method, predicted in fit["predicted"].items():
            assert fit["rel_error"][method][0] == pytest.approx(predicted / truth - 1)
            assert fit["rel_error"][method][1] == pytest.approx(predicted / (truth * 1.01) - 1)
    # the mean of two sweeps shifted +-0.02 is the noise-free sweep: the parametric law recovers the run's loss
    assert mean["rel_error"]["parametric"][0] == pytest.approx(0, abs=2e-3)
    assert fits[0]["predicted"]["parametric"] > mean["predicted"]["parametric"] > fits[1]["predicted"]["parametric"]
    rows = scaling_seeds.fit_rows("sweep seed 0", fits[0], 0)
    assert rows[0].metric.endswith("(selected)") and rows[0].extra["selected"]
    # the interval rows: whether the train seed's loss is inside the law's 95 % prediction interval, and its width
    for method in fits[0]["predicted"]:
        (lo, hi), predicted = fits[0]["pi95"][method], fits[0]["predicted"][method]
        assert fits[0]["covered"][method][0] == (lo <= truth <= hi)
        width = [r for r in scaling_seeds.fit_rows("s", fits[0], 0) if r.metric.startswith(f"95% PI half-width: "
                                                                                            f"{method}")]
        assert width[0].value == pytest.approx((hi - lo) / 2 / predicted)


def test_noise_rows_are_the_seeds_standard_deviations(tmp_path, monkeypatch):
    paths = {0: sweep(tmp_path / "s0.csv", 0.0), 1: sweep(tmp_path / "s1.csv", 0.1)}
    summaries = {0: summary(tmp_path / "t0" / "summary.json", 1e9, 2e10, 2.0),
                 1: summary(tmp_path / "t1" / "summary.json", 1e9, 2e10, 2.2)}
    whole = {"t0": 2.05, "t1": 2.07}
    monkeypatch.setattr(scaling_seeds, "whole_split_loss", lambda run_dir, data, context: whole[run_dir.name])
    rows = {(r.name, r.metric): r.value for r in scaling_seeds.noise_rows(paths, summaries, "shards", 16)}
    assert rows[("train run, whole validation split", "loss_sd")] == pytest.approx(np.std([2.05, 2.07], ddof=1))
    assert rows[("sweep runs", "loss_sd_median")] == pytest.approx(np.std([0.0, 0.1], ddof=1))
    assert rows[("best run per budget", "loss_sd_median")] == pytest.approx(np.std([0.0, 0.1], ddof=1))
    assert rows[("train run", "loss_sd")] == pytest.approx(np.std([2.0, 2.2], ddof=1))
    assert rows[("train run", "loss_mean")] == pytest.approx(2.1)


def test_left_out_budget_rows_score_every_run_of_the_largest_budget(tmp_path):
    """On runs that follow one parametric law exactly, the refit without the largest budget predicts each of its
    runs (the widest too) to within fit precision; IsoFLOP, which assumes the optimal allocation, predicts the
    optimum's loss for all of them, below every off-optimal run."""
    path = sweep(tmp_path / "s.csv", 0.0)
    rows = scaling_seeds.left_out_budget_rows("s", path, FitConfig(target_flops=(1e22,), bootstrap=0))
    values = {r.metric: r for r in rows}
    assert abs(values["left-out budget, widest run: rel_error parametric"].value) < 2e-3
    assert values["left-out budget, every run: mean |rel_error| parametric"].value < 2e-3
    widest = values["left-out budget, widest run: rel_error isoflop"]
    assert widest.value < 0 and len(widest.extra["by_params"]) == 5


def test_whole_split_loss_is_the_mean_over_every_window(monkeypatch):
    """Against a loop written here: each non-overlapping window's mean token loss (F.cross_entropy), averaged."""
    import torch
    import torch.nn.functional as F

    from model.core.config import ModelConfig
    from model.core.transformer import TransformerLM
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(vocab_size=64, context_length=16, d_model=16, n_layers=1, n_heads=2,
                                      d_ff=32)).eval()
    val = np.random.default_rng(0).integers(0, 64, 16 * 7 + 5).astype(np.uint16)
    monkeypatch.setattr(scaling_seeds, "load_model", lambda run_dir, attention: model)
    monkeypatch.setattr(scaling_seeds, "load_tokens", lambda data, split: val)
    expected = []
    with torch.no_grad():
        for w in range(7):
            x = torch.tensor(val[w * 16:(w + 1) * 16], dtype=torch.long)[None]
            y = torch.tensor(val[w * 16 + 1:(w + 1) * 16 + 1], dtype=torch.long)[None]
            expected.append(F.cross_entropy(model(x)[0], y[0]).item())
    got = scaling_seeds.whole_split_loss(Path("run"), "shards", 16)
    assert got == pytest.approx(float(np.mean(expected)), rel=1e-5)
