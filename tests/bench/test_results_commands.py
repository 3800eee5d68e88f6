"""Every results row names a command a reader can run (issue 45): the migration of the moved benchmark modules, the
check over every committed row, and ``record`` refusing a module that does not exist."""

from __future__ import annotations

import json
import sys
import types

import pytest

from bench.tools import migrate_commands
from bench.tools.results import Result, record, runnable_command


def test_every_committed_row_names_a_module_that_exists():
    assert migrate_commands.missing() == []


def test_the_migration_maps_each_moved_module_to_one_that_exists():
    assert migrate_commands.migrate("python -m bench.kernel_ops --repeats 5") == \
        "python -m bench.benchmarks.kernel_ops --repeats 5"
    assert migrate_commands.migrate("python -m bench.benchmarks.kernel_ops") == "python -m bench.benchmarks.kernel_ops"
    for old, new in migrate_commands.MOVED.items():
        assert not migrate_commands.module_exists(old) and migrate_commands.module_exists(new), (old, new)


def test_record_writes_the_module_that_ran_and_refuses_a_missing_one(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "__main__", types.SimpleNamespace(__spec__=types.SimpleNamespace(
        name="bench.benchmarks.scaling_backtest")))
    path = record("area", [Result("x", "m", 1.0)], "python -m bench.scaling_backtest --seed 1", tmp_path)
    assert json.loads(path.read_text())["command"] == "python -m bench.benchmarks.scaling_backtest --seed 1"
    assert runnable_command("python -m bench.benchmarks.langid") == "python -m bench.benchmarks.langid"  # exists: kept
    monkeypatch.setitem(sys.modules, "__main__", types.SimpleNamespace(__spec__=None))  # not run with -m
    with pytest.raises(ValueError, match="bench.nowhere, which does not exist"):
        record("area", [Result("x", "m", 1.0)], "python -m bench.nowhere", tmp_path)
