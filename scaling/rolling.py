"""Rolling-origin extrapolation: how well each law predicts runs beyond the compute it was fitted on, measured on
the sweep itself. ``--method auto`` chooses by it, and the prediction intervals (scaling/intervals.py) are
calibrated on its errors.

Origins are compute cuts: every budget when the runs are laid out on budgets, else every doubling of C from the
smallest run. At a cut each law is refitted on the runs at or below it (no bootstrap), if they are enough (>= 3
compute levels and MIN_LAW_RUNS runs; >= 3 budgets with >= 3 sizes for a law fitted on budgets), and predicts every
later run from its N, D and C alone (a law that predicts each budget's best run: those only). Each error is kept
with its distance, the run's C over the largest C fitted. The selection score of a law is the mean over origins of
its mean |relative error| on each later level's best run as far out as the sweep can check (``horizon``: the
farthest distance two origins reach, at least ``DISTANCE``; without such targets: on the farthest level from each
origin); a law that cannot be refitted at an origin (too few bracketed
budgets there, say) is not scored at that origin (``skipped``), and a prediction that is not finite scores infinity.
Forecasting practice (Tashman 2000, "Out-of-sample tests of forecasting accuracy"): evaluate at the horizon of use,
from several origins, never on the points fitted.
"""

from __future__ import annotations

import numpy as np

from scaling.laws import Law, LawError
from scaling.runs import MIN_SIZES, Runs

DISTANCE = 4.0  # selection: targets at >= 4x the largest C fitted (the default `train` run is 8x the sweep's largest)
MIN_LEVELS = 3  # compute levels (budgets) a law needs to separate its terms
MIN_LAW_RUNS = 8


def cuts(runs: Runs) -> list[float]:
    """The compute cuts of the rolling origins, by increasing C (the largest level is never a cut)."""
    if runs.budget is not None:
        levels = np.unique(runs.budget)
    else:
        c = runs.c
        levels = np.exp(np.arange(np.log(c.min()), np.log(c.max()), np.log(2.0))[1:])
    return [float(x) for x in levels if x < runs.levels.max()]


def enough(law: Law, fitted: Runs) -> bool:
    """Whether the runs at an origin can fit ``law`` at all."""
    if law.needs_budgets:
        return len(fitted.budgets()) >= MIN_LEVELS
    return fitted.n_compute_levels >= MIN_LEVELS and len(fitted) >= MIN_LAW_RUNS


def rolling_origin(laws: list[Law], runs: Runs) -> dict:
    """{"distance", "origins": [{"cut", "fitted_flops", "errors": {law: [{"flops", "distance", "log_error",
    "rel_error", "best"}] | None}}], "errors": {law: (distances, ln errors)} (every error, for the intervals),
    "score": {law: selection score}, "score_rule"}."""
    levels = runs.levels
    best = np.zeros(len(runs), dtype=bool)
    best[runs.best_runs()] = True
    report: dict = {"distance": DISTANCE, "origins": [], "errors": {}, "score": {}, "score_rule": None}
    for cut in cuts(runs):
        inside = levels <= cut * (1 + 1e-9)
        fitted = runs.take(np.flatnonzero(inside))
        reference = float(fitted.c.max())
        later = runs.take(np.flatnonzero(~inside))
        later_best, later_levels = best[~inside], levels[~inside]
        origin = {"cut": cut, "fitted_flops": reference, "errors": {}}
        for law in laws:
            if not enough(law, fitted):
                continue
            rows = np.flatnonzero(later_best) if law.predicts_best_run else np.arange(len(later))
            try:
                with np.errstate(all="ignore"):
                    model = law.fit(fitted)
                    predicted = law.predict(model, later, rows)
            except (LawError, np.linalg.LinAlgError) as exc:  # too little at this origin for this law (e.g. no
                origin.setdefault("skipped", {})[law.name] = str(exc)  # bracketed budgets yet): not scored here
                continue
            with np.errstate(all="ignore"):
                log_error = np.log(predicted / later.loss[rows])
            origin["errors"][law.name] = [
                {"flops": float(later.c[r]), "level": float(later_levels[r]),
                 "distance": float(later.c[r] / reference),
                 "log_error": float(e), "rel_error": float(np.expm1(e)), "best": bool(later_best[r])}
                for r, e in zip(rows, log_error, strict=True)]
        if origin["errors"]:
            report["origins"].append(origin)
    for law in laws:
        errors = [e for o in report["origins"] for e in (o["errors"].get(law.name) or [])]
        report["errors"][law.name] = (np.array([e["distance"] for e in errors]),
                                      np.array([e["log_error"] for e in errors]))
    report["distance"] = distance = horizon(report["origins"])
    report["score"], report["score_rule"] = _scores(laws, report["origins"], distance)
    return report


def horizon(origins: list[dict]) -> float:
    """The distance the selection scores at: as far out as the sweep can check itself (the farthest distance that
    at least two origins reach: one origin is one draw), and no nearer than DISTANCE. It depends on the runs alone,
    so the same runs give the same selection whatever is predicted from them."""
    reach = sorted((max((e["distance"] for errs in o["errors"].values() for e in (errs or ())), default=0.0)
                    for o in origins), reverse=True)
    measured = reach[1] if len(reach) >= 2 else (reach[0] if reach else DISTANCE)
    return float(max(DISTANCE, measured))


def _scores(laws: list[Law], origins: list[dict], distance: float) -> tuple[dict[str, float], str | None]:
    """Each law's mean over origins of mean |rel error| on the best runs at >= distance (else the farthest level)."""
    far = any(e["distance"] >= distance for o in origins for errs in o["errors"].values() for e in (errs or ()))
    rule = (f"best run of every level >= {distance:.3g}x the compute fitted" if far else
            "best run of the farthest level from each origin (no level is " f"{distance:.3g}x beyond an origin)")
    per_law: dict[str, list[float]] = {law.name: [] for law in laws}
    for origin in origins:
        chosen = [e for errs in origin["errors"].values() for e in (errs or ())]
        if not chosen:
            continue
        top = max(e["level"] for e in chosen)
        for law in laws:
            if law.name not in origin["errors"]:
                continue  # too few runs at this origin for this law
            errors = origin["errors"][law.name]
            if errors is None:
                per_law[law.name].append(np.inf)
                continue
            picked = [abs(e["rel_error"]) for e in errors if e["best"] and
                      (e["distance"] >= distance if far else e["level"] == top)]
            if picked:
                per_law[law.name].append(float(np.mean(picked)) if np.all(np.isfinite(picked)) else np.inf)
    scores = {name: float(np.mean(v)) for name, v in per_law.items() if v}
    return scores, (rule if scores else None)


__all__ = ["DISTANCE", "MIN_LEVELS", "MIN_LAW_RUNS", "MIN_SIZES", "rolling_origin", "cuts"]
