"""Where the tasks of a stage run: files are the unit of work, an executor maps a function over them.

``LocalExecutor(workers)`` runs tasks in-process (1 worker) or in a fork process pool on this machine. The same
task function runs unchanged on a cluster through ``RayExecutor`` (``ray.remote`` tasks on the cluster at
``address``, else on a local ``ray.init()`` of ``workers`` CPUs) or ``DaskExecutor`` (``dask.distributed`` futures
on the scheduler at ``address``, else on a ``LocalCluster`` of ``workers`` single-threaded processes). Ray and Dask
are imported only when chosen (``pip install -e ".[cluster]"``), so neither is a dependency. Task functions must be
module-level (picklable) and write their own outputs atomically, so a task retried elsewhere or a killed run
resumed redoes only unfinished files (datatrove's executors follow the same contract: per-task outputs plus a
completion marker).

A worker that dies mid-task is the engine's to retry (Ray: ``max_retries`` 3; Dask: ``allowed-failures`` 3); when
the retries run out the stage stops with ``TaskFailed`` naming the task. ``timeout_s`` bounds how long a cluster
stage waits with no task finishing (a task stuck in C code, a cluster that lost every worker): then it cancels
what is left and raises ``TaskFailed``. Dask runs tasks on worker threads, where SIGALRM cannot reach:
``thread_time_limit`` is the time limit for task code there.
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from workbench.params import setting

EXECUTORS = ("local", "ray", "dask")
# A local Ray instance only moves task arguments (paths, configs) and results (stats dicts): a small object store.
LOCAL_RAY_OBJECT_STORE_BYTES = 100 * 1024**2


class TaskFailed(RuntimeError):
    """A task's worker died more often than the cluster retries, or no task finished within the timeout."""


class _Closing:
    def close(self) -> None:
        """Release what this executor started (a local cluster); a cluster it connected to stays up."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class LocalExecutor(_Closing):
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


def task_name(task: Any) -> str:
    """How errors name a task: its first field when it is a tuple (the stages put the input file there)."""
    return str(task[0] if isinstance(task, tuple) and task else task)


def _stalled(timeout_s: float, unfinished: list) -> TaskFailed:
    shown = ", ".join(task_name(t) for t in unfinished[:3]) + (" ..." if len(unfinished) > 3 else "")
    return TaskFailed(f"no task finished in {timeout_s:g} s; {len(unfinished)} unfinished, cancelled: {shown}")


def _check_listening(address: str, timeout_s: float = 5.0) -> None:
    """A ConnectionError unless something accepts TCP connections at ``host:port``."""
    host, _, port = address.rpartition(":")
    if host and port.isdigit():
        try:
            socket.create_connection((host, int(port)), timeout=timeout_s).close()
        except OSError as e:
            raise ConnectionError(f"nothing listens at {address} ({e})") from None


class RayExecutor(_Closing):
    """Each task a ``ray.remote`` call; results yielded as they finish."""

    def __init__(self, address: str | None = None, workers: int = 1, timeout_s: float | None = None):
        import ray

        self._ray, self.timeout_s, self._started = ray, timeout_s, False
        if address and "://" not in address and address != "auto":
            _check_listening(address)  # ray.init retries an address where nothing listens for minutes
        if ray.is_initialized():
            return
        if address or os.environ.get("RAY_ADDRESS"):
            ray.init(address=address, ignore_reinit_error=True)
        else:
            ray.init(num_cpus=workers, include_dashboard=False, object_store_memory=LOCAL_RAY_OBJECT_STORE_BYTES,
                     ignore_reinit_error=True, logging_level="WARNING")
            self._started = True

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterator[Any]:
        from ray.exceptions import RayError, RayTaskError

        remote = self._ray.remote(num_cpus=1)(fn)
        task_of = {remote.remote(t): t for t in tasks}
        pending = list(task_of)
        try:
            while pending:
                done, pending = self._ray.wait(pending, num_returns=1, timeout=self.timeout_s)
                if not done:
                    raise _stalled(self.timeout_s, [task_of[r] for r in pending])
                try:
                    result = self._ray.get(done[0])
                except RayTaskError as e:  # the task raised: the same exception as under the local executor
                    raise e.cause from None
                except RayError as e:  # its worker or node died (after Ray's retries), ran out of memory, ...
                    raise TaskFailed(f"task {task_name(task_of[done[0]])} failed on Ray: {type(e).__name__}: "
                                     f"{str(e).splitlines()[0]}") from e
                yield result
        finally:
            for ref in pending:
                self._ray.cancel(ref, force=True)

    def close(self) -> None:
        if self._started:
            self._ray.shutdown()
            self._started = False


class DaskExecutor(_Closing):
    """Each task a ``dask.distributed`` future; results yielded as they finish."""

    def __init__(self, address: str | None = None, workers: int = 1, timeout_s: float | None = None):
        from dask.distributed import Client, LocalCluster

        self.timeout_s, self._cluster = timeout_s, None
        if address:
            self.client = Client(address)
        else:
            self._cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                         dashboard_address=None)
            self.client = Client(self._cluster)

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterator[Any]:
        from dask.distributed import KilledWorker, wait

        tasks = list(tasks)
        futures = self.client.map(fn, tasks, pure=False)
        task_of = {f.key: t for f, t in zip(futures, tasks, strict=True)}
        pending = set(futures)
        try:
            while pending:
                try:
                    done, pending = wait(pending, timeout=self.timeout_s, return_when="FIRST_COMPLETED")
                except TimeoutError:
                    raise _stalled(self.timeout_s, [task_of[f.key] for f in pending]) from None
                for future in done:
                    try:
                        yield future.result()
                    except KilledWorker as e:
                        raise TaskFailed(f"task {task_name(task_of[future.key])} failed on Dask: "
                                         f"{str(e).splitlines()[0]}") from e
        finally:
            if pending:
                self.client.cancel(list(pending), force=True)

    def close(self) -> None:
        self.client.close()
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None


def make_executor(kind: str = "local", workers: int = 1, address: str | None = None,
                  timeout_s: float | None = None):
    """``local`` (``workers`` processes), ``ray`` or ``dask`` (the cluster at ``address``, or a local one of
    ``workers`` processes); use it in a ``with`` block so a local cluster is shut down."""
    if kind == "local":
        if address or timeout_s is not None:
            raise ValueError("an address and a task timeout are for the ray and dask executors, not local")
        return LocalExecutor(workers)
    if kind not in EXECUTORS:
        raise ValueError(f"executor must be one of {EXECUTORS}, got {kind!r}")
    if timeout_s is not None and timeout_s <= 0:
        raise ValueError(f"task timeout must be > 0 seconds, got {timeout_s}")
    try:
        cls = RayExecutor if kind == "ray" else DaskExecutor
        return cls(address, workers, timeout_s)
    except ImportError as e:
        raise ValueError(f"executor {kind} needs `pip install -e \".[cluster]\"` ({e})") from None
    except OSError as e:  # nothing listens at the address, or a local cluster could not start
        where = f"the {kind} cluster at {address}" if address else f"a local {kind} cluster"
        raise ValueError(f"executor {kind}: cannot reach {where}: {str(e).splitlines()[0]}") from None


@dataclass(frozen=True)
class ExecutorSettings:
    """Where a stage's per-file tasks run (``make_executor``): every data stage's ``--executor``, ``--address`` and
    ``--task-timeout-s``."""

    executor: str = setting("local", "where the per-file tasks run", choices=EXECUTORS)
    address: str | None = setting(None, "ray/dask cluster to connect to: auto or head:6379 (Ray), "
                                        "tcp://scheduler:8786 (Dask); none: a local one of --workers processes")
    task_timeout_s: float | None = setting(None, "ray/dask: stop with an error when no task finishes for this many "
                                                 "seconds; none: wait")


@contextmanager
def alarm_time_limit(seconds: float, exc_type: type[BaseException]):
    """Raise ``exc_type`` once ``seconds`` have passed inside the block, by SIGALRM (the main thread only: Python
    runs signal handlers there); the handler and timer before it are restored."""

    def on_alarm(signum, frame):
        raise exc_type

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextmanager
def thread_time_limit(seconds: float, exc_type: type[BaseException]):
    """Raise ``exc_type`` in this thread once ``seconds`` have passed inside the block.

    For task code on a worker thread, where SIGALRM cannot reach. Like a Python signal handler, the exception lands
    between bytecodes: a call stuck in C code is interrupted when it returns to Python."""
    thread_id, lock, state = threading.get_ident(), threading.Lock(), {"armed": True, "fired": False}
    set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc

    def fire():
        with lock:
            if state["armed"]:
                set_async_exc(ctypes.c_ulong(thread_id), ctypes.py_object(exc_type))
                state["fired"] = True

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with lock:
            state["armed"] = False
            timer.cancel()
            if state["fired"]:  # already raised, or still pending: clear it so it cannot land after the block
                set_async_exc(ctypes.c_ulong(thread_id), None)
