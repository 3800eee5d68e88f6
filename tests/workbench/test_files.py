"""workbench.files: atomic writes leave either the old file or the new one, never a partial one."""

import errno
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


def test_write_metrics_removes_what_a_killed_write_of_it_left(tmp_path):
    metrics = tmp_path / "metrics" / "train.json"
    stale = [details_path(metrics).parent / ".train.json.k1ll3d.tmp", metrics.parent / ".train.json.x.tmp"]
    other = metrics.parent / ".dedup.json.y.tmp"  # another stage's write: not this one's to remove
    for path in (*stale, other):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{half")
    write_metrics(metrics, {"val_loss": 3.0}, {"val_loss": 3.0})
    assert not any(p.exists() for p in stale) and other.exists()


def test_write_error_is_one_line_for_a_full_or_read_only_disk_only():
    from workbench.files import write_error

    full = OSError(errno.ENOSPC, "No space left on device", "/data/out/.x.tmp")
    assert write_error(full).startswith("/data/out/.x.tmp: No space left on device:")
    wrapped = RuntimeError("task failed")
    wrapped.__cause__ = OSError(errno.EROFS, "Read-only file system", "/ro/a.json")
    assert "/ro/a.json: Read-only file system" in write_error(wrapped)
    assert write_error(OSError(errno.ENOENT, "No such file or directory", "x")) is None
    assert write_error(ValueError("bad")) is None


def test_exit_on_error_ends_a_cli_on_bad_input_or_a_full_disk_and_raises_a_bug_again(capsys):
    from workbench.files import error_line, exit_on_error

    class RunFolderError(RuntimeError):
        pass

    assert error_line(ValueError("extract.workers must be >= 1, got 0")) == "extract.workers must be >= 1, got 0"
    assert error_line(FileNotFoundError(errno.ENOENT, "No such file or directory", "in.gz")).endswith("'in.gz'")
    assert error_line(RunFolderError("no checkpoint")) is None
    assert error_line(RunFolderError("no checkpoint"), RunFolderError) == "no checkpoint"
    assert exit_on_error(OSError(errno.ENOSPC, "No space left on device", "/data/x.tmp")) == 2
    assert capsys.readouterr().err.startswith("error: /data/x.tmp: No space left on device:")
    bug = KeyError("step")
    with pytest.raises(KeyError) as raised:
        exit_on_error(bug)
    assert raised.value is bug and capsys.readouterr().err == ""
