"""Where the tasks of a stage run: files are the unit of work, an executor maps a function over them.

``LocalExecutor(workers)`` runs tasks in-process (1 worker) or in a fork process pool on this machine. The same
task function runs unchanged on a cluster through ``RayExecutor`` (``ray.remote`` tasks; ``ray.init()`` connects to
``RAY_ADDRESS`` or starts a local cluster) or ``DaskExecutor`` (``dask.distributed.Client(address)``), which are
imported only when chosen, so neither is a dependency. Task functions must be module-level (picklable) and
write their own outputs atomically, so a task retried elsewhere or a killed run resumed redoes only unfinished
files (datatrove's executors follow the same contract: per-task outputs plus a completion marker).
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable, Iterable, Iterator
from typing import Any

EXECUTORS = ("local", "ray", "dask")


class LocalExecutor:
    """Run tasks here: in order with one worker, else unordered over a fork process pool."""

    def __init__(self, workers: int = 1):
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.workers = workers

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterator[Any]:
        tasks = list(tasks)
        if self.workers == 1 or len(tasks) <= 1:
            yield from map(fn, tasks)
            return
        with mp.get_context("fork").Pool(min(self.workers, len(tasks))) as pool:
            yield from pool.imap_unordered(fn, tasks)


class RayExecutor:
    """Each task a ``ray.remote`` call; results yielded as they finish."""

    def __init__(self, address: str | None = None, num_cpus_per_task: float = 1):
        import ray

        if not ray.is_initialized():
            ray.init(address=address, ignore_reinit_error=True)
        self._ray, self.num_cpus = ray, num_cpus_per_task

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterator[Any]:
        remote = self._ray.remote(num_cpus=self.num_cpus)(fn)
        pending = [remote.remote(t) for t in tasks]
        while pending:
            done, pending = self._ray.wait(pending, num_returns=1)
            yield self._ray.get(done[0])


class DaskExecutor:
    """Each task a ``dask.distributed`` future; results yielded as they finish."""

    def __init__(self, address: str | None = None):
        from dask.distributed import Client

        self.client = Client(address) if address else Client(processes=True)

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterator[Any]:
        from dask.distributed import as_completed

        for future in as_completed(self.client.map(fn, list(tasks), pure=False)):
            yield future.result()


def make_executor(kind: str = "local", workers: int = 1, address: str | None = None):
    """``local`` (``workers`` processes), ``ray`` or ``dask`` (``address`` of the cluster, or a local one)."""
    if kind == "local":
        return LocalExecutor(workers)
    if kind not in EXECUTORS:
        raise ValueError(f"executor must be one of {EXECUTORS}, got {kind!r}")
    try:
        return RayExecutor(address) if kind == "ray" else DaskExecutor(address)
    except ImportError as e:
        package = "ray" if kind == "ray" else '"dask[distributed]"'
        raise ValueError(f"executor {kind} needs `pip install {package}` ({e})") from None
