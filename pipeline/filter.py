"""``python -m pipeline filter``: documents → kept documents + rejected-with-reason, one file per input file.

The chain is a list of steps (pipeline/steps.py) in a fixed order, each switched on or off in ``params.yaml``:
``langid`` → ``gopher`` (quality rules) → ``gopher_rep`` (repetition rules) → ``c4`` (line filters) →
``quality`` / ``toxicity`` / ``nsfw`` (fastText classifiers) → ``pii`` (masking, last so that dropped documents
are never masked and classifiers see the original text). A step's setting is ``false`` (off), ``true`` (paper
defaults) or a mapping of constructor arguments.

Each input file is one task for the executor (pipeline/executor.py). A task reads its file (a malformed JSONL
line is counted as ``bad_json`` and named file:line in a warning, never fatal), runs the chain, writes the kept
documents to ``out_dir/<name>`` and the dropped ones, each with its ``reason``, to ``rejected_dir/<name>``, both
atomically, then writes ``out_dir/_stats/<name>.json`` last as its completion marker, so a rerun skips finished
files and a killed run never leaves half-written outputs. Stats carry no timings, so a rerun is byte-identical;
seconds and docs/s go to the stage metrics (``metrics/filter.json``).
"""

from __future__ import annotations

import gzip
import importlib
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.steps import Step, StepStats, run_steps
from workbench.files import read_json, write_json, write_jsonl

log = logging.getLogger(__name__)

# step name -> (module, class), in chain order
STEPS = {
    "langid": ("pipeline.langid", "LanguageFilter"),
    "gopher": ("pipeline.quality_rules", "GopherQualityFilter"),
    "gopher_rep": ("pipeline.quality_rules", "GopherRepetitionFilter"),
    "c4": ("pipeline.quality_rules", "C4LineFilter"),
    "quality": ("pipeline.classify", "ClassifierFilter"),
    "toxicity": ("pipeline.classify", "ClassifierFilter"),
    "nsfw": ("pipeline.classify", "ClassifierFilter"),
    "pii": ("pipeline.pii", "PIIMasker"),
}
CLASSIFIER_STEPS = ("quality", "toxicity", "nsfw")


@dataclass(frozen=True)
class FilterConfig:
    steps: dict = field(default_factory=lambda: {"langid": True, "gopher": True, "gopher_rep": True, "pii": True})
    workers: int = 1

    def __post_init__(self):
        if not isinstance(self.steps, dict):
            raise ValueError(f"filter.steps must be a mapping of step name -> true/false/settings, got {self.steps!r}")
        unknown = sorted(set(self.steps) - set(STEPS))
        if unknown:
            raise ValueError(f"filter.steps: unknown step(s) {unknown} (known: {list(STEPS)})")
        for name, setting in self.steps.items():
            if not isinstance(setting, (bool, dict)):
                raise ValueError(f"filter.steps.{name} must be true, false or a mapping, got {setting!r}")
        if self.workers < 1:
            raise ValueError(f"filter.workers must be >= 1, got {self.workers}")

    def enabled(self) -> list[tuple[str, dict]]:
        """(name, constructor kwargs) of every step switched on, in chain order."""
        out = []
        for name in STEPS:
            setting = self.steps.get(name, False)
            if setting is False:
                continue
            kwargs = {} if setting is True else dict(setting)
            if name in CLASSIFIER_STEPS:
                kwargs.setdefault("task", name)
            out.append((name, kwargs))
        return out


def build_steps(cfg: FilterConfig) -> list[Step]:
    steps = []
    for name, kwargs in cfg.enabled():
        module, cls = STEPS[name]
        try:
            steps.append(getattr(importlib.import_module(module), cls)(**kwargs))
        except TypeError as e:
            raise ValueError(f"filter.steps.{name}: {e}") from None
    return steps


def read_documents(path: Path, bad: list[str]) -> Iterator[dict]:
    """Documents of a gzip/plain JSONL file; a line that is not a JSON object with a string ``text`` is skipped
    and recorded in ``bad`` as ``file:line: problem``. An unreadable (e.g. truncated gzip) tail ends the file.
    Invalid UTF-8 bytes and lone surrogates (from ``\udcff`` escapes) become U+FFFD / "?" rather than errors."""
    opener = gzip.open if str(path).endswith(".gz") else open
    lineno = 0
    try:
        with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    doc = json.loads(line)
                except json.JSONDecodeError as e:
                    bad.append(f"{path}:{lineno}: invalid JSON ({e.msg})")
                    continue
                if not isinstance(doc, dict) or not isinstance(doc.get("text"), str):
                    bad.append(f"{path}:{lineno}: not a document (needs a string 'text')")
                    continue
                try:
                    doc["text"].encode("utf-8")
                except UnicodeEncodeError:
                    doc["text"] = doc["text"].encode("utf-8", "replace").decode("utf-8")
                yield doc
    except (OSError, EOFError, UnicodeError) as e:
        bad.append(f"{path}:{lineno + 1}: unreadable ({type(e).__name__}: {e})")


def stats_path(out_dir: Path, name: str) -> Path:
    return out_dir / "_stats" / f"{name}.json"


def output_name(path: Path) -> str:
    return path.name if path.name.endswith((".jsonl.gz", ".jsonl")) else f"{path.name}.jsonl.gz"


def filter_file(task: tuple[Path, Path, Path, FilterConfig]) -> dict:
    """One task: filter one documents file; returns its stats (also written as the completion marker)."""
    path, out_dir, rejected_dir, cfg = task
    name = output_name(path)
    steps, stats, rejected, bad = build_steps(cfg), {}, [], []
    t0 = time.perf_counter()
    counts = {"docs_in": 0, "chars_in": 0}

    def counted():
        for doc in read_documents(path, bad):
            counts["docs_in"] += 1
            counts["chars_in"] += len(doc["text"])
            yield doc

    kept_chars = 0

    def kept():
        nonlocal kept_chars
        for doc in run_steps(counted(), steps, stats, rejected):
            kept_chars += len(doc["text"])
            yield doc

    docs_out = write_jsonl(out_dir / name, kept())
    write_jsonl(rejected_dir / name, rejected)
    for line in bad[:5]:
        log.warning("skipped %s", line)
    if len(bad) > 5:
        log.warning("skipped %d more bad lines in %s", len(bad) - 5, path)
    result = {"input": str(path), "docs_in": counts["docs_in"], "docs_out": docs_out, "bad_json": len(bad),
              "chars_in": counts["chars_in"], "chars_out": kept_chars,
              "steps": {k: {**v.to_dict(), "seconds": 0.0} for k, v in stats.items()}}
    write_json(stats_path(out_dir, name), result)  # written last: marks the file as done; no timings in it
    result["seconds"] = time.perf_counter() - t0
    result["step_seconds"] = {k: v.seconds for k, v in stats.items()}
    return result


def input_files(inputs: list[Path]) -> list[Path]:
    files = []
    for p in inputs:
        p = Path(p)
        if p.is_dir():
            files += sorted(p.glob("*.jsonl.gz")) + sorted(p.glob("*.jsonl"))
        elif p.is_file():
            files.append(p)
        else:
            raise FileNotFoundError(f"input not found: {p}")
    if not files:
        raise FileNotFoundError(f"no .jsonl/.jsonl.gz documents in {', '.join(map(str, inputs))}")
    names = [output_name(f) for f in files]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"two inputs would write the same output name {dupes[0]!r}")
    return files


def run_filter(inputs: list[Path], out_dir: Path, rejected_dir: Path, metrics_path: Path, cfg: FilterConfig,
               executor=None, force: bool = False) -> dict:
    """Filter every input file (skipping finished ones unless ``force``); write and return the stage metrics."""
    from tqdm import tqdm

    from pipeline.executor import LocalExecutor

    files, out_dir, rejected_dir = input_files(inputs), Path(out_dir), Path(rejected_dir)
    build_steps(cfg)  # fail fast on bad settings or missing models, before any task starts
    done = {f: read_json(stats_path(out_dir, output_name(f))) for f in files
            if not force and stats_path(out_dir, output_name(f)).exists() and (out_dir / output_name(f)).exists()}
    todo = [f for f in files if f not in done]
    executor = executor or LocalExecutor(cfg.workers)
    start = time.perf_counter()
    fresh = list(tqdm(executor.map(filter_file, [(f, out_dir, rejected_dir, cfg) for f in todo]), total=len(todo),
                      desc="filter", unit="file", dynamic_ncols=True, disable=len(todo) < 2))
    metrics = summarize(list(done.values()) + fresh, [n for n, _ in cfg.enabled()])
    wall = time.perf_counter() - start
    fresh_docs = sum(r["docs_in"] for r in fresh)
    metrics.update(seconds=round(wall, 3), files_skipped=len(done),
                   docs_per_s=round(fresh_docs / wall, 1) if fresh and wall > 0 else None)
    for name, step in metrics["steps"].items():
        step["seconds"] = round(sum(r["step_seconds"].get(name, 0.0) for r in fresh), 3)
        step["docs_per_s"] = round(step["docs_in"] / step["seconds"], 1) if fresh and step["seconds"] > 0 else None
    write_json(metrics_path, metrics)
    return metrics


def summarize(per_file: list[dict], order: list[str]) -> dict:
    """Stage metrics: documents and characters in/out, per-step in/out/drops, drops per reason."""
    steps = {name: StepStats() for name in order}
    for r in per_file:
        for name, s in r["steps"].items():
            steps.setdefault(name, StepStats()).merge(StepStats.from_dict(s))
    drops = {}
    for s in steps.values():
        drops.update(s.drops)
    bad = sum(r.get("bad_json", 0) for r in per_file)
    if bad:
        drops["bad_json"] = bad
    return {"stage": "filter", "files": len(per_file), "docs_in": sum(r["docs_in"] for r in per_file),
            "docs_out": sum(r["docs_out"] for r in per_file), "chars_in": sum(r["chars_in"] for r in per_file),
            "chars_out": sum(r["chars_out"] for r in per_file), "drops": dict(sorted(drops.items())),
            "step_order": list(steps), "steps": {k: v.to_dict() for k, v in steps.items()}}
