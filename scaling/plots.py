"""PNG plots of the scaling-law fits (scaling/predict.py), kept apart from the fits.

The figures mirror Hoffmann et al. 2022 (Chinchilla): fig. 3 left (IsoFLOP curves with fitted parabolas and
their minima), fig. 3 centre/right (N_opt and D_opt against C, extrapolated to the target budgets) and fig. 4
(parametric loss contours over (N, D) with the compute-optimal frontier and iso-FLOP lines). matplotlib is
imported inside the functions (heavy, needed only for the PNGs) and drawn through ``matplotlib.figure.Figure``
(Agg), never pyplot's global state; each PNG is written to a temporary file and renamed into place.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from scaling.laws.isoflop import FittedIsoflop
from scaling.laws.parametric import ParametricLaw
from scaling.predict import FitResult
from scaling.runs import compute_levels
from workbench.files import atomic_path


def new_figure(ncols: int = 1, width: float = 6.4, height: float = 4.8):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * ncols, height), layout="constrained")
    return fig, fig.subplots(1, ncols, squeeze=False)[0]


def save_figure(fig, path: Path) -> Path:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    return path


def _budget_colors(budgets: np.ndarray) -> list:
    from matplotlib import colormaps

    logc = np.log10(budgets)
    span = np.ptp(logc) or 1.0
    return [colormaps["viridis"](0.9 * (v - logc.min()) / span) for v in logc]


def plot_isoflop_curves(frame: pd.DataFrame, labels: np.ndarray, iso: FittedIsoflop, path: Path) -> Path:
    """Loss against N per budget: runs, the fitted parabola in ln N, its vertex (star) and the best run (ring)."""
    fig, (ax,) = new_figure()
    for budget, color in zip(iso.budgets, _budget_colors(np.array([b.flops for b in iso.budgets])), strict=False):
        runs = frame[labels == budget.flops]
        ax.scatter(runs["params"], runs["loss"], s=14, color=color, label=f"C = {budget.flops:.2g}")
        x = np.linspace(np.log(runs["params"].min()) - 0.2, np.log(runs["params"].max()) + 0.2, 200)
        ax.plot(np.exp(x), np.polyval(budget.parabola, x), color=color, lw=1)
        ax.scatter([budget.n_opt], [budget.loss_opt], marker="*", s=120, color=color, edgecolor="black", zorder=3)
        ax.scatter([budget.grid_n_opt], [budget.grid_loss], s=70, facecolor="none", edgecolor="black", zorder=3)
    ax.set(xscale="log", xlabel="parameters N", ylabel="loss",
           title="IsoFLOP curves (star: parabola minimum, ring: best run)")
    ax.legend(fontsize=7, ncols=2)
    return save_figure(fig, path)


def _allocation(fitted, flops: np.ndarray) -> bool:
    """Whether a law's N_opt(C) can be drawn on log axes (Gadre with a = 0 or b = 0 has none)."""
    with np.errstate(all="ignore"):
        values = np.concatenate([fitted.n_opt(flops), fitted.d_opt(flops)])
    return bool(np.all(np.isfinite(values)) and np.all(values > 0))


def plot_optimal_allocation(result: FitResult, targets: np.ndarray, path: Path) -> Path:
    """N_opt(C) and D_opt(C): the IsoFLOP budgets' vertices and best runs, and every fitted law's N_opt and D_opt,
    extrapolated to the targets (stars); the selected law drawn thick and named so."""
    fig, axes = new_figure(ncols=2)
    fits = {name: f.fitted for name, f in result.fits.items() if f.fitted is not None}
    selected = result.report["selection"]["method"]
    iso = fits.get("isoflop")
    budgets = np.array([b.flops for b in iso.budgets]) if iso else np.unique(result.runs.levels)
    flops = np.geomspace(min(budgets.min(), min(targets)), max(budgets.max(), max(targets)) * 1.5, 100)
    for ax, quantity in zip(axes, ("n_opt", "d_opt"), strict=False):
        if iso is not None:
            ax.scatter(budgets, [getattr(b, quantity) for b in iso.budgets], marker="o", s=22, color="black",
                       label="budget vertices")
            ax.scatter(budgets, [getattr(b, f"grid_{quantity}") for b in iso.budgets], marker="s", s=22,
                       facecolor="none", color="black", label="budget best runs")
        for (name, fitted), style in zip(fits.items(), ("-", ":", "--", "-.") * 4, strict=False):
            if not _allocation(fitted, flops):
                continue
            curve = getattr(fitted, quantity)
            values, at_targets = curve(flops), curve(targets)
            chosen = name == selected
            line = ax.plot(flops, values, style, lw=2.5 if chosen else 1,
                           label=f"{name} (selected)" if chosen else name, zorder=4 if chosen else 2)[0]
            ax.scatter(targets, at_targets, marker="*", s=110, color=line.get_color(), zorder=3)
        for target in targets:
            ax.axvline(target, color="grey", lw=0.5, ls=":")
        ax.set(xscale="log", yscale="log", xlabel="compute C (FLOPs)",
               ylabel="parameters N_opt" if quantity == "n_opt" else "tokens D_opt",
               title=f"{'N_opt' if quantity == 'n_opt' else 'D_opt'} vs C (stars: targets)")
        ax.legend(fontsize=7)
    return save_figure(fig, path)


def plot_parametric_contours(frame: pd.DataFrame, law: ParametricLaw, targets: np.ndarray, path: Path) -> Path:
    """log-spaced contours of L(N, D) with the runs, iso-FLOP lines D = C/6N and the frontier (N_opt, D_opt)(C)."""
    from matplotlib.colors import LogNorm

    fig, (ax,) = new_figure(width=7.2)
    n_all = np.concatenate([frame["params"].to_numpy(), law.n_opt(targets)])
    d_all = np.concatenate([frame["tokens"].to_numpy(), law.d_opt(targets)])
    n_grid = np.geomspace(n_all.min() / 3, n_all.max() * 3, 200)
    d_grid = np.geomspace(d_all.min() / 3, d_all.max() * 3, 200)
    loss = law.loss(n_grid[None, :], d_grid[:, None])  # (D, N)
    levels = np.geomspace(loss.min(), min(loss.max(), 4 * loss.min()), 25)
    filled = ax.contourf(n_grid, d_grid, loss, levels=levels, cmap="viridis_r", norm=LogNorm(), extend="max")
    fig.colorbar(filled, ax=ax, label="predicted loss L(N, D)", ticks=levels[::4], format="%.2f")
    budgets = np.unique(compute_levels(frame["flops"].to_numpy()))
    if len(budgets) > 12:  # scattered C (not an IsoFLOP sweep): a few representative iso-FLOP lines
        budgets = np.geomspace(budgets.min(), budgets.max(), 8)
    for budget in budgets:
        ax.plot(n_grid, budget / (6 * n_grid), color="white", lw=0.5, alpha=0.6)
    for target in targets:
        ax.plot(n_grid, target / (6 * n_grid), color="red", lw=0.8, ls="--")
    flops = np.geomspace(6 * n_grid.min() * d_grid.min(), 6 * n_grid.max() * d_grid.max(), 200)
    ax.plot(law.n_opt(flops), law.d_opt(flops), color="black", lw=1.5, label="compute-optimal frontier")
    ax.scatter(frame["params"], frame["tokens"], s=8, color="white", edgecolor="black", lw=0.3, label="runs")
    ax.scatter(law.n_opt(targets), law.d_opt(targets), marker="*", s=150, color="red", zorder=3,
               label="optimum at target C (dashed: iso-FLOP)")
    ax.set(xscale="log", yscale="log", xlim=(n_grid[0], n_grid[-1]), ylim=(d_grid[0], d_grid[-1]),
           xlabel="parameters N", ylabel="tokens D",
           title=f"L = {law.E:.3g} + {law.A:.3g}/N^{law.alpha:.3f} + {law.B:.3g}/D^{law.beta:.3f}")
    ax.legend(fontsize=7, loc="lower left")
    return save_figure(fig, path)


def plot_all(frame: pd.DataFrame, result: FitResult, targets: np.ndarray, out_dir: Path) -> list[Path]:
    """Every plot the fits allow; returns the PNG paths written."""
    targets = np.asarray(targets, dtype=float)
    fits = {name: f.fitted for name, f in result.fits.items() if f.fitted is not None}
    law = getattr(fits.get("parametric"), "fit", None)
    if law is not None and not (np.isfinite(law.G) and law.G > 0):
        law = None  # a degenerate law (its allocation G under- or overflowed): nothing to draw on log axes
    paths = []
    if "isoflop" in fits and result.runs.budget is not None:
        paths.append(plot_isoflop_curves(frame, result.runs.budget, fits["isoflop"], out_dir / "isoflop_curves.png"))
    if "isoflop" in fits or any(_allocation(f, targets) for f in fits.values()):
        paths.append(plot_optimal_allocation(result, targets, out_dir / "optimal_allocation.png"))
    if law is not None:
        paths.append(plot_parametric_contours(frame, law, targets, out_dir / "parametric_contours.png"))
    return paths
