"""Rolling-origin extrapolation checks: how well each law predicts runs at least ``DISTANCE`` times the compute it
was fitted on, which is what a scaling law is used for. ``--method auto`` chooses by it.

Origins: every compute budget C_k whose runs up to C_k are enough to fit every law (>= 3 budgets with >= 3 model
sizes when the runs share budgets, else >= 3 distinct budgets and MIN_LAW_RUNS runs) and that has a budget at least
``DISTANCE`` x C_k beyond it. At each origin each law is refitted on the runs with C <= C_k (no bootstrap) and
predicts the best (lowest-loss) run of every budget >= DISTANCE x C_k from its N, D and C alone. A law's score is
the mean over origins of its mean |relative error| there; a law that cannot be fitted at an origin scores infinity.
Forecasting practice (Tashman 2000, "Out-of-sample tests of forecasting accuracy"): evaluate at the horizon of use,
from several origins, never on the points fitted.
"""

from __future__ import annotations

import numpy as np

from scaling.data import budget_labels
from scaling.validate import (
    FAMILY_METHODS,
    MIN_BUDGETS,
    MIN_LAW_RUNS,
    best_runs,
    budget_groups,
    fit_family,
    run_predictions,
)

DISTANCE = 4.0  # targets sit at >= 4x the largest budget fitted (the default `train` run is 8x the sweep's largest)


def origins(n: np.ndarray, c: np.ndarray, distance: float = DISTANCE) -> list[tuple[float, list[float]]]:
    """(C_k, the target budgets >= distance x C_k) for every usable origin, by increasing C_k."""
    labels = budget_labels(c)
    budgets = np.unique(labels)
    shared = {b for b, _ in budget_groups(n, c)}
    out = []
    for origin in budgets:
        fitted = labels <= origin
        enough = (len([b for b in shared if b <= origin]) >= MIN_BUDGETS if len(shared) >= MIN_BUDGETS else
                  len(np.unique(labels[fitted])) >= MIN_BUDGETS and fitted.sum() >= MIN_LAW_RUNS)
        targets = [float(b) for b in budgets if b >= distance * origin * (1 - 1e-9)]
        if enough and targets:
            out.append((float(origin), targets))
    return out


def rolling_origin(families: tuple[str, ...], n: np.ndarray, d: np.ndarray, c: np.ndarray, loss: np.ndarray,
                   distance: float = DISTANCE) -> dict:
    """{"distance", "origins": [{"budget", "targets", "errors": {method: [rel error per target] | None}}],
    "score": {method: mean over origins of mean |rel error|}}; no origins: empty lists and scores."""
    labels = budget_labels(c)
    methods = [m for f in families for m in FAMILY_METHODS[f]]
    report: dict = {"distance": distance, "origins": [], "score": {}}
    per_method: dict[str, list[float]] = {m: [] for m in methods}
    for origin, targets in origins(n, c, distance):
        fitted = labels <= origin
        best = best_runs(labels, loss, targets)
        runs = (n[best], d[best], c[best])
        errors: dict[str, list[float] | None] = {}
        for family in families:
            try:
                with np.errstate(all="ignore"):
                    fit = fit_family(family, n[fitted], d[fitted], c[fitted], loss[fitted], np.array(targets), 0,
                                     np.random.default_rng(0), runs)
                predictions = run_predictions(fit)
            except (ValueError, np.linalg.LinAlgError):
                predictions = {}
            for method in FAMILY_METHODS[family]:
                value = predictions.get(method, {}).get("value")
                errors[method] = None if value is None else [float(v) for v in value / loss[best] - 1]
        for method in methods:
            error = errors.get(method)
            per_method[method].append(np.inf if error is None or not np.all(np.isfinite(error)) else
                                      float(np.mean(np.abs(error))))
        report["origins"].append({"budget": origin, "targets": targets, "errors": errors})
    if report["origins"]:
        report["score"] = {m: float(np.mean(v)) for m, v in per_method.items()}
    return report
