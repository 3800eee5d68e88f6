"""bench.experiments.scaling_variants: the params each variant sweeps with, and its scores against runs drawn from a
law written out in the test (an exact law's own fit must miss its check runs by nothing)."""

import numpy as np
import pandas as pd
import pytest
import yaml

from bench.experiments import scaling_variants
from tests.scaling.test_validate import ASYMMETRIC, sweep
from workbench.params import read_params


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setattr(scaling_variants, "FOLDER", tmp_path)
    return tmp_path


def test_a_variant_changes_only_what_it_names(folder):
    params = read_params("params.yaml")
    sweep_path, check_path, check_flops = scaling_variants.write_params(params, "lr_x2",
                                                                        scaling_variants.VARIANTS["lr_x2"])
    swept, check = yaml.safe_load(sweep_path.read_text()), yaml.safe_load(check_path.read_text())
    assert swept["train"]["lr"] == 1.2e-2 and swept["train"]["batch_size"] == params["train"]["batch_size"]
    assert swept["sweep"]["budgets"] == params["sweep"]["budgets"]
    assert swept["sweep"]["results"] == str(folder / "lr_x2" / "results.csv")
    assert check_flops == 4 * max(params["sweep"]["budgets"])
    assert check["sweep"]["budgets"] == [check_flops] and check["sweep"]["branches"] is False
    assert check["sweep"]["shapes"] == scaling_variants.CHECK_SHAPES and check["train"]["lr"] == 1.2e-2
    moved = scaling_variants.VARIANTS["moved_up"]["sweep"]
    assert scaling_variants.write_params(params, "moved_up", {"sweep": moved})[2] == 4 * max(moved["budgets"])


def test_scores_against_check_runs_from_a_known_law(folder, monkeypatch):
    monkeypatch.setattr(scaling_variants, "sweep_main", lambda argv: 0)  # the results below stand in for training
    budgets = np.geomspace(1e18, 1e21, 7)
    (folder / "default" / "check").mkdir(parents=True)
    sweep(ASYMMETRIC.loss, ASYMMETRIC.n_opt, budgets=budgets).to_csv(folder / "default" / "results.csv", index=False)
    n = ASYMMETRIC.n_opt(4e21) * np.array([0.7, 1.4])
    d = 4e21 / (6 * n)
    pd.DataFrame({"params": n, "tokens": d, "flops": 4e21, "loss": ASYMMETRIC.loss(n, d), "d_model": [48, 64]}).to_csv(
        folder / "default" / "check" / "results.csv", index=False)
    rows = {r.metric: r.value for r in scaling_variants.measure("default", folder / "p.yaml", folder / "c.yaml", 4e21)}
    assert abs(rows["check run d48: rel_error parametric"]) < 1e-4
    assert abs(rows["check run d64: rel_error parametric"]) < 1e-4
    assert rows["rolling-origin error parametric"] < 1e-4
    assert rows["frontier curvature"] > 0  # a Chinchilla law bends the normal way
    assert rows["check run d64: loss"] == pytest.approx(float(ASYMMETRIC.loss(n[1], d[1])))
