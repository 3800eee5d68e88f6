"""bench.tools.results rows -> bench.tools.report tables in the doc; the check fails on a stale section or a typed
figure."""

import json
import re

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
    """What CI runs: the generated sections of every page of docs/benchmarks/ equal what benchmarks/results/ gives,
    and no number outside them is a hand-typed figure without a source (bench.tools.figures), in any section."""
    assert report.sections(report.pages()), "no generated section in docs/benchmarks/"
    assert report.main(["--check"]) == 0


# the areas docs/benchmarks.md rendered when it was split into docs/benchmarks/ (issue 37); a page may add more
SPLIT_AREAS = {
    "alignment", "alignment_engines", "alignment_engines_equal_vocab", "alignment_sft800", "alignment_tune",
    "ce_memory", "classifiers", "classifiers_real", "dedup", "distributed", "extract", "extract_explore", "filter",
    "funnel", "gopher_words", "gpu_attention", "gpu_ce_memory", "gpu_cross_entropy", "gpu_e2e", "gpu_kernel_e2e",
    "gpu_kernel_select", "gpu_model_train", "gpu_rmsnorm", "gpu_runs", "gpu_swiglu", "langid", "model_train", "pii",
    "repro", "scaling", "scaling_blind", "scaling_published", "scaling_seeds", "tokenizer", "variants"}
SPLIT_SECTIONS = 54


def test_the_index_links_every_page_and_every_section_appears_once():
    """docs/benchmarks/README.md links every area page (and nothing that is not one); each generated section (one
    marker spec) sits in exactly one page, and none of the split's sections was lost."""
    area_pages = {p.name for p in report.pages()} - {report.INDEX.name}
    linked = set(re.findall(r"\]\(([\w.-]+\.md)(?:#[\w-]*)?\)", report.INDEX.read_text(encoding="utf-8")))
    assert area_pages - linked == set(), "area pages the index does not link"
    assert linked - area_pages == set(), "index links to pages that do not exist"
    found = report.sections(report.pages())
    twice = {spec: [p.name for p in where] for spec, where in found.items() if len(where) > 1}
    assert not twice, f"generated sections appearing more than once: {twice}"
    assert len(found) >= SPLIT_SECTIONS
    assert SPLIT_AREAS <= {report.parse_spec(spec)["area"] for spec in found}


def test_a_folder_of_pages_is_generated_and_checked_page_by_page(tmp_path, capsys):
    results = tmp_path / "results"
    record("demo", [Result("ours", "speed", 2.0), Result("ours", "acc", 0.5)], "python -m demo", results)
    pages = tmp_path / "pages"
    pages.mkdir()
    (pages / "README.md").write_text("# Index\n\n- [One](one.md), [Two](two.md)\n")
    (pages / "one.md").write_text("# One\n\n<!-- results area=demo metrics=speed -->\n<!-- /results -->\n")
    (pages / "two.md").write_text("# Two\n\n<!-- results area=demo metrics=acc -->\nold\n<!-- /results -->\n")
    args = ["--doc", str(pages), "--results-dir", str(results)]
    assert report.main([*args, "--check"]) == 1
    err = capsys.readouterr().err
    assert "one.md: generated sections are out of date" in err and "two.md" in err and "README.md" not in err
    assert report.main(args) == 0
    assert "| ours | speed | 2 |" in (pages / "one.md").read_text()
    assert "| ours | acc | 0.5 |" in (pages / "two.md").read_text()
    assert report.main([*args, "--check"]) == 0
    (pages / "two.md").write_text((pages / "two.md").read_text() + "\nTyped: 3.7x faster.\n")
    capsys.readouterr()
    assert report.main([*args, "--check"]) == 1
    assert "two.md:" in capsys.readouterr().err  # the figure rule runs on every page, naming the page


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
