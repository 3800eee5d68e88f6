"""The filter stage runner: per-file tasks, rejected-with-reason, resumable, bad lines counted, same result
for any number of workers; the executor; the data funnel report."""

from __future__ import annotations

import gzip
import json

import pytest

import pipeline.filters.stage as filt
from pipeline.filters.stage import FilterConfig, run_filter
from pipeline.report import funnel_rows, write_funnel
from pipeline.runtime.steps import Step, StepStats, run_steps
from workbench.executor import LocalExecutor, make_executor
from workbench.files import read_jsonl, write_json, write_jsonl


class ShortDocs(Step):
    name = "short"

    def __init__(self, min_words: int = 3):
        self.min_words = min_words

    def reject(self, doc):
        return "short_doc" if len(doc["text"].split()) < self.min_words else None


class Shout(Step):
    """Rewrites the text it keeps, as PII masking does."""

    name = "shout"

    def reject(self, doc):
        doc["text"] = doc["text"].upper()
        doc["shouted"] = True
        return None


@pytest.fixture
def toy_steps(monkeypatch):
    monkeypatch.setattr(filt, "STEPS", {"short": (__name__, "ShortDocs"), "shout": (__name__, "Shout")})


def _docs(n, offset=0):
    return [{"id": f"d{offset + i}", "url": f"u{i}", "text": "a b c d" if i % 3 else "tiny"} for i in range(n)]


def _inputs(tmp_path, files=3, n=9):
    folder = tmp_path / "docs"
    for f in range(files):
        write_jsonl(folder / f"part{f}.jsonl.gz", _docs(n, offset=100 * f))
    return folder


CFG = {"short": {"min_words": 2}, "shout": True}


def test_run_steps_counts_keeps_and_drops_with_reason():
    stats, rejected = {}, []
    kept = list(run_steps(_docs(6), [ShortDocs(2), Shout()], stats, rejected.append))
    assert [d["id"] for d in kept] == ["d1", "d2", "d4", "d5"] and all(d["text"] == "A B C D" for d in kept)
    assert [(d["id"], d["reason"]) for d in rejected] == [("d0", "short_doc"), ("d3", "short_doc")]
    assert stats["short"].to_dict() | {"seconds": 0} == {"docs_in": 6, "docs_out": 4, "drops": {"short_doc": 2},
                                                         "seconds": 0, "chars_out": 28}
    assert (stats["shout"].docs_in, stats["shout"].docs_out) == (4, 4)
    total = StepStats()
    total.merge(stats["short"])
    total.merge(StepStats.from_dict(stats["short"].to_dict()))
    assert total.docs_in == 12 and total.drops["short_doc"] == 4


def test_filter_writes_kept_rejected_metrics_and_resumes(tmp_path, toy_steps):
    folder = _inputs(tmp_path)
    out, rej, metrics = tmp_path / "out", tmp_path / "rejected", tmp_path / "m.json"
    m = run_filter([folder], out, rej, metrics, FilterConfig(steps=CFG))
    assert (m["files"], m["docs_in"], m["docs_out"], m["drops"]) == (3, 27, 18, {"short_doc": 9})
    assert m["steps"]["short"]["docs_out"] == 18 and m["files_skipped"] == 0
    kept = list(read_jsonl(out / "part1.jsonl.gz"))
    assert len(kept) == 6 and kept[0]["text"] == "A B C D" and kept[0]["shouted"]
    dropped = list(read_jsonl(rej / "part1.jsonl.gz"))
    assert {d["reason"] for d in dropped} == {"short_doc"} and dropped[0]["text"] == "tiny"
    assert json.loads(metrics.read_text())["docs_out"] == 18

    before = {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    m2 = run_filter([folder], out, rej, metrics, FilterConfig(steps=CFG))
    assert m2["files_skipped"] == 3 and m2["docs_out"] == 18
    (out / "_done" / "part2.jsonl.gz.json").unlink()  # as if killed before part2 finished
    m3 = run_filter([folder], out, rej, metrics, FilterConfig(steps=CFG))
    assert m3["files_skipped"] == 2 and m3["docs_out"] == 18
    assert {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def _documents(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.jsonl.gz"))}


def test_a_changed_step_setting_filters_every_file_again(tmp_path, toy_steps):
    """The filter's records hold its chain's settings: a stricter step redoes the finished files (before, a rerun
    kept the outputs of the old threshold), a chain that only spells the same settings otherwise does not."""
    folder = _inputs(tmp_path)
    out, rej = tmp_path / "out", tmp_path / "rejected"
    assert run_filter([folder], out, rej, None, FilterConfig(steps=CFG))["docs_out"] == 18
    same = run_filter([folder], out, rej, None, FilterConfig(steps={**CFG, "shout": {}}))  # true: the defaults
    assert same["files_skipped"] == 3
    stricter = {**CFG, "short": {"min_words": 5}}
    again = run_filter([folder], out, rej, None, FilterConfig(steps=stricter))
    assert again["files_skipped"] == 0 and again["docs_out"] == 0
    run_filter([folder], tmp_path / "clean", tmp_path / "clean-rej", None, FilterConfig(steps=stricter))
    assert _documents(out) == _documents(tmp_path / "clean") and _documents(rej) == _documents(tmp_path / "clean-rej")


def test_workers_give_the_same_outputs(tmp_path, toy_steps):
    folder = _inputs(tmp_path, files=4)
    outs = []
    for workers in (1, 2):
        out = tmp_path / f"out{workers}"
        run_filter([folder], out, tmp_path / f"rej{workers}", tmp_path / f"m{workers}.json",
                   FilterConfig(steps=CFG, workers=workers))
        outs.append({p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()})
    assert outs[0] == outs[1] and len(outs[0]) == 8


def test_bad_lines_are_skipped_counted_and_named(tmp_path, toy_steps, caplog):
    path = tmp_path / "docs" / "bad.jsonl"
    path.parent.mkdir()
    lines = [json.dumps({"id": "ok1", "text": "one two three"}), "{not json", json.dumps([1, 2]),
             json.dumps({"id": "no_text"}), "", json.dumps({"id": "ok2", "text": "x" * (10 << 20)}),
             json.dumps({"id": "bin", "text": "\udcff\x00\x01 junk bytes here"})]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogateescape")
    trunc = tmp_path / "docs" / "cut.jsonl.gz"
    trunc.write_bytes(gzip.compress(("\n".join(lines[:1] * 50) + "\n").encode())[:-30])
    with caplog.at_level("WARNING"):
        m = run_filter([path.parent], tmp_path / "out", tmp_path / "rej", tmp_path / "m.json",
                       FilterConfig(steps={"short": {"min_words": 2}}))
    assert m["drops"]["bad_json"] >= 4 and m["docs_in"] >= 3
    assert any("bad.jsonl:2: invalid JSON" in r.message for r in caplog.records)
    assert any("cut.jsonl.gz" in r.message and "unreadable" in r.message for r in caplog.records)
    kept = {d["id"] for d in read_jsonl(tmp_path / "out" / "bad.jsonl")}
    assert kept == {"ok1", "bin"}


def test_config_errors_name_the_step(tmp_path, toy_steps):
    with pytest.raises(ValueError, match="unknown step"):
        FilterConfig(steps={"nope": True})
    with pytest.raises(ValueError, match="filter.steps.short"):
        filt.build_steps(FilterConfig(steps={"short": {"bogus": 1}}))
    with pytest.raises(FileNotFoundError, match="input not found"):
        run_filter([tmp_path / "missing"], tmp_path / "o", tmp_path / "r", tmp_path / "m.json",
                   FilterConfig(steps=CFG))


def _square(x):
    return x * x


def test_local_executor_runs_every_task_once():
    assert sorted(LocalExecutor(2).map(_square, range(7))) == [x * x for x in range(7)]
    assert list(make_executor("local", 1).map(_square, [3])) == [9]
    with pytest.raises(ValueError, match="executor must be one of"):
        make_executor("spark")
    try:
        import dask.distributed  # noqa: F401
    except ImportError:
        with pytest.raises(ValueError, match="needs `pip install"):
            make_executor("dask")


def test_funnel_rows_follow_the_stage_metrics(tmp_path):
    details = tmp_path / "details"  # the report reads each stage's detailed metrics
    write_json(details / "extract.json", {"records_read": 100, "docs_out": 90})
    write_json(details / "filter.json", {"docs_in": 90, "docs_out": 50, "chars_in": 9000, "chars_out": 6000,
                                         "step_order": ["langid", "gopher"],
                                         "steps": {"langid": {"docs_out": 70, "chars_out": 7500},
                                                   "gopher": {"docs_out": 50, "chars_out": 6000}}})
    write_json(details / "dedup.json", {"docs_in": 50, "docs_out": 40, "chars_out": 4000,
                                        "drops": {"exact_duplicate": 5, "minhash_duplicate": 5}})
    write_json(details / "shards.json", {"train_docs": 38, "val_docs": 2, "train_tokens": 900, "val_tokens": 100})
    rows = funnel_rows(tmp_path)
    assert [(r["step"], r["docs"], r["dropped"]) for r in rows] == [
        ("records", 100, 0), ("extracted", 90, 10), ("langid", 70, 20), ("gopher", 50, 20), ("exact", 45, 5),
        ("minhash", 40, 5)]
    assert rows[-1]["tokens"] == 1000 and rows[-1]["tokens_est"] == 1000 and rows[3]["tokens_est"] == 1500
    assert rows[1]["chars"] == 9000 and rows[1]["tokens_est"] == 2250 and rows[-1]["kept_share"] == 0.4
    assert rows[2]["chars"] == 7500 and rows[2]["tokens_est"] == 1875
    frame, paths = write_funnel(tmp_path, tmp_path / "reports")
    assert all(p.stat().st_size > 0 for p in paths) and list(frame["docs"]) == [100, 90, 70, 50, 45, 40]
    assert paths[1].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
