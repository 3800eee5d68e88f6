"""The runs a law is fitted on, and how they are laid out: on shared compute budgets (an IsoFLOP sweep) or scattered.

IsoFLOP budgets exist only where the runs were laid out on them: a budget column in the results (``budget``,
``budget_flops``, ``compute_budget``...: scaling/data.py), or, without one, when at least ``SHARED_SHARE`` of the
runs share their C (within ``BUDGET_RTOL``) with >= 2 other model sizes. Runs whose C merely happen to agree (the
Chinchilla runs Epoch re-extracted: 245 runs, 134 distinct C, 42 % of them in chance groups of >= 3 sizes) form no
budgets: no IsoFLOP law is fitted on them and no law is checked against a budget's sampled N.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

BUDGET_RTOL = 1e-2  # runs whose C agree within 1 % share a compute level
SHARED_SHARE = 0.8  # share of runs on shared budgets that makes a layout an IsoFLOP sweep
MIN_SIZES = 3  # a parabola in ln N needs three model sizes


def compute_levels(flops: np.ndarray, rtol: float = BUDGET_RTOL) -> np.ndarray:
    """Each run's compute level: runs whose C are within ``rtol`` of a neighbour share one (their median)."""
    flops = np.asarray(flops, dtype=float)
    order = np.argsort(flops, kind="stable")
    breaks = np.flatnonzero(np.diff(np.log(flops[order])) > np.log1p(rtol)) + 1
    labels = np.empty_like(flops)
    for members in np.split(order, breaks):
        labels[members] = np.median(flops[members])
    return labels


def sized_groups(n: np.ndarray, labels: np.ndarray, min_sizes: int = MIN_SIZES) -> list[tuple[float, np.ndarray]]:
    """(label, row indices) of every group with >= ``min_sizes`` distinct N, by increasing label (NaN: no group)."""
    out = []
    for label in np.unique(labels[np.isfinite(labels)]):
        idx = np.flatnonzero(labels == label)
        if len(np.unique(n[idx])) >= min_sizes:
            out.append((float(label), idx))
    return out


def detect_layout(n: np.ndarray, c: np.ndarray, budget: np.ndarray | None = None) -> tuple[np.ndarray | None, str]:
    """(each run's budget label, or None for scattered runs; one line saying why)."""
    if budget is not None:
        groups = sized_groups(n, budget)
        return np.asarray(budget, dtype=float), f"budgets from the budget column ({len(groups)} with >= {MIN_SIZES} " \
                                                f"sizes)"
    labels = compute_levels(c)
    groups = sized_groups(n, labels)
    shared = sum(len(idx) for _, idx in groups) / len(n)
    if shared >= SHARED_SHARE:
        return labels, f"budgets from shared C ({len(groups)} with >= {MIN_SIZES} sizes, {shared:.0%} of the runs)"
    return None, (f"scattered: {shared:.0%} of the runs share their C with >= {MIN_SIZES - 1} other sizes (an IsoFLOP "
                  f"layout needs {SHARED_SHARE:.0%} or a budget column): no IsoFLOP budgets")


@dataclass(frozen=True)
class Runs:
    """N, D, C, loss of the runs and, when they were laid out on compute budgets, each run's budget (else None);
    ``unique``: each run's unique training tokens U when known (D > U: the run repeated its data, D / U epochs)."""

    n: np.ndarray
    d: np.ndarray
    c: np.ndarray
    loss: np.ndarray
    budget: np.ndarray | None = None
    unique: np.ndarray | None = None

    def __post_init__(self) -> None:  # a normalization: lists and columns into float arrays
        for name in ("n", "d", "c", "loss"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=float))
        for name in ("budget", "unique"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=float))

    def __len__(self) -> int:
        return len(self.n)

    def take(self, idx: np.ndarray) -> Runs:
        budget, unique = (None if a is None else a[idx] for a in (self.budget, self.unique))
        return Runs(self.n[idx], self.d[idx], self.c[idx], self.loss[idx], budget, unique)

    @cached_property
    def levels(self) -> np.ndarray:
        """Each run's compute level: its budget when laid out, else its C grouped within BUDGET_RTOL."""
        return self.budget if self.budget is not None else compute_levels(self.c)

    @cached_property
    def n_compute_levels(self) -> int:
        """How many distinct C the runs hold (within BUDGET_RTOL), whatever their layout."""
        return len(np.unique(compute_levels(self.c)))

    def budgets(self) -> list[tuple[float, np.ndarray]]:
        """(C, row indices) of every IsoFLOP budget with >= MIN_SIZES model sizes; [] for scattered runs."""
        return [] if self.budget is None else sized_groups(self.n, self.budget)

    def best_runs(self) -> np.ndarray:
        """The lowest-loss run of every compute level, by increasing level."""
        levels = self.levels
        return np.array([np.flatnonzero(levels == b)[np.argmin(self.loss[levels == b])] for b in np.unique(levels)],
                        dtype=int)
