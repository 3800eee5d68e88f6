"""Settings that once failed quietly, through the CLIs as users type them: a params file that does not exist, a
mistyped key and a mistyped or abbreviated flag are each one line naming the nearest valid name, exit 2."""

from __future__ import annotations

import pytest

from model.train import main as train_main
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
