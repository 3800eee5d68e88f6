"""bench.tools.results rows -> bench.tools.report tables in the doc; the check fails on a stale section or a typed
figure."""

import json

from bench.tools import report
from bench.tools.results import Result, interleaved, latest, read_rows, record, timing_result


def _doc(tmp_path, body="old\n"):
    doc = tmp_path / "bench.md"
    doc.write_text(f"# B\n\ntext 1.5x (source: Rae et al. 2021)\n\n<!-- results area=demo metrics=speed,acc -->\n"
                   f"{body}<!-- /results -->\n", encoding="utf-8")
    return doc


def test_rows_append_and_the_newest_wins(tmp_path):
    record("demo", [Result("ours", "speed", 120.0, "docs/s", "theirs", 60.0)], "python -m x", tmp_path)
    record("demo", [Result("ours", "speed", 150.0, "docs/s", "theirs", 50.0), Result("ours", "acc", 0.95)],
           "python -m x --again", tmp_path)
    rows = read_rows(tmp_path)
    assert len(rows) == 3 and rows[0]["ratio"] == 2.0
    newest = latest(rows)
    assert newest[("demo", "ours", "speed")]["value"] == 150.0 and newest[("demo", "ours", "speed")]["ratio"] == 3.0
    assert {"machine", "date", "command", "commit"} <= set(rows[0])


def test_report_writes_sections_and_check_catches_drift_and_typed_figures(tmp_path, capsys):
    results = tmp_path / "results"
    record("demo", [Result("ours", "speed", 1234.5, "docs/s", "theirs", 617.25), Result("ours", "acc", 0.95)],
           "python -m demo", results)
    doc = _doc(tmp_path)
    args = ["--doc", str(doc), "--results-dir", str(results)]
    assert report.main([*args, "--check"]) == 1  # stale
    assert report.main(args) == 0
    text = doc.read_text()
    assert "| ours | speed | 1,234 | docs/s | theirs | 617.2 | 2 | 1 |" in text
    assert "| ours | acc | 0.95 |" in text and "by `python -m demo`" in text
    assert "text 1.5x (source: Rae et al. 2021)" in text  # outside the markers nothing changes
    assert report.main([*args, "--check"]) == 0
    doc.write_text(text.replace("| ours | acc | 0.95 |", "| ours | acc | 0.97 |"))  # a hand-typed figure
    capsys.readouterr()
    assert report.main([*args, "--check"]) == 1
    assert "0.97" in capsys.readouterr().err


def test_bad_rows_and_markers_are_one_line_errors(tmp_path, capsys):
    (tmp_path / "demo.jsonl").write_text(json.dumps({"area": "demo"}) + "\n{broken\n")
    doc = _doc(tmp_path)
    assert report.main(["--doc", str(doc), "--results-dir", str(tmp_path)]) == 2
    assert "demo.jsonl:2" in capsys.readouterr().err
    (tmp_path / "demo.jsonl").unlink()
    assert report.main(["--doc", str(doc), "--results-dir", str(tmp_path)]) == 2
    assert "area=demo: no rows" in capsys.readouterr().err


def test_interleaved_timing_and_ratio():
    calls = []
    ours, theirs = interleaved(lambda: calls.append("o"), lambda: calls.append("t"), repeats=3, warmup=1)
    assert calls == ["o", "t"] * 4 and len(ours) == len(theirs) == 3
    r = timing_result("ours", "encode_s", [1.0, 2.0, 3.0], "theirs", [4.0, 6.0, 8.0])
    assert (r.value, r.min, r.max, r.baseline_value, r.ratio, r.repeats) == (2.0, 1.0, 3.0, 6.0, 3.0, 3)


def test_the_committed_doc_matches_the_committed_results():
    """What CI runs: docs/benchmarks.md's generated sections equal what benchmarks/results/ gives, and no number
    outside them is a hand-typed figure without a source (bench.tools.figures), in any section."""
    assert report.SECTION.search(report.DOC.read_text(encoding="utf-8")), "no generated section in the doc"
    assert report.main(["--check"]) == 0


def test_markers_pick_names_with_spaces_and_an_earlier_run_by_commit(tmp_path):
    results = tmp_path / "results"
    record("demo", [Result("ours (fast)", "speed", 11.0), Result("plain", "speed", 5.0)], "python -m demo",
           results, commit="aaaaaaa")
    record("demo", [Result("ours (fast)", "speed", 12.0), Result("plain", "speed", 6.0)], "python -m demo",
           results, commit="bbbbbbb+dirty")
    doc = tmp_path / "bench.md"
    doc.write_text('<!-- results area=demo names="ours (fast)" -->\n<!-- /results -->\n\n'
                   '<!-- results area=demo names="ours (fast)" commit=aaaaaaa -->\n<!-- /results -->\n')
    args = ["--doc", str(doc), "--results-dir", str(results)]
    assert report.main(args) == 0
    newest, earlier = (m.group("body") for m in report.SECTION.finditer(doc.read_text()))
    assert "| ours (fast) | speed | 12 |" in newest and "(commit bbbbbbb+dirty)" in newest
    assert "| ours (fast) | speed | 11 |" in earlier and "(commit aaaaaaa)" in earlier
    assert "plain" not in newest + earlier
    assert report.main([*args, "--check"]) == 0
    doc.write_text("<!-- results area=demo commit=ccccccc -->\n<!-- /results -->\n")
    assert report.main(args) == 2  # no rows at that commit: a one-line error, nothing written
