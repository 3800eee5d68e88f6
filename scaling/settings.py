"""The settings ``scaling.fit`` and ``scaling.compare`` share (each command's config subclasses ``FitSettings``,
restating a default or a help text with ``workbench.params.override``): which runs of a table, which laws, where to
predict and how many resamples, checked once here."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scaling.data import parse_columns, parse_where
from scaling.laws import LAWS
from scaling.predict import AUTO, choose_laws
from workbench.params import Checked, setting


@dataclass(frozen=True)
class FitSettings(Checked):
    target_flops: tuple[float, ...] = setting((), "compute budgets to predict at (none: 10x and 100x the largest "
                                                  "budget of the runs)")
    method: str = setting(AUTO, f"which laws to fit: auto (every law: {', '.join(LAWS)}; the valid one of smallest "
                                f"rolling-origin error is selected) or law names, comma-separated")
    bootstrap: int = setting(200, "bootstrap resamples for CIs and intervals; 0 = none", at_least=0)
    seed: int = setting(0, "bootstrap seed")
    columns: tuple[str, ...] = setting((), "the results' own column names, as KEY=COLUMN pairs (KEY: params, tokens, "
                                           "flops, loss, budget, unique_tokens, epochs or an alias such as N, D, C), "
                                           "e.g. params='Model Size' flops='Training FLOP': a published CSV fits "
                                           "unedited; applies to every file read (--holdout too)")
    by: str = setting("", "fit each value of this column on its own (a recipe, a dataset: runs that differ in it are "
                          "separate experiments), into <out-dir>/<value>/; scaling.compare judges recipes against "
                          "each other")
    where: tuple[str, ...] = setting((), "fit only the runs whose COLUMN holds VALUE, as COLUMN=VALUE pairs (all must "
                                         "hold), e.g. dataset=c4 loss_split=val: one experiment of a table that holds "
                                         "several")
    suggest_flops: float = setting(0.0, "compute a user would spend on more runs, for the 'train next' suggestions "
                                        "printed when an interval is wider than the loss or a pair is undecided (0: "
                                        "4x the runs' largest budget)", at_least=0)

    def __post_init__(self) -> None:  # YAML 1.1 reads 1e23 as a string: numbers are converted before the checks
        try:
            targets = tuple(float(c) for c in np.atleast_1d(self.target_flops))
        except (TypeError, ValueError):
            raise ValueError(f"--target-flops must be numbers, got {self.target_flops!r}") from None
        for name, value in (("target_flops", targets), ("columns", tuple(self.columns)), ("where", tuple(self.where)),
                            ("bootstrap", int(self.bootstrap)), ("seed", int(self.seed)),
                            ("suggest_flops", float(self.suggest_flops))):
            object.__setattr__(self, name, value)
        super().__post_init__()
        if not all(np.isfinite(c) and c > 0 for c in targets):  # a YAML list's strings reach the parser unconverted
            raise ValueError(f"--target-flops must be positive and finite, got {list(targets)}")
        choose_laws(self.method)  # an unknown law is an error before anything is read
        parse_columns(self.columns)  # a bad KEY=COLUMN is an error before anything is read
        parse_where(self.where)
