"""Settings that once failed quietly, through the CLIs as users type them: a params file that does not exist, a
mistyped section or key and a mistyped or abbreviated flag are each one line naming the nearest valid name, exit 2;
a dispatched step's usage names the command as typed, and no help line shows two defaults."""

from __future__ import annotations

import argparse

import pytest

from lmw_cli.cli_docs import capture_parser, cli_modules
from model.train import main as train_main
from pipeline.__main__ import main as pipeline_main
from scaling.fit import main as fit_main


def _one_error(capsys) -> str:
    lines = [line for line in capsys.readouterr().err.strip().splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("main", [train_main, fit_main], ids=["model.train", "scaling.fit"])
def test_a_params_file_that_does_not_exist_is_one_line(main, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text("train:\n  max_steps: 3\n")
    argv = ["--params", "param.yaml"] + (["results.csv"] if main is fit_main else [])
    assert main(argv) == 2  # once: exit 0 on the built-in defaults
    assert "param.yaml: no such params file (did you mean params.yaml?)" in _one_error(capsys)


def test_an_abbreviated_flag_is_refused_with_the_nearest(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        train_main(["--params", "none", "--max-step", "3"])  # once taken for --max-steps
    assert exit_info.value.code == 2
    assert "--max-step 3 (did you mean --max-steps?)" in _one_error(capsys)


def test_a_mistyped_key_names_the_nearest(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text("train:\n  max_stepz: 3\n")
    assert train_main([]) == 2
    assert _one_error(capsys).endswith("unknown key(s) max_stepz (did you mean max_steps?)")


def test_a_mistyped_section_names_the_nearest(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text("trian:\n  max_steps: 3\n")  # once ignored: train ran on its defaults
    assert train_main([]) == 2
    assert _one_error(capsys) == "error: params.yaml: unknown section 'trian' (did you mean train?)"


def test_a_profile_names_its_own_mistyped_section(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text("train:\n  max_steps: 3\n")
    (tmp_path / "fast.yaml").write_text("base: params.yaml\nsweeep:\n  budget: 1\n")
    assert train_main(["--params", "fast.yaml"]) == 2
    assert _one_error(capsys).endswith("fast.yaml: unknown section 'sweeep' (did you mean sweep?)")


def test_the_dispatcher_names_the_step_as_typed(capsys):
    with pytest.raises(SystemExit):
        pipeline_main(["filter", "--help"])
    assert capsys.readouterr().out.startswith("usage: python -m pipeline filter ")  # was: pipeline.filters.stage
    with pytest.raises(SystemExit) as exit_info:
        pipeline_main(["dedup", "--bogus-flag"])
    assert exit_info.value.code == 2 and "(python -m pipeline dedup --help lists the flags)" in _one_error(capsys)


def test_every_help_line_shows_one_default():
    twice = []
    for module in cli_modules():
        parser = capture_parser(module)
        formatter = parser._get_formatter()
        for action in parser._actions:
            if action.help and action.help != argparse.SUPPRESS:
                text = formatter._expand_help(action)
                if text.count("(default") > 1:
                    twice.append(f"{module} {action.option_strings or action.dest}: {text}")
    assert not twice, twice
