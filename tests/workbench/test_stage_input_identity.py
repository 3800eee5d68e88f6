"""A stage's completion is keyed on its input's identity (size and SHA-256), not on whether its output exists: an
input changed since is redone and said so in one line, the others are not touched, and the outputs equal a clean
run's (issue 46: a truncated WARC replaced by the full one kept the truncated output)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.__main__ import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def crawls(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("crawls")
    for name, pages, seed in (("a", 30, 0), ("b", 20, 1)):
        subprocess.run([sys.executable, "-m", "pipeline.sample", "--pages", str(pages), "--seed", str(seed), "--out",
                        str(folder / f"{name}.warc.gz"), "--manifest", str(folder / f"{name}.jsonl")],
                       cwd=ROOT, check=True, capture_output=True)
    data = (folder / "a.warc.gz").read_bytes()
    (folder / "a_cut.warc.gz").write_bytes(data[: len(data) // 3])  # a download cut short
    return {"a": folder / "a.warc.gz", "a_cut": folder / "a_cut.warc.gz", "b": folder / "b.warc.gz"}


def _extract(inputs: Path, out: Path) -> int:
    return main(["--params", "none", "extract", str(inputs), "--out-dir", str(out), "--workers", "1"])


def _outputs(out: Path) -> dict:
    """Every output file's bytes; a record's JSON less the paths in it (the clean run has other folders)."""
    files = {}
    for p in sorted(out.rglob("*")):
        if p.is_file():
            files[str(p.relative_to(out))] = p.read_bytes() if p.parent.name != "_done" else _without_paths(p)
    return files


def _without_paths(record: Path) -> dict:
    found = json.loads(record.read_text())
    found["inputs"] = [{k: v for k, v in i.items() if k != "path"} for i in found["inputs"]]
    found["settings"].pop("rejected_dir", None)
    return {k: v for k, v in found.items() if k != "input"}


def test_a_replaced_input_is_redone_and_said_so(crawls, tmp_path, capsys):
    inputs = tmp_path / "in"
    inputs.mkdir()
    shutil.copy(crawls["a_cut"], inputs / "a.warc.gz")
    shutil.copy(crawls["b"], inputs / "b.warc.gz")
    assert _extract(inputs, tmp_path / "out") == 0
    b_marker = tmp_path / "out" / "_done" / "b.jsonl.gz.json"
    b_written = b_marker.stat().st_mtime_ns
    capsys.readouterr()

    shutil.copy(crawls["a"], inputs / "a.warc.gz")  # the full file arrives
    assert _extract(inputs, tmp_path / "out") == 0
    said = [line for line in capsys.readouterr().out.splitlines() if "changed since" in line]
    assert len(said) == 1 and "a.warc.gz" in said[0]
    assert b_marker.stat().st_mtime_ns == b_written  # the unchanged input was not run again

    clean = tmp_path / "in_clean"
    clean.mkdir()
    shutil.copy(crawls["a"], clean / "a.warc.gz")
    shutil.copy(crawls["b"], clean / "b.warc.gz")
    assert _extract(clean, tmp_path / "clean") == 0
    assert _outputs(tmp_path / "out") == _outputs(tmp_path / "clean")


def test_an_unchanged_input_is_not_redone(crawls, tmp_path, capsys):
    assert _extract(crawls["b"], tmp_path / "out") == 0
    marker = tmp_path / "out" / "_done" / "b.jsonl.gz.json"
    written = marker.stat().st_mtime_ns
    capsys.readouterr()
    assert _extract(crawls["b"], tmp_path / "out") == 0
    assert marker.stat().st_mtime_ns == written
    assert "changed since" not in capsys.readouterr().out


def _docs(path: Path, texts: list[str]) -> None:
    path.write_text("".join(json.dumps({"id": f"{path.stem}:{i}", "text": t}) + "\n" for i, t in enumerate(texts)))


def _dedup(inputs: Path, out: Path) -> int:
    return main(["--params", "none", "dedup", str(inputs), "--out-dir", str(out / "kept"), "--rejected-dir",
                 str(out / "rejected")])


def test_dedup_is_done_again_when_an_input_changed(tmp_path, capsys):
    words = "the council met on monday to vote on a budget for parks schools roads and the new library".split()
    texts = [" ".join(words[i:] + words[:i]) for i in range(6)]
    inputs = tmp_path / "in"
    inputs.mkdir()
    _docs(inputs / "a.jsonl", texts[:3])
    _docs(inputs / "b.jsonl", texts[3:])
    assert _dedup(inputs, tmp_path / "out") == 0
    capsys.readouterr()
    assert _dedup(inputs, tmp_path / "out") == 0
    assert "changed since" not in capsys.readouterr().out  # unchanged: the marker stands

    _docs(inputs / "b.jsonl", texts[3:] + texts[:1])  # b now repeats a's first document
    assert _dedup(inputs, tmp_path / "out") == 0
    said = [line for line in capsys.readouterr().out.splitlines() if "changed since" in line]
    assert len(said) == 1 and "b.jsonl" in said[0]
    assert _dedup(inputs, tmp_path / "clean") == 0
    assert _outputs(tmp_path / "out" / "kept") == _outputs(tmp_path / "clean" / "kept")
    assert _outputs(tmp_path / "out" / "rejected") == _outputs(tmp_path / "clean" / "rejected")
    assert (tmp_path / "out" / "rejected" / "b.jsonl").read_text().count("exact_duplicate") == 1


def test_filter_redoes_only_the_changed_input(tmp_path, capsys):
    words = "the council met on monday to vote on a budget for parks schools roads and the new library".split()
    texts = [" ".join(words[i:] + words[:i]) + " and it was a long meeting that went on well into the evening"
             for i in range(6)]
    inputs = tmp_path / "in"
    inputs.mkdir()
    _docs(inputs / "a.jsonl", texts[:3])
    _docs(inputs / "b.jsonl", texts[3:])

    def run(out: Path) -> int:
        return main(["--params", "none", "filter", str(inputs), "--out-dir", str(out / "kept"), "--rejected-dir",
                     str(out / "rejected"), "--workers", "1"])

    assert run(tmp_path / "out") == 0
    a_marker = tmp_path / "out" / "kept" / "_done" / "a.jsonl.json"
    a_written = a_marker.stat().st_mtime_ns
    capsys.readouterr()
    _docs(inputs / "b.jsonl", texts[3:5])  # b loses a document
    assert run(tmp_path / "out") == 0
    said = [line for line in capsys.readouterr().out.splitlines() if "changed since" in line]
    assert len(said) == 1 and "b.jsonl" in said[0]
    assert a_marker.stat().st_mtime_ns == a_written  # a was not filtered again
    assert run(tmp_path / "clean") == 0
    assert _outputs(tmp_path / "out" / "kept") == _outputs(tmp_path / "clean" / "kept")
    assert _outputs(tmp_path / "out" / "rejected") == _outputs(tmp_path / "clean" / "rejected")
