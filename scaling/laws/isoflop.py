"""IsoFLOP profiles: Hoffmann et al. 2022, "Training Compute-Optimal Large Language Models" (Chinchilla), approach 2.

Per compute budget C fit loss = a·(ln N)² + b·ln N + c (np.polyfit); its vertex gives N_opt(C) = exp(−b/2a),
the loss there c − b²/4a, and D_opt(C) = C/(6·N_opt). Then N_opt = k·C^a_N and D_opt = k'·C^a_D are fitted by
least squares in log space. Loss model for extrapolation: L_opt(C) = E + A·C^(−γ) fitted to the per-budget losses by
least squares in loss (variable projection: for fixed γ it is linear in E, A; E ≥ 0; E := 0 with fewer than 4
budgets). It is the form approach 3 implies along the compute-optimal frontier, L_opt − E ∝ C^(−αβ/(α+β)); a log-log
line would let the loss fall to zero. A budget whose parabola has no minimum, or whose vertex lies outside its sampled
N range (its runs do not bracket the optimum: the vertex is an extrapolation), is left out and named
(``unbracketed``), as a budget with < 3 model sizes is (``skipped``). The law predicts L_opt(C) for a run of C FLOPs:
the loss of that budget's compute-optimal run, so it is scored on each budget's best run only.
The grid-minimum variant (scaling/laws/isoflop_grid.py) uses each budget's lowest-loss run instead of the vertex.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy.optimize import minimize_scalar

from scaling.laws.base import Bound, Fitted, Law, LawError
from scaling.laws.registry import register
from scaling.runs import Runs

GAMMA_BOUNDS = (1e-3, 3.0)  # the exponent of L_opt(C): searched on a grid over this range, then refined inside it


@dataclass(frozen=True)
class PowerLaw:
    """y = coef · x^exponent."""

    coef: float
    exponent: float

    def __call__(self, x: np.ndarray | float) -> np.ndarray:
        return self.coef * np.asarray(x, dtype=float) ** self.exponent


def fit_power_law(x: np.ndarray, y: np.ndarray) -> PowerLaw:
    """Least squares of ln y on ln x."""
    exponent, log_coef = np.polyfit(np.log(x), np.log(y), 1)
    return PowerLaw(float(np.exp(log_coef)), float(exponent))


@dataclass(frozen=True)
class LossLaw:
    """L_opt(C) = E + A · C^(−gamma)."""

    E: float
    A: float
    gamma: float

    def __call__(self, flops: np.ndarray | float) -> np.ndarray:
        return self.E + self.A * np.asarray(flops, dtype=float) ** -self.gamma


def fit_loss_law(flops: np.ndarray, loss: np.ndarray) -> LossLaw:
    """E + A·C^(−γ) by least squares in loss: E, A solved in closed form per γ, γ found by a bounded 1-D search."""
    log_c = np.log(np.asarray(flops, dtype=float))
    shift = log_c.mean()  # z = (C/C̄)^(−γ) keeps the 2×2 regression well scaled
    loss = np.asarray(loss, dtype=float)
    free_e = len(loss) >= 4

    def solve(gamma: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        z = np.exp(-np.outer(gamma, log_c - shift))  # (G, n_budgets)
        through_origin = (z @ loss) / (z * z).sum(1)  # E = 0
        if not free_e:
            return np.zeros(len(gamma)), through_origin, ((through_origin[:, None] * z - loss) ** 2).sum(1)
        zc = z - z.mean(1, keepdims=True)
        slope = (zc @ (loss - loss.mean())) / np.maximum((zc * zc).sum(1), 1e-300)
        e = loss.mean() - slope * z.mean(1)
        slope, e = np.where(e < 0, through_origin, slope), np.maximum(e, 0.0)
        return e, slope, ((e[:, None] + slope[:, None] * z - loss) ** 2).sum(1)

    grid = np.linspace(*GAMMA_BOUNDS, 120)
    best = grid[np.argmin(solve(grid)[2])]
    step = grid[1] - grid[0]
    res = minimize_scalar(lambda g: float(solve(np.array([g]))[2][0]), method="bounded", options={"xatol": 1e-10},
                          bounds=(max(best - step, GAMMA_BOUNDS[0]), min(best + step, GAMMA_BOUNDS[1])))
    gamma = float(res.x)
    e, slope, _ = solve(np.array([gamma]))
    return LossLaw(float(e[0]), float(slope[0] * np.exp(gamma * shift)), gamma)


@dataclass(frozen=True)
class BudgetFit:
    """One compute budget: its parabola, the vertex (N_opt, D_opt, loss) and its best run ("grid minimum")."""

    flops: float
    n_points: int
    parabola: tuple[float, float, float]  # a, b, c of loss = a·(ln N)² + b·ln N + c
    n_opt: float
    d_opt: float
    loss_opt: float
    extrapolated: bool  # vertex outside the sampled N range
    grid_n_opt: float
    grid_d_opt: float
    grid_loss: float


class UnbracketedBudget(LawError):
    """A budget's runs do not bracket its optimum: the parabola has no minimum."""


def fit_budget(flops: float, params: np.ndarray, loss: np.ndarray) -> BudgetFit:
    """Parabola in ln N through one budget's runs; raises LawError naming the budget with < 3 sizes, and
    UnbracketedBudget when the parabola has no minimum."""
    n_distinct = len(np.unique(params))
    if n_distinct < 3:
        raise LawError(f"IsoFLOP budget C={flops:.4g}: {n_distinct} distinct model sizes, need >= 3 for a parabola")
    x = np.log(params)
    a, b, c = (float(v) for v in np.polyfit(x, loss, 2))
    if a <= 0:
        raise UnbracketedBudget(f"IsoFLOP budget C={flops:.4g}: fitted parabola has no minimum (a={a:.3g} <= 0)")
    x_opt = -b / (2 * a)
    best = int(np.argmin(loss))
    return BudgetFit(flops=float(flops), n_points=len(params), parabola=(a, b, c), n_opt=float(np.exp(x_opt)),
                     d_opt=float(flops / (6 * np.exp(x_opt))), loss_opt=c - b * b / (4 * a),
                     extrapolated=bool(x_opt < x.min() or x_opt > x.max()), grid_n_opt=float(params[best]),
                     grid_d_opt=float(flops / (6 * params[best])), grid_loss=float(loss[best]))


def bracketed_budgets(runs: Runs) -> tuple[list[BudgetFit], list[tuple[float, int]], list[tuple[float, str]]]:
    """(the budgets whose parabola has its minimum inside the sampled N, budgets with < 3 sizes as (C, sizes),
    budgets left out as (C, why))."""
    if runs.budget is None:
        raise LawError("the runs are not laid out on compute budgets (scaling/runs.py): approach 2 needs IsoFLOP "
                       "budgets")
    labels = runs.budget
    sizes = {float(c): len(np.unique(runs.n[labels == c])) for c in np.unique(labels[np.isfinite(labels)])}
    skipped = [(c, k) for c, k in sizes.items() if k < 3]
    budgets, unbracketed = [], []
    for c in (c for c, k in sizes.items() if k >= 3):
        n = runs.n[labels == c]
        try:
            fit = fit_budget(c, n, runs.loss[labels == c])
        except UnbracketedBudget:
            unbracketed.append((c, "the parabola has no minimum"))
            continue
        if fit.extrapolated:
            unbracketed.append((c, f"vertex N={fit.n_opt:.3g} outside the sampled N [{n.min():.3g}, {n.max():.3g}]"))
        else:
            budgets.append(fit)
    return budgets, skipped, unbracketed


@dataclass(frozen=True)
class FittedIsoflop(Fitted):
    law: Law
    budgets: tuple[BudgetFit, ...]
    n_law: PowerLaw
    d_law: PowerLaw
    loss_law: LossLaw
    skipped: tuple[tuple[float, int], ...] = ()
    unbracketed: tuple[tuple[float, str], ...] = ()

    @property
    def budgets_used(self) -> int:
        return len(self.budgets)

    def parameters(self) -> dict[str, float]:
        return {"n_opt.coef": self.n_law.coef, "n_opt.exponent": self.n_law.exponent, "d_opt.coef": self.d_law.coef,
                "d_opt.exponent": self.d_law.exponent, "E": self.loss_law.E, "A": self.loss_law.A,
                "gamma": self.loss_law.gamma}

    def loss(self, n, d, c) -> np.ndarray:
        return self.loss_law(c)

    def n_opt(self, c) -> np.ndarray:
        return self.n_law(c)

    def d_opt(self, c) -> np.ndarray:
        return self.d_law(c)

    def loss_opt(self, c) -> np.ndarray:
        return self.loss_law(c)

    def unpinned(self) -> set[str]:
        return {"E"} if len(self.budgets) < 4 else set()  # E is held at 0 below 4 budgets (fit_loss_law)

    def details(self) -> dict:
        return {"budgets": [asdict(b) for b in self.budgets],
                "skipped_budgets": [{"flops": c, "model_sizes": k} for c, k in self.skipped],
                "unbracketed_budgets": [{"flops": c, "why": why} for c, why in self.unbracketed]}


@register
class IsoflopParabola(Law):
    name = "isoflop"
    preference = 1
    title = ("Hoffmann et al. 2022 approach 2: per-budget parabola in ln N, N_opt and D_opt power laws in C through "
             "the vertices, L_opt(C) = E + A*C^-gamma by least squares")
    n_params = 7
    bounds = {"E": Bound(0.0, np.inf), "gamma": Bound(*GAMMA_BOUNDS)}
    needs_budgets = True
    predicts_best_run = True
    checks_vertices = False  # its unbracketed budgets are left out of its own fit
    point = ("n_opt", "d_opt", "loss_opt")  # the BudgetFit fields each budget contributes

    def fit(self, runs: Runs, warm: Fitted | None = None) -> FittedIsoflop:
        budgets, skipped, unbracketed = bracketed_budgets(runs)
        if len(budgets) < 2:
            raise LawError(f"approach 2 needs >= 2 compute budgets with >= 3 model sizes that bracket their optimum, "
                           f"found {len(budgets)} ({len(skipped)} budget(s) with fewer sizes and {len(unbracketed)} "
                           f"unbracketed left out)")
        c = np.array([b.flops for b in budgets])
        n, d, loss = (np.array([getattr(b, f) for b in budgets]) for f in self.point)
        return FittedIsoflop(self, tuple(budgets), fit_power_law(c, n), fit_power_law(c, d), fit_loss_law(c, loss),
                             tuple(skipped), tuple(unbracketed))
