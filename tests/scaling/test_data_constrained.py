"""The data-constrained law (Muennighoff et al. 2023) against runs generated from known constants, against the
parametric law where no run repeats, and the unique-token columns it reads."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scaling.data import canonicalize, parse_columns
from scaling.laws import LAWS, LawError
from scaling.laws.data_constrained import DataConstrained, effective_tokens, huber_objective
from scaling.laws.parametric import ParametricLaw
from scaling.predict import fit_and_predict, table_runs
from scaling.runs import Runs

# Chinchilla's constants (Hoffmann et al. 2022, eq. 10) and Muennighoff et al. 2023's R*_D
TRUE = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28, "R_star": 15.39}


def naive_loss(n, d, u, E, A, B, alpha, beta, R_star):
    """The paper's formula, written out per run: U_D = min(D, U), R_D = D / U_D - 1, D' = U_D + U_D R* (1 - e^-R/R*)."""
    out = []
    for ni, di, ui in zip(n, d, u):
        seen = min(di, ui)
        repeats = di / seen - 1
        effective = seen + seen * R_star * (1 - np.exp(-repeats / R_star))
        out.append(E + A / ni ** alpha + B / effective ** beta)
    return np.array(out)


def repeated_runs(noise: float, seed: int = 0) -> Runs:
    """Model sizes 1e7-1e9 on pools of 1e8-1e10 unique tokens, each for 0.2 to 60 epochs (the paper's layout)."""
    rng = np.random.default_rng(seed)
    n, d, u = [], [], []
    for size in np.geomspace(1e7, 1e9, 5):
        for pool in np.geomspace(1e8, 1e10, 3):
            for epochs in (0.2, 1, 4, 15, 60):
                n.append(size)
                u.append(pool)
                d.append(pool * epochs)
    n, d, u = map(np.array, (n, d, u))
    loss = naive_loss(n, d, u, **TRUE) * np.exp(rng.normal(0, noise, len(n)))
    return Runs(n, d, 6 * n * d, loss, unique=u)


def test_effective_tokens_is_the_papers_formula():
    d = np.array([1e8, 2e8, 5e9, 1e12])
    u = np.array([1e9, 1e8, 1e8, 1e8])
    expected = naive_loss(np.ones(4), d, u, E=0, A=0, B=1, alpha=0, beta=-1, R_star=15.39)  # B / D'^-1 = D'
    assert np.allclose(effective_tokens(d, u, 15.39), expected, rtol=1e-12)
    assert effective_tokens(1e8, 1e9, 15.39) == 1e8  # no repeat: D' = D
    assert np.isclose(effective_tokens(1e14, 1e8, 15.39), 1e8 * 16.39, rtol=1e-6)  # many epochs: U (1 + R*)


def test_gradient_matches_finite_differences():
    runs = repeated_runs(0.01)
    theta = np.array([6.0, 6.1, 0.5, 0.3, 0.3, np.log(10.0)])
    data = (np.log(runs.n), runs.d, runs.unique, np.log(runs.loss))
    _, grad = huber_objective(theta, *data)
    eps = 1e-6
    numeric = [(huber_objective(theta + eps * e, *data)[0] - huber_objective(theta - eps * e, *data)[0]) / (2 * eps)
               for e in np.eye(6)]
    assert np.allclose(grad, numeric, rtol=1e-4, atol=1e-8)


@pytest.mark.parametrize("noise,seed", [(0.0, 1), (0.002, 1), (0.002, 2), (0.002, 3)])
def test_recovers_known_constants_within_10_percent(noise, seed):
    """0.2 % lognormal noise on the loss, about a seed's spread in small LM runs; A is the least identified."""
    fitted = DataConstrained().fit(repeated_runs(noise, seed=seed))
    found = fitted.parameters()
    assert fitted.repeats
    for name, value in TRUE.items():
        assert found[name] == pytest.approx(value, rel=0.10 if noise else 1e-3), name


def test_without_repeats_it_is_the_parametric_fit():
    rng = np.random.default_rng(3)
    n = np.geomspace(1e7, 1e9, 25)
    d = np.geomspace(2e8, 2e10, 25)[rng.permutation(25)]
    u = d * rng.uniform(1.0, 3.0, 25)  # every run draws fewer tokens than its pool holds
    loss = naive_loss(n, d, u, **TRUE) * np.exp(rng.normal(0, 0.003, 25))
    runs = Runs(n, d, 6 * n * d, loss, unique=u)
    ours, chinchilla = DataConstrained().fit(runs), LAWS["parametric"].fit(runs)
    assert not ours.repeats and ours.unpinned() == {"R_star"} and ours.r_star == 15.39
    assert {k: v for k, v in ours.parameters().items() if k != "R_star"} == \
        {k: v for k, v in chinchilla.parameters().items() if k != "G"}
    assert np.array_equal(ours.loss_with_unique(n, d, u), chinchilla.loss(n, d, None))


def test_compute_optimal_allocation_leans_to_parameters_when_the_pool_runs_out():
    fitted = DataConstrained().fit(repeated_runs(0.0))
    chinchilla = ParametricLaw(**{k: v for k, v in TRUE.items() if k != "R_star"})
    small, large = 1e18, 1e24  # D_opt below the 1e10 pool, and far above it
    # at small budgets nothing repeats: Chinchilla's closed-form allocation with the true constants
    assert float(fitted.n_opt(small)) == pytest.approx(float(chinchilla.n_opt(small)), rel=0.01)
    # the brute-force minimum of the paper's formula over a fine grid of N at the large budget
    grid = np.geomspace(1e6, 1e14, 200001)
    brute = grid[np.argmin(naive_loss(grid, large / (6 * grid), np.full_like(grid, 1e10), **TRUE))]
    assert float(fitted.n_opt(large)) == pytest.approx(brute, rel=0.01)
    assert float(fitted.d_opt(large)) / float(fitted.n_opt(large)) < chinchilla.d_opt(large) / chinchilla.n_opt(large)


def test_needs_unique_tokens():
    runs = repeated_runs(0.0)
    with pytest.raises(LawError, match="unique training tokens"):
        DataConstrained().fit(Runs(runs.n, runs.d, runs.c, runs.loss))


def test_columns_give_unique_tokens_from_either_column():
    frame = pd.DataFrame({"N": [1e7, 2e7], "D": [4e8, 8e8], "loss": [3.0, 2.9], "Epochs": [2.0, 4.0]})
    out = canonicalize(frame)
    assert out["unique_tokens"].tolist() == [2e8, 2e8] and out["epochs"].tolist() == [2.0, 4.0]
    mapped = canonicalize(frame.rename(columns={"Epochs": "pool"}).assign(pool=[2e8, 2e8]),
                          columns=parse_columns(["unique_tokens=pool"]))
    assert mapped["epochs"].tolist() == [2.0, 4.0] and "pool" not in mapped
    with pytest.raises(ValueError, match=r"column 'epochs' \(from 'Epochs'\) row 2: value -1.0 must be > 0"):
        canonicalize(frame.assign(Epochs=[2.0, -1.0]))
    runs, _ = table_runs(out)
    assert runs.unique.tolist() == [2e8, 2e8]


def test_auto_fits_it_beside_the_others_and_without_the_column_reports_why():
    runs = repeated_runs(0.002, seed=5)
    frame = pd.DataFrame({"params": runs.n, "tokens": runs.d, "flops": runs.c, "loss": runs.loss,
                          "unique_tokens": runs.unique})
    report = fit_and_predict(frame, targets=[1e22], bootstrap=5).report
    assert report["laws"]["data_constrained"]["parameters"]["R_star"]["value"] == pytest.approx(15.39, rel=0.1)
    without = fit_and_predict(frame.drop(columns="unique_tokens"), targets=[1e22], bootstrap=0).report
    assert "data_constrained" not in without["laws"]
    assert "unique training tokens" in without["validity"]["data_constrained"]["reasons"][0]


def test_a_scalar_budget_gives_a_scalar_allocation_as_every_law_does():
    fitted = DataConstrained().fit(repeated_runs(0.0))
    assert np.shape(fitted.n_opt(1e20)) == () and np.shape(fitted.loss_opt(1e20)) == ()
    assert np.shape(fitted.n_opt(np.array([1e20, 1e21]))) == (2,)
