"""A data stage that keeps, changes or drops documents: a chain of document steps (``pipeline.runtime.steps``, the
one interface: ``Step.reject(doc)`` returns a reason to drop the document or None to keep it, changed in place or
not) over each input file, on the data-stage base (``workbench.stage.FileStage``: resume, records, metrics).

The base reads each file (a bad line is skipped and counted as ``bad_json``), runs the chain (``run_steps``), writes
the kept documents to ``out_dir`` and the dropped ones, each with its ``reason``, to ``rejected_dir`` (when given),
one file per input, then the file's record; the metrics sum documents and characters in and out, each step's
counts, and the drops per reason. A stage of one step is its own step: it implements ``reject``; a stage of a chain
returns it from ``steps``. The stage object travels to the workers with each task, so it must pickle (a
module-level class whose fields are plain values; ``steps`` builds the chain in the worker).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from pipeline.runtime.steps import Step, StepStats, run_steps
from workbench.bad_input import InputIssues, merged_stats
from workbench.documents import read_documents
from workbench.stage import FileStage, TaskWriter, sum_stats


def document_task(task: tuple[DocumentStage, Path]) -> dict:
    """One task: every document of one file through the stage's steps, kept or rejected with its reason; the file's
    stats, written as its record without timings (a rerun is byte-identical), returned with them."""
    stage, path = task
    name, issues, stats = stage.output_name(path), InputIssues(), {}
    rejected = stage.rejected_dir / name if stage.rejected_dir is not None else None
    counts = {"docs_in": 0, "chars_in": 0, "chars_out": 0}
    start = time.perf_counter()

    def counted():
        for doc in read_documents(path, issues):
            counts["docs_in"] += 1
            counts["chars_in"] += len(doc["text"])
            yield doc

    with TaskWriter(text=True, kept=stage.out_dir / name, rejected=rejected) as out:
        for doc in run_steps(counted(), stage.steps(), stats, out.reject):
            counts["chars_out"] += len(doc["text"])
            out.keep(doc)
    issues.warn(logging.getLogger(type(stage).__module__))
    result = {"input": str(path), "docs_in": counts["docs_in"], "docs_out": out.counts["kept"],
              "bad_json": len(issues.skipped), "chars_in": counts["chars_in"], "chars_out": counts["chars_out"],
              "steps": {k: {**v.to_dict(), "seconds": 0.0} for k, v in stats.items()}, **issues.stats()}
    stage.record(path).write(**result)  # written last: marks the file as done
    return {**result, "seconds": time.perf_counter() - start,
            "step_seconds": {k: v.seconds for k, v in stats.items()}}


class DocumentStage(FileStage, Step):
    """A ``FileStage`` whose task runs ``steps()`` over every document of a file (the module docstring)."""

    task_fn = document_task

    def __init__(self, files: list[Path], out_dir: Path, rejected_dir: Path | None = None, force: bool = False):
        super().__init__(files, out_dir, force)
        self.rejected_dir = Path(rejected_dir) if rejected_dir is not None else None

    def steps(self) -> list[Step]:
        """The chain, built where the task runs; by default the stage itself, one step."""
        return [self]

    def step_names(self) -> list[str]:
        """The steps the metrics list, in order, also those no file reached."""
        return [self.name]

    def task(self, path: Path) -> tuple:
        return self, path

    def output_dirs(self) -> list[Path]:
        return [self.out_dir] + ([self.rejected_dir] if self.rejected_dir is not None else [])

    def outputs(self, path: Path) -> list[Path]:
        return [folder / self.output_name(path) for folder in self.output_dirs()]

    def summarize(self, per_file: list[dict]) -> dict:
        """Stage metrics: documents and characters in/out, per-step in/out/drops, drops per reason."""
        steps = {name: StepStats() for name in self.step_names()}
        for r in per_file:
            for name, s in r["steps"].items():
                steps.setdefault(name, StepStats()).merge(StepStats.from_dict(s))
        drops = {reason: n for s in steps.values() for reason, n in s.drops.items()}
        bad = sum(r.get("bad_json", 0) for r in per_file)
        if bad:
            drops["bad_json"] = bad
        return {"stage": self.name, "files": len(per_file),
                **sum_stats(per_file, ("docs_in", "docs_out", "chars_in", "chars_out")),
                "drops": dict(sorted(drops.items())),
                "step_order": list(steps), "steps": {k: v.to_dict() for k, v in steps.items()},
                **merged_stats(per_file)}

    def add_timings(self, metrics: dict, fresh: list[dict], skipped: int, wall: float) -> None:
        metrics.update(seconds=round(wall, 3), files_skipped=skipped,
                       docs_per_s=round(sum(s["docs_in"] for s in fresh) / wall, 1) if fresh and wall > 0 else None)
        for name, step in metrics["steps"].items():
            step["seconds"] = round(sum(r["step_seconds"].get(name, 0.0) for r in fresh), 3)
            step["docs_per_s"] = round(step["docs_in"] / step["seconds"], 1) if fresh and step["seconds"] > 0 else None
