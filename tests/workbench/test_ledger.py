"""workbench.ledger: one notion of the same input (its bytes, not its path or mtime) and of finished work (a record
with the inputs and the settings) for every data stage: a per-file stage, a global stage and a work folder."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from pipeline.dedup import sharded
from pipeline.dedup.stage import DedupConfig, run_dedup
from pipeline.runtime.document_stage import DocumentStage
from tests.pipeline.test_dedup import edit, prose
from workbench.executor import LocalExecutor
from workbench.files import read_json, write_jsonl
from workbench.ledger import WORK_FOLDER, Ledger, finished_task, identity, mark_task_done, record_path


def _later(path: Path) -> None:
    """``touch``: the same bytes, a later mtime."""
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))


def _flip_last_byte(path: Path) -> None:
    """Another byte at the same size (and the mtime put back: only the content tells it)."""
    stat, data = path.stat(), bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_an_input_is_its_bytes_not_its_mtime_or_place(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"text": "one"}\n')
    first = identity(path)
    assert first == {"size": 16, "sha256": hashlib.sha256(b'{"text": "one"}\n').hexdigest()}
    _later(path)
    assert identity(path) == first
    shutil.copy(path, tmp_path / "copy.jsonl")
    assert identity(tmp_path / "copy.jsonl") == first
    _flip_last_byte(path)
    assert identity(path)["size"] == 16 and identity(path) != first


def _done_once(tmp_path: Path, settings: dict | None = None):
    """A record of work ``out.txt`` made from one input, and that input."""
    source, out = tmp_path / "in.txt", tmp_path / "out" / "out.txt"
    source.write_text("the input\n")
    out.parent.mkdir()
    out.write_text("the output\n")
    Ledger("toy", out.parent, settings or {"k": 1}).record("out.txt", [source]).write(lines=1)
    return source, out


def test_a_record_counts_for_the_same_bytes_and_settings_only(tmp_path, capsys):
    source, out = _done_once(tmp_path)
    ledger = Ledger("toy", out.parent, {"k": 1})
    assert ledger.record("out.txt", [source]).done(out) == {"lines": 1}
    _later(source)
    assert ledger.record("out.txt", [source]).done(out) == {"lines": 1}  # touched: still done
    assert "changed since" not in capsys.readouterr().out
    assert Ledger("toy", out.parent, {"k": 2}).record("out.txt", [source]).done(out) is None  # other settings
    assert ledger.record("out.txt", [source]).done(out, tmp_path / "missing") is None  # an output is missing
    _flip_last_byte(source)
    assert ledger.record("out.txt", [source]).done(out) is None
    said = [line for line in capsys.readouterr().out.splitlines() if "changed since" in line]
    assert said == [f"toy: {source} changed since {out.parent} was made: doing it again"]


def test_a_record_holds_the_inputs_settings_and_fields_and_no_more(tmp_path):
    source, out = _done_once(tmp_path, {"extractor": "x", "languages": ("en",)})
    written = read_json(record_path(out.parent, "out.txt"))
    assert written == {"inputs": [{"path": str(source), **identity(source)}], "lines": 1,
                       "settings": {"extractor": "x", "languages": ["en"]}}
    before = record_path(out.parent, "out.txt").read_bytes()
    Ledger("toy", out.parent, {"extractor": "x", "languages": ("en",)}).record("out.txt", [source]).write(lines=1)
    assert record_path(out.parent, "out.txt").read_bytes() == before  # the same bytes on every rerun
    with pytest.raises(ValueError, match="settings"):
        Ledger("toy", out.parent).record("out.txt", [source]).write(settings={})


def test_a_task_record_needs_its_outputs(tmp_path):
    record, output = tmp_path / "done.json", tmp_path / "part.bin"
    assert finished_task(record, output) is None
    mark_task_done(record, {"docs": 3})
    assert finished_task(record, output) is None
    output.write_bytes(b"")
    assert finished_task(record, output) == {"docs": 3} == finished_task(record)


def test_a_work_folder_is_keyed_on_the_inputs_bytes_and_the_settings(tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("the input\n")
    ledger = Ledger("toy", tmp_path / "out", {"k": 1})
    work = ledger.work(inputs=[identity(source)])
    (work / "done.json").write_text("{}")
    _later(source)
    assert ledger.work(inputs=[identity(source)]) == work and (work / "done.json").exists()  # kept: resumed
    assert ledger.work(fresh=True, inputs=[identity(source)]) == work and not (work / "done.json").exists()
    other = Ledger("toy", tmp_path / "out", {"k": 2}).work(inputs=[identity(source)])
    assert other != work and not work.exists()  # another run's folder is stale: removed
    _flip_last_byte(source)
    assert ledger.work(inputs=[identity(source)]) not in (work, other)
    assert [p.name for p in (tmp_path / "out" / WORK_FOLDER).iterdir()] == [ledger.work(inputs=[identity(source)]).name]
    ledger.remove_work()
    assert not (tmp_path / "out" / WORK_FOLDER).exists()


# -- a per-file stage ---------------------------------------------------------------------------------------
class Shorter(DocumentStage):
    """A toy per-file stage with a setting: drop documents of fewer than ``min_words`` words."""

    name = "shorter"

    def __init__(self, *args, min_words: int = 2, **kwargs):
        super().__init__(*args, **kwargs)
        self.min_words = min_words

    def settings(self) -> dict:
        return {"min_words": self.min_words}

    def reject(self, doc: dict) -> str | None:
        return None if len(doc["text"].split()) >= self.min_words else "short"


def _docs(folder: Path) -> list[Path]:
    folder.mkdir()
    for name, texts in {"a.jsonl": ["one two", "one two three"], "b.jsonl": ["x", "x y z w"]}.items():
        (folder / name).write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    return sorted(folder.iterdir())


def _shorter(files: list[Path], out: Path, min_words: int) -> dict:
    return Shorter(files, out / "kept", out / "rejected", min_words=min_words).run(LocalExecutor(1), None)


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.jsonl"))}


def test_a_per_file_stage_redoes_its_files_when_a_setting_changes_and_not_when_touched(tmp_path):
    files = _docs(tmp_path / "in")
    assert _shorter(files, tmp_path / "out", 2)["docs_out"] == 3
    for path in files:
        _later(path)
    assert _shorter(files, tmp_path / "out", 2)["files_skipped"] == 2
    again = _shorter(files, tmp_path / "out", 3)
    assert again["files_skipped"] == 0 and again["docs_out"] == 2
    _shorter(files, tmp_path / "clean", 3)
    assert _tree(tmp_path / "out" / "kept") == _tree(tmp_path / "clean" / "kept")
    assert _tree(tmp_path / "out" / "rejected") == _tree(tmp_path / "clean" / "rejected")


# -- a global stage and its work folder ---------------------------------------------------------------------
def _corpus(folder: Path) -> Path:
    """Two files with one near copy across them: the dedup threshold decides whether it goes."""
    base = [prose(200 + k) for k in range(6)]
    near = edit(base[0], 1, 0)
    write_jsonl(folder / "a.jsonl", [{"id": f"a{i}", "text": t} for i, t in enumerate(base[:3])])
    write_jsonl(folder / "b.jsonl", [{"id": f"b{i}", "text": t} for i, t in enumerate(base[3:] + [near])])
    return folder


def test_a_global_stage_redoes_its_work_when_a_setting_changes_and_not_when_touched(tmp_path):
    inputs = _corpus(tmp_path / "in")
    loose, strict = DedupConfig(jaccard_threshold=0.5), DedupConfig(jaccard_threshold=1.0)
    first = run_dedup(inputs, tmp_path / "out", None, loose, rejected_dir=tmp_path / "rej")
    assert first["drops"] == {"minhash_duplicate": 1}
    for path in inputs.iterdir():
        _later(path)
    assert run_dedup(inputs, tmp_path / "out", None, loose, rejected_dir=tmp_path / "rej")["seconds"] == 0.0
    again = run_dedup(inputs, tmp_path / "out", None, strict, rejected_dir=tmp_path / "rej")
    assert again["seconds"] > 0 and again["drops"] == {}
    run_dedup(inputs, tmp_path / "clean", None, strict, rejected_dir=tmp_path / "clean-rej")
    assert _tree(tmp_path / "out") == _tree(tmp_path / "clean")


def _interrupted(inputs: Path, out: Path, cfg: DedupConfig, monkeypatch) -> None:
    """A sharded run stopped at its last task stage (every earlier task's done.json in the work folder)."""
    def stop(task):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(sharded.tasks, "filter_file", stop)
        with pytest.raises(KeyboardInterrupt):
            run_dedup(inputs, out, None, cfg, rejected_dir=out.parent / "rej")


def test_the_sharded_work_folder_resumes_touched_inputs_and_restarts_on_changed_settings(tmp_path, monkeypatch):
    inputs, out = _corpus(tmp_path / "in"), tmp_path / "o" / "out"
    cfg = DedupConfig(engine="sharded", workers=1, shards=1)
    _interrupted(inputs, out, cfg, monkeypatch)
    for path in inputs.iterdir():
        _later(path)
    resumed = run_dedup(inputs, out, None, cfg, rejected_dir=out.parent / "rej")
    assert resumed["tasks"]["skipped"] > 0 and resumed["tasks"]["run"] == 2  # only the two filter tasks ran

    out = tmp_path / "o2" / "out"
    _interrupted(inputs, out, cfg, monkeypatch)
    other = DedupConfig(engine="sharded", workers=1, shards=1, jaccard_threshold=1.0)
    restarted = run_dedup(inputs, out, None, other, rejected_dir=out.parent / "rej")
    assert restarted["tasks"]["skipped"] == 0 and not (out / WORK_FOLDER).exists()
    run_dedup(inputs, tmp_path / "clean", None, other, rejected_dir=tmp_path / "clean-rej")
    assert _tree(out) == _tree(tmp_path / "clean")
