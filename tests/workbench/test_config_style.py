"""Issue 46: one config style. Every setting of every user-facing CLI is a field of a ``setting()`` dataclass, made a
flag (or a positional input) by ``workbench.params.add_config_flags``, with help text of its own: no hand-written
``add_argument``, no table of help texts kept beside the fields. Only the parser's own flags are exempt: ``--help``,
``--params`` (which file the settings come from) and ``-v/--verbose`` (logging)."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import re
from pathlib import Path

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


# -- the whole tree: no setting declared, and no argument added, outside the one parser ------------------------------
ROOT = Path(__file__).resolve().parents[2]
ONE_PARSER = ROOT / "workbench" / "params.py"
OUTSIDE = {
    "a hand-written argument": re.compile(r"\.add_argument\("),
    "a field declared with its own help metadata": re.compile(r"\bfield\([^)]*metadata=\{\s*['\"]help"),
    "an alias of setting()": re.compile(r"^\s*\w+\s*=\s*setting\s*(#.*)?$"),
}


def source_files() -> list[Path]:
    return sorted(p for package in ALL_PACKAGES for p in (ROOT / package).rglob("*.py") if p != ONE_PARSER)


def in_sources(find) -> list[str]:
    """``path:where`` for each place ``find(text)`` names in a source file of any package."""
    return [f"{path.relative_to(ROOT)}:{where}" for path in source_files()
            for where in find(path.read_text(encoding="utf-8"))]


def declared_outside(text: str) -> list[str]:
    """``line: what`` for each line of ``text`` that declares a setting or adds an argument outside the one parser."""
    return [f"{n}: {what}" for n, line in enumerate(text.splitlines(), 1)
            for what, pattern in OUTSIDE.items() if pattern.search(line)]


def test_no_package_declares_a_setting_or_adds_an_argument_outside_the_one_parser():
    assert in_sources(declared_outside) == []


def test_each_way_around_the_one_parser_is_caught():
    planted = ('    p.add_argument("--x", type=int)\n'
               '    size: int = field(default=1, metadata={"help": "a size"})\n'
               "_f = setting  # short\n"
               '    fine: int = setting(1, "declared once")\n')
    assert declared_outside(planted) == ["1: a hand-written argument", "2: a field declared with its own help metadata",
                                         "3: an alias of setting()"]


def post_inits_without_a_reason(text: str) -> list[int]:
    """The lines of the ``__post_init__`` methods in ``text`` that neither say why they stay (a comment on the def
    line or on the first statement after ``super().__post_init__()``) nor only call the base's."""
    lines = text.splitlines()
    found = []
    for node in ast.walk(ast.parse(text)):
        if not (isinstance(node, ast.FunctionDef) and node.name == "__post_init__"):
            continue
        body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        own = [s for s in body if ast.unparse(s) != "super().__post_init__()"]
        if own and "#" not in lines[node.lineno - 1] and "#" not in lines[own[0].lineno - 1]:
            found.append(node.lineno)
    return found


def test_each_hand_written_post_init_left_says_why_a_declaration_cannot_state_it():
    assert in_sources(post_inits_without_a_reason) == []


def test_a_post_init_without_its_reason_is_caught():
    planted = ("class A:\n"
               "    def __post_init__(self):\n"
               "        if self.n < 1:\n"
               "            raise ValueError('n')\n"
               "class B:\n"
               "    def __post_init__(self):\n"
               "        super().__post_init__()\n"
               "        if self.a > self.b:  # a rule across two settings\n"
               "            raise ValueError('a <= b')\n")
    assert post_inits_without_a_reason(planted) == [2]
