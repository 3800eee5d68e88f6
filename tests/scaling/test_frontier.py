"""scaling/frontier.py: the bend of the best loss per budget against compute, checked against losses written out
here (an exact quadratic in log2 C, a Chinchilla law, and a law whose frontier speeds up)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from scaling.frontier import frontier_trend
from tests.scaling.test_validate import ASYMMETRIC, run_cli, sweep

BUDGETS = np.geomspace(1e18, 1e21, 7)


def test_curvature_and_drops_of_an_exact_quadratic():
    x = np.log2(BUDGETS)
    loss = np.exp(1.5 - 0.01 * (x - 60) - 0.002 * (x - 60) ** 2)  # d²lnL/dx² = -0.004: falls faster and faster
    trend = frontier_trend(np.repeat(BUDGETS, 2), np.repeat(loss, 2) * np.tile([1.0, 1.1], len(BUDGETS)))
    assert np.isclose(trend["curvature"], -0.004, atol=1e-12) and trend["curvature_se"] < 1e-9
    assert trend["accelerating"] is True
    np.testing.assert_allclose(trend["best_loss"], loss)  # the lower of each budget's two runs
    expected = [-(np.log(loss[i + 1]) - np.log(loss[i])) / (x[i + 1] - x[i]) for i in range(len(x) - 1)]
    np.testing.assert_allclose(trend["drop_per_doubling"], expected)
    assert frontier_trend(BUDGETS[:4], loss[:4]) is None  # too few budgets to measure a bend


def test_a_chinchilla_law_bends_the_normal_way(tmp_path, capsys):
    code, out = run_cli(tmp_path, sweep(ASYMMETRIC.loss, ASYMMETRIC.n_opt, budgets=BUDGETS), "--bootstrap", "0")
    report = pd.read_json(out / "fit.json", typ="series")
    assert code == 0 and report["frontier"]["curvature"] > 0 and report["frontier"]["accelerating"] is False
    assert "frontier accelerating" not in capsys.readouterr().out


def test_a_sweep_still_in_a_transient_is_named(tmp_path, capsys):
    frame = sweep(ASYMMETRIC.loss, ASYMMETRIC.n_opt, budgets=BUDGETS)
    # every budget held up by a transient that fades faster and faster with compute: 20 % at 1e18, none at 1e21
    frame["loss"] *= 1 + 0.2 * (1 - (np.log10(frame["flops"] / 1e18) / 3) ** 2)
    code, _ = run_cli(tmp_path, frame, "--bootstrap", "0")
    out = capsys.readouterr().out
    assert code == 0 and "frontier accelerating" in out and "no law here can follow" in out
