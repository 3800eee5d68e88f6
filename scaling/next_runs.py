"""What to train next: the runs expected to narrow a prediction's interval most, within a compute cap.

Each bootstrap refit (scaling/pairs.py ``paired_bootstrap``) predicts both the quantity in question q (one recipe's
ln L at a target, or a pair's ln L_a − ln L_b) and the ln L of every candidate run x_k. Measuring candidate k (with
the recipe's residual scatter σ²) conditions q on x_k; for a Gaussian reading of the bootstrap ensemble (the
ensemble Kalman update) the parameter variance of q left is

    var(q) − cov(q, x_k)² / (var(x_k) + σ²),

summed over the recipes a candidate is trained for (one run per recipe, at the same N and D, for a pair). A
candidate beyond the ladder's largest budget also brings the target nearer: its extrapolation part is the rolling
origin's at the new distance. The predicted half-width is max(extrapolation, hypot(parameters, scatter)), as for
the interval itself (scaling/intervals.py); candidates are ranked by it, then by the parameter part left (when the
extrapolation part sets both), then by cost.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from scaling.intervals import bootstrap, extrapolation_halfwidth
from scaling.laws import Fitted, Law
from scaling.pairs import Z95
from scaling.runs import Runs

SIZE_SPAN = 8.0  # candidate model sizes: the ladder's, within this factor of the law's N_opt(C)
TOP = 3


def candidate_runs(sizes: np.ndarray, n_opt: Callable[[np.ndarray], np.ndarray], min_flops: float, cap: float,
                   runs_per_candidate: int = 1) -> np.ndarray:
    """(k, 3) candidate (N, D, C): budgets doubling from ``min_flops`` while ``runs_per_candidate`` runs of one fit
    within ``cap``, each with the model ``sizes`` the ladder already trains (a shape a user can run) that lie within
    SIZE_SPAN of the law's ``n_opt`` there."""
    top = cap / runs_per_candidate
    if top < min_flops:
        return np.empty((0, 3))
    budgets = min_flops * 2.0 ** np.arange(int(math.floor(math.log2(top / min_flops))) + 1)
    out = []
    for c in budgets:
        centre = float(np.asarray(n_opt(np.array([c])), dtype=float).ravel()[0])
        for n in np.unique(np.asarray(sizes, dtype=float)):
            if np.isfinite(centre) and centre > 0 and abs(math.log(n / centre)) <= math.log(SIZE_SPAN):
                out.append((n, c / (6.0 * n), c))
    return np.array(out) if out else np.empty((0, 3))


def variance_left(q: np.ndarray, xs: list[np.ndarray], scatter: list[float]) -> np.ndarray:
    """Per candidate, the variance of ``q`` (bootstrap samples, shape (B,)) left after measuring it: ``xs`` holds,
    per recipe the candidate is trained for, the (B, k) samples of its ln L; ``scatter``: each recipe's residual sd.
    Resamples where anything is NaN are left out."""
    ok = np.isfinite(q)
    for x in xs:
        ok &= np.all(np.isfinite(x), axis=1)
    if ok.sum() < 3:
        return np.full(xs[0].shape[1], np.nan)
    q = q[ok] - q[ok].mean()
    left = np.full(xs[0].shape[1], float(q @ q) / (len(q) - 1))
    for x, sd in zip(xs, scatter, strict=True):  # one measurement per recipe, taken one after the other
        x = x[ok] - x[ok].mean(axis=0)
        cov = (q @ x) / (len(q) - 1)
        var = np.einsum("bk,bk->k", x, x) / (len(q) - 1) + (sd if np.isfinite(sd) else 0.0) ** 2
        with np.errstate(all="ignore"):
            left = left - np.where(var > 0, cov * cov / var, 0.0)
    return np.maximum(left, 0.0)


def suggest(q: np.ndarray, xs: list[np.ndarray], scatter: list[float], candidates: np.ndarray, scatter_part: float,
            extrapolation: Callable[[float], float], max_flops: float, target: float, top: int = TOP) -> list[dict]:
    """The ``top`` candidates by predicted 95 % half-width (ln L) of the quantity after training them: [{"n", "d",
    "flops", "runs", "cost", "halfwidth_log", "now_halfwidth_log", "parameters_log"}]. ``scatter_part``: the
    interval's scatter half-width; ``extrapolation(distance)``: its extrapolation half-width at a distance."""
    if not len(candidates):
        return []
    ok = np.isfinite(q)
    now_param = Z95 * float(np.nanstd(q[ok], ddof=1)) if ok.sum() >= 3 else float("nan")
    now = max(extrapolation(target / max_flops), math.hypot(now_param, scatter_part))
    left = variance_left(q, xs, scatter)
    rows = []
    for (n, d, c), var in zip(candidates, left, strict=True):
        if not np.isfinite(var):
            continue
        param = Z95 * math.sqrt(var)
        half = max(extrapolation(target / max(max_flops, c)), math.hypot(param, scatter_part))
        rows.append({"n": float(n), "d": float(d), "flops": float(c), "runs": len(xs), "cost": float(c) * len(xs),
                     "halfwidth_log": half, "now_halfwidth_log": now, "parameters_log": param})
    rows.sort(key=lambda r: (round(r["halfwidth_log"], 6), r["parameters_log"], r["cost"]))
    return rows[:top]


def extrapolation(errors: tuple[np.ndarray, np.ndarray]) -> Callable[[float], float]:
    """distance -> the extrapolation half-width the rolling-origin ``errors`` give there (0 where they give none)."""
    def at(distance: float) -> float:
        half = extrapolation_halfwidth(*errors, distance)[0]
        return half if np.isfinite(half) else 0.0
    return at


def fit_suggestions(law: Law, runs: Runs, fitted: Fitted, errors: tuple[np.ndarray, np.ndarray], residual_sd: float,
                    target: float, cap: float, n_boot: int, seed: int) -> list[dict]:
    """For one recipe's fit (scaling.fit): the runs within ``cap`` expected to narrow the interval of its
    compute-optimal loss at ``target`` most (``suggest``, over a bootstrap of ``law`` that also predicts them)."""
    candidates = candidate_runs(runs.n, fitted.n_opt, float(runs.c.min()), cap)
    if not len(candidates) or n_boot < 3:
        return []

    def predict(f: Fitted) -> dict[str, np.ndarray]:
        return {"q": np.log(f.loss_opt(np.array([target]))), "x": np.log(f.loss(*candidates.T))}

    samples, _ = bootstrap(law, runs, fitted, n_boot, np.random.default_rng(seed), predict)
    if not samples:
        return []
    scatter = residual_sd if np.isfinite(residual_sd) else 0.0
    return suggest(samples["q"][:, 0], [samples["x"]], [scatter], candidates, Z95 * scatter, extrapolation(errors),
                   float(runs.c.max()), target)
