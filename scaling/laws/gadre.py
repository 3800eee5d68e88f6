"""The over-training-aware law of Gadre et al. 2024, "Language models scale reliably with over-training and on
downstream tasks" (eq. 4):

    L(C, M) = E + (a·M^η + b·M^(−η))·C^(−η),   M = D/N (the token multiplier), C = 6·N·D.

It is Chinchilla's L(N, D) = E + A/N^α + B/D^β with one exponent for both terms (α = β = 2η) rewritten in compute
and over-training (N = (C/6M)^½, D = (C·M/6)^½, so a = A·6^η, b = B·6^η): at any fixed token multiplier M the
reducible loss is a power law in C with the same exponent η, so runs trained far from the compute-optimal M
(over- or under-trained) extrapolate along parallel lines.

Fit: least squares in the loss, the objective of Gadre et al. (their code runs scipy ``curve_fit``, i.e.
Levenberg-Marquardt, from 128 starting points and keeps the smallest residual). Here the same objective is minimised
without starting points: for a fixed η the law is linear in (E, A, B), solved by non-negative least squares (E, A,
B ≥ 0), and η is found on a grid over ETA_BOUNDS refined by a bounded 1-D search (variable projection). The bounds
are the optimizer's: scaling/select.py marks a fit whose bootstrap CI reaches them. Bootstrap: rows resampled with
replacement. Compute-optimal allocation (α = β): N_opt = G·(C/6)^½, D_opt = (C/6)^½/G, G = (a/b)^(1/(4η)), where
L_opt(C) = E + 2·√(a·b)·C^(−η).

``Gadre`` is the law (scaling/laws/base.py protocol); the functions below are its math on arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize_scalar, nnls

from scaling.laws.base import Bound, Fitted, Law
from scaling.laws.registry import register
from scaling.runs import Runs

ETA_BOUNDS = (0.005, 1.5)  # η = α/2: Chinchilla's exponents α, β ∈ (0.01, 3)
ETA_GRID = 150


@dataclass(frozen=True)
class GadreLaw:
    """L(C, M) = E + (a·M^eta + b·M^−eta)·C^−eta with M = D/N, C = 6ND; as L(N, D): E + A/N^(2eta) + B/D^(2eta)."""

    E: float
    a: float
    b: float
    eta: float

    @property
    def A(self) -> float:
        return self.a * 6.0 ** -self.eta

    @property
    def B(self) -> float:
        return self.b * 6.0 ** -self.eta

    def loss(self, params: np.ndarray | float, tokens: np.ndarray | float) -> np.ndarray:
        """The law at (N, D): M = D/N, C = 6·N·D."""
        n, d = np.asarray(params, dtype=float), np.asarray(tokens, dtype=float)
        m, c = d / n, 6.0 * n * d
        return self.E + (self.a * m ** self.eta + self.b * m ** -self.eta) * c ** -self.eta

    @property
    def G(self) -> float:
        """N_opt / (C/6)^½; 0 or inf when a or b is 0 (the law has no compute-optimal allocation)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return float(np.divide(self.a, self.b) ** (1 / (4 * self.eta)))

    def n_opt(self, flops: np.ndarray | float) -> np.ndarray:
        return self.G * np.sqrt(np.asarray(flops, dtype=float) / 6)

    def d_opt(self, flops: np.ndarray | float) -> np.ndarray:
        return np.sqrt(np.asarray(flops, dtype=float) / 6) / self.G


def _solve(eta: float, log_n: np.ndarray, log_d: np.ndarray, loss: np.ndarray) -> tuple[np.ndarray, float]:
    """(E, A, B) ≥ 0 minimising Σ (E + A·N^(−2η) + B·D^(−2η) − L)² at this η, and that sum."""
    x_n, x_d = np.exp(-2 * eta * log_n), np.exp(-2 * eta * log_d)
    scale = np.array([1.0, x_n.max(), x_d.max()])  # columns of similar size: NNLS on a well-scaled matrix
    design = np.column_stack([np.ones_like(loss), x_n, x_d]) / scale
    coef, norm = nnls(design, loss)
    return coef / scale, float(norm * norm)


def fit_gadre(params: np.ndarray, tokens: np.ndarray, loss: np.ndarray) -> tuple[GadreLaw, float]:
    """Least squares in loss: NNLS in (E, A, B) for each η, η by a grid over ETA_BOUNDS and a bounded search;
    returns (law, sum of squared residuals)."""
    log_n, log_d = np.log(np.asarray(params, dtype=float)), np.log(np.asarray(tokens, dtype=float))
    loss = np.asarray(loss, dtype=float)
    grid = np.linspace(*ETA_BOUNDS, ETA_GRID)
    sse = np.array([_solve(eta, log_n, log_d, loss)[1] for eta in grid])
    i, step = int(np.argmin(sse)), grid[1] - grid[0]
    res = minimize_scalar(lambda eta: _solve(eta, log_n, log_d, loss)[1], method="bounded",
                          bounds=(max(grid[i] - step, ETA_BOUNDS[0]), min(grid[i] + step, ETA_BOUNDS[1])),
                          options={"xatol": 1e-10})
    eta = float(res.x) if res.fun <= sse[i] else float(grid[i])
    (e, a_coef, b_coef), objective = _solve(eta, log_n, log_d, loss)
    return GadreLaw(float(e), float(a_coef * 6.0 ** eta), float(b_coef * 6.0 ** eta), eta), objective


@dataclass(frozen=True)
class FittedGadre(Fitted):
    law: Law
    fit: GadreLaw
    objective: float

    def parameters(self) -> dict[str, float]:
        f = self.fit
        return {"E": f.E, "a": f.a, "b": f.b, "eta": f.eta, "A": f.A, "B": f.B, "G": f.G}

    def loss(self, n, d, c) -> np.ndarray:
        return self.fit.loss(n, d)

    def n_opt(self, c) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # a = 0 or b = 0: no optimum
            return self.fit.n_opt(c)

    def d_opt(self, c) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return self.fit.d_opt(c)

    def loss_opt(self, c) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return self.fit.loss(self.n_opt(c), self.d_opt(c))

    def details(self) -> dict:
        return {"objective": self.objective}


@register
class Gadre(Law):
    name = "gadre"
    preference = 3
    title = ("Gadre et al. 2024 eq. 4: L(C, M) = E + (a*M^eta + b*M^-eta)*C^-eta, M = D/N, C = 6ND (Chinchilla with "
             "alpha = beta = 2*eta); least squares in loss")
    n_params = 4
    bounds = {"E": Bound(0.0, np.inf), "a": Bound(0.0, np.inf), "b": Bound(0.0, np.inf), "eta": Bound(*ETA_BOUNDS)}

    def fit(self, runs: Runs, warm: Fitted | None = None) -> FittedGadre:
        law, objective = fit_gadre(runs.n, runs.d, runs.loss)
        return FittedGadre(self, law, objective)
