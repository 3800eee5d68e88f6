"""Issue 46: one config style. Every setting of every user-facing CLI is a field of a ``setting()`` dataclass, made a
flag (or a positional input) by ``workbench.params.add_config_flags``, with help text of its own: no hand-written
``add_argument``, no table of help texts kept beside the fields. Only the parser's own flags are exempt: ``--help``,
``--params`` (which file the settings come from) and ``-v/--verbose`` (logging)."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from lmw_cli.cli_docs import ALL_PACKAGES, capture_parser, cli_modules
from workbench.params import add_config_flags, add_params_flag, setting

PARSERS_OWN = ("params", "verbose")


def outside_settings(parser: argparse.ArgumentParser) -> list[str]:
    """Each argument of ``parser`` not declared as a setting with its own help, and why."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or action.dest in PARSERS_OWN:
            continue
        name = action.option_strings[-1] if action.option_strings else action.dest
        declared = getattr(action, "setting", None)
        text = declared.metadata.get("help", "").strip() if declared is not None else ""
        if declared is None:
            found.append(f"{name}: not declared in a setting() dataclass")
        elif not text:
            found.append(f"{name}: its setting has no help text")
        elif not (action.help or "").startswith(text):
            found.append(f"{name}: its help comes from a table, not from its setting")
    return found


@pytest.mark.parametrize("module", cli_modules(ALL_PACKAGES))
def test_every_cli_setting_is_declared_once_with_its_help(module):
    assert outside_settings(capture_parser(module)) == []


def test_a_hand_written_flag_a_setting_without_help_and_a_help_table_are_each_caught():
    @dataclasses.dataclass(frozen=True)
    class Planted:
        documented: int = setting(1, "a documented setting")
        bare: int = setting(2, "")
        tabled: int = setting(3, "its own help")

    parser = argparse.ArgumentParser()
    add_params_flag(parser, "planted")
    add_config_flags(parser, Planted)
    next(a for a in parser._actions if a.dest == "tabled").help = "help from a table"  # what a help table did
    parser.add_argument("--by-hand", type=int, default=4, help="written outside any dataclass")
    assert outside_settings(parser) == ["--bare: its setting has no help text",
                                        "--tabled: its help comes from a table, not from its setting",
                                        "--by-hand: not declared in a setting() dataclass"]


def test_a_choice_from_a_params_file_is_checked_like_a_flag(tmp_path):
    """argparse checks a flag's choices; a params file's value is checked by config_from_args, in one line."""
    from pipeline.web.extract import main

    params = tmp_path / "params.yaml"
    params.write_text("extract:\n  extractor: no-such-extractor\n")
    assert main(["--params", str(params), str(tmp_path / "missing.warc.gz")]) == 2
