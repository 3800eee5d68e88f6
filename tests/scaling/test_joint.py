"""The joint fit of recipes (scaling/joint.py) against runs generated from known constants, against the single-law
fit it generalises, and its gradient against finite differences."""

from __future__ import annotations

import numpy as np
import pytest

from scaling.joint import _stack, fit_joint, joint_objective
from scaling.laws import LAWS
from scaling.runs import Runs

SHARED = {"A": 406.4, "alpha": 0.34, "beta": 0.28}
OWN = {"a": (1.69, 410.7), "b": (1.80, 380.0), "c": (1.75, 450.0)}  # recipe: (E, B)


def recipe_runs(E: float, B: float, unique: float, r_star: float, noise: float, seed: int) -> Runs:
    """Five budgets x five sizes, D' of Muennighoff et al. 2023 from ``unique`` tokens, written out."""
    rng = np.random.default_rng(seed)
    rows = [(np.sqrt(c / 120) * k, c) for c in np.geomspace(1e17, 1e20, 6) for k in (0.25, 0.5, 1, 2, 4)]
    n, c = (np.array(x) for x in zip(*rows, strict=True))
    d = c / (6 * n)
    seen = np.minimum(d, unique)
    effective = seen + seen * r_star * (1 - np.exp(-(d / seen - 1) / r_star))
    loss = (E + SHARED["A"] / n ** SHARED["alpha"] + B / effective ** SHARED["beta"]) * np.exp(
        rng.normal(0, noise, len(n)))
    return Runs(n, d, c, loss, budget=c, unique=np.full(len(n), unique))


def own_fits(law: str, runs: dict[str, Runs]) -> dict:
    return {name: LAWS[law].fit(r) for name, r in runs.items()}


def test_the_gradient_matches_finite_differences():
    runs = {name: recipe_runs(E, B, 3e9, 5.0, 0.01, i) for i, (name, (E, B)) in enumerate(OWN.items())}
    data = _stack(runs, "data_constrained")
    theta = np.array([6.0, 0.3, 0.3, np.log(4.0), 6.1, 5.9, 6.2, 0.5, 0.6, 0.55])
    _, grad = joint_objective(theta, *data, delta=1.0)  # delta 1: the quadratic branch everywhere (smooth)
    numeric = [(joint_objective(theta + h, *data, delta=1.0)[0] - joint_objective(theta - h, *data, delta=1.0)[0])
               / 2e-6 for h in np.eye(len(theta)) * 1e-6]
    assert grad == pytest.approx(numeric, rel=1e-4, abs=1e-7)


@pytest.mark.parametrize("law,unique,r_star", [("parametric", 1e15, 15.39), ("data_constrained", 2e9, 5.0)])
def test_the_joint_fit_recovers_known_constants(law, unique, r_star):
    runs = {name: recipe_runs(E, B, unique, r_star, 0.002, i) for i, (name, (E, B)) in enumerate(OWN.items())}
    if law == "data_constrained":
        assert all(np.any(r.d > r.unique) for r in runs.values())  # the runs repeat their data
    joint = fit_joint(law, runs, own_fits(law, runs))
    for name, (E, B) in OWN.items():
        fit = joint.fitted[name].fit
        assert fit.E == pytest.approx(E, rel=0.1) and fit.B == pytest.approx(B, rel=0.1)
        assert fit.A == pytest.approx(SHARED["A"], rel=0.1)
        assert (fit.alpha, fit.beta) == pytest.approx((SHARED["alpha"], SHARED["beta"]), rel=0.1)
    if law == "data_constrained":
        assert joint.fitted["a"].r_star == pytest.approx(r_star, rel=0.1)


def test_one_recipe_alone_is_the_law_fitted_on_its_own():
    runs = {"a": recipe_runs(1.69, 410.7, 1e15, 15.39, 0.01, 0)}
    own = own_fits("parametric", runs)
    joint = fit_joint("parametric", runs, own)
    assert joint.objective == pytest.approx(own["a"].objective, rel=1e-6, abs=1e-12)
    assert joint.fitted["a"].loss(1e9, 2e10, 1.2e20) == pytest.approx(own["a"].loss(1e9, 2e10, 1.2e20), rel=1e-6)


def test_the_data_constrained_joint_fit_is_never_worse_than_the_parametric_one():
    generated = {name: recipe_runs(E, B, 1e15, 15.39, 0.01, i) for i, (name, (E, B)) in enumerate(OWN.items())}
    runs = {name: Runs(r.n, r.d, r.c, r.loss, r.budget, np.full(len(r), r.d.max() / 3))  # repeats the losses ignore
            for name, r in generated.items()}
    parametric = fit_joint("parametric", runs, own_fits("parametric", runs))
    constrained = fit_joint("data_constrained", runs, own_fits("data_constrained", runs), nested=parametric)
    assert constrained.objective <= parametric.objective * (1 + 1e-9)
