"""The protocol every scaling law follows: what data it needs, fit, predict, and its parameters with their bounds.

A law (``Law``) fits a ``Runs`` table and returns a ``Fitted`` law, which predicts the loss of any run from its N, D
and C, the compute-optimal N, D and loss at a budget C, and its log residuals on the runs it was fitted on.
Fitting, validity, selection, the intervals and the report (scaling/predict.py, select.py, intervals.py, report.py)
see only this protocol: a new law is one module in scaling/laws/ that defines a ``Law`` subclass decorated with
``@register`` (scaling/laws/__init__.py imports every module of the package).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from scaling.runs import Runs


class LawError(ValueError):
    """The law cannot be fitted on these runs (one line: why)."""


@dataclass(frozen=True)
class Bound:
    """The optimizer's box for one parameter; ``log``: compared on a log scale."""

    lo: float
    hi: float
    log: bool = False


class Fitted(ABC):
    """A law fitted on some runs."""

    law: Law
    budgets_used: int | None = None  # IsoFLOP laws: the budgets approach 2 fitted

    @abstractmethod
    def parameters(self) -> dict[str, float]:
        """The fitted parameters (bounded ones named as in ``Law.bounds``)."""

    @abstractmethod
    def loss(self, n: np.ndarray, d: np.ndarray, c: np.ndarray) -> np.ndarray:
        """The predicted loss of runs of N parameters trained on D tokens with C FLOPs."""

    @abstractmethod
    def n_opt(self, c: np.ndarray) -> np.ndarray:
        """The compute-optimal model size at budget C."""

    def d_opt(self, c: np.ndarray) -> np.ndarray:
        return np.asarray(c, dtype=float) / (6.0 * self.n_opt(c))

    def loss_opt(self, c: np.ndarray) -> np.ndarray:
        """The loss of the compute-optimal run at C."""
        c = np.asarray(c, dtype=float)
        return self.loss(self.n_opt(c), self.d_opt(c), c)

    def unpinned(self) -> set[str]:
        """Parameters held fixed by the fit (not estimated), so never "at a bound"."""
        return set()

    def details(self) -> dict:
        """Extra fit.json fields of this law (its per-budget fits, objective, ...)."""
        return {}


class Law(ABC):
    """One scaling-law family."""

    name: ClassVar[str]  # predictions.csv's ``method``
    title: ClassVar[str]  # one line: the law and how it is fitted, with its source
    n_params: ClassVar[int]  # fitted parameters: the fewer wins a tie
    preference: ClassVar[int] = 100  # without a rolling origin to choose by, the lowest is selected
    bounds: ClassVar[dict[str, Bound]] = {}
    needs_budgets: ClassVar[bool] = False  # fitted on IsoFLOP budgets (runs laid out on them)
    predicts_best_run: ClassVar[bool] = False  # predicts each budget's best run (L_opt(C)), scored on those only
    checks_vertices: ClassVar[bool] = True  # its N_opt(C) is checked against each budget's sampled N

    @abstractmethod
    def fit(self, runs: Runs, warm: Fitted | None = None) -> Fitted:
        """Fit on ``runs`` (``warm``: a fit on similar runs to start from, for bootstrap refits); raises LawError."""

    def scored(self, runs: Runs) -> np.ndarray:
        """The rows of ``runs`` this law's predictions are scored on: every run, or each level's best run."""
        return runs.best_runs() if self.predicts_best_run else np.arange(len(runs))

    def predict(self, fitted: Fitted, runs: Runs, rows: np.ndarray) -> np.ndarray:
        """The predicted loss of ``rows`` of ``runs``: from their N, D and C (a law that reads more of a run, such as
        its unique tokens, says so here)."""
        return fitted.loss(runs.n[rows], runs.d[rows], runs.c[rows])

    def residuals(self, fitted: Fitted, runs: Runs) -> np.ndarray:
        """ln(predicted / measured) on the rows of ``runs`` it is scored on."""
        rows = self.scored(runs)
        return np.log(self.predict(fitted, runs, rows) / runs.loss[rows])
