"""Fits that never mislead: default targets follow the sweep, every prediction states its distance, an interval
wider than the loss is a warning, and a wide interval comes with the runs to train next."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scaling.fit import main
from scaling.report import trust_lines

CHINCHILLA = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}


def noisy_sweep(tmp_path, noise: float) -> str:
    """Five budgets 1e17-1.6e18 x five sizes from Chinchilla's law with multiplicative noise."""
    rng = np.random.default_rng(0)
    rows = []
    for c in np.geomspace(1e17, 1.6e18, 5):
        for k in (0.25, 0.5, 1, 2, 4):
            n = np.sqrt(c / 120) * k
            d = c / (6 * n)
            loss = (CHINCHILLA["E"] + CHINCHILLA["A"] / n ** 0.34 + CHINCHILLA["B"] / d ** 0.28) * np.exp(
                rng.normal(0, noise))
            rows.append({"params": n, "tokens": d, "flops": c, "loss": loss})
    path = tmp_path / "sweep.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return str(path)


def test_default_targets_are_10x_and_100x_the_sweep_with_their_distance(tmp_path, capsys):
    out = tmp_path / "fit"
    assert main([noisy_sweep(tmp_path, 0.002), "--bootstrap", "20", "--no-plots", "--out-dir", str(out),
                 "--params", "none"]) == 0
    predictions = pd.read_csv(out / "predictions.csv")
    assert sorted(predictions["target_flops"].unique()) == pytest.approx([1.6e19, 1.6e20])
    assert sorted(predictions["distance"].unique()) == pytest.approx([10, 100])
    assert "x sweep" in capsys.readouterr().out


def test_a_wide_interval_is_a_warning_and_names_the_runs_to_train_next(tmp_path, capsys):
    out = tmp_path / "fit"
    assert main([noisy_sweep(tmp_path, 0.08), "--bootstrap", "40", "--no-plots", "--out-dir", str(out),
                 "--method", "parametric", "--params", "none"]) == 0
    printed = capsys.readouterr().out
    predictions = pd.read_csv(out / "predictions.csv")
    wide = predictions[predictions["loss_hi"] - predictions["loss_lo"] > predictions["loss"]]
    assert len(wide) >= 1
    for flops in wide["target_flops"]:
        assert f"warning: parametric at C={flops:.3g}" in printed and f"train next for C={flops:.3g}" in printed
    suggestions = pd.read_csv(out / "next_runs.csv")
    assert (suggestions["flops"] <= 4 * 1.6e18 * (1 + 1e-9)).all()  # within the default cap
    assert (suggestions["halfwidth_log"] <= suggestions["now_halfwidth_log"] + 1e-12).all()


def test_trust_lines_against_hand_made_rows():
    row = {"method": "parametric", "target_flops": 1e21, "distance": 100.0, "calibrated_distance": 8.0,
           "loss": 2.0, "loss_lo": 1.0, "loss_hi": 3.5}
    lines = trust_lines([row])
    assert len(lines) == 2 and "beyond the 8x its rolling origin checked" in lines[0]
    assert lines[1].startswith("warning: parametric at C=1e+21 (100x the largest fitted C): the 95% interval [1, 3.5]")
    assert trust_lines([row | {"distance": 4.0, "loss_lo": 1.9, "loss_hi": 2.1}]) == []
