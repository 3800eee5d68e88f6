"""Which fits can be trusted, and which law predicts best: every method's fit and bootstrap behind one call, its
prediction for a given run, the validity checks, leave-the-largest-budget-out validation and ``--method auto``.

What each method predicts for a run of N parameters trained on D tokens with C FLOPs (used for held-out runs and
for the leave-out validation alike):
- ``parametric`` (scaling/parametric.py) and ``gadre`` (scaling/gadre.py): their law at (N, D);
- ``isoflop`` and ``isoflop_grid`` (scaling/isoflop.py): L_opt(C) at the run's C, the loss of the compute-optimal
  model for that budget: it assumes the run's allocation of C between N and D is the compute-optimal one (for a run
  far from it, the IsoFLOP prediction is too low by however much that allocation costs).

A fit is invalid (its predictions stay in fit.json and predictions.csv with ``valid`` false, out of the printed table,
the headline metrics and the leaderboard; each reason is printed) when:
1. IsoFLOP: the results hold fewer than 3 compute budgets with >= 3 distinct model sizes whose parabola's vertex
   lies inside their sampled N range (scaling.data.budget_labels; budgets with fewer sizes, and budgets whose runs
   do not bracket the optimum, are left out of approach 2 and named, not counted against it); the parametric and
   Gadre laws take runs on any budgets (a published sweep), but need runs on >= 3 distinct compute budgets;
2. the parametric and Gadre laws: their own N_opt(C) at a budget with >= 3 sizes lies outside its sampled N range
   (the data never saw the optimum the law extrapolates to);
A parameter whose bootstrap 95% CI reaches the optimizer's bounds (``BOUNDS``; with --bootstrap 0, the point
estimate sitting at one) is flagged beside the law's predictions (``at_bound``), not voided: the data do not pin that
parameter down, and the user should know. With ``--strict`` only, a law is also invalid when its
leave-the-largest-budget-out prediction misses: refit without the largest budget, predict that budget's best
(lowest-loss) run as above, and the measured loss falls outside the 95% prediction interval, the refit's bootstrap
CI and its relative residual scatter on the budgets fitted added in quadrature. Without --strict the miss is a note.
For runs not on shared budgets the laws leave out the largest-compute runs.
``--method auto`` fits every method and picks the valid one that extrapolates best from several origins at >= 4x
the compute fitted (scaling/rolling.py); without such origins, the smallest leave-the-largest-budget-out error.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from scaling.data import HEADLINE_METHODS, budget_labels
from scaling.gadre import ETA_BOUNDS, bootstrap_gadre, fit_gadre, gadre_stats
from scaling.isoflop import GAMMA_BOUNDS, bootstrap_isoflop, fit_isoflop, isoflop_stats
from scaling.parametric import THETA_BOUNDS, bootstrap_parametric, fit_parametric, parametric_stats

Runs = tuple[np.ndarray, np.ndarray, np.ndarray]  # N, D, C of the runs to predict
CI_PERCENTILES = (2.5, 97.5)
MIN_BUDGETS = 3
MIN_LAW_RUNS = 8  # runs a law in N and D is refitted on when it leaves out the largest-compute runs
LOBO_RTOL = 1e-6  # a leave-out miss this small is exact (an exact law's CI has zero width)
# a fit family -> the prediction methods it yields (the predictions.csv ``method`` values)
FAMILY_METHODS = {"isoflop": ("isoflop", "isoflop_grid"), "parametric": ("parametric",), "gadre": ("gadre",)}
# method -> the stats key holding its prediction for each of the ``runs``
RUN_KEYS = {"isoflop": "parabola.pred.run_loss", "isoflop_grid": "grid_minimum.pred.run_loss",
            "parametric": "pred.run_loss", "gadre": "pred.run_loss"}
PREFERENCE = HEADLINE_METHODS  # parametric, isoflop, isoflop_grid, gadre
# --method auto: leave-out errors within TIE of the smallest (0.01 percentage points, below what a loss measurement
# resolves) are a tie, won by the method with the fewest fitted parameters (Gadre 4, parametric 5, IsoFLOP 3 per
# budget + 3)
TIE = 1e-4
PARSIMONY = ("gadre", "parametric", "isoflop", "isoflop_grid")
_LOG_A, _LOG_B, _LOG_E, _ALPHA, _BETA = THETA_BOUNDS
# family -> stats key -> (lower, upper, compared in log space): the optimizer's bounds (scaling/isoflop.py fits
# L_opt's E >= 0 only with >= 4 budgets and holds it at 0 with fewer, which is not a bound it reached)
BOUNDS: dict[str, dict[str, tuple[float, float, bool]]] = {
    "isoflop": {f"{variant}.loss.{name}": bound for variant in ("parabola", "grid_minimum")
                for name, bound in (("E", (0.0, np.inf, False)), ("gamma", (*GAMMA_BOUNDS, False)))},
    "parametric": {"A": (*np.exp(_LOG_A), True), "B": (*np.exp(_LOG_B), True), "E": (*np.exp(_LOG_E), True),
                   "alpha": (*_ALPHA, False), "beta": (*_BETA, False)},
    "gadre": {"E": (0.0, np.inf, False), "a": (0.0, np.inf, False), "b": (0.0, np.inf, False),
              "eta": (*ETA_BOUNDS, False)},
}
BOUND_RTOL = 1e-3  # "reaches": within this fraction of the bounded range (exactly, for a bound of 0 with no upper)


@dataclass
class FamilyFit:
    """One fit family on one table: the fitted model, its stats at the targets (and runs), the bootstrap."""

    family: str
    model: object  # IsoflopFit | ParametricLaw | GadreLaw
    point: dict[str, np.ndarray]
    samples: dict[str, np.ndarray]
    skipped: int
    extra: dict = field(default_factory=dict)  # parametric: theta, objective; gadre: objective


def fit_family(family: str, n: np.ndarray, d: np.ndarray, c: np.ndarray, loss: np.ndarray, targets: np.ndarray,
               n_boot: int, rng: np.random.Generator, runs: Runs | None = None) -> FamilyFit:
    """Fit, predict at ``targets`` (and for ``runs``), bootstrap; raises ValueError when the fit is impossible."""
    if family == "isoflop":
        iso = fit_isoflop(n, c, loss)
        samples, skipped = bootstrap_isoflop(n, c, loss, targets, n_boot, rng, runs)
        return FamilyFit(family, iso, isoflop_stats(iso, targets, runs), samples, skipped)
    if family == "parametric":
        law, theta, objective = fit_parametric(n, d, loss)
        samples, skipped = bootstrap_parametric(n, d, loss, theta, targets, n_boot, rng, runs=runs)
        return FamilyFit(family, law, parametric_stats(law, targets, runs), samples, skipped,
                         {"theta": theta, "objective": objective})
    if family == "gadre":
        law, objective = fit_gadre(n, d, loss)
        samples, skipped = bootstrap_gadre(n, d, loss, targets, n_boot, rng, runs)
        return FamilyFit(family, law, gadre_stats(law, targets, runs), samples, skipped, {"objective": objective})
    raise ValueError(f"unknown fit family {family!r}")


def ci95(samples: dict[str, np.ndarray], key: str) -> tuple[np.ndarray, np.ndarray] | None:
    """Bootstrap percentiles over the resamples where ``key`` is defined (NaN where none is); None without any."""
    values = samples.get(key)
    if values is None or len(values) == 0:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # "All-NaN slice": a NaN CI is the answer there
        lo, hi = np.nanpercentile(values, CI_PERCENTILES, axis=0)
    return lo, hi


def run_predictions(fit: FamilyFit) -> dict[str, dict[str, np.ndarray | None]]:
    """Each method's prediction for the ``runs`` the fit was given: {method: {"value", "ci95"}} (no loss involved)."""
    out = {}
    for method in FAMILY_METHODS[fit.family]:
        key = RUN_KEYS[method]
        if key in fit.point:
            out[method] = {"value": fit.point[key], "ci95": ci95(fit.samples, key)}
    return out


def all_run_predictions(fits: dict[str, FamilyFit]) -> dict[str, dict[str, np.ndarray | None]]:
    """``run_predictions`` of every fitted family, by method."""
    return {method: pred for fit in fits.values() for method, pred in run_predictions(fit).items()}


# ---------------------------------------------------------------- validity
def budget_groups(n: np.ndarray, c: np.ndarray) -> list[tuple[float, np.ndarray]]:
    """(C, row indices) of every compute budget with >= 3 distinct model sizes, by increasing C."""
    labels = budget_labels(c)
    groups = [(float(b), np.flatnonzero(labels == b)) for b in np.unique(labels)]
    return [(b, idx) for b, idx in groups if len(np.unique(n[idx])) >= 3]


def _side(value: float, lo: float, hi: float, log: bool) -> float | None:
    """The bound ``value`` reaches (within BOUND_RTOL of the bounded range; exactly, for an open range), or None."""
    if np.isnan(value):
        return None
    if log:
        value, lo, hi = (np.log(v) if v > 0 else -np.inf for v in (value, lo, hi))
    tol = BOUND_RTOL * (hi - lo) if np.isfinite(hi - lo) else 0.0
    if value <= lo + tol:
        return np.exp(lo) if log else lo
    if np.isfinite(hi) and value >= hi - tol:
        return np.exp(hi) if log else hi
    return None


def bound_reasons(fit: FamilyFit, n_budgets: int) -> dict[str, dict[str, str]]:
    """Per method: {parameter: why} for each parameter whose bootstrap 95% CI (the point estimate without bootstrap)
    reaches a bound."""
    out: dict[str, dict[str, str]] = {m: {} for m in FAMILY_METHODS[fit.family]}
    for key, (lo, hi, log) in BOUNDS[fit.family].items():
        if key.endswith("loss.E") and n_budgets < 4:
            continue  # E is held at 0 below 4 budgets (scaling/isoflop.py fit_loss_law), not fitted
        method = "isoflop_grid" if key.startswith("grid_minimum.") else fit.family
        name = key.removeprefix("parabola.").removeprefix("grid_minimum.")
        ci = ci95(fit.samples, key)
        if ci is not None:
            ci_lo, ci_hi = float(ci[0]), float(ci[1])
            below, above = _side(ci_lo, lo, hi, log), _side(ci_hi, lo, hi, log)
            hit = lo if below is not None and np.isclose(below, lo) else \
                hi if above is not None and np.isclose(above, hi) else None
            if hit is not None:
                out[method][name] = (f"{name}'s bootstrap 95% CI [{ci_lo:.4g}, {ci_hi:.4g}] reaches the "
                                      f"optimizer's bound {hit:.4g}")
        else:
            value = float(fit.point[key])
            hit = _side(value, lo, hi, log)
            if hit is not None:
                out[method][name] = f"{name} = {value:.4g} sits at the optimizer's bound {hit:.4g} (no bootstrap)"
    return out


def vertex_reasons(fit: FamilyFit, n: np.ndarray, c: np.ndarray) -> list[str]:
    """One reason per budget with >= 3 sizes where a law's N_opt(C) is outside the sampled N. (IsoFLOP leaves such
    budgets out of its own fit: scaling/isoflop.py ``unbracketed_budgets``.)"""
    if fit.family == "isoflop":
        return []
    reasons = []
    for budget, idx in budget_groups(n, c):
        lo, hi = float(n[idx].min()), float(n[idx].max())
        n_opt = float(fit.model.n_opt(budget))
        if not lo <= n_opt <= hi:
            reasons.append(f"budget C={budget:.3g}: the law's N_opt(C) N={n_opt:.3g} lies outside the sampled N "
                           f"[{lo:.3g}, {hi:.3g}]")
    return reasons


def best_runs(labels: np.ndarray, loss: np.ndarray, budgets) -> list[int]:
    """The row of the lowest-loss run of each of ``budgets`` (``budget_labels`` values)."""
    return [int(np.flatnonzero(labels == b)[np.argmin(loss[labels == b])]) for b in budgets]


def leave_largest_out(family: str, n: np.ndarray, d: np.ndarray, c: np.ndarray, loss: np.ndarray, n_boot: int,
                      rng: np.random.Generator) -> dict[str, dict]:
    """Refit without the largest budget and predict its best run: {method: {budget, run, predicted_loss, ci95,
    rel_error, within_ci, residual_sd, pi95 (``prediction_interval``), within_pi}} ({} with fewer than 3 budgets;
    {method: {"error"}} when the refit is impossible)."""
    groups = budget_groups(n, c)
    if len(groups) >= MIN_BUDGETS:
        budget, idx = groups[-1]
    else:  # runs not on shared budgets (a published sweep): a law in N and D leaves out the largest-compute runs
        labels = budget_labels(c)
        budget = float(labels.max())
        idx = np.flatnonzero(labels == budget)
        if family == "isoflop" or len(n) - len(idx) < MIN_LAW_RUNS:
            return {}
    best = int(idx[np.argmin(loss[idx])])
    keep = np.ones(len(n), dtype=bool)
    keep[idx] = False
    # the target run, then the best run of every budget fitted: their misses are the fit's residual scatter
    labels = budget_labels(c)
    fitted_best = best_runs(labels, loss, np.unique(labels[keep]))
    rows = [best, *fitted_best]
    runs = (n[rows], d[rows], c[rows])
    try:
        with np.errstate(all="ignore"):
            fit = fit_family(family, n[keep], d[keep], c[keep], loss[keep], np.array([budget]), n_boot, rng, runs)
    except (ValueError, np.linalg.LinAlgError) as exc:
        return {m: {"budget": budget, "error": str(exc)} for m in FAMILY_METHODS[family]}
    out = {}
    run = {"n": float(n[best]), "d": float(d[best]), "flops": float(c[best]), "loss": float(loss[best])}
    for method, pred in run_predictions(fit).items():
        value = float(pred["value"][0])
        ci = None if pred["ci95"] is None else [float(pred["ci95"][0][0]), float(pred["ci95"][1][0])]
        within = None if ci is None or not np.all(np.isfinite(ci)) else bool(ci[0] <= run["loss"] <= ci[1])
        residuals = np.asarray(pred["value"][1:], dtype=float) / loss[fitted_best] - 1
        pi = prediction_interval(value, ci, residuals)
        out[method] = {"budget": budget, "run": run, "predicted_loss": value, "ci95": ci,
                       "rel_error": value / run["loss"] - 1, "within_ci": within,
                       "residual_sd": float(np.std(residuals, ddof=1)) if len(residuals) > 1 else None,
                       "pi95": pi, "within_pi": None if pi is None else bool(pi[0] <= run["loss"] <= pi[1])}
    return out


def prediction_interval(value: float, ci: list[float] | None, residuals: np.ndarray) -> list[float] | None:
    """A 95% prediction interval for one new run: the parameters' bootstrap CI (its half-width, relative) and the
    fit's own relative residual scatter on the budgets it was fitted on, added in quadrature; None without
    residuals to measure (fewer than 2) or with a non-finite prediction."""
    if len(residuals) < 2 or not np.isfinite(value) or not np.all(np.isfinite(residuals)):
        return None
    half_ci = 0.0 if ci is None or not np.all(np.isfinite(ci)) else (ci[1] - ci[0]) / 2 / value
    half = float(np.hypot(half_ci, 1.96 * np.std(residuals, ddof=1)))
    return [value * (1 - half), value * (1 + half)]


def validity(family: str, fit: FamilyFit | None, error: str | None, n: np.ndarray, c: np.ndarray,
             lobo: dict[str, dict], strict: bool = False) -> dict[str, dict]:
    """{method: {"valid", "reasons", "notes"}} for one fit family (``fit`` None: it failed with ``error``). A
    leave-out miss outside its prediction interval is a note, and voids the law only when ``strict``."""
    methods = FAMILY_METHODS[family]
    if fit is None:
        return {m: {"valid": False, "reasons": [f"fit failed: {error}"], "notes": []} for m in methods}
    # the budgets approach 2 fitted (bracketed, >= 3 sizes); the laws in N and D: every budget with >= 3 sizes
    n_budgets = len(fit.model.budgets) if family == "isoflop" else len(budget_groups(n, c))
    shared = []
    if family == "isoflop" and n_budgets < MIN_BUDGETS:
        left_out = len(fit.model.unbracketed_budgets)
        shared.append(f"{n_budgets} compute budget(s) with >= 3 model sizes that bracket their optimum"
                      f"{f' ({left_out} unbracketed left out)' if left_out else ''}, need >= {MIN_BUDGETS}")
    n_compute = len(np.unique(budget_labels(c)))
    if family != "isoflop" and n_compute < MIN_BUDGETS:  # a law in N and D takes runs on any budgets, but not few
        shared.append(f"runs on {n_compute} compute budget(s): N and D move together, so the law cannot separate "
                      f"their terms; need >= {MIN_BUDGETS}")
    shared += vertex_reasons(fit, n, c)
    bounds = bound_reasons(fit, n_budgets)
    out = {}
    for method in methods:
        # a parameter at the optimizer's bound (E -> 0: the runs do not pin the irreducible loss) is flagged beside
        # the law's predictions, not a reason to drop them: the law still describes the runs it was fitted on
        reasons, notes = list(shared), list(bounds[method].values())
        check = lobo.get(method)
        if check is None:
            notes.append("leave-the-largest-budget-out check needs >= 3 budgets: not run")
        elif "error" in check:
            reasons.append(f"leave-the-largest-budget-out refit failed: {check['error']}")
        elif check.get("within_pi") is None:
            notes.append("leave-the-largest-budget-out prediction interval not checked (too few budgets fitted)")
        elif not check["within_pi"] and abs(check["rel_error"]) > LOBO_RTOL:
            lo, hi = check["pi95"]
            message = (f"leave-the-largest-budget-out: predicted {check['predicted_loss']:.4g} [{lo:.4g}, {hi:.4g}] "
                       f"for the best run of C={check['budget']:.3g}, measured {check['run']['loss']:.4g} "
                       f"({check['rel_error']:+.2%}): outside its 95% prediction interval")
            # the interval holds the parameters' uncertainty and the fit's residual scatter: a miss outside it is
            # evidence to weigh, a reason to drop the law only under --strict
            (reasons if strict else notes).append(message + ("" if strict else " (--strict: voids the law)"))
        out[method] = {"valid": not reasons, "reasons": reasons, "notes": notes,
                       "at_bound": list(bounds[method])}
    return out


# ---------------------------------------------------------------- choosing the method
def select_method(mode: str, methods: list[str], valid: dict[str, dict], lobo: dict[str, dict],
                  rolling: dict | None = None) -> dict:
    """{"method", "valid", "mode", "why", "lobo_rel_error"}: ``auto`` takes the valid method (any, when none is
    valid) with the smallest rolling-origin score (scaling/rolling.py: mean |error| at >= 4x the compute fitted),
    or, without usable origins, the smallest leave-the-largest-budget-out |error|; ties within TIE go to the fewest
    parameters. Other modes take the first valid of PREFERENCE."""
    errors = {m: lobo[m]["rel_error"] for m in methods if "rel_error" in lobo.get(m, {})}
    scores = {m: v for m, v in ((rolling or {}).get("score") or {}).items() if m in methods}
    ok = [m for m in methods if valid.get(m, {}).get("valid")]
    ordered = sorted(methods, key=lambda m: PREFERENCE.index(m) if m in PREFERENCE else len(PREFERENCE))
    if mode == "auto" and any(np.isfinite(v) for v in scores.values()):
        return _smallest(mode, scores, ok, errors, f"smallest rolling-origin error (mean |error| predicting the best "
                         f"run of budgets >= {rolling['distance']:g}x the largest fitted, over "
                         f"{len(rolling['origins'])} origin(s) C <= {rolling['origins'][-1]['budget']:.3g})")
    if mode == "auto" and errors:
        method = _smallest(mode, {m: abs(e) for m, e in errors.items()}, ok, errors,
                           "smallest leave-the-largest-budget-out error (no rolling origin: too few budgets)")
        method["why"] += f" (predicting the best run of C={lobo[method['method']]['budget']:.3g} from the smaller " \
                         f"budgets)"
        return method
    method = next((m for m in ordered if m in ok), ordered[0] if ordered else None)
    if mode == "auto":
        why = "no leave-the-largest-budget-out error (fewer than 3 budgets): first valid fit of " + ", ".join(ordered)
    else:
        why = f"--method {mode}: the first valid fit of {', '.join(ordered)}"
    if method is not None and method not in ok:
        why += " (none is valid: the first fitted)"
    return {"method": method, "valid": bool(method in ok), "mode": mode, "why": why, "lobo_rel_error": errors}


def _smallest(mode: str, scores: dict[str, float], ok: list[str], errors: dict[str, float], rule: str) -> dict:
    """The method of smallest score among the valid ones (all, when none is valid), ties to the fewest parameters."""
    pool = [m for m in scores if m in ok and np.isfinite(scores[m])] or \
        [m for m in scores if np.isfinite(scores[m])] or list(scores)
    smallest = min(scores[m] for m in pool)
    tied = [m for m in pool if scores[m] <= smallest + TIE]
    method = min(tied, key=lambda m: PARSIMONY.index(m) if m in PARSIMONY else len(PARSIMONY))
    listing = ", ".join(f"{m} {scores[m]:.2%}" + ("" if m in ok else " (invalid)")
                        for m in sorted(scores, key=lambda m: scores[m]))
    among = "the valid fits" if method in ok else "all fits (none is valid)"
    tie = f"; a tie within {TIE:.0e} with {', '.join(m for m in tied if m != method)}, won by the fewest " \
          f"parameters" if len(tied) > 1 else ""
    return {"method": method, "valid": bool(method in ok), "mode": mode,
            "why": f"{rule} among {among}: {listing}{tie}", "lobo_rel_error": errors}
