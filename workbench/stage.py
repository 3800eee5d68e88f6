"""The one base of the data stages (extract, filter, dedup, tokenize): read -> decide -> write -> record -> count.

After datatrove's ``PipelineStep``: the base owns the iteration, the writers and the counting; a stage only decides
(extraction, the filter steps, dedup's clustering, encoding). What the base owns:

- the tasks: ``FileStage.run`` maps one task per unfinished input file over an executor (``workbench.executor``:
  the local pool, Ray or Dask) with a progress bar (``map_tasks``, which stages with tasks of their own use too);
- the writers: ``TaskWriter`` opens one task's output files (kept and rejected documents, or token parts) together
  and writes them atomically, so a task that raises leaves no file under a final name; the task's record in the
  stage's ledger (``workbench.ledger``: ``_done/<output name>.json``, its stats without timings, the input's
  identity and the stage's ``settings``) is written last;
- resume: a file whose output exists and whose record holds the input as it is now (size and SHA-256) and the
  stage's settings as they are now is not run again (``finished``); its record's stats count as if it had been.
  A changed input is redone, and the stage says so in one line; changed settings redo every file;
- the metrics: per-file stats summed (``sum_stats``) into the stage's metrics, written atomically with their
  headline (``write_stage_metrics``: ``metrics/<stage>.json`` and ``metrics/details/<stage>.json``); a stage none
  of whose inputs could be read then fails (``workbench.bad_input``);
- leftovers: a killed task leaves its writers' temporary files (``.<name>.<random>.tmp``); ``run`` removes those
  of its output folders first (``remove_leftovers``), so a folder a stage owns holds only finished files.

A stage that keeps, changes or drops documents one at a time is a ``DocumentStage``
(pipeline/runtime/document_stage.py: a chain of document steps over each file, on this base). Dedup is global
(sketch everything, cluster, then write): a ``CorpusStage`` keeps one record for the whole stage in the same ledger
(and a work folder keyed on the same identities for its tasks) instead of a record per file. Tokenize joins its
files' parts into one pair of shards and keeps its own record; both use the writers and the metrics, not the
per-file map of ``FileStage``, and map their tasks with ``map_tasks``.
"""

from __future__ import annotations

import functools
import json
import time
from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any

from tqdm import tqdm

from workbench.bad_input import require_readable
from workbench.documents import output_name
from workbench.files import atomic_open, write_metrics
from workbench.ledger import DONE_FOLDER, Ledger, Record
from workbench.stage_cli import funnel_headline


def remove_leftovers(*folders: Path | None) -> None:
    """Remove the temporary files a killed writer left in ``folders`` and their records (``atomic_path``'s
    ``.<name>.<random>.tmp``). Only for folders one stage owns: another run's open temporary file would go too."""
    for folder in folders:
        if folder is None:
            continue
        for place in (Path(folder), Path(folder) / DONE_FOLDER):
            for leftover in place.glob(".*.tmp") if place.is_dir() else ():
                leftover.unlink(missing_ok=True)


class TaskWriter:
    """One task's output files, by role (``kept=``, ``rejected=``, or any others; a None path is not written),
    opened together: each appears under its name only when the ``with`` block ends without an exception.

    ``keep``/``reject`` write one document: a dict as a JSON line, or a line's bytes as they are (binary files
    only); ``write`` writes anything to a role's file; ``counts`` has the writes per role. ``text=True`` opens
    the files as UTF-8 text: gzip's bytes depend on how the stream is fed, and text is how the documents stages
    (``workbench.files.write_jsonl``) have always written theirs."""

    def __init__(self, text: bool = False, **paths: Path | None):
        self.text = text
        self.paths = {role: Path(p) for role, p in paths.items() if p is not None}
        self.files: dict[str, IO] = {}
        self.counts: Counter = Counter()
        self._stack = ExitStack()

    def __enter__(self) -> TaskWriter:
        mode = "w" if self.text else "wb"
        with ExitStack() as opening:  # a file that fails to open closes (and removes) the ones opened before it
            self.files = {role: opening.enter_context(atomic_open(p, mode)) for role, p in self.paths.items()}
            self._stack = opening.pop_all()
        return self

    def __exit__(self, *exc) -> bool:
        return self._stack.__exit__(*exc)

    def write(self, role: str, data: bytes | str) -> None:
        self.files[role].write(data)
        self.counts[role] += 1

    def keep(self, doc: dict | bytes) -> None:
        """A kept document."""
        self.write("kept", self._line(doc))

    def reject(self, doc: dict | bytes) -> None:
        """A dropped document (with its ``reason``), when this task writes rejected documents."""
        if "rejected" in self.files:
            self.write("rejected", self._line(doc))

    def _line(self, doc: dict | bytes) -> bytes | str:
        if isinstance(doc, bytes):
            return doc
        line = json.dumps(doc, ensure_ascii=False) + "\n"
        return line if self.text else line.encode("utf-8")


def map_tasks(executor, fn: Callable[[Any], dict], tasks: list, desc: str, unit: str = "file",
              **progress) -> list[dict]:
    """``fn`` over ``tasks`` on ``executor`` (module-level ``fn``, picklable tasks), with a progress bar; the
    results in the order they finish."""
    bar = tqdm(executor.map(fn, tasks), total=len(tasks), desc=desc, unit=unit, dynamic_ncols=True, **progress)
    return list(bar)


def sum_stats(per_file: Iterable[dict], keys: Iterable[str]) -> dict:
    """Each of ``keys`` summed over the per-file stats."""
    per_file = list(per_file)
    return {k: sum(s[k] for s in per_file) for k in keys}


def sum_counts(per_file: Iterable[dict], key: str = "drops") -> Counter:
    """The per-file counters under ``key`` (drops per reason) added up."""
    total: Counter = Counter()
    for stats in per_file:
        total.update(stats[key])
    return total


def write_stage_metrics(metrics_path: Path | None, metrics: dict, headline: dict) -> None:
    """The headline to ``metrics_path`` (what DVC shows), every number to ``metrics/details/``; nothing when the
    path is None (a CLI run outside the project writes no metrics file unless asked)."""
    if metrics_path is not None:
        write_metrics(metrics_path, metrics, headline)


class FileStage:
    """A stage of one task per input file, each writing ``out_dir/<output name>`` and then its record in the
    stage's ``ledger`` (``self.record(path).write(**stats)``, last).

    A stage sets ``name`` and decides: ``task(path)`` (the picklable argument of its module-level ``task_fn``, which
    returns the file's stats), ``summarize`` (the stage metrics from every file's stats, finished earlier or now),
    ``add_timings`` and ``settings`` (what decides its outputs besides the input); ``check`` may refuse the files to
    run. ``run`` does the rest: resume, the map, the metrics."""

    name = "stage"
    bar_for_one_file = True  # False: a progress bar only when two or more files run
    task_fn: Callable[[Any], dict]

    def __init__(self, files: list[Path], out_dir: Path, force: bool = False):
        self.files, self.out_dir, self.force = list(files), Path(out_dir), force

    # -- what a stage decides
    def output_name(self, path: Path) -> str:
        return output_name(path)

    def settings(self) -> dict:
        """What decides this stage's outputs besides each input (JSON values): a file recorded with other settings
        is done again. None by default; a stage with options that change its outputs returns them."""
        return {}

    def task(self, path: Path) -> Any:  # pragma: no cover - interface
        raise NotImplementedError

    def summarize(self, per_file: list[dict]) -> dict:  # pragma: no cover - interface
        raise NotImplementedError

    def add_timings(self, metrics: dict, fresh: list[dict], skipped: int, wall: float) -> None:
        """Add this run's seconds (and rates) to ``metrics``; ``fresh``: the stats of the files run now."""
        metrics["seconds"] = round(wall, 3)

    def headline(self, metrics: dict) -> dict:
        return funnel_headline(metrics)

    def check(self, todo: list[Path]) -> None:
        """Refuse (ValueError) to run ``todo`` before any task starts; nothing by default."""

    def output_dirs(self) -> list[Path]:
        """The folders this stage writes its outputs to (their leftovers are removed before a run)."""
        return [self.out_dir]

    def outputs(self, path: Path) -> list[Path]:
        """The files the task of ``path`` writes (all must exist for its record to count)."""
        return [self.out_dir / self.output_name(path)]

    # -- what the base does
    @functools.cached_property
    def ledger(self) -> Ledger:
        """Where this stage records its finished files (``out_dir/_done/``), with its settings (computed once)."""
        return Ledger(self.name, self.out_dir, self.settings())

    def record(self, path: Path) -> Record:
        """The record of input ``path``'s task: named for its output, made from that one input."""
        return self.ledger.record(self.output_name(path), [path])

    def finished(self) -> dict[Path, dict]:
        """The stats of every input whose outputs and record exist, with the input as it is now and the settings
        as they are now (none when ``force``); an input changed since says so in one line and is redone."""
        records = {path: self.record(path) for path in self.files}  # the settings computed once, before any task
        if self.force:
            return {}
        done = {path: record.done(*self.outputs(path)) for path, record in records.items()}
        return {path: stats for path, stats in done.items() if stats is not None}

    def run_tasks(self, executor, todo: list[Path]) -> list[dict]:
        progress = {} if self.bar_for_one_file else {"disable": len(todo) < 2}
        return map_tasks(executor, type(self).task_fn, [self.task(p) for p in todo], desc=self.name, **progress)

    def run(self, executor, metrics_path: Path | None) -> dict:
        """Run the unfinished files, sum every file's stats, write the metrics; a ValueError when no input was
        readable."""
        done = self.finished()
        todo = [p for p in self.files if p not in done]
        self.check(todo)
        remove_leftovers(*self.output_dirs())
        start = time.perf_counter()
        fresh = self.run_tasks(executor, todo) if todo else []
        metrics = self.summarize(list(done.values()) + fresh)
        self.add_timings(metrics, fresh, len(done), time.perf_counter() - start)
        write_stage_metrics(metrics_path, metrics, self.headline(metrics))
        require_readable(metrics, len(self.files))
        return metrics


class CorpusStage:
    """A stage over all its inputs at once (dedup: sketch everything, cluster, then write), with one record in its
    ``ledger`` for the whole stage, named ``name``, and a work folder (``ledger.work``) for tasks of its own.

    A stage sets ``name``, ``timings`` (the metrics that say how this run went, left out of the record) and
    ``nothing_ran`` (their values when the record stands), and decides: ``settings``, ``outputs`` (every file it
    writes; all must exist for the record to count), ``output_dirs`` and ``compute(ledger, record)`` (the work:
    writes the outputs, returns the metrics). ``run`` does the rest: a stage whose record holds its inputs and
    settings as they are now, with every output there, is not run again (its recorded metrics count); otherwise the
    record goes first (a kill from then on leaves none to trust), then the leftovers, the work, the metrics, the
    record, the work folder."""

    name = "stage"
    timings: tuple[str, ...] = ("seconds",)
    nothing_ran: dict = {"seconds": 0.0}

    def __init__(self, files: list[Path], out_dir: Path, force: bool = False):
        self.files, self.out_dir, self.force = list(files), Path(out_dir), force

    def settings(self) -> dict:
        return {}

    def outputs(self) -> list[Path]:  # pragma: no cover - interface
        raise NotImplementedError

    def output_dirs(self) -> list[Path]:
        return [self.out_dir]

    def compute(self, ledger: Ledger, record: Record) -> dict:  # pragma: no cover - interface
        raise NotImplementedError

    def headline(self, metrics: dict) -> dict:
        return funnel_headline(metrics)

    def run(self, metrics_path: Path | None) -> dict:
        """The stage's metrics, from its record or from the work done now; a ValueError when no input was readable."""
        ledger = Ledger(self.name, self.out_dir, self.settings())
        record = ledger.record(self.name, self.files)
        done = record.done(*self.outputs()) if not self.force else None
        if done is not None:
            ledger.remove_work()  # left by a kill after the record was written
            metrics = {**done["metrics"], **self.nothing_ran}
            write_stage_metrics(metrics_path, metrics, self.headline(metrics))
        else:
            record.path.unlink(missing_ok=True)
            remove_leftovers(*self.output_dirs())
            metrics = self.compute(ledger, record)
            write_stage_metrics(metrics_path, metrics, self.headline(metrics))
            record.write(metrics={k: v for k, v in metrics.items() if k not in self.timings})
            ledger.remove_work()  # the stage's tasks, once the record holds
        require_readable(metrics, len(self.files))
        return metrics
