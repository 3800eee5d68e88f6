"""The one base of the data stages (extract, filter, dedup, tokenize): read -> decide -> write -> mark -> count.

After datatrove's ``PipelineStep``: the base owns the iteration, the writers and the counting; a stage only decides
(extraction, the filter steps, dedup's clustering, encoding). What the base owns:

- the tasks: ``FileStage.run`` maps one task per unfinished input file over an executor (``workbench.executor``:
  the local pool, Ray or Dask) with a progress bar (``map_tasks``, which stages with tasks of their own use too);
- the writers: ``TaskWriter`` opens one task's output files (kept and rejected documents, or token parts) together
  and writes them atomically, so a task that raises leaves no file under a final name; the task's completion
  marker (``_stats/<name>.json``: its stats, without timings, so a rerun writes the same bytes) is written last;
- resume: a file whose marker and outputs exist, and whose marker records the input file as it is now (size and
  SHA-256: ``input_identity``), is not run again (``finished_stats``); its marker's stats count as if it had been. A
  changed input is redone, and the stage says so in one line;
- the metrics: per-file stats summed (``sum_stats``) into the stage's metrics, written atomically with their
  headline (``write_stage_metrics``: ``metrics/<stage>.json`` and ``metrics/details/<stage>.json``); a stage none
  of whose inputs could be read then fails (``workbench.bad_input``);
- leftovers: a killed task leaves its writers' temporary files (``.<name>.<random>.tmp``); ``run`` removes those
  of its output folders first (``remove_leftovers``), so a folder a stage owns holds only finished files.

A stage that keeps, changes or drops documents one at a time is a ``DocumentStage``: it says only ``decide(doc)``
(the document to keep, or the reason it is dropped); the base reads the files, writes kept and rejected documents
and counts. Dedup is global (sketch everything, cluster, then write) and tokenize joins its files' parts into one
pair of shards, so each keeps one ``StageMarker`` (the inputs' identities and the settings) instead of a marker per
file, and the writers and the metrics, not the per-file map of ``FileStage``; both map their tasks with
``map_tasks``.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any

from tqdm import tqdm

from workbench.bad_input import InputIssues, merged_stats, require_readable
from workbench.documents import output_name, read_documents
from workbench.files import atomic_open, file_sha256, read_json, write_json, write_metrics
from workbench.stage_cli import funnel_headline

STATS_FOLDER = "_stats"  # beside a stage's outputs: one completion marker per input file (or one for the stage)


def marker_path(out_dir: Path | str, name: str) -> Path:
    """The completion marker of output ``name`` (or of a whole stage) in ``out_dir``: ``_stats/<name>.json``."""
    return Path(out_dir) / STATS_FOLDER / f"{name}.json"


def finished_stats(marker: Path, *outputs: Path) -> dict | None:
    """The stats a finished task wrote to ``marker``, when it and every one of ``outputs`` exist; else None."""
    if Path(marker).exists() and all(Path(p).exists() for p in outputs):
        return read_json(marker)
    return None


def mark_done(marker: Path, stats: dict, source: Path | None = None) -> dict:
    """Write a task's completion marker (after its outputs): its ``stats``, key-sorted, atomically; with ``source``,
    also that input file's identity (``input_identity``), so that a changed input is redone."""
    write_json(marker, stats | ({"input_identity": input_identity(source)} if source is not None else {}))
    return stats


def input_identity(path: Path) -> dict:
    """What a marker records of its input file: its size and the SHA-256 of its bytes (not its path or mtime: the
    marker must be the same bytes on every machine)."""
    return {"size": Path(path).stat().st_size, "sha256": file_sha256(path)}


def remove_leftovers(*folders: Path | None) -> None:
    """Remove the temporary files a killed writer left in ``folders`` and their ``_stats`` (``atomic_path``'s
    ``.<name>.<random>.tmp``). Only for folders one stage owns: another run's open temporary file would go too."""
    for folder in folders:
        if folder is None:
            continue
        for place in (Path(folder), Path(folder) / STATS_FOLDER):
            for leftover in place.glob(".*.tmp") if place.is_dir() else ():
                leftover.unlink(missing_ok=True)


class StageMarker:
    """The one completion marker of a stage whose outputs depend on all its inputs together (dedup, tokenize):
    ``_stats/<name>.json`` in ``out_dir`` with the inputs (paths, and identities: ``input_identity``), the values
    in ``wanted`` that decide the outputs (the settings), and what the stage adds when it ``write``s (its metrics,
    per-input counts). No timings: it sits in a DVC output whose bytes must not change between runs."""

    def __init__(self, name: str, out_dir: Path, files: list[Path], **wanted):
        self.name, self.out_dir, self.path = name, Path(out_dir), marker_path(out_dir, name)
        self.files, self.wanted = files, wanted
        self.inputs, self.identities = [str(f) for f in files], [input_identity(f) for f in files]

    def recorded(self, *outputs: Path) -> tuple[dict | None, list[bool]]:
        """The marker as written, when it and every one of ``outputs`` exist and its ``wanted`` values are as now
        (else None), and, per input, whether the marker records it as it is now; an input recorded with other
        bytes is said in one line."""
        done = finished_stats(self.path, *outputs)
        if done is None or any(done.get(k) != v for k, v in self.wanted.items()):
            return None, [False] * len(self.files)
        old = dict(zip(done.get("inputs", []), done.get("input_identities", []), strict=False))
        same = [old.get(i) == identity for i, identity in zip(self.inputs, self.identities, strict=True)]
        changed = [i for i, unchanged in zip(self.inputs, same, strict=True) if not unchanged and i in old]
        if changed:
            more = f" and {len(changed) - 1} more" if len(changed) > 1 else ""
            tqdm.write(f"{self.name}: {changed[0]}{more} changed since {self.out_dir} was made: doing it again")
        return done, same

    def write(self, **recorded) -> None:
        """The marker, written last (after every output), with ``recorded`` beside the inputs and settings."""
        mark_done(self.path, {"inputs": self.inputs, "input_identities": self.identities, **self.wanted, **recorded})


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
    """A stage of one task per input file, each writing ``out_dir/<output name>`` and its marker.

    A stage sets ``name`` and decides: ``task(path)`` (the picklable argument of its module-level ``task_fn``, which
    returns the file's stats), ``summarize`` (the stage metrics from every file's stats, finished earlier or now) and
    ``add_timings``; ``check`` may refuse the files to run. ``run`` does the rest: resume, the map, the metrics."""

    name = "stage"
    bar_for_one_file = True  # False: a progress bar only when two or more files run
    task_fn: Callable[[Any], dict]

    def __init__(self, files: list[Path], out_dir: Path, force: bool = False):
        self.files, self.out_dir, self.force = list(files), Path(out_dir), force

    # -- what a stage decides
    def output_name(self, path: Path) -> str:
        return output_name(path)

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

    # -- what the base does
    def marker(self, path: Path) -> Path:
        return marker_path(self.out_dir, self.output_name(path))

    def finished(self) -> dict[Path, dict]:
        """The stats of every input whose output and marker exist and whose marker records the input as it is now
        (none when ``force``); an input changed since says so in one line and is redone."""
        done = {}
        for path in self.files if not self.force else ():
            stats = finished_stats(self.marker(path), self.out_dir / self.output_name(path))
            if stats is None:
                continue
            recorded = stats.pop("input_identity", None)  # None: a marker written without it (mark_done's source)
            if recorded is not None and recorded != input_identity(path):
                tqdm.write(f"{self.name}: {path} is not the input {self.out_dir / self.output_name(path)} was made "
                           "from (it changed since): doing it again")
                continue
            done[path] = stats
        return done

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


def document_task(task: tuple[DocumentStage, Path]) -> dict:
    """One ``DocumentStage`` task: every document of one file through ``stage.decide``, kept or rejected with its
    reason; the file's stats, also written as its completion marker (with the input's identity)."""
    stage, path = task
    name, issues, drops = stage.output_name(path), InputIssues(), Counter()
    rejected = stage.rejected_dir / name if stage.rejected_dir is not None else None
    docs_in = 0
    with TaskWriter(text=True, kept=stage.out_dir / name, rejected=rejected) as out:
        for doc in read_documents(path, issues):
            docs_in += 1
            decision = stage.decide(doc)
            if isinstance(decision, str):
                drops[decision] += 1
                out.reject({**doc, "reason": decision})
            else:
                out.keep(decision)
    issues.warn(logging.getLogger(type(stage).__module__))
    stats = {"input": str(path), "docs_in": docs_in, "docs_out": out.counts["kept"],
             "drops": dict(sorted(drops.items())), **issues.stats(with_skipped=True)}
    return mark_done(stage.marker(path), stats, path)


class DocumentStage(FileStage):
    """A ``FileStage`` over documents files that decides one document at a time: a stage sets ``name`` and
    ``decide``; the base reads each file (bad lines skipped and counted), writes the kept documents to ``out_dir``
    and the dropped ones, with their ``reason``, to ``rejected_dir`` (when given), one file per input, and sums
    documents in and out and drops per reason into the metrics. The stage object travels to the workers with each
    task, so it must pickle (a module-level class whose fields are plain values)."""

    task_fn = document_task

    def __init__(self, files: list[Path], out_dir: Path, rejected_dir: Path | None = None, force: bool = False):
        super().__init__(files, out_dir, force)
        self.rejected_dir = Path(rejected_dir) if rejected_dir is not None else None

    def decide(self, doc: dict) -> dict | str:  # pragma: no cover - interface
        """The document to keep (``doc`` itself or a changed copy), or why it is dropped (a short reason)."""
        raise NotImplementedError

    def task(self, path: Path) -> tuple:
        return self, path

    def output_dirs(self) -> list[Path]:
        return [self.out_dir] + ([self.rejected_dir] if self.rejected_dir is not None else [])

    def summarize(self, per_file: list[dict]) -> dict:
        drops = sum_counts(per_file) + Counter(bad_json=sum(s.get("bad_json", 0) for s in per_file))
        return {"stage": self.name, "files": len(per_file), **sum_stats(per_file, ("docs_in", "docs_out")),
                "drops": dict(sorted(drops.items())), **merged_stats(per_file)}

    def add_timings(self, metrics: dict, fresh: list[dict], skipped: int, wall: float) -> None:
        metrics.update(seconds=round(wall, 3), files_skipped=skipped,
                       docs_per_s=round(sum(s["docs_in"] for s in fresh) / wall, 1) if fresh and wall > 0 else None)
