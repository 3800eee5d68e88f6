"""The dedup stage as sharded tasks over intermediate files (``dedup.engine: sharded``): the same decisions as the
single-process stage (``pipeline/dedup/stage.py``, the reference), byte for byte, on the local pool, Ray or Dask.

``run_sharded`` runs the stages of ``pipeline/dedup/tasks.py`` in order, each a map over its tasks on the
executor: signatures (per input file) -> exact (per fingerprint shard) -> buckets (per band x key shard) ->
shingles (per input file) -> pairs (per band x key shard) -> clusters (one) -> lines (per line-key shard, only for
``line_dedup: first``) -> filter (per input file). Only small things travel (paths, settings, counts); the data
moves through files in the stage's work folder (``out_dir/_work/<key>``, workbench/ledger.py: the key hashes the
inputs' identities, size and SHA-256, the settings, the output names and the shard count, so another run's tasks
are never mixed in). A killed run resumes per task: the next run skips every task with a ``done.json``. The stage
(pipeline/dedup/stage.py) removes the work folder once its record is written.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path

from pipeline.dedup import tasks
from pipeline.dedup.records import DedupConfig, stage_metrics
from workbench.bad_input import InputIssues
from workbench.executor import LocalExecutor
from workbench.files import read_json
from workbench.stage import map_tasks, sum_stats

log = logging.getLogger(__name__)


SHARD_DOCS = 4096  # documents per hash-range shard, at most (about): more documents, more shards


def _stage(executor, name: str, fn: Callable, layout: tasks.Layout, parts: list, counts: Counter) -> list[dict]:
    """Run the unfinished tasks of one stage; return every task's result, in ``parts`` order."""
    done = [layout.folder(name, p) / "done.json" for p in parts]  # each task's result, written last
    todo = [p for p, d in zip(parts, done, strict=True) if not d.exists()]
    counts["run"] += len(todo)
    counts["skipped"] += len(parts) - len(todo)
    map_tasks(executor, fn, [(f"dedup {name} {p}", layout, p) for p in todo], desc=f"dedup {name}", unit="task",
              mininterval=2.0, disable=len(todo) < 2 or None)
    return [read_json(d) for d in done]


def run_sharded(files: list[Path], out_dir: Path, rejected_dir: Path | None, names: list[str], cfg: DedupConfig,
                work: Path, executor=None) -> dict:
    """Dedup ``files`` into ``out_dir/<name>`` (and ``rejected_dir/<name>``) with the sharded tasks, their files in
    ``work`` (the stage ledger's work folder for these inputs and settings: a task finished there is not run
    again); return the stage metrics (the single stage's, plus ``engine``, ``shards`` and ``tasks``). ``executor``:
    a ``LocalExecutor``, ``RayExecutor`` or ``DaskExecutor`` (default: a local pool of ``cfg.workers`` processes)."""
    start = time.perf_counter()
    out_files = [Path(out_dir) / n for n in names]
    rejected_files = [Path(rejected_dir) / n for n in names] if rejected_dir is not None else None
    executor = executor or LocalExecutor(cfg.workers)
    layout = tasks.Layout(work, tuple(files), tuple(out_files), tuple(rejected_files) if rejected_files else None, cfg)
    counts: Counter = Counter()
    n_files = range(len(files))
    stages: dict[str, list[dict]] = {}
    sig = stages["sig"] = _stage(executor, "sig", tasks.signatures, layout, list(n_files), counts)
    offsets = list(itertools.accumulate((r["docs"] for r in sig), initial=0))
    # a shard holds at most about SHARD_DOCS documents, so a bucket or pairs task's memory does not grow with the
    # corpus (the count follows from the inputs alone: a resumed run gets the same shards)
    cfg = replace(cfg, shards=max(cfg.shards, -(-offsets[-1] // SHARD_DOCS)))
    shards = list(range(cfg.shards))
    layout = replace(layout, offsets=tuple(offsets), cfg=cfg)
    if cfg.exact:
        stages["exact"] = _stage(executor, "exact", tasks.exact, layout, shards, counts)
    stages["buckets"] = _stage(executor, "buckets", tasks.buckets, layout, layout.bucket_parts(), counts)
    cand = stages["shingles"] = _stage(executor, "shingles", tasks.shingles, layout, list(n_files), counts)
    pairs = stages["pairs"] = _stage(executor, "pairs", tasks.pairs, layout, layout.bucket_parts(), counts)
    clusters = stages["clusters"] = _stage(executor, "clusters", tasks.clusters, layout, [0], counts)
    if cfg.line_dedup == "first":
        stages["lines"] = _stage(executor, "lines", tasks.lines, layout, shards, counts)
    written = stages["filter"] = _stage(executor, "filter", tasks.filter_file, layout, list(n_files), counts)
    wall = time.perf_counter() - start
    issues = InputIssues(**{f.name: [x for r in sig for x in r[f.name]] for f in fields(InputIssues)})
    issues.warn(log)
    read = sum_stats(sig, ("docs", "chars_in"))
    metrics = stage_metrics(cfg, len(files), {"docs_in": read["docs"], "chars_in": read["chars_in"]}, written, issues,
                            wall, clusters=clusters[0]["clusters"], clustered_docs=clusters[0]["clustered_docs"],
                            candidate_docs=sum(r["candidates"] for r in cand),
                            comparisons=sum(r["comparisons"] for r in pairs),
                            verified_pairs=sum(r["joins"] for r in pairs), engine="sharded", shards=cfg.shards,
                            tasks=dict(sorted(counts.items())))
    metrics["task_peak_rss_mb"] = task_peak_rss(stages)
    return metrics  # the work folder goes after the stage's record is written (CorpusStage.run): a kill in between
    # keeps both the finished tasks and, once the record is there, the finished stage


def task_peak_rss(stages: dict[str, list[dict]]) -> dict[str, float]:
    """Per stage, the largest peak RSS of one of its tasks (MB; a task resumed from an earlier run reports that
    run's). The clusters task's memory grows with the verified pairs it joins, every other with a shard or a file."""
    peaks = {name: [r["peak_rss_mb"] for r in results if r.get("peak_rss_mb") is not None]
             for name, results in stages.items()}
    return {name: round(max(values), 1) for name, values in peaks.items() if values}
