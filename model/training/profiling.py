"""``model.train --profile``: a torch.profiler window over a few training steps.

After one waiting and one warmup step, ``steps`` steps are recorded with CPU (and CUDA) activity,
shapes and memory. When the window closes, the Chrome trace goes to
``<out_dir>/profile/trace[-rank<R>].json`` (open it in chrome://tracing or https://ui.perfetto.dev)
and a table of the most expensive operators and kernels is printed and saved next to it.
``region(name)`` labels forward / backward / optimizer in the trace, and on CUDA also opens an
NVTX range, so ``nsys profile`` timelines show the same phases.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch


class StepProfiler:
    def __init__(self, enabled: bool, out_dir: str | Path, steps: int = 5, device: str = "cpu", rank: int = 0,
                 row_limit: int = 20):
        self.enabled = enabled
        self.cuda = device.startswith("cuda")
        self.folder = Path(out_dir) / "profile"
        self.suffix = f"-rank{rank}" if rank else ""
        self.row_limit = row_limit
        self.table: str | None = None
        self._prof = None
        if not enabled:
            return
        if steps <= 0:
            raise ValueError(f"TrainConfig.profile_steps must be > 0, got {steps}")
        activities = [torch.profiler.ProfilerActivity.CPU]
        if self.cuda:
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self._prof = torch.profiler.profile(
            activities=activities, schedule=torch.profiler.schedule(wait=1, warmup=1, active=steps, repeat=1),
            on_trace_ready=self._write, record_shapes=True, profile_memory=True)
        self._prof.start()

    @contextlib.contextmanager
    def region(self, name: str):
        if not self.enabled:
            yield
            return
        if self.cuda:
            torch.cuda.nvtx.range_push(name)
        try:
            with torch.profiler.record_function(name):
                yield
        finally:
            if self.cuda:
                torch.cuda.nvtx.range_pop()

    def step(self) -> None:
        if self._prof is not None:
            self._prof.step()

    def close(self) -> None:
        if self._prof is not None:
            self._prof.stop()
            self._prof = None

    def _write(self, prof) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        trace = self.folder / f"trace{self.suffix}.json"
        prof.export_chrome_trace(str(trace))
        sort_by = "self_device_time_total" if self.cuda else "self_cpu_time_total"
        self.table = prof.key_averages().table(sort_by=sort_by, row_limit=self.row_limit)
        (self.folder / f"top_kernels{self.suffix}.txt").write_text(self.table + "\n", encoding="utf-8")
        print(f"\nprofile: {trace} (chrome://tracing or ui.perfetto.dev); top operators by {sort_by}:\n"
              f"{self.table}", flush=True)
