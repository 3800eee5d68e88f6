"""The settings every training loop shares about its run folder and its machine: ``model.train``'s TrainConfig and
the alignment trainers' LoopConfig declare them here once (each may restate a default with
``workbench.params.override``)."""

from __future__ import annotations

from dataclasses import dataclass

from workbench.params import Checked, setting


@dataclass(frozen=True)
class RunSettings(Checked):
    """How often a run checkpoints, how many checkpoints it keeps, and how it uses the CPU."""

    ckpt_interval: int = setting(200, "steps between checkpoints (and always at the end); a killed run goes on from "
                                      "the newest", at_least=1)
    keep_last: int = setting(3, "checkpoints kept in the run folder", at_least=1)
    deterministic: bool = setting(False, "torch.use_deterministic_algorithms at a fixed thread count: a resumed run "
                                         "ends with an uninterrupted run's weights, bit for bit (CPU)")
    threads: int | None = setting(None, "torch CPU threads (default: the cores other processes leave free, "
                                        "re-checked as the run goes)", at_least=1)
