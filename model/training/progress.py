"""Where a training run's progress goes: ``metrics.csv``, an optional tracker, the tqdm bar, the profiler.

``Monitor`` is the loop's one handle on all of them (rank 0 writes files; every rank profiles), and it
measures tokens/s over the window of steps since the last logged row.
"""

from __future__ import annotations

import contextlib
import csv
import sys
import time
from pathlib import Path

from model.training.profiling import StepProfiler
from model.training.train_config import TrainConfig
from workbench.files import atomic_open

CSV_FIELDS = ("step", "tokens", "loss", "val_loss", "lr", "grad_norm", "tokens_per_s", "mfu")
MOE_FIELDS = ("aux_loss", "moe_dropped", "moe_load")  # appended for mixture-of-experts models


class MetricsLog:
    """metrics.csv of a run; on resume, rows after the resumed step are dropped (they get redone)."""

    def __init__(self, path: Path, resume_step: int | None, fields: tuple[str, ...] = CSV_FIELDS):
        self.path, self.fields = path, fields
        rows = []
        if resume_step is not None and path.exists():
            with open(path, newline="", encoding="utf-8") as fh:
                for row in csv.DictReader(fh):
                    with contextlib.suppress(TypeError, ValueError):
                        if None not in row.values() and int(row["step"]) <= resume_step:
                            rows.append(row)
        with atomic_open(path, "w") as fh:  # the rows up to the resume step, then appended to
            writer = csv.DictWriter(fh, fields, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
        self.fh = open(path, "a", newline="", encoding="utf-8")
        self.writer = csv.DictWriter(self.fh, fields)

    def write(self, row: dict) -> None:
        self.writer.writerow({k: ("" if row.get(k) is None else row[k]) for k in self.fields})
        self.fh.flush()

    def close(self) -> None:
        self.fh.close()


def make_tracker(cfg: TrainConfig, out_dir: Path):
    """A function that sends a logged row to TensorBoard or Weights & Biases (``cfg.tracker``), or drops it."""
    if cfg.tracker == "tensorboard":
        from torch.utils.tensorboard import SummaryWriter  # optional: needs the tensorboard package

        writer = SummaryWriter(str(out_dir / "tensorboard"))
        return lambda row: [writer.add_scalar(k, v, row["step"]) for k, v in row.items() if v is not None]
    if cfg.tracker == "wandb":
        import wandb  # optional

        wandb.init(project="lm-workbench", name=out_dir.name, config=cfg.to_dict(), resume="allow")
        return lambda row: wandb.log({k: v for k, v in row.items() if v is not None}, step=row["step"])
    return lambda row: None


class Monitor:
    """metrics.csv, the tracker and the progress bar (rank 0 only), the step profiler (every rank)."""

    def __init__(self, cfg: TrainConfig, out_dir: Path, *, main_rank: bool, rank: int, device: str, is_moe: bool,
                 step: int, total: int, resumed: bool):
        from tqdm import tqdm  # lazy: model/ must import with only torch, triton and numpy installed

        fields = CSV_FIELDS + (MOE_FIELDS if is_moe else ())
        self.metrics = MetricsLog(out_dir / "metrics.csv", step if resumed else None, fields) if main_rank else None
        self.track = make_tracker(cfg, out_dir) if main_rank else (lambda row: None)
        self.window_tokens, self.window_start = 0, time.perf_counter()
        self.bar = tqdm(total=total, initial=step, desc="train", unit="step", dynamic_ncols=True, file=sys.stderr,
                        disable=not main_rank)
        self.profiler = StepProfiler(cfg.profile, out_dir, cfg.profile_steps, device, rank)

    def stepped(self, tokens: int) -> None:
        """One optimizer step of ``tokens`` tokens is done."""
        self.profiler.step()
        self.window_tokens += tokens
        self.bar.update(1)

    def tokens_per_s(self) -> tuple[float, float]:
        """(tokens/s over the window since the last row, now)."""
        now = time.perf_counter()
        return self.window_tokens / max(now - self.window_start, 1e-9), now

    def log(self, row: dict, *, loss: float, tokens_per_s: float, mfu: float | None, now: float) -> None:
        """Write a metrics row, show the unrounded numbers on the bar, and start a new window at ``now``."""
        if self.metrics:
            self.metrics.write(row)
        self.track(row)
        self.bar.set_postfix(loss=f"{loss:.3f}", tok_s=f"{tokens_per_s:,.0f}",
                             **({"mfu": f"{mfu:.1%}"} if mfu is not None else {}))
        self.window_tokens, self.window_start = 0, now

    def write(self, line: str) -> None:
        """A line printed above the progress bar."""
        self.bar.write(line)

    def close(self) -> None:
        self.bar.close()
        self.profiler.close()
        if self.metrics:
            self.metrics.close()
