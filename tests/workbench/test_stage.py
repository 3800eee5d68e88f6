"""workbench.stage: the data-stage base resumes per file, writes atomically and sums its files' stats."""

import gzip
import json

import pytest

from workbench.bad_input import InputIssues
from workbench.documents import output_name, read_documents
from workbench.executor import LocalExecutor
from workbench.files import details_path, read_json
from workbench.ledger import identity, record_path
from workbench.stage import FileStage, TaskWriter, sum_counts, sum_stats

FILES = {
    "a.jsonl": ["one two", "one two three four", "x"],
    "b.jsonl": ["a b c d e", "short one"],
    "c.jsonl": ["a", "b", "c d e f g h"],
}
RAN: list[str] = []  # the files whose task ran (in this process: one local worker)


def keep_short(task: tuple) -> dict:
    """A stage task that decides only: keep documents of at most three words, reject the rest as ``long``."""
    path, ledger, rejected_dir = task
    out_dir = ledger.out_dir
    RAN.append(path.name)
    name, drops = output_name(path), {}
    with TaskWriter(text=True, kept=out_dir / name, rejected=rejected_dir / name) as out:
        docs_in = 0
        for doc in read_documents(path, InputIssues()):
            if doc["text"] == "boom":
                raise RuntimeError("the task failed mid-file")
            docs_in += 1
            if len(doc["text"].split()) <= 3:
                out.keep(doc)
            else:
                drops["long"] = drops.get("long", 0) + 1
                out.reject({**doc, "reason": "long"})
    stats = {"input": str(path), "docs_in": docs_in, "docs_out": out.counts["kept"], "drops": drops}
    return ledger.record(name, [path]).write(**stats)


class ShortDocs(FileStage):
    name = "short"
    task_fn = keep_short

    def __init__(self, files, out_dir, rejected_dir, force=False):
        super().__init__(files, out_dir, force)
        self.rejected_dir = rejected_dir

    def task(self, path):
        return path, self.ledger, self.rejected_dir

    def summarize(self, per_file):
        return {"stage": "short", "files": len(per_file), **sum_stats(per_file, ("docs_in", "docs_out")),
                "drops": dict(sum_counts(per_file))}

    def add_timings(self, metrics, fresh, skipped, wall):
        metrics.update(seconds=round(wall, 3), docs_per_s=None, files_skipped=skipped)


def _inputs(tmp_path, files=FILES):
    folder = tmp_path / "in"
    folder.mkdir()
    for name, texts in files.items():
        (folder / name).write_text("".join(json.dumps({"id": f"{name}:{i}", "text": t}) + "\n"
                                           for i, t in enumerate(texts)))
    return sorted(folder.iterdir())


def _run(tmp_path, files, executor=None, force=False):
    RAN.clear()
    stage = ShortDocs(files, tmp_path / "out", tmp_path / "rejected", force)
    return stage.run(executor or LocalExecutor(1), tmp_path / "metrics" / "short.json")


def test_stats_sum_across_files_into_the_metrics_and_headline(tmp_path):
    files = _inputs(tmp_path)
    with LocalExecutor(2) as executor:  # a fork pool: the results come back in any order
        metrics = _run(tmp_path, files, executor)
    texts = [t for ts in FILES.values() for t in ts]
    short = [t for t in texts if len(t.split()) <= 3]
    assert metrics["files"] == 3 and metrics["docs_in"] == len(texts) == 8
    assert metrics["docs_out"] == len(short) == 5 and metrics["drops"] == {"long": len(texts) - len(short)}
    assert read_json(details_path(tmp_path / "metrics" / "short.json")) == metrics
    assert read_json(tmp_path / "metrics" / "short.json") == {
        "docs_in": 8, "docs_out": 5, "drop_rate": round(1 - 5 / 8, 4), "seconds": metrics["seconds"],
        "docs_per_s": None}
    for path in files:  # each file's record holds that file's own counts, beside the input's identity
        marker = read_json(record_path(tmp_path / "out", path.name))
        assert marker.pop("inputs") == [{"path": str(path), **identity(path)}] and marker.pop("settings") == {}
        kept = [json.loads(line)["text"] for line in (tmp_path / "out" / path.name).read_text().splitlines()]
        assert kept == [t for t in FILES[path.name] if len(t.split()) <= 3]
        assert marker == {"input": str(path), "docs_in": len(FILES[path.name]), "docs_out": len(kept),
                          "drops": {"long": len(FILES[path.name]) - len(kept)} if len(kept) < len(FILES[path.name])
                          else {}}


def test_a_rerun_resumes_after_the_files_whose_marker_exists(tmp_path):
    files = _inputs(tmp_path)
    first = _run(tmp_path, files)
    assert RAN == ["a.jsonl", "b.jsonl", "c.jsonl"]
    record_path(tmp_path / "out", "b.jsonl").unlink()  # killed after a's and c's records, before b's
    again = _run(tmp_path, files)
    assert RAN == ["b.jsonl"] and again["files_skipped"] == 2
    assert {k: v for k, v in again.items() if k not in ("seconds", "files_skipped")} == \
        {k: v for k, v in first.items() if k not in ("seconds", "files_skipped")}
    (tmp_path / "out" / "c.jsonl").unlink()  # a marker without its output is not finished
    _run(tmp_path, files)
    assert RAN == ["c.jsonl"]
    _run(tmp_path, files, force=True)
    assert RAN == ["a.jsonl", "b.jsonl", "c.jsonl"]


def test_a_task_that_raises_leaves_no_partial_file_and_no_marker(tmp_path):
    files = _inputs(tmp_path, {"a.jsonl": ["fine"], "b.jsonl": ["kept", "a long document is rejected", "boom"]})
    with pytest.raises(RuntimeError, match="mid-file"):
        _run(tmp_path, files)
    out, rejected = tmp_path / "out", tmp_path / "rejected"
    assert sorted(p.name for p in out.iterdir()) == ["_done", "a.jsonl"]  # b's kept file never appeared
    assert sorted(p.name for p in rejected.iterdir()) == ["a.jsonl"]  # nor its rejected one, nor a .tmp
    assert [p.name for p in (out / "_done").iterdir()] == ["a.jsonl.json"]
    assert not (tmp_path / "metrics").exists()


def test_task_writer_writes_gzip_and_binary_roles_atomically(tmp_path):
    with TaskWriter(kept=tmp_path / "k.jsonl.gz", rejected=None, train=tmp_path / "t.bin") as out:
        out.keep({"text": "é"})
        out.keep(b'{"text": "raw"}\n')
        out.reject({"text": "not written: no rejected file"})
        out.write("train", b"\x01\x02")
    assert gzip.open(tmp_path / "k.jsonl.gz").read() == '{"text": "é"}\n{"text": "raw"}\n'.encode()
    assert (tmp_path / "t.bin").read_bytes() == b"\x01\x02" and out.counts == {"kept": 2, "train": 1}
    with pytest.raises(ValueError), TaskWriter(kept=tmp_path / "k.jsonl.gz", other=tmp_path / "o.bin") as out:
        out.keep({"text": "new"})
        raise ValueError
    assert gzip.open(tmp_path / "k.jsonl.gz").read().startswith(b'{"text": "\xc3\xa9"}')  # the old file stays
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.jsonl.gz", "t.bin"]


def test_sum_stats_and_counts():
    per_file = [{"docs": 2, "chars": 10, "drops": {"a": 1}}, {"docs": 5, "chars": 1, "drops": {"a": 2, "b": 1}}]
    assert sum_stats(per_file, ("docs", "chars")) == {"docs": 7, "chars": 11}
    assert sum_counts(per_file) == {"a": 3, "b": 1}
