"""Data-constrained loss L(N, D, U) = E + A/N^α + B/D'^β: Muennighoff et al. 2023, "Scaling Data-Constrained Language
Models" (eq. 5, the data term), over the Chinchilla law of scaling/laws/parametric.py.

A run that trains on D tokens drawn from U unique ones sees U_D = min(D, U) unique tokens repeated R = D/U_D − 1
times beyond the first epoch; repeated tokens are worth less, decaying with the constant R*:

    D' = U_D + U_D·R*·(1 − e^(−R/R*))

so D' = D when no run repeats (R = 0), and D' → U_D·(1 + R*) for many epochs. The paper's fit has R*_D = 15.39. The
parameter-side term of the paper (excess parameters, R*_N) is left out: it matters only for models far beyond
compute-optimal for their data.

Fit: Huber(1e-3) on ln L as the parametric law, over θ = (ln A, ln B, ln E, α, β, ln R*). The parametric law is
fitted on D' for each R* of ``R_STAR_STARTS`` and the best start polished jointly (L-BFGS-B, analytic gradient);
bootstrap refits polish from the full-data optimum. When no fitted run repeats its data, R* is not identified: it is
held at the paper's 15.39 and the fit is the parametric law's fit itself. The law needs each run's unique training
tokens (a ``unique_tokens`` or ``epochs`` column, scaling/data.py); without them it is not fitted.

Predictions away from a run (the targets, held-out runs) assume the recipe's pool of unique tokens: the largest U
among the fitted runs. The compute-optimal N at a budget C then minimises L(N, C/6N, U) numerically, so at budgets
whose optimal D exceeds the pool the allocation moves towards parameters, as the paper's Figure 3 shows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from scaling.blas import one_blas_thread
from scaling.laws.base import Bound, Fitted, Law, LawError
from scaling.laws.parametric import HUBER_DELTA, THETA_BOUNDS, ParametricLaw, fit_parametric
from scaling.laws.registry import register
from scaling.runs import Runs

R_STAR_PUBLISHED = 15.39  # Muennighoff et al. 2023, R*_D
R_STAR_BOUNDS = (float(np.log(0.1)), float(np.log(1e4)))
R_STAR_STARTS = (1.0, 3.0, 15.39, 50.0, 300.0)
DC_BOUNDS = (*THETA_BOUNDS, R_STAR_BOUNDS)
REPEAT_RTOL = 1e-9  # D above U by more than this: the run repeated its data


def effective_tokens(tokens, unique, r_star: float) -> np.ndarray:
    """D' = U_D + U_D·R*·(1 − e^(−R/R*)), with U_D = min(D, U) and R = D/U_D − 1."""
    d, u = np.asarray(tokens, dtype=float), np.asarray(unique, dtype=float)
    seen = np.minimum(d, u)
    return seen + seen * r_star * -np.expm1(-(d / seen - 1.0) / r_star)


def _effective_and_slope(d: np.ndarray, u: np.ndarray, rho: float) -> tuple[np.ndarray, np.ndarray]:
    """D' and ∂D'/∂ρ at ρ = ln R*."""
    r_star = np.exp(rho)
    seen = np.minimum(d, u)
    x = (d / seen - 1.0) / r_star
    decay = np.exp(-x)
    eff = seen + seen * r_star * (1.0 - decay)
    return eff, seen * r_star * (1.0 - decay - x * decay)  # R*·∂D'/∂R*


def huber_lse(t_n: np.ndarray, t_d: np.ndarray, e, log_loss: np.ndarray, delta: float
              ) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """Σ Huber_δ(LSE(t_n, t_d, e) − ln L), and Huber'(r) times each term's softmax weight (∂LSE/∂term): the parts
    of the gradient (a stable log-sum-exp, written out)."""
    top = np.maximum(np.maximum(t_n, t_d), e)
    w_n, w_d, w_e = np.exp(t_n - top), np.exp(t_d - top), np.exp(e - top)
    total = w_n + w_d + w_e
    r = top + np.log(total) - log_loss
    value = np.where(np.abs(r) <= delta, 0.5 * r * r, delta * (np.abs(r) - 0.5 * delta)).sum()
    psi = np.clip(r, -delta, delta)
    return float(value), psi * w_n / total, psi * w_d / total, psi * w_e / total


def huber_objective(theta: np.ndarray, log_n: np.ndarray, d: np.ndarray, u: np.ndarray, log_loss: np.ndarray,
                    delta: float = HUBER_DELTA) -> tuple[float, np.ndarray]:
    """Σ Huber_δ(LSE(a − α ln N, b − β ln D', e) − ln L) and its gradient in θ = (a, b, e, α, β, ρ = ln R*)."""
    a, b, e, alpha, beta, rho = theta
    eff, slope = _effective_and_slope(d, u, rho)
    log_eff = np.log(eff)
    value, s_n, s_d, s_e = huber_lse(a - alpha * log_n, b - beta * log_eff, e, log_loss, delta)
    grad = np.array([s_n.sum(), s_d.sum(), s_e.sum(), -s_n @ log_n, -s_d @ log_eff, -beta * (s_d @ (slope / eff))])
    return value, grad


def _polish(init: np.ndarray, data: tuple, gtol: float) -> tuple[np.ndarray, float]:
    one_blas_thread()
    res = minimize(huber_objective, np.clip(init, *np.array(DC_BOUNDS).T), args=data, jac=True, method="L-BFGS-B",
                   bounds=DC_BOUNDS, options={"ftol": 0.0, "gtol": gtol, "maxiter": 20000})
    return res.x, float(res.fun)


def fit_data_constrained(n: np.ndarray, d: np.ndarray, u: np.ndarray, loss: np.ndarray,
                         init: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """θ = (ln A, ln B, ln E, α, β, ln R*) and the objective, for runs that repeat their data; ``init``: polish only."""
    data = (np.log(n), d, u, np.log(loss))
    if init is not None:
        return _polish(init, data, 1e-10)
    starts = []
    for r_star in R_STAR_STARTS:
        _, theta, objective = fit_parametric(n, effective_tokens(d, u, r_star), loss, polish=False)
        starts.append((objective, np.append(theta, np.log(r_star))))
    return _polish(min(starts, key=lambda s: s[0])[1], data, 1e-14)


@dataclass(frozen=True)
class FittedDataConstrained(Fitted):
    law: Law
    fit: ParametricLaw  # E, A, B, alpha, beta over the effective data D'
    r_star: float
    pool: float  # the unique tokens a prediction away from the fitted runs assumes: the largest U among them
    theta: np.ndarray  # (ln A, ln B, ln E, alpha, beta, ln R*)
    objective: float
    repeats: bool  # whether any fitted run repeated its data (else R* was held at R_STAR_PUBLISHED)

    def parameters(self) -> dict[str, float]:
        f = self.fit
        return {"E": f.E, "A": f.A, "B": f.B, "alpha": f.alpha, "beta": f.beta, "R_star": self.r_star}

    def loss_with_unique(self, n, d, unique) -> np.ndarray:
        return self.fit.loss(n, effective_tokens(d, unique, self.r_star))

    def loss(self, n, d, c) -> np.ndarray:
        return self.loss_with_unique(n, d, self.pool)

    def n_opt(self, c) -> np.ndarray:
        """argmin over N of L(N, C/6N, pool): a grid over ln N, then golden-section search in the bracketing cell."""
        shape = np.shape(c)  # a scalar budget gives a scalar N, as the other laws do
        c = np.atleast_1d(np.asarray(c, dtype=float))
        centre = 0.5 * np.log(c / 6.0)
        grid = centre[:, None] + np.linspace(-20.0, 20.0, 401)[None, :]

        def loss_at(log_n: np.ndarray) -> np.ndarray:
            n = np.exp(log_n)
            budget = c[:, None] if log_n.ndim == 2 else c
            return self.loss(n, budget / (6.0 * n), budget)

        with np.errstate(all="ignore"):
            values = loss_at(grid)
            best = np.argmin(np.where(np.isfinite(values), values, np.inf), axis=1)
            lo = grid[np.arange(len(c)), np.maximum(best - 1, 0)]
            hi = grid[np.arange(len(c)), np.minimum(best + 1, grid.shape[1] - 1)]
            ratio = (np.sqrt(5.0) - 1.0) / 2.0
            for _ in range(80):
                x1, x2 = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
                left = loss_at(x1) <= loss_at(x2)
                hi, lo = np.where(left, x2, hi), np.where(left, lo, x1)
        return np.exp(0.5 * (lo + hi)).reshape(shape)

    def unpinned(self) -> set[str]:
        return set() if self.repeats else {"R_star"}

    def details(self) -> dict:
        return {"huber_delta": HUBER_DELTA, "objective": self.objective, "unique_pool": self.pool,
                "repeated_runs": self.repeats}


@register
class DataConstrained(Law):
    name = "data_constrained"
    preference = 10
    title = ("Muennighoff et al. 2023: L = E + A/N^alpha + B/D'^beta, D' = U + U R* (1 - e^(-R/R*)) for R repeats of "
             "U unique tokens; Huber(1e-3) on log L")
    n_params = 6
    bounds = {"A": Bound(*np.exp(THETA_BOUNDS[0]), log=True), "B": Bound(*np.exp(THETA_BOUNDS[1]), log=True),
              "E": Bound(*np.exp(THETA_BOUNDS[2]), log=True), "alpha": Bound(*THETA_BOUNDS[3]),
              "beta": Bound(*THETA_BOUNDS[4]), "R_star": Bound(*np.exp(R_STAR_BOUNDS), log=True)}

    def fit(self, runs: Runs, warm: Fitted | None = None) -> FittedDataConstrained:
        if runs.unique is None:
            raise LawError("needs each run's unique training tokens (a unique_tokens or epochs column)")
        repeats = bool(np.any(runs.d > runs.unique * (1 + REPEAT_RTOL)))
        init = warm.theta if isinstance(warm, FittedDataConstrained) and warm.repeats == repeats else None
        with np.errstate(all="ignore"):  # a degenerate resample overflows; the caller checks the result is finite
            if repeats:
                theta, objective = fit_data_constrained(runs.n, runs.d, runs.unique, runs.loss, init=init)
            else:  # R* is not identified: the parametric law's own fit, with R* held at the published value
                _, theta5, objective = fit_parametric(runs.n, runs.d, runs.loss, init=None if init is None else
                                                      init[:5], polish=init is None)
                theta = np.append(theta5, np.log(R_STAR_PUBLISHED))
        a, b, e, alpha, beta, rho = theta
        law = ParametricLaw(float(np.exp(e)), float(np.exp(a)), float(np.exp(b)), float(alpha), float(beta))
        r_star = float(np.exp(rho)) if repeats else R_STAR_PUBLISHED
        return FittedDataConstrained(self, law, r_star, float(runs.unique.max()), theta, objective, repeats)

    def predict(self, fitted: Fitted, runs: Runs, rows: np.ndarray) -> np.ndarray:
        """Each run at its own unique tokens (the pool only when the runs do not say)."""
        if runs.unique is None or not isinstance(fitted, FittedDataConstrained):
            return super().predict(fitted, runs, rows)
        return fitted.loss_with_unique(runs.n[rows], runs.d[rows], runs.unique[rows])
