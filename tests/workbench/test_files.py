"""workbench.files: atomic writes leave either the old file or the new one, never a partial one."""

import gzip
import json

import pytest

from workbench.files import atomic_open, details_path, read_jsonl, write_json, write_jsonl, write_metrics


def test_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old")
    with pytest.raises(RuntimeError), atomic_open(path) as fh:
        fh.write("half")
        raise RuntimeError("killed")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_gzip_jsonl_is_deterministic_and_round_trips(tmp_path):
    rows = [{"id": i, "text": "é" * i} for i in range(5)]
    a, b = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz"
    assert write_jsonl(a, rows) == 5 and write_jsonl(b, rows) == 5
    assert a.read_bytes() == b.read_bytes()  # no timestamp in the gzip header
    assert list(read_jsonl(a)) == rows
    assert [json.loads(line) for line in gzip.open(a, "rt")] == rows


def test_bad_jsonl_line_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"a": 1}\n{oops\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: invalid JSON"):
        list(read_jsonl(path))


def test_write_json_sorts_keys_unless_asked(tmp_path):
    write_json(tmp_path / "s.json", {"b": 1, "a": 2})
    write_json(tmp_path / "u.json", {"b": 1, "a": 2}, sort_keys=False)
    assert (tmp_path / "s.json").read_text().index('"a"') < (tmp_path / "s.json").read_text().index('"b"')
    assert (tmp_path / "u.json").read_text().index('"b"') < (tmp_path / "u.json").read_text().index('"a"')


def test_write_metrics_puts_details_beside_the_headline(tmp_path):
    metrics = tmp_path / "metrics" / "filter.json"
    write_metrics(metrics, {"docs_in": 3, "drops": {"x": 1}}, {"docs_in": 3})
    assert details_path(metrics) == tmp_path / "metrics" / "details" / "filter.json"
    assert json.loads(metrics.read_text()) == {"docs_in": 3}
    assert json.loads(details_path(metrics).read_text())["drops"] == {"x": 1}
