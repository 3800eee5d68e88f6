"""Map a function over records in worker processes that may die or hang, without the stage dying or hanging.

``multiprocessing.Pool`` loses the task of a worker that is killed (``SIGKILL``, the OOM killer, a segfault in C
code) and waits for it forever; ``concurrent.futures.ProcessPoolExecutor`` fails every pending task and cannot
say which record did it. ``SupervisedPool`` gives each worker one record at a time over its own pipe and watches
the workers: when one dies, its record comes back as ``Lost("crash", record)``; when one is still busy
``kill_after_s`` seconds after it got its record (stuck in C code, where no Python signal handler runs), it is
killed and its record comes back as ``Lost("timeout", record)``. Either way a fresh worker takes its place and the
other records go on. Results are yielded in input order, so outputs do not depend on the number of workers.
Workers are forked, so the function and whatever the initializer sets up need not be picklable; records and
results are.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

_WINDOW_PER_WORKER = 16  # records handed out ahead of the oldest unfinished one, per worker


@dataclass(frozen=True)
class Lost:
    """A record whose worker died (``reason="crash"``) or was killed for overrunning (``"timeout"``)."""

    reason: str
    record: Any


class _RemoteError(Exception):
    """``fn`` raised in a worker; re-raised in the parent with the worker's message."""


def _serve(conn: Connection, fn: Callable, initializer: Callable | None, initargs: tuple,
           inherited: list[Connection]) -> None:
    """A worker: run ``fn`` on each ``(index, record)`` received; ``None`` or a closed pipe ends it."""
    for other in inherited:  # the parent's ends of the pipes (this worker's and the others'), copied by fork
        other.close()
    if initializer is not None:
        initializer(*initargs)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        index, record = message
        try:
            conn.send((index, True, fn(record)))
        except Exception as e:  # noqa: BLE001 - handed to the parent, which raises it
            conn.send((index, False, f"{type(e).__name__}: {e}"))


class _Worker:
    def __init__(self, ctx, fn: Callable, initializer: Callable | None, initargs: tuple, inherited: list[Connection]):
        self.conn, child = ctx.Pipe()
        # the worker closes its copy of this end too: then the parent's death (even by SIGKILL) ends it with EOF
        self.process = ctx.Process(target=_serve, args=(child, fn, initializer, initargs, [*inherited, self.conn]),
                                   daemon=True)
        self.process.start()
        child.close()
        self.job: tuple[int, Any, float] | None = None  # (index, record, deadline) while busy

    def give(self, index: int, record: Any, kill_after_s: float) -> None:
        self.job = (index, record, time.monotonic() + kill_after_s)
        self.conn.send((index, record))

    def stop(self, kill: bool = False) -> None:
        """End the process: ask it to finish (or kill it at once), wait for it, close the pipe."""
        if not kill:
            with contextlib.suppress(OSError):  # already dead
                self.conn.send(None)
            self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.conn.close()


class SupervisedPool:
    """``workers`` forked processes running ``fn``; ``imap(records)`` yields a result or a ``Lost`` per record."""

    def __init__(self, fn: Callable[[Any], Any], workers: int, kill_after_s: float,
                 initializer: Callable | None = None, initargs: tuple = ()):
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if kill_after_s <= 0:
            raise ValueError(f"kill_after_s must be > 0, got {kill_after_s}")
        self._ctx = mp.get_context("fork")
        self._spawn_args = (fn, initializer, initargs)
        self.kill_after_s = kill_after_s
        self.restarts = 0
        self._workers: list[_Worker] = []
        for _ in range(workers):
            self._workers.append(self._spawn())

    def _spawn(self) -> _Worker:
        return _Worker(self._ctx, *self._spawn_args, [w.conn for w in self._workers])

    def imap(self, records: Iterable[Any]) -> Iterator[Any]:
        """Results in the order of ``records``; ``Lost(reason, record)`` for a record that killed or hung its worker."""
        records = iter(records)
        done: dict[int, Any] = {}
        next_in = next_out = 0
        exhausted = False
        window = _WINDOW_PER_WORKER * len(self._workers)
        try:
            while True:
                for i, worker in enumerate(self._workers):  # feed the idle workers
                    if exhausted or worker.job is not None or next_in - next_out >= window:
                        continue
                    try:
                        record = next(records)
                    except StopIteration:
                        exhausted = True
                        continue
                    self._give(i, next_in, record)
                    next_in += 1
                while next_out in done:
                    yield done.pop(next_out)
                    next_out += 1
                busy = [w for w in self._workers if w.job is not None]
                if not busy:
                    if exhausted:
                        return
                    continue
                self._collect(busy, done)
        finally:  # left early (the caller stopped, or raised): no record of this call may linger in a worker
            for i, worker in enumerate(self._workers):
                if worker.job is not None:
                    self._replace(i)

    def _give(self, i: int, index: int, record: Any) -> None:
        try:
            self._workers[i].give(index, record, self.kill_after_s)
        except OSError:  # it died while idle: its successor takes the record
            self._replace(i)
            self._workers[i].give(index, record, self.kill_after_s)

    def _collect(self, busy: list[_Worker], done: dict[int, Any]) -> None:
        """Wait for a result, a death or the first deadline; file what happened under the record's index."""
        now = time.monotonic()
        timeout = max(0.0, min(w.job[2] for w in busy) - now)
        ready = set(wait([w.conn for w in busy] + [w.process.sentinel for w in busy], timeout))
        now = time.monotonic()
        for i, worker in enumerate(self._workers):
            if worker.job is None:
                continue
            index, record, deadline = worker.job
            if worker.conn in ready or worker.process.sentinel in ready:
                try:
                    if not worker.conn.poll():
                        raise EOFError
                    got, ok, value = worker.conn.recv()
                except (EOFError, OSError):  # died before answering
                    done[index] = Lost("crash", record)
                    self._replace(i)
                    continue
                if not ok:
                    raise _RemoteError(f"record {index}: {value}")
                done[got] = value
                worker.job = None
            elif now >= deadline:
                done[index] = Lost("timeout", record)
                self._replace(i)

    def _replace(self, i: int) -> None:
        """Kill worker ``i`` and fork its successor (without the killed worker's pipe end)."""
        self._workers.pop(i).stop(kill=True)
        self._workers.insert(i, self._spawn())
        self.restarts += 1

    def close(self) -> None:
        for worker in self._workers:
            worker.stop()
        self._workers = []

    def __enter__(self) -> SupervisedPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
