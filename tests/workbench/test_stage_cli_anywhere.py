"""Stage CLIs anywhere: outside the project every path setting has a default under the current folder, named after
the stage, so each stage chains to the next given only its input (tests/test_walkthrough.py runs them); what is
still missing is named in one error line."""

from __future__ import annotations

from pathlib import Path

import pytest

from lmw_cli.config import built_in_defaults

EXPECTED = {  # section -> {setting: default}: each stage's outputs, and its inputs as the stage before writes them
    "extract": {"out_dir": "extract"},
    "filter": {"out_dir": "filter", "rejected_dir": "rejected/filter"},
    "dedup": {"out_dir": "dedup", "rejected_dir": "rejected/dedup"},
    "tokenizer": {"out_dir": "tokenizer"},
    "shards": {"tokenizer": "tokenizer", "out_dir": "shards"},
    "train": {"data": "shards", "out_dir": "runs/train"},
    "sweep": {"data": "shards", "out_dir": "sweep/runs", "results": "sweep/results.csv"},
}


@pytest.mark.parametrize("section", sorted(EXPECTED))
def test_path_defaults_are_folders_under_the_current_one(section):
    defaults = built_in_defaults(section)
    for key, expected in EXPECTED[section].items():
        assert Path(defaults[key]) == Path(expected), f"{section}.{key}"
        assert not Path(defaults[key]).is_absolute()


@pytest.mark.parametrize("step", ["extract", "filter", "dedup", "train-tokenizer", "tokenize"])
def test_a_stage_without_its_input_names_it_in_one_line(step, tmp_path, monkeypatch, capsys):
    from pipeline.__main__ import main

    monkeypatch.chdir(tmp_path)
    assert main([step]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error:") and "input" in err


def test_a_sweep_without_a_design_names_both_settings_in_one_line(tmp_path, monkeypatch, capsys):
    from scaling.sweep import main

    monkeypatch.chdir(tmp_path)
    assert main(["--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--budgets and --shapes" in err
