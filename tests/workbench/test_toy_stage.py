"""A new data stage is one small class on the base (pipeline/runtime/document_stage.py ``DocumentStage``): this toy
stage upper-cases every document and drops empty ones, and gets resume, markers, metrics, the rejected file, a
changed input redone alone, a SIGKILL survived, and Ray and Dask, without a line of its own for any of them."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
from pathlib import Path

import pytest

from pipeline.runtime.document_stage import DocumentStage
from workbench.executor import LocalExecutor, make_executor
from workbench.files import read_json
from workbench.ledger import record_path


class Upper(DocumentStage):
    """The whole toy stage."""

    name = "upper"

    def reject(self, doc: dict) -> str | None:
        if not doc["text"].strip():
            return "empty"
        doc["text"] = doc["text"].upper()
        return None


class KilledUpper(Upper):
    """The toy stage, killed by SIGKILL (no cleanup of any kind runs) in the middle of its ``victim`` document."""

    def __init__(self, *args, victim: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.victim = victim

    def reject(self, doc: dict) -> str | None:
        if doc["text"] == self.victim:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().reject(doc)


TEXTS = {
    "a.jsonl": ["one two", "", "three"],
    "b.jsonl": ["alpha", "beta gamma", "  ", "delta"],
    "c.jsonl": ["x", "y z"],
}


def _inputs(folder: Path, texts: dict[str, list[str]] = TEXTS) -> list[Path]:
    folder.mkdir(exist_ok=True)
    for name, lines in texts.items():
        (folder / name).write_text("".join(json.dumps({"id": f"{name}:{i}", "text": t}) + "\n"
                                           for i, t in enumerate(lines)) + "not json\n")
    return sorted(folder.iterdir())


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _run(files, root: Path, executor=None, cls=Upper, **kwargs) -> dict:
    stage = cls(files, root / "out", root / "rejected", **kwargs)
    return stage.run(executor or LocalExecutor(1), root / "metrics" / "upper.json")


def _reference(files: list[Path], tmp_path: Path) -> Path:
    """An uninterrupted run from scratch of the same files: what every other run must equal, byte for byte."""
    root = tmp_path / "reference"
    _run(files, root)
    return root


def test_the_toy_stage_writes_kept_rejected_markers_and_metrics(tmp_path):
    files = _inputs(tmp_path / "in")
    metrics = _run(files, tmp_path)
    kept = [json.loads(line)["text"] for line in (tmp_path / "out" / "b.jsonl").read_text().splitlines()]
    assert kept == ["ALPHA", "BETA GAMMA", "DELTA"]  # written by a naive reading of the input: upper, not blank
    rejected = [json.loads(line) for line in (tmp_path / "rejected" / "a.jsonl").read_text().splitlines()]
    assert rejected == [{"id": "a.jsonl:1", "text": "", "reason": "empty"}]
    everything = [t for ts in TEXTS.values() for t in ts]
    assert metrics["docs_in"] == len(everything) == 9 and metrics["files"] == 3
    assert metrics["docs_out"] == sum(1 for t in everything if t.strip()) == 7
    assert metrics["drops"] == {"bad_json": 3, "empty": 2}  # bad_json: the "not json" line of each file
    assert "bad_files" not in metrics
    assert read_json(tmp_path / "metrics" / "upper.json")["docs_out"] == 7
    marker = read_json(record_path(tmp_path / "out", "c.jsonl"))
    assert marker["docs_in"] == 2 and marker["inputs"][0]["size"] == files[2].stat().st_size


def test_a_rerun_skips_everything_and_a_changed_input_alone_is_redone(tmp_path, capsys):
    files = _inputs(tmp_path / "in")
    _run(files, tmp_path)
    markers = {p.name: record_path(tmp_path / "out", p.name).stat().st_mtime_ns for p in files}
    assert _run(files, tmp_path)["files_skipped"] == 3
    _inputs(tmp_path / "in", {"b.jsonl": ["a new b"]})
    again = _run(files, tmp_path)
    assert again["files_skipped"] == 2
    assert "upper: " in capsys.readouterr().err  # the one line naming the changed input
    after = {p.name: record_path(tmp_path / "out", p.name).stat().st_mtime_ns for p in files}
    assert after["a.jsonl"] == markers["a.jsonl"] and after["c.jsonl"] == markers["c.jsonl"]
    assert after["b.jsonl"] != markers["b.jsonl"]
    clean = tmp_path / "clean"
    _run(files, clean)
    assert _tree(tmp_path / "out") == _tree(clean / "out") and _tree(tmp_path / "rejected") == _tree(clean / "rejected")


def test_sigkill_mid_task_then_a_rerun_equals_an_uninterrupted_run_with_no_temporary_file_left(tmp_path):
    files = _inputs(tmp_path / "in")
    reference = _reference(files, tmp_path)
    killed = mp.get_context("fork").Process(target=_run, args=(files, tmp_path),
                                            kwargs={"cls": KilledUpper, "victim": "delta"})
    killed.start()
    killed.join(60)
    assert killed.exitcode == -signal.SIGKILL
    left = [p.name for p in (tmp_path / "out").iterdir()] + [p.name for p in (tmp_path / "rejected").iterdir()]
    assert any(name.endswith(".tmp") for name in left)  # what a killed writer leaves, and what must not stay
    assert "b.jsonl" not in left  # no half-written file under a final name
    _run(files, tmp_path)
    assert _tree(tmp_path / "out") == _tree(reference / "out")
    assert _tree(tmp_path / "rejected") == _tree(reference / "rejected")


@pytest.mark.slow
@pytest.mark.parametrize("kind,module", [("dask", "dask.distributed"), ("ray", "ray")])
def test_the_toy_stage_on_a_cluster_is_byte_identical_to_local(tmp_path, kind, module):
    pytest.importorskip(module)
    files = _inputs(tmp_path / "in")
    reference = _reference(files, tmp_path)
    with make_executor(kind, workers=2) as executor:
        metrics = _run(files, tmp_path, executor)
    assert metrics["docs_out"] == 7
    assert _tree(tmp_path / "out") == _tree(reference / "out")
    assert _tree(tmp_path / "rejected") == _tree(reference / "rejected")
