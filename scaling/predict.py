"""``fit_and_predict``: every scaling law fitted on a table of runs, validated, one selected, and its predictions with
95 % prediction intervals, as one report (fit.json). The CLI (scaling/fit.py), the experiments and the benchmarks
call this; scaling/report.py turns the report into files and the printed summary.

Steps: the runs' layout (scaling/runs.py: IsoFLOP budgets or scattered); each law fitted (scaling/laws/) and
bootstrapped (runs resampled within budgets, else rows; ``bootstrap`` resamples); the rolling origin
(scaling/rolling.py); validity and selection (scaling/select.py); each law's compute-optimal N, D and loss at the
``targets`` and its loss for each held-out run, with intervals (scaling/intervals.py). Held-out runs are predicted
from their N, D and C; their loss is read only after every prediction was made (``holdout_section``).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from scaling.frontier import frontier_trend
from scaling.intervals import bootstrap, percentiles, prediction_interval
from scaling.laws import LAWS, Fitted, Law, LawError
from scaling.rolling import rolling_origin
from scaling.runs import Runs, detect_layout
from scaling.select import select, validity

AUTO = "auto"
TARGET_DISTANCES = (10.0, 100.0)  # default targets: this many times the largest compute fitted


def default_targets(max_flops: float) -> np.ndarray:
    """The targets a fit predicts at when none are given: 10x and 100x the sweep's largest budget (the distances
    its rolling origin can still speak for; 1e23 from a laptop sweep is a guess, not a prediction)."""
    return float(max_flops) * np.asarray(TARGET_DISTANCES)


def choose_laws(method: str | Sequence[str]) -> dict[str, Law]:
    """``auto``: every registered law; else the named ones (a name or a comma-separated list)."""
    names = method.split(",") if isinstance(method, str) else list(method)
    names = [n.strip() for n in names if n.strip()]
    if names == [AUTO]:
        return dict(LAWS)
    unknown = [n for n in names if n not in LAWS]
    if unknown or not names:
        raise ValueError(f"method must be {AUTO} or law names ({', '.join(LAWS)}), got {method!r}")
    return {n: LAWS[n] for n in names}


def table_runs(frame: pd.DataFrame) -> tuple[Runs, str]:
    """The runs of a canonical results table (scaling/data.py) and its layout line."""
    n, d, c, loss = (frame[k].to_numpy(dtype=float) for k in ("params", "tokens", "flops", "loss"))
    column = frame["budget"].to_numpy(dtype=float) if "budget" in frame else None
    unique = frame["unique_tokens"].to_numpy(dtype=float) if "unique_tokens" in frame else None
    labels, layout = detect_layout(n, c, column)
    return Runs(n, d, c, loss, labels, unique), layout


def rolling_errors(report: dict, law: str) -> tuple[np.ndarray, np.ndarray]:
    """(distances, ln errors) of every rolling-origin prediction of ``law`` (a fit.json report's origins): what its
    intervals are calibrated on."""
    errors = [e for o in report["rolling_origin"]["origins"] for e in (o["errors"].get(law) or ())]
    return np.array([e["distance"] for e in errors]), np.array([e["log_error"] for e in errors])


@dataclass
class LawFit:
    """One law on the runs: its fit (None when it failed, with ``error``), bootstrap samples and residual sd."""

    law: Law
    fitted: Fitted | None
    error: str | None = None
    samples: dict | None = None
    skipped: int = 0
    residual_sd: float = float("nan")


@dataclass
class FitResult:
    report: dict  # fit.json
    fits: dict[str, LawFit]
    runs: Runs


def _fit_one(law: Law, runs: Runs, targets: np.ndarray, held: tuple | None, n_boot: int, seed: int) -> LawFit:
    try:
        with np.errstate(all="ignore"):
            fitted = law.fit(runs)
            residuals = law.residuals(fitted, runs)
    except (LawError, np.linalg.LinAlgError) as exc:
        return LawFit(law, None, str(exc))

    def predict(f: Fitted) -> dict[str, np.ndarray]:
        out = {"loss_opt": f.loss_opt(targets), "n_opt": f.n_opt(targets), "d_opt": f.d_opt(targets)}
        return out | ({"loss_run": f.loss(*held)} if held is not None else {})

    rng = np.random.default_rng([seed, zlib.crc32(law.name.encode())])
    samples, skipped = bootstrap(law, runs, fitted, n_boot, rng, predict)
    sd = float(np.std(residuals, ddof=1)) if len(residuals) > 1 and np.all(np.isfinite(residuals)) else float("nan")
    return LawFit(law, fitted, None, samples, skipped, sd)


def _parameter_stats(fit: LawFit) -> dict:
    out = {}
    for name, value in fit.fitted.parameters().items():
        ci = percentiles(fit.samples, name)
        values = fit.samples.get(name)
        with np.errstate(all="ignore"):
            se = float(np.nanstd(values, ddof=1)) if values is not None and len(values) > 1 else None
        out[name] = {"value": float(value), "ci95": None if ci is None else [float(ci[0]), float(ci[1])], "se": se}
    return out


def _interval(fit: LawFit, key: str, i: int, value: float, flops: float, max_c: float, rolling: dict) -> dict:
    boot = fit.samples[key][:, i] if key in (fit.samples or {}) else None
    return prediction_interval(float(value), boot, fit.residual_sd, flops / max_c, rolling["errors"].get(fit.law.name))


def fit_and_predict(frame: pd.DataFrame, targets: Sequence[float] = (), method: str = AUTO,
                    bootstrap: int = 200, seed: int = 0, holdout: pd.DataFrame | None = None) -> FitResult:
    """Fit, bootstrap, validate, select and predict (see the module docstring). ``frame``: canonical runs (params,
    tokens, flops, loss, optional budget); ``holdout``: runs to predict (params, tokens, flops; run_id and loss
    optional: the loss only scores the predictions); ``targets``: () for ``default_targets``. Raises ValueError on a
    bad ``method``."""
    laws = choose_laws(method)
    runs, layout = table_runs(frame)
    targets = np.asarray(targets, dtype=float) if len(targets) else default_targets(runs.c.max())
    held = None if holdout is None else tuple(holdout[k].to_numpy(dtype=float) for k in ("params", "tokens", "flops"))
    fits = {name: _fit_one(law, runs, targets, held, bootstrap, seed) for name, law in laws.items()}
    fitted_laws = [f.law for f in fits.values() if f.fitted is not None]
    max_c = float(runs.c.max())
    rolling = rolling_origin(fitted_laws, runs)
    valid = {name: validity(f.law, f.fitted, f.error, runs, f.samples or {}) for name, f in fits.items()}
    selection = select(laws, valid, rolling)
    predictions, law_sections = [], {}
    for name, fit in fits.items():
        if fit.fitted is None:
            continue
        law_sections[name] = {"title": fit.law.title, "parameters": _parameter_stats(fit),
                              "residual_sd": fit.residual_sd,
                              "bootstrap": {"used": bootstrap - fit.skipped, "skipped": fit.skipped}} \
            | fit.fitted.details()
        with np.errstate(all="ignore"):
            point = {"n_opt": fit.fitted.n_opt(targets), "d_opt": fit.fitted.d_opt(targets),
                     "loss": fit.fitted.loss_opt(targets)}
        for i, flops in enumerate(targets):
            pi = _interval(fit, "loss_opt", i, point["loss"][i], flops, max_c, rolling)
            reach = rolling["errors"].get(name, ((),))[0]
            row = {"method": name, "target_flops": float(flops), "distance": float(flops / max_c),
                   "calibrated_distance": float(np.max(reach)) if len(reach) else np.nan}
            for q, key in (("n_opt", "n_opt"), ("d_opt", "d_opt")):
                ci = percentiles(fit.samples or {}, key)
                row |= {q: float(point[q][i]), f"{q}_lo": float(ci[0][i]) if ci else np.nan,
                        f"{q}_hi": float(ci[1][i]) if ci else np.nan}
            with np.errstate(all="ignore"):  # numpy division: a degenerate N_opt of 0 gives inf, not an exception
                row["tokens_per_param"] = float(np.float64(row["d_opt"]) / row["n_opt"])
            row |= {"loss": pi["value"], "loss_lo": pi["pi95"][0], "loss_hi": pi["pi95"][1],
                    "interval_dominant": pi["dominant"], "interval_calibration": pi["calibration"],
                    "valid": valid[name]["valid"], "selected": name == selection["method"],
                    "at_bound": " ".join(valid[name]["at_bound"])}
            predictions.append(row)
    report = {"n_runs": len(runs), "layout": layout, "target_flops": targets.tolist(), "bootstrap": bootstrap,
              "seed": seed, "method": method, "laws": law_sections, "validity": valid,
              "rolling_origin": {k: v for k, v in rolling.items() if k != "errors"}, "selection": selection,
              "frontier": frontier_trend(runs.c, runs.loss), "predictions": predictions}
    if holdout is not None:
        report["holdout"] = holdout_section(holdout, held, fits, selection["method"], max_c, rolling, valid)
    return FitResult(report, fits, runs)


def holdout_section(holdout: pd.DataFrame, held: tuple[np.ndarray, np.ndarray, np.ndarray], fits: dict[str, LawFit],
                    selected: str | None, max_c: float, rolling: dict, valid: dict) -> dict:
    """fit.json's ``holdout``: each held-out run's prediction by every law with its interval, then (the first place
    the held-out losses are read) the measured loss and the errors. The largest run (by C) is also spelt out at the
    top level; ``runs`` lists every run."""
    n, d, c = held
    ids = holdout["run_id"].astype(str).tolist() if "run_id" in holdout else [f"run{i + 1}" for i in range(len(n))]
    with np.errstate(all="ignore"):
        losses = {name: fit.fitted.loss(n, d, c) for name, fit in fits.items() if fit.fitted is not None}
    runs = []
    for i in range(len(n)):
        predicted, intervals = {}, {}
        for name, values in losses.items():
            value = float(values[i])
            pi = _interval(fits[name], "loss_run", i, value, c[i], max_c, rolling)
            predicted[name] = value
            intervals[name] = {"pi95": pi["pi95"], "dominant": pi["dominant"], "calibration": pi["calibration"],
                               "parts": pi["parts"], "distance": float(c[i] / max_c)}
        runs.append({"run_id": ids[i], "n": n[i], "d": d[i], "flops": c[i], "predicted_loss": predicted,
                     "interval": intervals, "valid": {m: valid[m]["valid"] for m in predicted}})
    if "loss" in holdout:  # read after every prediction above
        for run, loss in zip(runs, holdout["loss"].to_numpy(dtype=float), strict=True):
            run["actual_loss"] = float(loss)
            run["rel_error"] = {m: v / loss - 1 for m, v in run["predicted_loss"].items()}
            run["covered"] = {m: bool(iv["pi95"][0] <= loss <= iv["pi95"][1]) for m, iv in run["interval"].items()}
    top = max(runs, key=lambda r: r["flops"])
    return top | {"selected_method": selected, "runs": runs}
