"""Recipes fitted jointly: one law whose exponents and model term every recipe shares, each recipe with its own data
term and irreducible loss (``scaling.compare --share exponents``, the default).

    ln L_r(N, D) = LSE(a − α ln N, b_r − β ln D'_r, e_r)       Huber(1e-3) on ln L, as scaling/laws/parametric.py

A data recipe changes what its tokens are worth (B_r) and the floor of the loss on the shared validation text
(E_r); the model-size term (A, α), the data exponent β and, in the data-constrained form, how fast repeated tokens
lose value (R*, Muennighoff et al. 2023: D'_r from each recipe's unique tokens) are properties of the model family
and the training, shared. Goyal et al. 2024 fit data pools the same way (one utility per pool, shared scaling).
With R recipes the law has 3 + 2R parameters (+ R*) instead of 5R (6R), and two recipes differ by their offsets,
which every run of both pins down, instead of by the difference of two independent extrapolations.

``fit_joint`` starts from each recipe's own fit (scaling/laws/) and from their medians, and polishes the best
(L-BFGS-B, analytic gradient); bootstrap refits (``paired_bootstrap_joint``, the paired resamples of
scaling/pairs.py) start from the full-data optimum. ``joint_rolling`` is the rolling origin (scaling/rolling.py) of
the joint law: at each compute cut all recipes are refitted together and each predicts its later runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from scaling.blas import one_blas_thread
from scaling.laws import LAWS, Fitted
from scaling.laws.data_constrained import (
    R_STAR_BOUNDS,
    R_STAR_PUBLISHED,
    REPEAT_RTOL,
    FittedDataConstrained,
    _effective_and_slope,
    huber_lse,
)
from scaling.laws.parametric import HUBER_DELTA, THETA_BOUNDS, FittedParametric, ParametricLaw
from scaling.pairs import paired_resamples
from scaling.rolling import MIN_LAW_RUNS, MIN_LEVELS, cuts
from scaling.runs import Runs
from scaling.select import BOUND_RTOL

JOINT_LAWS = ("parametric", "data_constrained")
RHO_STARTS = (float(np.log(R_STAR_PUBLISHED)), float(np.log(1e3)))


@dataclass
class JointFit:
    law: str
    theta: np.ndarray  # (a, α, β, ρ = ln R*, b_1..b_R, e_1..e_R)
    objective: float
    fitted: dict[str, Fitted]  # each recipe's law with the shared and its own parameters
    repeats: bool


def _stack(runs: dict[str, Runs], law: str) -> tuple:
    names = list(runs)
    g = np.concatenate([np.full(len(runs[r]), i) for i, r in enumerate(names)])
    n, d, loss = (np.concatenate([getattr(runs[r], k) for r in names]) for k in ("n", "d", "loss"))
    if law == "data_constrained":
        u = np.concatenate([runs[r].unique for r in names])
    else:
        u = np.full(len(n), np.inf)
    return np.log(n), d, u, np.log(loss), g, len(names)


def joint_objective(theta: np.ndarray, log_n, d, u, log_loss, g, n_recipes: int,
                    delta: float = HUBER_DELTA) -> tuple[float, np.ndarray]:
    """Σ Huber_δ(LSE(a − α ln N, b_g − β ln D'_g, e_g) − ln L) over every recipe's runs, and its gradient."""
    a, alpha, beta, rho = theta[:4]
    b, e = theta[4:4 + n_recipes][g], theta[4 + n_recipes:][g]
    if np.all(np.isinf(u)):
        log_eff, slope_over = np.log(d), np.zeros_like(d)
    else:
        eff, slope = _effective_and_slope(d, u, rho)
        log_eff, slope_over = np.log(eff), slope / eff
    value, s_n, s_d, s_e = huber_lse(a - alpha * log_n, b - beta * log_eff, e, log_loss, delta)
    grad = np.concatenate([[s_n.sum(), -s_n @ log_n, -s_d @ log_eff, -beta * (s_d @ slope_over)],
                           np.bincount(g, s_d, n_recipes), np.bincount(g, s_e, n_recipes)])
    return value, grad


def _bounds(n_recipes: int, fit_rho: bool, rho: float) -> list[tuple[float, float]]:
    a, b, e, alpha, beta = THETA_BOUNDS
    return [a, alpha, beta, R_STAR_BOUNDS if fit_rho else (rho, rho)] + [b] * n_recipes + [e] * n_recipes


def _theta_of(fitted: Fitted) -> np.ndarray:
    """(a, b, e, α, β, ρ) of one recipe's own fit."""
    f = fitted.fit
    rho = np.log(fitted.r_star) if isinstance(fitted, FittedDataConstrained) else np.log(R_STAR_PUBLISHED)
    return np.array([np.log(f.A), np.log(f.B), np.log(f.E), f.alpha, f.beta, rho])


def _build(law: str, runs: dict[str, Runs], theta: np.ndarray, objective: float, repeats: bool) -> JointFit:
    names = list(runs)
    a, alpha, beta, rho = theta[:4]
    fitted: dict[str, Fitted] = {}
    for i, name in enumerate(names):
        b, e = theta[4 + i], theta[4 + len(names) + i]
        fit = ParametricLaw(float(np.exp(e)), float(np.exp(a)), float(np.exp(b)), float(alpha), float(beta))
        if law == "data_constrained":
            own = np.array([a, b, e, alpha, beta, rho])
            fitted[name] = FittedDataConstrained(LAWS[law], fit, float(np.exp(rho)), float(runs[name].unique.max()),
                                                 own, objective, repeats)
        else:
            fitted[name] = FittedParametric(LAWS[law], fit, np.array([a, b, e, alpha, beta]), objective)
    return JointFit(law, theta, objective, fitted, repeats)


def fit_joint(law: str, runs: dict[str, Runs], own: dict[str, Fitted] | None = None,
              warm: JointFit | None = None, nested: JointFit | None = None) -> JointFit:
    """The joint law on every recipe's runs. ``own``: each recipe's own fit of ``law`` (the starts); ``warm``: a
    joint fit to polish from instead (bootstrap refits); ``nested``: the joint parametric fit, a start of the
    data-constrained one at R* at its upper bound (no decay: the same law), so that one is never worse."""
    if law not in JOINT_LAWS:
        raise ValueError(f"a joint fit shares the exponents of {' or '.join(JOINT_LAWS)}, not {law}")
    data = _stack(runs, law)
    count = len(runs)
    repeats = law == "data_constrained" and any(np.any(r.d > r.unique * (1 + REPEAT_RTOL)) for r in runs.values())
    rho = np.log(R_STAR_PUBLISHED)
    bounds = _bounds(count, repeats, rho)
    if warm is not None:
        starts = [warm.theta]
    else:
        own_thetas = np.array([_theta_of(own[r]) for r in runs]) if own else \
            np.tile([6.0, 6.0, 0.5, 0.3, 0.3, rho], (count, 1))
        rhos = RHO_STARTS if repeats else (rho,)  # the high R* start is the parametric law (no decay): nested
        starts = [np.concatenate([[t[0], t[3], t[4], r], own_thetas[:, 1], own_thetas[:, 2]])
                  for t in [np.median(own_thetas, axis=0), *own_thetas] for r in (*rhos, t[5])]
        if nested is not None:
            starts.append(np.concatenate([nested.theta[:3], [R_STAR_BOUNDS[1] if repeats else rho],
                                          nested.theta[4:]]))
    lo, hi = np.array(bounds).T
    best = None
    one_blas_thread()
    for start in starts:
        with np.errstate(all="ignore"):
            res = minimize(joint_objective, np.clip(start, lo, hi), args=data, jac=True, method="L-BFGS-B",
                           bounds=bounds, options={"ftol": 0.0, "gtol": 1e-10 if warm is not None else 1e-13,
                                                   "maxiter": 20000})
        if np.isfinite(res.fun) and (best is None or res.fun < best.fun):
            best = res
    if best is None:
        raise ValueError("the joint fit did not converge")
    return _build(law, runs, best.x, float(best.fun), repeats)


def paired_bootstrap_joint(joint: JointFit, runs: dict[str, Runs], n_boot: int, seed: int,
                           predict: Callable[[str, Fitted], np.ndarray]) -> dict[str, np.ndarray]:
    """As scaling/pairs.py ``paired_bootstrap``, each resample refitted jointly (warm from ``joint``)."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray | None] = {r: None for r in runs}
    for b, picks in enumerate(paired_resamples(runs, n_boot, rng)):
        try:
            refit = fit_joint(joint.law, {r: runs[r].take(idx) for r, idx in picks.items()}, warm=joint)
        except (ValueError, np.linalg.LinAlgError):
            continue
        for name, fitted in refit.fitted.items():
            with np.errstate(all="ignore"):
                values = np.asarray(predict(name, fitted), dtype=float).ravel()
            if out[name] is None:
                out[name] = np.full((n_boot, values.size), np.nan)
            if np.all(np.isfinite(values)):
                out[name][b] = values
    return {r: (v if v is not None else np.full((n_boot, 0), np.nan)) for r, v in out.items()}


def joint_rolling(law: str, runs: dict[str, Runs], own: dict[str, Fitted]) -> dict[str, dict]:
    """{recipe: a rolling-origin report (scaling/rolling.py's ``origins`` layout, errors under ``law``)}: at each
    compute cut of the ladder every recipe is refitted jointly on its runs at or below it and predicts its later
    runs from their N, D and C."""
    first = next(iter(runs.values()))
    reports: dict[str, dict] = {r: {"origins": []} for r in runs}
    for cut in cuts(first):
        inside = {r: x.levels <= cut * (1 + 1e-9) for r, x in runs.items()}
        fitted_runs = {r: x.take(np.flatnonzero(inside[r])) for r, x in runs.items()}
        if any(x.n_compute_levels < MIN_LEVELS or len(x) < MIN_LAW_RUNS for x in fitted_runs.values()):
            continue
        try:
            joint = fit_joint(law, fitted_runs, own)
        except ValueError:
            continue
        for name, x in runs.items():
            later = x.take(np.flatnonzero(~inside[name]))
            if not len(later):
                continue
            best = np.zeros(len(x), dtype=bool)
            best[x.best_runs()] = True
            reference = float(fitted_runs[name].c.max())
            with np.errstate(all="ignore"):
                predicted = LAWS[law].predict(joint.fitted[name], later, np.arange(len(later)))
                log_error = np.log(predicted / later.loss)
            errors = [{"flops": float(c), "level": float(level), "distance": float(c / reference),
                       "log_error": float(err), "rel_error": float(np.expm1(err)), "best": bool(is_best)}
                      for c, level, err, is_best in zip(later.c, later.levels, log_error, best[~inside[name]],
                                                        strict=True)]
            reports[name]["origins"].append({"cut": cut, "fitted_flops": reference, "errors": {law: errors}})
    return reports


def joint_at_bound(joint: JointFit) -> list[str]:
    """The shared parameters the optimizer's box, not the data, sets: α or β at 0 or 3, and R* at an end of its
    range when the runs repeat (scaling/select.py keeps such a law only when nothing else is valid)."""
    a, alpha, beta, rho = joint.theta[:4]
    out = [name for name, value, (lo, hi) in (("alpha", alpha, THETA_BOUNDS[3]), ("beta", beta, THETA_BOUNDS[4]))
           if min(value - lo, hi - value) <= BOUND_RTOL * (hi - lo)]
    lo, hi = R_STAR_BOUNDS
    if joint.law == "data_constrained" and joint.repeats and min(rho - lo, hi - rho) <= BOUND_RTOL * (hi - lo):
        out.append("R_star")
    return out


def rolling_score(reports: dict[str, dict], law: str) -> float:
    """Mean |relative error| of every recipe's best run per later level, over origins: how the joint law is chosen."""
    errors = [abs(e["rel_error"]) for rep in reports.values() for o in rep["origins"] for e in o["errors"][law]
              if e["best"]]
    return float(np.mean(errors)) if errors else float("inf")
