"""How fast the best loss per compute budget falls, and whether that speeds up: the shape every law here assumes.

Each law (E + A·C^−γ along the frontier, E + A/N^α + B/D^β) bends the frontier's ln L against ln C upwards
(convex: each doubling of compute buys a smaller relative drop) or keeps it straight (E = 0). Runs still in a
training transient bend it the other way (the default sweep: its wider models' loss falls steeply between about 0.3M
and 1M tokens, which they reach only at its largest budgets), so the largest budgets fall faster than the smaller.
No law here can follow that: on the default sweep every one extrapolated too high a loss 4x beyond it; moved up 2x,
past the drop (where the loss falls slower again), the IsoFLOP laws extrapolated too low a loss 8x beyond it
(docs/benchmarks/scaling.md). ``frontier_trend`` measures the bend: the best run's ln L per budget against log2 C,
fitted by a quadratic; a curvature below zero by more than two standard errors is ``accelerating``.
"""

from __future__ import annotations

import numpy as np

from scaling.runs import compute_levels

MIN_TREND_BUDGETS = 5  # a quadratic and its curvature's standard error need >= 2 residual degrees of freedom
SIGNIFICANCE = 2.0  # standard errors


def frontier_trend(flops: np.ndarray, loss: np.ndarray) -> dict | None:
    """{"budgets", "best_loss", "drop_per_doubling" (−Δln L per doubling of C between consecutive budgets),
    "curvature" (d²ln L / d(log2 C)²), "curvature_se", "accelerating"}; None with < MIN_TREND_BUDGETS budgets."""
    labels = compute_levels(np.asarray(flops, dtype=float))
    budgets = np.unique(labels)
    if len(budgets) < MIN_TREND_BUDGETS:
        return None
    best = np.array([np.min(np.asarray(loss, dtype=float)[labels == b]) for b in budgets])
    x, y = np.log2(budgets), np.log(best)
    design = np.column_stack([np.ones_like(x), x - x.mean(), (x - x.mean()) ** 2])
    coef, residual, *_ = np.linalg.lstsq(design, y, rcond=None)
    sigma2 = float(residual[0]) / (len(x) - 3) if residual.size else 0.0
    se = float(np.sqrt(sigma2 * np.linalg.inv(design.T @ design)[2, 2]))
    curvature = 2 * float(coef[2])
    return {"budgets": budgets.tolist(), "best_loss": best.tolist(),
            "drop_per_doubling": (-np.diff(y) / np.diff(x)).tolist(), "curvature": curvature,
            "curvature_se": 2 * se, "accelerating": bool(curvature < -SIGNIFICANCE * 2 * se)}
