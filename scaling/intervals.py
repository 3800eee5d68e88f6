"""Bootstrap refits and 95 % prediction intervals for a predicted loss.

A prediction interval for one new run's loss combines three parts, each a 95 % half-width in ln L (so no bound is
ever <= 0): its half-width is the extrapolation part, or the parameter and scatter parts added in quadrature when
that is larger (the rolling-origin errors already hold the parameter and noise error of a refit at that distance:
adding them again would count them twice; measured on the published sweeps, docs/benchmarks/scaling.md, the sum of
all three covered as often, 100 %, at a 1.2x wider median interval). The parts:
- ``parameters``: the spread of the bootstrap refits' predictions (percentiles 2.5 and 97.5 of ln L, halved);
- ``scatter``: the fit's own residual scatter, 1.96 sd of ln(predicted / measured) on the runs it was fitted on;
- ``extrapolation``: the error the sweep itself shows at that distance. Rolling origin (scaling/rolling.py) refits
  each law on the runs up to a compute cut and records its ln error on every later run, with the distance C_run /
  C_fitted. For a prediction at distance r (its C over the largest C fitted) the calibration errors are those at
  distances >= r; with n >= 19 of them the half-width is their split-conformal quantile (the ceil((n+1)·0.95)-th
  smallest |error|: Vovk et al. 2005, Angelopoulos & Bates 2021). With fewer, the 19 errors of largest distance
  r' are scaled to r as an error that grows with ln r (error · ln r / ln r') and their quantile taken (conformal
  with 19, else Student's t_(0.975, n) times their root mean square, widened for the few: with one error,
  t(1) = 12.7): the interval says which (``calibration``). Without any rolling-origin error the extrapolation part
  is unmeasured, the other two are doubled, and the interval says so.
Inside the sweep (r <= 1) there is no extrapolation part.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np
from scipy import stats

from scaling.laws import Fitted, Law, LawError
from scaling.runs import Runs

Z95 = 1.959963984540054
LEVEL = 0.95
CONFORMAL_MIN = math.ceil(LEVEL / (1 - LEVEL))  # 19: the fewest errors with a finite 95 % conformal quantile


def resample(n_rows: int, groups: list[np.ndarray] | None, rng: np.random.Generator) -> np.ndarray:
    """Row indices of one bootstrap resample: within each budget's rows (``groups``), else over all rows."""
    if groups is None:
        return rng.integers(0, n_rows, size=n_rows)
    return np.concatenate([rng.choice(g, size=len(g), replace=True) for g in groups])


def bootstrap(law: Law, runs: Runs, fitted: Fitted, n_boot: int, rng: np.random.Generator,
              predict: Callable[[Fitted], dict[str, np.ndarray]]) -> tuple[dict[str, np.ndarray], int]:
    """``n_boot`` refits on resampled runs (warm-started at ``fitted``): their parameters and ``predict(refit)``
    stacked along a new first axis, and how many resamples could not be fitted (skipped)."""
    samples: list[dict[str, np.ndarray]] = []
    skipped = 0
    groups = None if runs.budget is None else [np.flatnonzero(runs.budget == b) for b in np.unique(runs.budget)]
    for _ in range(n_boot):
        try:
            with np.errstate(all="ignore"):
                refit = law.fit(runs.take(resample(len(runs), groups, rng)), warm=fitted)
                values = {k: np.asarray(v, dtype=float) for k, v in refit.parameters().items()} | predict(refit)
        except (LawError, np.linalg.LinAlgError):
            skipped += 1
            continue
        if not all(np.all(np.isfinite(v)) for k, v in values.items() if k.startswith("loss")):
            skipped += 1
            continue
        samples.append(values)
    return ({k: np.stack([s[k] for s in samples]) for k in samples[0]} if samples else {}), skipped


def percentiles(samples: dict[str, np.ndarray], key: str) -> tuple[np.ndarray, np.ndarray] | None:
    """Bootstrap 2.5 and 97.5 percentiles of ``key`` over the resamples where it is defined; None without any."""
    values = samples.get(key)
    if values is None or len(values) < 2:
        return None
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column: a NaN CI is the answer there
        lo, hi = np.nanpercentile(values, [100 * (1 - LEVEL) / 2, 100 * (1 + LEVEL) / 2], axis=0)
    return lo, hi


def _quantile(errors: np.ndarray) -> tuple[float, str]:
    """A 95 % half-width from calibration |errors|: conformal with >= CONFORMAL_MIN, Student t below."""
    n = len(errors)
    if n >= CONFORMAL_MIN:
        k = math.ceil((n + 1) * LEVEL)
        return float(np.sort(np.abs(errors))[k - 1]), f"conformal quantile of {n} rolling-origin errors"
    rms = float(np.sqrt(np.mean(np.square(errors))))
    return float(stats.t.ppf((1 + LEVEL) / 2, n) * rms), (f"only {n} rolling-origin error(s): Student t({n}) x their "
                                                           f"RMS, widened for the few")


def extrapolation_halfwidth(distances: np.ndarray, errors: np.ndarray, distance: float) -> tuple[float, str]:
    """(95 % half-width in ln L of the extrapolation error at ``distance``, how it was calibrated)."""
    if distance <= 1.0:
        return 0.0, "inside the sweep: no extrapolation"
    distances, errors = np.asarray(distances, dtype=float), np.asarray(errors, dtype=float)
    ok = np.isfinite(errors) & (distances > 1.0)
    distances, errors = distances[ok], errors[ok]
    far = distances >= distance * (1 - 1e-9)
    if far.sum() >= CONFORMAL_MIN:
        half, how = _quantile(errors[far])
        return half, f"{how} at >= {distance:.3g}x"
    if len(errors) >= 1:
        farthest = np.argsort(-distances, kind="stable")[:CONFORMAL_MIN]
        scaled = errors[farthest] * np.log(distance) / np.log(distances[farthest])
        half, how = _quantile(scaled)
        return half, (f"{far.sum()} rolling-origin error(s) at >= {distance:.3g}x: the {len(farthest)} farthest "
                      f"({distances[farthest].min():.3g}-{distances[farthest].max():.3g}x) scaled by ln distance, "
                      f"{how}")
    return math.nan, "no rolling-origin error: the extrapolation error is unmeasured"


def prediction_interval(value: float, boot: np.ndarray | None, residual_sd: float, distance: float,
                        rolling: tuple[np.ndarray, np.ndarray] | None) -> dict:
    """{"value", "pi95": [lo, hi], "halfwidth_log", "parts": {part: half-width in ln L}, "dominant",
    "calibration"} for one predicted loss ``value`` (> 0) at ``distance`` = its C / the largest C fitted; ``boot``:
    the bootstrap refits' predictions of it; ``rolling``: (distances, ln errors) of this law's rolling origin."""
    parts = {"parameters": 0.0, "scatter": 0.0, "extrapolation": 0.0}
    if boot is not None and np.sum(np.isfinite(boot)) >= 2:
        with np.errstate(divide="ignore", invalid="ignore"):
            logs = np.log(boot[np.isfinite(boot) & (boot > 0)])
        lo, hi = np.percentile(logs, [100 * (1 - LEVEL) / 2, 100 * (1 + LEVEL) / 2])
        parts["parameters"] = float(hi - lo) / 2
    if np.isfinite(residual_sd):
        parts["scatter"] = Z95 * residual_sd
    extrapolation, calibration = extrapolation_halfwidth(*(rolling or ((), ())), distance)
    if np.isfinite(extrapolation):
        parts["extrapolation"] = extrapolation
        half = max(extrapolation, float(np.hypot(parts["parameters"], parts["scatter"])))
    else:
        half = 2.0 * float(np.hypot(parts["parameters"], parts["scatter"]))
        calibration += "; the parameter and scatter parts doubled"
    if not (np.isfinite(value) and value > 0):
        return {"value": value, "pi95": [math.nan, math.nan], "halfwidth_log": math.nan, "parts": parts,
                "dominant": None, "calibration": calibration}
    return {"value": float(value), "pi95": [float(value * np.exp(-half)), float(value * np.exp(half))],
            "halfwidth_log": half, "parts": parts, "dominant": max(parts, key=parts.get), "calibration": calibration}
