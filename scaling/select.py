"""Which fitted laws can be trusted, and which one to use.

A law is invalid (its predictions stay in fit.json and predictions.csv with ``valid`` false, out of the printed
table, the headline metrics and the leaderboard; each reason is printed) when:
1. its fit failed (``LawError``: e.g. approach 2 on runs not laid out on budgets);
2. a law fitted on budgets (IsoFLOP) has fewer than 3 budgets with >= 3 sizes that bracket their optimum;
3. a law in N and D sees runs on fewer than 3 compute levels (N and D move together: it cannot separate them);
4. a law in N and D puts its own N_opt(C) outside the sampled N of an IsoFLOP budget (the data never saw the
   optimum it extrapolates to). Only true budgets count (scaling/runs.py): scattered runs form none.
A parameter whose fitted value sits at the optimizer's bounds (``Law.bounds``) is ``at_bound``: the law is kept but
never selected over a valid law without one; when it is the only one, the selection says its predictions are
bound-limited. A parameter whose bootstrap 95 % CI merely reaches a bound is ``unpinned``: a note.

``select`` (``--method auto``): among the valid laws (those without a parameter at a bound, when there are any), the
one of smallest rolling-origin score (scaling/rolling.py); ties within TIE go to the fewest parameters; without a
rolling origin, the valid law of lowest ``Law.preference``. When no law is valid, nothing is selected.
"""

from __future__ import annotations

import numpy as np

from scaling.intervals import percentiles
from scaling.laws import Fitted, Law
from scaling.rolling import MIN_LEVELS
from scaling.runs import Runs

BOUND_RTOL = 1e-3  # "reaches": within this fraction of the bounded range (exactly, for a bound of 0 with no upper)
TIE = 1e-4  # rolling-origin scores within 0.01 percentage points: a tie, below what a loss measurement resolves


def _side(value: float, lo: float, hi: float, log: bool) -> float | None:
    """The bound ``value`` reaches (within BOUND_RTOL of the bounded range; exactly, for an open range), or None."""
    if not np.isfinite(value):
        return None
    if log:
        value, lo, hi = (np.log(v) if v > 0 else -np.inf for v in (value, lo, hi))
    tol = BOUND_RTOL * (hi - lo) if np.isfinite(hi - lo) else 0.0
    hit = lo if value <= lo + tol else hi if np.isfinite(hi) and value >= hi - tol else None
    return None if hit is None else float(np.exp(hit) if log else hit)


def at_bound(law: Law, fitted: Fitted, samples: dict[str, np.ndarray]) -> tuple[dict[str, str], dict[str, str]]:
    """({parameter: why} for each bounded parameter whose fitted value sits at its bound (a degenerate law: the
    bound, not the data, sets it), {parameter: why} for each other one whose bootstrap 95 % CI reaches a bound (the
    runs do not pin it down: a note))."""
    at, unpinned = {}, {}
    values = fitted.parameters()
    for name, bound in law.bounds.items():
        if name in fitted.unpinned():
            continue
        hit = _side(float(values[name]), bound.lo, bound.hi, bound.log)
        if hit is not None:
            at[name] = f"{name} = {values[name]:.4g} sits at the optimizer's bound {hit:.4g}"
            continue
        ci = percentiles(samples, name)
        if ci is None:
            continue
        lo, hi = float(ci[0]), float(ci[1])
        below, above = _side(lo, bound.lo, bound.hi, bound.log), _side(hi, bound.lo, bound.hi, bound.log)
        reach = bound.lo if below is not None and np.isclose(below, bound.lo) else \
            bound.hi if above is not None and np.isclose(above, bound.hi) else None
        if reach is not None:
            unpinned[name] = f"{name}'s bootstrap 95% CI [{lo:.4g}, {hi:.4g}] reaches the optimizer's bound {reach:.4g}"
    return at, unpinned


def vertex_reasons(fitted: Fitted, runs: Runs) -> list[str]:
    """One reason per IsoFLOP budget whose sampled N does not hold the law's own N_opt(C)."""
    reasons = []
    for budget, idx in runs.budgets():
        lo, hi = float(runs.n[idx].min()), float(runs.n[idx].max())
        with np.errstate(all="ignore"):
            n_opt = float(fitted.n_opt(budget))
        if not lo <= n_opt <= hi:
            reasons.append(f"budget C={budget:.3g}: the law's N_opt(C) N={n_opt:.3g} lies outside the sampled N "
                           f"[{lo:.3g}, {hi:.3g}]")
    return reasons


def validity(law: Law, fitted: Fitted | None, error: str | None, runs: Runs,
             samples: dict[str, np.ndarray]) -> dict:
    """{"valid", "reasons", "notes", "at_bound": [parameter]} of one law on ``runs``."""
    if fitted is None:
        return {"valid": False, "reasons": [f"fit failed: {error}"], "notes": [], "at_bound": [], "unpinned": []}
    reasons = []
    if law.needs_budgets and (fitted.budgets_used or 0) < MIN_LEVELS:
        reasons.append(f"{fitted.budgets_used} compute budget(s) with >= 3 model sizes that bracket their optimum, "
                       f"need >= {MIN_LEVELS}")
    levels = runs.n_compute_levels
    if not law.needs_budgets and levels < MIN_LEVELS:
        reasons.append(f"runs on {levels} compute level(s): N and D move together, so the law cannot separate their "
                       f"terms; need >= {MIN_LEVELS}")
    if law.checks_vertices:
        reasons += vertex_reasons(fitted, runs)
    at, unpinned = at_bound(law, fitted, samples)
    return {"valid": not reasons, "reasons": reasons, "notes": list(at.values()) + list(unpinned.values()),
            "at_bound": list(at), "unpinned": list(unpinned)}


def select(laws: dict[str, Law], valid: dict[str, dict], rolling: dict | None) -> dict:
    """{"method" (None when no law is valid), "valid", "why", "scores", "bound_limited": [parameter]}."""
    ok = [m for m in laws if valid[m]["valid"]]
    if not ok:
        why = "; ".join(f"{m}: {'; '.join(valid[m]['reasons'])}" for m in laws)
        return {"method": None, "valid": False, "why": f"no valid law ({why})", "scores": {}, "bound_limited": []}
    free = [m for m in ok if not valid[m]["at_bound"]]
    pool = free or ok
    note = "" if len(pool) == len(ok) else \
        f" (left out, a parameter at its bound: {', '.join(m for m in ok if m not in pool)})"
    scores = {m: v for m, v in ((rolling or {}).get("score") or {}).items() if m in laws}
    scored = [m for m in pool if np.isfinite(scores.get(m, np.inf))]
    if scored:
        smallest = min(scores[m] for m in scored)
        tied = [m for m in scored if scores[m] <= smallest + TIE]
        method = min(tied, key=lambda m: (laws[m].n_params, laws[m].preference))
        listing = ", ".join(f"{m} {scores[m]:.2%}" + ("" if m in pool else " (not eligible)")
                            for m in sorted(scores, key=scores.get))
        tie = f"; tied within {TIE:.0e} with {', '.join(m for m in tied if m != method)}, won by the fewest " \
              f"parameters" if len(tied) > 1 else ""
        why = (f"smallest rolling-origin error (mean |error| on the {rolling['score_rule']}, over "
               f"{len(rolling['origins'])} origin(s)): {listing}{tie}{note}")
    else:
        ordered = sorted(pool, key=lambda m: laws[m].preference)
        method = ordered[0]
        why = f"no rolling origin (too few compute levels to refit on): the first valid of {', '.join(ordered)} " \
              f"(Law.preference){note}"
    return {"method": method, "valid": True, "why": why, "scores": scores,
            "bound_limited": list(valid[method]["at_bound"])}
