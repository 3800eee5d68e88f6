"""Every CLI's flags explain themselves; docs/cli.md is what the CLIs print; stage CLIs run outside the project."""

import argparse

from lmw_cli import cli_docs
from pipeline.dedup import stage as dedup
from pipeline.sample import crawl
from pipeline.web import extract


def test_every_flag_of_every_cli_has_help_and_shows_its_default():
    modules = cli_docs.cli_modules()
    assert {"pipeline.web.extract", "tokenizer.train", "model.train", "scaling.fit", "alignment.grpo",
            "bench.benchmarks.kernel_select"} <= set(modules)
    problems = {m: cli_docs.undocumented(cli_docs.capture_parser(m)) for m in modules}
    assert not {m: p for m, p in problems.items() if p}


def test_cli_reference_is_current():
    """docs/cli.md holds every user-facing CLI's --help as this checkout prints it (python -m lmw_cli.cli_docs)."""
    assert cli_docs.main(["--check"]) == 0


def test_a_bare_flag_and_a_hidden_default_are_caught():
    p = argparse.ArgumentParser()
    p.add_argument("--n-train", type=int, default=5)  # no help at all
    p.add_argument("--lr", type=float, default=0.1, help="lr")  # the field name again
    p.add_argument("--seed", type=int, default=3, help="the seed")  # default not shown
    p.add_argument("--out", default="x", help="where (default: %(default)s)")
    p.add_argument("--secret", help=argparse.SUPPRESS)
    assert cli_docs.undocumented(p) == ["--n-train: no help text", "--lr: no help text",
                                        "--seed: the default (3) is not shown"]
    p.formatter_class = argparse.ArgumentDefaultsHelpFormatter
    assert cli_docs.undocumented(p) == ["--n-train: no help text", "--lr: no help text"]


def test_stage_clis_run_in_an_empty_folder_on_their_own_files(tmp_path, monkeypatch):
    """No params.yaml: the dataclass/flag defaults, and no metrics file unless one is asked for."""
    monkeypatch.chdir(tmp_path)
    assert crawl.main(["--out", "in/crawl.warc.gz", "--manifest", "in/manifest.jsonl", "--pages", "20"]) == 0
    assert extract.main(["in/", "--out-dir", "docs"]) == 0
    assert dedup.main(["docs", "--out-dir", "deduped", "--rejected-dir", "rejected"]) == 0
    assert any((tmp_path / "deduped").iterdir()) and not (tmp_path / "metrics").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deduped", "docs", "in", "rejected"]
