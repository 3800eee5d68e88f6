"""IsoFLOP profiles: Hoffmann et al. 2022, "Training Compute-Optimal Large Language Models" (Chinchilla), approach 2.

Per compute budget C fit loss = a·(ln N)² + b·ln N + c (np.polyfit); its vertex gives N_opt(C) = exp(−b/2a),
the loss there c − b²/4a, and D_opt(C) = C/(6·N_opt). Then N_opt = k·C^a_N and D_opt = k'·C^a_D are fitted by
least squares in log space. The "grid minimum" variant uses each budget's lowest-loss run instead of the vertex.
Loss model for extrapolation: L_opt(C) = E + A·C^(−γ) fitted to the per-budget minimum losses by least squares
in loss (variable projection: for fixed γ it is linear in E, A; E ≥ 0; E := 0 with fewer than 4 budgets). It is
the form approach 3 implies along the compute-optimal frontier, L_opt − E ∝ C^(−αβ/(α+β)); a log-log line
would let the loss fall to zero. A budget whose parabola has no minimum, or whose vertex lies outside its sampled N
range (its runs do not bracket the optimum: the vertex is an extrapolation), is left out of the power laws and named
(``unbracketed_budgets``), as a budget with < 3 model sizes is (``skipped_budgets``): one such budget does not void
approach 2; fewer than 2 bracketed budgets do. Bootstrap: runs resampled within each budget; resamples with < 2
bracketed budgets are skipped and counted.

Pure functions of arrays (N, C, loss); scaling/fit.py turns them into the report and the CLI.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize_scalar

from scaling.data import budget_labels, stack_samples

GAMMA_BOUNDS = (1e-3, 3.0)  # the exponent of L_opt(C): searched on a grid over this range, then refined inside it

# ---------------------------------------------------------------- power laws
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


# ---------------------------------------------------------------- IsoFLOP (approach 2)
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


@dataclass(frozen=True)
class IsoflopFit:
    """Per-budget fits and the power laws in C through their vertices ("parabola") and best runs ("grid_minimum")."""

    budgets: tuple[BudgetFit, ...]
    n_opt: PowerLaw  # from parabola vertices
    d_opt: PowerLaw
    loss: LossLaw
    grid_n_opt: PowerLaw  # from each budget's best run
    grid_d_opt: PowerLaw
    grid_loss: LossLaw
    skipped_budgets: tuple[tuple[float, int], ...] = ()  # (C, model sizes) of budgets with < 3 sizes: left out
    unbracketed_budgets: tuple[tuple[float, str], ...] = ()  # (C, why) of budgets whose optimum is not bracketed

    def variant(self, name: str) -> tuple[PowerLaw, PowerLaw, LossLaw]:
        return (self.n_opt, self.d_opt, self.loss) if name == "parabola" else \
            (self.grid_n_opt, self.grid_d_opt, self.grid_loss)


class UnbracketedBudget(ValueError):
    """A budget's runs do not bracket its optimum: the parabola has no minimum."""


def fit_budget(flops: float, params: np.ndarray, loss: np.ndarray) -> BudgetFit:
    """Parabola in ln N through one budget's runs; raises ValueError naming the budget with < 3 sizes, and
    UnbracketedBudget when the parabola has no minimum."""
    n_distinct = len(np.unique(params))
    if n_distinct < 3:
        raise ValueError(f"IsoFLOP budget C={flops:.4g}: {n_distinct} distinct model sizes, need >= 3 for a parabola")
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


def fit_isoflop(params: np.ndarray, flops: np.ndarray, loss: np.ndarray) -> IsoflopFit:
    """Chinchilla approach 2 over the budgets with >= 3 distinct N (a parabola needs three) whose runs bracket the
    optimum; the others are left out and listed in ``skipped_budgets`` and ``unbracketed_budgets``. Needs >= 2."""
    labels = budget_labels(flops)
    sizes = {float(c): len(np.unique(params[labels == c])) for c in np.unique(labels)}
    skipped = tuple((c, k) for c, k in sizes.items() if k < 3)
    budgets, unbracketed = [], []
    for c in (c for c, k in sizes.items() if k >= 3):
        n = params[labels == c]
        try:
            fit = fit_budget(c, n, loss[labels == c])
        except UnbracketedBudget:
            unbracketed.append((c, "the parabola has no minimum"))
            continue
        if fit.extrapolated:
            unbracketed.append((c, f"vertex N={fit.n_opt:.3g} outside the sampled N [{n.min():.3g}, {n.max():.3g}]"))
        else:
            budgets.append(fit)
    if len(budgets) < 2:
        raise ValueError(f"IsoFLOP needs >= 2 compute budgets with >= 3 model sizes that bracket their optimum, "
                         f"found {len(budgets)} ({len(skipped)} budget(s) with fewer sizes and {len(unbracketed)} "
                         f"unbracketed left out)")
    c = np.array([b.flops for b in budgets])

    def column(name: str) -> np.ndarray:
        return np.array([getattr(b, name) for b in budgets])

    return IsoflopFit(tuple(budgets), fit_power_law(c, column("n_opt")), fit_power_law(c, column("d_opt")),
                      fit_loss_law(c, column("loss_opt")), fit_power_law(c, column("grid_n_opt")),
                      fit_power_law(c, column("grid_d_opt")), fit_loss_law(c, column("grid_loss")), skipped,
                      tuple(unbracketed))


def isoflop_stats(fit: IsoflopFit, targets: np.ndarray,
                  runs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Flat ``variant.quantity`` → value(s); the same keys for the fit and for each bootstrap refit. ``runs``
    (N, D, C): ``variant.pred.run_loss`` = L_opt(C), what the IsoFLOP fit predicts for a run of C FLOPs (it assumes
    the run's N and D are the compute-optimal ones; N and D themselves are not used)."""
    stats: dict[str, np.ndarray] = {}
    for variant in ("parabola", "grid_minimum"):
        n_law, d_law, loss_law = fit.variant(variant)
        stats |= {f"{variant}.n_opt.coef": n_law.coef, f"{variant}.n_opt.exponent": n_law.exponent,
                  f"{variant}.d_opt.coef": d_law.coef, f"{variant}.d_opt.exponent": d_law.exponent,
                  f"{variant}.loss.E": loss_law.E, f"{variant}.loss.A": loss_law.A,
                  f"{variant}.loss.gamma": loss_law.gamma, f"{variant}.pred.n_opt": n_law(targets),
                  f"{variant}.pred.d_opt": d_law(targets), f"{variant}.pred.loss": loss_law(targets)}
        if runs is not None:
            stats[f"{variant}.pred.run_loss"] = loss_law(runs[2])
    return {k: np.asarray(v, dtype=float) for k, v in stats.items()}


def bootstrap_isoflop(params: np.ndarray, flops: np.ndarray, loss: np.ndarray, targets: np.ndarray, n_boot: int,
                      rng: np.random.Generator, runs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
                      ) -> tuple[dict[str, np.ndarray], int]:
    """Refit on runs resampled with replacement within each budget; returns (stacked stats, skipped count)."""
    labels = budget_labels(flops)
    groups = [np.flatnonzero(labels == c) for c in np.unique(labels)]
    samples, skipped = [], 0
    for _ in range(n_boot):
        idx = np.concatenate([rng.choice(g, size=len(g), replace=True) for g in groups])
        try:
            with np.errstate(all="ignore"):  # a degenerate resample is counted as skipped
                samples.append(isoflop_stats(fit_isoflop(params[idx], flops[idx], loss[idx]), targets, runs))
        except (ValueError, np.linalg.LinAlgError):
            skipped += 1
    return stack_samples(samples), skipped

