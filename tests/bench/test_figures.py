"""bench.tools.figures: a number outside the generated sections is a hand-typed figure unless its block cites a source;
dates, versions, hardware names, references and code are not figures."""

from bench.tools import report
from bench.tools.figures import offenders


def figures(text):
    return [o.figure for o in offenders(text)]


def test_measurements_are_figures_and_references_are_not():
    text = ("## Speed\n\n"
            "Ours ran at 1,234 docs/s, 1.5x datatrove, 0.9565 agreement, −0.106 nats.\n\n"
            "Measured 2026-11-26 with torch 2.13 and Python 3.11.7 on an H200 (issue 23, issues 4, 5 and 10, line 12,"
            " §7), `--limit 600`, Rae et al. 2021, d64, lid.176, ZeRO-1, top-2, S 16k.\n\n"
            "```bash\npython -m bench.benchmarks.filter --limit 600\n```\n")
    assert figures(text) == ["1,234", "1.5", "0.9565", "−0.106"]


def test_a_source_in_the_block_or_a_comment_before_it_allows_figures():
    cited = "| model | MFU |\n|---|---|\n| PaLM 540B | 46.2 % (source: Chowdhery et al. 2022, table 3) |\n"
    assert figures(cited) == []
    commented = "<!-- source: https://arxiv.org/abs/2204.02311 -->\n| model | MFU |\n|---|---|\n| PaLM | 46.2 % |\n"
    assert figures(commented) == []
    assert figures("A paragraph.\n\n" + commented.split("\n", 1)[1]) == ["46.2"]


def test_a_number_glued_to_a_name_is_not_cut_into_a_figure():
    # "500-line" is glued to a name; the pattern must not backtrack to read its first digits as the figure "50"
    assert figures("A ~500-line file on a 2-core VM.\n") == []
    assert figures("A ~500-line file read at 2.25x.\n") == ["2.25"]


def test_a_cited_list_item_does_not_cite_its_neighbours():
    text = ("- Before: 0.39 s (source: issue 26's table).\n"
            "- After: 0.12 s, measured here.\n"
            "  continued on a second line: 1.7x.\n")
    assert figures(text) == ["0.12", "1.7"]


def test_numbers_in_generated_sections_are_left_to_the_results_check():
    text = "<!-- results area=demo -->\n| ours | 1.5 |\n<!-- /results -->\n\nOutside: 2.5x.\n"
    assert figures(text) == ["2.5"]


def test_check_fails_on_a_planted_figure_and_lists_it_by_section(tmp_path, capsys):
    doc = tmp_path / "bench.md"
    doc.write_text("# B\n\n## Mine\n\nNothing typed here (issue 23).\n\n## Theirs\n\nTyped: 3.7x faster.\n")
    args = ["--doc", str(doc), "--results-dir", str(tmp_path)]
    assert report.main([*args, "--check"]) == 1
    assert "hand-typed figure 3.7 in section 'Theirs'" in capsys.readouterr().err
    assert report.main([*args, "--check", "--allow-section", "Theirs"]) == 0
    assert report.main([*args, "--list"]) == 0
    assert "## Theirs: 1 hand-typed figures" in capsys.readouterr().out

