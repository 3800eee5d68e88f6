"""The PNGs of leaderboard/report.py: the default run's training curves beside the sweep, and a fallback scaling plot.

``training_curves``: train and validation loss against tokens for the default run (the nanoGPT / CS336
assignment-1 learning-curve plot), and beside it each sweep run's final validation loss against its FLOPs,
coloured by compute budget (the raw points of Hoffmann et al. 2022 fig. 3 left). ``scaling_plot`` is drawn only
when scaling/plots.py's PNGs are missing: each fit method's predicted loss at its target budgets over the sweep.
matplotlib is imported inside the functions (heavy, needed only for the PNGs) and drawn through
``matplotlib.figure.Figure`` (Agg), never pyplot's global state; each PNG is written to a temporary file and renamed
into place, without the matplotlib version in its metadata (the same inputs give the same bytes).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from workbench.files import atomic_path


def _save(fig, path: Path) -> Path:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110, metadata={"Software": None})
    return path


def _sweep_points(ax, sweep: pd.DataFrame) -> None:
    """Final val loss against FLOPs (flops_actual when recorded), one colour per budget."""
    from matplotlib import colormaps

    loss = pd.to_numeric(sweep.get("val_loss", sweep.get("loss")), errors="coerce")
    flops = pd.to_numeric(sweep.get("flops_actual", sweep.get("flops")), errors="coerce")
    budget = pd.to_numeric(sweep.get("flops", flops), errors="coerce")
    budgets = sorted(budget.dropna().unique())
    for i, b in enumerate(budgets):
        mask = budget == b
        color = colormaps["viridis"](0.9 * i / max(len(budgets) - 1, 1))
        ax.scatter(flops[mask], loss[mask], s=22, color=color, label=f"C = {b:.2g}")
    ax.set(xscale="log", xlabel="FLOPs", ylabel="final val loss")
    if budgets:
        ax.legend(fontsize=7)


def training_curves(curves: pd.DataFrame | None, sweep: pd.DataFrame | None, path: Path) -> Path | None:
    """Left: the default run's loss and val_loss against tokens; right: the sweep's final loss against FLOPs."""
    if curves is None and sweep is None:
        return None
    from matplotlib.figure import Figure

    panels = int(curves is not None) + int(sweep is not None)
    fig = Figure(figsize=(5.5 * panels, 4.2), layout="constrained")
    axes = list(fig.subplots(1, panels, squeeze=False)[0])
    if curves is not None:
        ax = axes.pop(0)
        ax.plot(curves["tokens"], curves["loss"], lw=1.2, label="train loss")
        if "val_loss" in curves and curves["val_loss"].notna().any():
            val = curves.dropna(subset=["val_loss"])
            ax.plot(val["tokens"], val["val_loss"], marker="o", lw=1.2, label="val loss")
        ax.set(xlabel="tokens", ylabel="loss", title="Default run")
        ax.legend(fontsize=8)
    if sweep is not None:
        ax = axes.pop(0)
        _sweep_points(ax, sweep)
        ax.set_title("Sweep runs: final loss vs compute")
    return _save(fig, path)


def scaling_plot(preds: pd.DataFrame, sweep: pd.DataFrame | None, path: Path) -> Path:
    """Predicted loss per method at the target budgets, with the sweep runs for scale."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.6), layout="constrained")
    ax = fig.subplots()
    if sweep is not None:
        _sweep_points(ax, sweep)
    for method, group in preds.groupby("method", sort=True):
        group = group.sort_values("target_flops")
        ax.plot(group["target_flops"], group["loss"], marker="*", ms=10, lw=1, label=f"{method} prediction")
    ax.set(xscale="log", xlabel="FLOPs", ylabel="loss", title="Scaling-law predictions")
    ax.legend(fontsize=7)
    return _save(fig, path)
