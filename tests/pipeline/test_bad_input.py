"""Bad input, one policy (workbench/bad_input.py), through the stages' command lines: each case checks the count,
the message (file, and line where there is one) and the exit status."""

import gzip
import json

import pytest
import yaml

from pipeline.__main__ import main
from tests.pipeline.warcs import PROSE, page, response
from workbench.files import details_path, read_jsonl, write_jsonl

GOOD_DOCS = [{"id": f"d{i}", "text": f"{PROSE[i % 3]} Story number {i}."} for i in range(6)]


@pytest.fixture()
def params(tmp_path):
    """A params file whose filter chain is off (every document kept), so the tests need no models."""
    path = tmp_path / "params.yaml"
    steps = {"langid": False, "gopher": False, "gopher_rep": False, "pii": False}
    path.write_text(yaml.safe_dump({"filter": {"steps": steps}}))
    return ["--params", str(path)]


def _warc(path, first: int = 0, pages: int = 3):
    path.write_bytes(b"".join(response(f"http://s{i}.example/", page(f"P{i}", PROSE + [f"Page {i}."]), i)
                              for i in range(first, first + pages)))
    return path


def _extract(args: list[str], tmp_path, params) -> int:
    return main(params + ["extract", *args, "--out-dir", str(tmp_path / "docs"),
                          "--metrics", str(tmp_path / "m" / "extract.json")])


def _details(tmp_path, stage: str) -> dict:
    return json.loads(details_path(tmp_path / "m" / f"{stage}.json").read_text())


def _one_line(text: str, prefix: str = "") -> str:
    """The one line of ``text`` (stdout), or of its lines that start with ``prefix`` (stderr, where progress bars
    also go)."""
    lines = [line for line in text.strip().splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, lines
    return lines[0]


# -- extract -----------------------------------------------------------------------------------------------------
def test_extract_takes_a_folder_of_warc_files(tmp_path, params, capsys):
    crawl = tmp_path / "crawl"
    crawl.mkdir()
    _warc(crawl / "b.warc.gz", 3), _warc(crawl / "a.warc.gz", 0)
    (crawl / "README.txt").write_text("not a crawl file")
    assert _extract([str(crawl)], tmp_path, params) == 0
    assert _details(tmp_path, "extract")["files"] == 2
    urls = [d["url"] for d in read_jsonl(tmp_path / "docs" / "a.jsonl.gz")]
    assert urls == [f"http://s{i}.example/" for i in range(3)]
    assert len(list(read_jsonl(tmp_path / "docs" / "b.jsonl.gz"))) == 3
    (tmp_path / "empty").mkdir()
    assert _extract([str(tmp_path / "empty")], tmp_path, params) == 2
    assert "no .warc.gz/.warc/.wet.gz/.wet files in" in _one_line(capsys.readouterr().err, "error:")


CORRUPT = {
    "empty": (b"", "unreadable: empty file"),
    "not_a_warc": (gzip.compress(b"<html>a page, not a WARC</html>"), "unreadable: not a WARC/WET file"),
    "corrupt_gzip": (b"\x1f\x8b\x08\x00" + b"\x00" * 40, "unreadable: cannot decompress"),
}


@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_extract_counts_and_names_an_unreadable_warc_and_fails_when_nothing_is_readable(tmp_path, params, capsys,
                                                                                       case):
    content, problem = CORRUPT[case]
    bad = tmp_path / "bad.warc.gz"
    bad.write_bytes(content)
    assert _extract([str(bad)], tmp_path, params) == 2
    err = _one_line(capsys.readouterr().err, "error:")
    assert err.startswith("error: no readable input:") and f"{bad}: {problem}" in err

    good = _warc(tmp_path / "good.warc.gz")
    assert _extract([str(good), str(bad), "--force"], tmp_path, params) == 0
    summary = _one_line(capsys.readouterr().out)
    assert summary.startswith("extract: 3 records -> 3 documents") and f"1 bad file: {bad}: {problem}" in summary
    metrics = _details(tmp_path, "extract")
    assert metrics["files_unreadable"] == 1 and len(metrics["bad_files"]) == 1 and problem in metrics["bad_files"][0]


def test_extract_names_a_warc_cut_short_and_keeps_what_came_before(tmp_path, params, capsys):
    cut = tmp_path / "cut.warc.gz"
    records = _warc(tmp_path / "whole.warc.gz", pages=4).read_bytes()
    last = response("http://s3.example/", page("P3", PROSE + ["Page 3."]), 3)
    cut.write_bytes(records[: len(records) - len(last) // 2])
    assert _extract([str(cut)], tmp_path, params) == 0
    summary = _one_line(capsys.readouterr().out)
    assert f"1 bad file: {cut}: cut short after 4 records: truncated gzip at record 4" in summary
    assert [d["url"] for d in read_jsonl(tmp_path / "docs" / "cut.jsonl.gz")] == [f"http://s{i}.example/"
                                                                                  for i in range(3)]
    assert _details(tmp_path, "extract")["drops"] == {"warc_truncated": 1}


# -- documents stages --------------------------------------------------------------------------------------------
@pytest.fixture()
def tokenizer_dir(tmp_path, params):
    write_jsonl(tmp_path / "good" / "good.jsonl.gz", GOOD_DOCS)
    out = tmp_path / "tok"
    assert main(params + ["train-tokenizer", str(tmp_path / "good"), "--out-dir", str(out),
                          "--vocab-size", "270"]) == 0
    return out


def _stage(stage: str, inputs, tmp_path, params, tokenizer_dir=None) -> int:
    """Run a documents stage on ``inputs`` (a file or folder) with its outputs under tmp_path."""
    out, metrics = str(tmp_path / f"out-{stage}"), str(tmp_path / "m" / f"{stage}.json")
    if stage == "train-tokenizer":
        args = [str(inputs), "--vocab-size", "270"]
    elif stage == "tokenize":
        args = [str(inputs), "--tokenizer", str(tokenizer_dir)]
    else:
        args = [str(inputs), "--rejected-dir", str(tmp_path / f"rej-{stage}")]
    return main(params + [stage, *args, "--out-dir", out, "--metrics", metrics])


def _bad_json_count(stage: str, metrics: dict) -> int:
    return metrics["drops"].get("bad_json", 0) if stage in ("filter", "dedup") else metrics.get("bad_json", 0)


DOC_STAGES = ["filter", "dedup", "train-tokenizer", "tokenize"]


@pytest.mark.parametrize("stage", DOC_STAGES)
def test_a_malformed_line_is_skipped_counted_and_named(tmp_path, params, tokenizer_dir, caplog, capsys, stage):
    path = tmp_path / "docs" / "mixed.jsonl.gz"
    path.parent.mkdir()
    lines = [json.dumps(GOOD_DOCS[0]), "{not json", json.dumps(GOOD_DOCS[1])]
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    capsys.readouterr()
    assert _stage(stage, path.parent, tmp_path, params, tokenizer_dir) == 0
    assert _bad_json_count(stage, _details(tmp_path, stage)) == 1
    assert any(f"{path}:2: invalid JSON" in r.message for r in caplog.records)
    if stage in ("train-tokenizer", "tokenize"):
        assert "; 1 bad line skipped" in _one_line(capsys.readouterr().out)


@pytest.mark.parametrize("stage", DOC_STAGES)
def test_invalid_utf8_in_a_jsonl_gz_is_repaired_counted_and_named(tmp_path, params, tokenizer_dir, caplog, capsys,
                                                                  stage):
    path = tmp_path / "docs" / "latin1.jsonl.gz"
    path.parent.mkdir()
    good = "".join(json.dumps(d) + "\n" for d in GOOD_DOCS[:2]).encode()
    path.write_bytes(gzip.compress(good + b'{"id": "x", "text": "caf\xe9 cr\xe8me br\xfbl\xe9e"}\n'))
    capsys.readouterr()
    assert _stage(stage, path.parent, tmp_path, params, tokenizer_dir) == 0
    assert _details(tmp_path, stage)["invalid_utf8"] == 1
    assert any(f"{path}:3: invalid UTF-8 replaced" in r.message for r in caplog.records)
    assert "1 document with invalid UTF-8 repaired" in _one_line(capsys.readouterr().out)
    if stage == "filter":
        kept = {d["id"]: d["text"] for d in read_jsonl(tmp_path / "out-filter" / "latin1.jsonl.gz")}
        assert kept["x"] == "caf\ufffd cr\ufffdme br\ufffdl\ufffde"


def _truncated_gzip(path):
    path.write_bytes(gzip.compress("".join(json.dumps(d) + "\n" for d in GOOD_DOCS).encode())[:25])


@pytest.mark.parametrize("stage", DOC_STAGES)
def test_an_unreadable_file_is_named_and_only_unreadable_input_fails(tmp_path, params, tokenizer_dir, capsys, stage):
    docs = tmp_path / "docs"
    docs.mkdir()
    cut = docs / "cut.jsonl.gz"
    _truncated_gzip(cut)
    capsys.readouterr()
    assert _stage(stage, docs, tmp_path, params, tokenizer_dir) == 2
    err = _one_line(capsys.readouterr().err, "error:")
    assert f"{cut}: unreadable: line 1: EOFError" in err

    write_jsonl(docs / "good.jsonl.gz", GOOD_DOCS)
    assert _stage(stage, docs, tmp_path, params, tokenizer_dir) == 0
    summary = _one_line(capsys.readouterr().out)
    assert f"1 bad file: {cut}: unreadable: line 1: EOFError" in summary
    metrics = _details(tmp_path, stage)
    assert metrics["files_unreadable"] == 1 and metrics["bad_files"][0].startswith(f"{cut}: unreadable")


@pytest.mark.parametrize("stage", ["filter", "dedup", "tokenize"])
def test_an_empty_file_is_named_and_not_an_error(tmp_path, params, tokenizer_dir, capsys, stage):
    write_jsonl(tmp_path / "docs" / "empty.jsonl.gz", [])
    write_jsonl(tmp_path / "docs" / "good.jsonl.gz", GOOD_DOCS)
    capsys.readouterr()
    assert _stage(stage, tmp_path / "docs", tmp_path, params, tokenizer_dir) == 0
    assert f"1 bad file: {tmp_path / 'docs' / 'empty.jsonl.gz'}: no documents" in _one_line(capsys.readouterr().out)
    assert "files_unreadable" not in _details(tmp_path, stage)


def test_an_empty_corpus_is_an_error_for_train_tokenizer(tmp_path, params, capsys):
    write_jsonl(tmp_path / "docs" / "empty.jsonl.gz", [])
    assert _stage("train-tokenizer", tmp_path / "docs", tmp_path, params) == 2
    err = _one_line(capsys.readouterr().err, "error:")
    assert err.startswith("error: no text to train on in")
    assert f"(0 documents); 1 bad file: {tmp_path / 'docs' / 'empty.jsonl.gz'}: no documents" in err
    write_jsonl(tmp_path / "blank" / "blank.jsonl.gz", [{"id": "a", "text": ""}, {"id": "b", "text": ""}])
    assert _stage("train-tokenizer", tmp_path / "blank", tmp_path, params) == 2
    assert "no text to train on" in _one_line(capsys.readouterr().err, "error:")
    assert not (tmp_path / "out-train-tokenizer" / "vocab.json").exists()
