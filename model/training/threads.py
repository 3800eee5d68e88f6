"""CPU threads for training: torch's intra-op pool sized to the cores that other processes leave free.

torch starts one intra-op thread per core. Each matmul splits across all of them and waits for the slowest, so
on 2 cores with another process busy on one, every op waits for a thread the scheduler runs only part of the time:
the ``train`` stage fell from about 4 to 0.2 steps/s that way. ``CpuThreads`` measures how many of
this process's cores the others keep busy (from ``/proc/stat``, less this process's own CPU time) and sets
``torch.set_num_threads`` to the cores left, at the start and again every ``interval_s`` as the load changes.
``bench.benchmarks.cpu_contention`` measures the policy against fixed thread counts.

Where ``/proc/stat`` is missing (macOS, Windows) the policy keeps torch's choice.
"""

from __future__ import annotations

import logging
import os
import time

import torch

log = logging.getLogger(__name__)

_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def usable_cores() -> list[int]:
    """The cores this process may run on (its affinity mask: a container's or taskset's cpuset)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def busy_seconds(cores: list[int], stat: str = "/proc/stat") -> float | None:
    """CPU seconds spent busy (not idle, not waiting on I/O) on ``cores`` since boot; None without /proc/stat."""
    try:
        with open(stat, encoding="ascii") as fh:
            lines = [line.split() for line in fh if line.startswith("cpu") and line[3].isdigit()]
    except OSError:
        return None
    wanted = {f"cpu{core}" for core in cores}
    ticks = 0
    for fields in lines:
        if fields[0] in wanted:
            values = [int(v) for v in fields[1:]]
            ticks += sum(values) - values[3] - values[4]  # idle, iowait
    return ticks / _TICKS_PER_S


def own_seconds() -> float:
    times = os.times()
    return times.user + times.system


def free_cores(busy_before: float, own_before: float, wall: float, busy_after: float, own_after: float,
               n_cores: int) -> float:
    """The cores other processes left idle over ``wall`` seconds: all of them less the busy time that was not ours."""
    others = max(0.0, (busy_after - busy_before) - (own_after - own_before)) / max(wall, 1e-9)
    return max(0.0, n_cores - others)


def threads_for(free: float, n_cores: int) -> int:
    """One thread per core at least half free (so a core another process keeps fully busy gets none), >= 1."""
    return max(1, min(n_cores, int(free + 0.5)))


class CpuThreads:
    """Keeps ``torch.set_num_threads`` at the free cores while a run trains: ``update()`` once per step."""

    def __init__(self, interval_s: float = 5.0, probe_s: float = 0.2):
        self.cores = usable_cores()
        self.interval_s = interval_s
        self.enabled = busy_seconds(self.cores) is not None
        self.threads = torch.get_num_threads()
        if self.enabled:
            self._last = self._sample()
            time.sleep(probe_s)  # the first reading, before the run adds load of its own
            self.update(force=True)

    def _sample(self) -> tuple[float, float, float]:
        return time.perf_counter(), busy_seconds(self.cores), own_seconds()

    def update(self, force: bool = False) -> int:
        """Re-measure once ``interval_s`` has passed (or when ``force``); the thread count now in use."""
        if not self.enabled:
            return self.threads
        now = time.perf_counter()
        if not force and now - self._last[0] < self.interval_s:
            return self.threads
        sample = self._sample()
        (t0, busy0, own0), (t1, busy1, own1) = self._last, sample
        self._last = sample
        threads = threads_for(free_cores(busy0, own0, t1 - t0, busy1, own1, len(self.cores)), len(self.cores))
        if threads != self.threads:
            log.info("CPU threads %d -> %d (cores free of other processes)", self.threads, threads)
            torch.set_num_threads(threads)
            self.threads = threads
        return threads
