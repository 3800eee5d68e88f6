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
are the optimizer's: scaling/validate.py marks a fit whose bootstrap CI reaches them. Bootstrap: rows resampled with
replacement. Compute-optimal allocation (α = β): N_opt = G·(C/6)^½, D_opt = (C/6)^½/G, G = (a/b)^(1/(4η)), where
L_opt(C) = E + 2·√(a·b)·C^(−η).

Pure functions of arrays (N, D, loss); scaling/fit.py turns them into the report and the CLI.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize_scalar, nnls

from scaling.data import stack_samples

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


def gadre_stats(law: GadreLaw, targets: np.ndarray,
                runs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Flat stats: the law, N_opt/D_opt power laws, predictions at ``targets``; ``runs`` (N, D, C): L(N, D)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # a = 0 or b = 0: no optimum (inf/nan)
        n, d = law.n_opt(targets), law.d_opt(targets)
        stats = {"E": law.E, "a": law.a, "b": law.b, "eta": law.eta, "A": law.A, "B": law.B, "G": law.G,
                 "n_opt.coef": law.G * 6 ** -0.5, "n_opt.exponent": 0.5, "d_opt.coef": np.divide(6 ** -0.5, law.G),
                 "d_opt.exponent": 0.5, "pred.n_opt": n, "pred.d_opt": d, "pred.loss": law.loss(n, d)}
    if runs is not None:
        stats["pred.run_loss"] = law.loss(runs[0], runs[1])
    return {k: np.asarray(v, dtype=float) for k, v in stats.items()}


def bootstrap_gadre(params: np.ndarray, tokens: np.ndarray, loss: np.ndarray, targets: np.ndarray, n_boot: int,
                    rng: np.random.Generator, runs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
                    ) -> tuple[dict[str, np.ndarray], int]:
    """Refit on rows resampled with replacement; returns (stacked stats, 0 skipped). Every resample is kept: one
    whose a or b is 0 (no compute-optimal allocation: NaN N_opt, D_opt and optimal loss) puts that CI at the bound."""
    samples = []
    for _ in range(n_boot):
        idx = rng.integers(0, len(params), size=len(params))
        samples.append(gadre_stats(fit_gadre(params[idx], tokens[idx], loss[idx])[0], targets, runs))
    return stack_samples(samples), 0
