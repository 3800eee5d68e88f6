"""Every results row names a command a reader can run: the check over every committed row, and ``record`` refusing
a module that does not exist."""

from __future__ import annotations

import json
import sys
import types

import pytest

from bench.tools.results import Result, missing_modules, record, runnable_command


def test_every_committed_row_names_a_module_that_exists():
    assert missing_modules() == []


def test_record_writes_the_module_that_ran_and_refuses_a_missing_one(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "__main__", types.SimpleNamespace(__spec__=types.SimpleNamespace(
        name="bench.benchmarks.scaling_backtest")))
    path = record("area", [Result("x", "m", 1.0)], "python -m bench.scaling_backtest --seed 1", tmp_path)
    assert json.loads(path.read_text())["command"] == "python -m bench.benchmarks.scaling_backtest --seed 1"
    assert runnable_command("python -m bench.benchmarks.langid") == "python -m bench.benchmarks.langid"  # exists: kept
    monkeypatch.setitem(sys.modules, "__main__", types.SimpleNamespace(__spec__=None))  # not run with -m
    with pytest.raises(ValueError, match="bench.nowhere, which does not exist"):
        record("area", [Result("x", "m", 1.0)], "python -m bench.nowhere", tmp_path)


def test_finish_records_the_command_the_settings_were_parsed_from(tmp_path, capsys):
    from bench.experiments.scaling_variants import VARIANTS, VariantsSettings
    from bench.tools.results import finish, parse_bench

    variant = next(iter(VARIANTS))
    argv = ["--variants", variant, "--params", "my params.yaml", "--results-dir", str(tmp_path)]
    settings = parse_bench(VariantsSettings, argv)
    assert finish("area", [Result("x", "m", 1.0)], settings) == 0
    row = json.loads((tmp_path / "area.jsonl").read_text())
    assert row["command"] == (f"python -m bench.experiments.scaling_variants --variants {variant} "
                              f"--params 'my params.yaml' --results-dir {tmp_path}")
    same_values = VariantsSettings(variants=(variant,), params="my params.yaml", results_dir=tmp_path)
    with pytest.raises(TypeError, match="did not come from parse_bench"):
        finish("area", [Result("x", "m", 1.0)], same_values)
