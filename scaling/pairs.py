"""Recipes fitted on one ladder, compared in pairs: a paired bootstrap and paired rolling-origin errors.

Recipes that share a ladder (the same (N, D) points, each trained on its own data) share most of their
extrapolation error: a law that is too optimistic far out is too optimistic for both. So the difference of two
recipes is judged on paired quantities, never on two separate intervals:

- ``paired_bootstrap``: every resample draws ladder points (within each compute level, with replacement) once and
  refits every recipe on its own runs at those points, so the parameter uncertainty of a difference is that of the
  same resampled ladder;
- ``paired_errors``: at each rolling origin (scaling/rolling.py) the two recipes' errors on the best run of the same
  later level are subtracted; their quantile at the target's distance is the extrapolation part of the difference's
  interval (scaling/intervals.py ``extrapolation_halfwidth``, as for one recipe's loss).

The difference's 95 % interval in ln L_a − ln L_b is max(extrapolation, hypot(bootstrap, scatter)) as for one
prediction, and P(A better) = Φ(−r / σ) with σ its half-width / 1.96 (a normal reading of the interval).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import stats

from scaling.intervals import LEVEL, extrapolation_halfwidth
from scaling.laws import Fitted, Law, LawError
from scaling.runs import Runs

Z95 = float(stats.norm.ppf((1 + LEVEL) / 2))
KEY_DIGITS = 4  # ladder points are matched on N and D to 4 significant digits


def ladder_keys(runs: Runs) -> list[tuple[float, float]]:
    """Each run's ladder point: (N, D) rounded to KEY_DIGITS significant digits."""
    return [(float(f"{n:.{KEY_DIGITS}g}"), float(f"{d:.{KEY_DIGITS}g}")) for n, d in zip(runs.n, runs.d, strict=True)]


def paired_resamples(runs: dict[str, Runs], n_boot: int, rng: np.random.Generator) -> list[dict[str, np.ndarray]]:
    """``n_boot`` resamples of the shared ladder: each draws the ladder's points within each compute level (with
    replacement) and gives every recipe the row indices of its runs at the drawn points."""
    rows: dict[str, dict[tuple, int]] = {r: {k: i for i, k in enumerate(ladder_keys(x))} for r, x in runs.items()}
    level_of: dict[tuple, float] = {}
    for x in runs.values():
        for key, level in zip(ladder_keys(x), x.levels, strict=True):
            level_of.setdefault(key, float(f"{level:.{KEY_DIGITS}g}"))
    by_level: dict[float, list[tuple]] = {}
    for key, level in sorted(level_of.items()):
        by_level.setdefault(level, []).append(key)
    out = []
    for _ in range(n_boot):
        drawn = [points[j] for points in by_level.values() for j in rng.integers(0, len(points), len(points))]
        out.append({r: np.array([rows[r][k] for k in drawn if k in rows[r]], dtype=int) for r in runs})
    return out


def paired_bootstrap(law: Law, runs: dict[str, Runs], fitted: dict[str, Fitted], n_boot: int, seed: int,
                     predict: Callable[[str, Fitted], np.ndarray]) -> dict[str, np.ndarray]:
    """{recipe: (n_boot, k) array of ``predict(recipe, refit)``} over paired resamples (``paired_resamples``); a
    refit that fails or predicts a non-finite value leaves its row NaN."""
    samples = {r: None for r in runs}
    rng = np.random.default_rng(seed)
    for b, picks in enumerate(paired_resamples(runs, n_boot, rng)):
        for recipe, idx in picks.items():
            try:
                with np.errstate(all="ignore"):
                    values = np.asarray(predict(recipe, law.fit(runs[recipe].take(idx), warm=fitted[recipe])),
                                        dtype=float)
            except (LawError, np.linalg.LinAlgError, ValueError):
                values = None
            if samples[recipe] is None and values is not None:
                samples[recipe] = np.full((n_boot, values.size), np.nan)
            if values is not None and np.all(np.isfinite(values)):
                samples[recipe][b] = values.ravel()
    return {r: (s if s is not None else np.full((n_boot, 0), np.nan)) for r, s in samples.items()}


def paired_errors(rolling_a: dict, rolling_b: dict, law: str) -> tuple[np.ndarray, np.ndarray]:
    """(distances, ln error of A − ln error of B) on the best run of each later level, matched by origin and level,
    from two recipes' rolling origins (scaling/rolling.py reports)."""

    def best(report: dict) -> dict[tuple[float, float], tuple[float, float]]:
        out = {}
        for origin in report["origins"]:
            for e in (origin["errors"].get(law) or ()):
                if e["best"]:
                    out[(round(math.log(origin["cut"]), 3), round(math.log(e["level"]), 3))] = (e["distance"],
                                                                                               e["log_error"])
        return out

    a, b = best(rolling_a), best(rolling_b)
    shared = sorted(set(a) & set(b))
    return (np.array([0.5 * (a[k][0] + b[k][0]) for k in shared]),
            np.array([a[k][1] - b[k][1] for k in shared]))


def paired_scatter(runs_a: Runs, residuals_a: np.ndarray, runs_b: Runs, residuals_b: np.ndarray) -> float:
    """The sd of the two recipes' residual differences (ln L) at their shared ladder points: the scatter a pair
    does not share (a law's misfit at a point is common to both and cancels); NaN with fewer than 3 points."""
    a = dict(zip(ladder_keys(runs_a), residuals_a, strict=True))
    b = dict(zip(ladder_keys(runs_b), residuals_b, strict=True))
    diffs = np.array([a[k] - b[k] for k in a if k in b])
    return float(np.std(diffs, ddof=1)) if len(diffs) >= 3 and np.all(np.isfinite(diffs)) else float("nan")


def difference(log_a: float, log_b: float, boot_a: np.ndarray | None, boot_b: np.ndarray | None, scatter: float,
               distance: float, errors: tuple[np.ndarray, np.ndarray], confidence: float) -> dict:
    """One pair at one target: {"r" (ln L_a − ln L_b), "halfwidth_log", "parts", "calibration", "p_a_better",
    "verdict" ("a", "b" or "undecided")}. ``boot_*``: the paired bootstrap's ln L at the target (NaN: a failed
    refit); ``scatter``: ``paired_scatter``; ``errors``: ``paired_errors``."""
    r = log_a - log_b
    parts = {"parameters": 0.0, "scatter": 0.0, "extrapolation": 0.0}
    if boot_a is not None and boot_b is not None:
        diffs = boot_a - boot_b
        diffs = diffs[np.isfinite(diffs)]
        if len(diffs) >= 2:
            lo, hi = np.percentile(diffs, [100 * (1 - LEVEL) / 2, 100 * (1 + LEVEL) / 2])
            parts["parameters"] = float(hi - lo) / 2
    if np.isfinite(scatter):
        parts["scatter"] = Z95 * scatter
    extrapolation, calibration = extrapolation_halfwidth(*errors, distance)
    inner = math.hypot(parts["parameters"], parts["scatter"])
    if np.isfinite(extrapolation):
        parts["extrapolation"] = extrapolation
        half = max(extrapolation, inner)
    else:
        half = 2.0 * inner
        calibration += "; the parameter and scatter parts doubled"
    sigma = half / Z95
    p_a = float(stats.norm.cdf(-r / sigma)) if sigma > 0 else float(r < 0) + 0.5 * float(r == 0)
    verdict = "a" if p_a >= confidence else "b" if 1.0 - p_a >= confidence else "undecided"
    return {"r": float(r), "halfwidth_log": float(half), "parts": parts, "dominant": max(parts, key=parts.get),
            "calibration": calibration, "p_a_better": p_a, "verdict": verdict}


def flip_flops(grid: np.ndarray, log_a: np.ndarray, log_b: np.ndarray, start: float) -> float:
    """The first compute >= ``start`` on ``grid`` where the sign of ln L_a − ln L_b changes (log-linear
    interpolation between grid points), or NaN when it does not."""
    keep = grid >= start * (1 - 1e-9)
    c, r = np.log(grid[keep]), (log_a - log_b)[keep]
    for i in range(len(r) - 1):
        if np.isfinite(r[i]) and np.isfinite(r[i + 1]) and np.sign(r[i]) != np.sign(r[i + 1]) and r[i] != 0:
            t = r[i] / (r[i] - r[i + 1])
            return float(np.exp(c[i] + t * (c[i + 1] - c[i])))
    return float("nan")


def single_scale_verdict(runs_a: Runs, runs_b: Runs) -> tuple[str, float]:
    """DataDecide's baseline: rank by the best run at the largest compute level both ladders reached; ("a", "b" or
    "undecided" on a tie, that level)."""
    keys = [np.round(np.log(x.levels), 3) for x in (runs_a, runs_b)]
    shared = sorted(set(keys[0]) & set(keys[1]))
    if not shared:
        return "undecided", float("nan")
    top = keys[0] == shared[-1]
    best = [float(x.loss[k == shared[-1]].min()) for x, k in zip((runs_a, runs_b), keys, strict=True)]
    verdict = "a" if best[0] < best[1] else "b" if best[1] < best[0] else "undecided"
    return verdict, float(runs_a.levels[top][0])
