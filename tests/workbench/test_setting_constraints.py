"""A setting declares its constraints once, in ``setting()``; the parser and every ``Checked`` instance enforce them.

Each case states the verdict a reader expects from the declaration alone (a bound is inclusive or exclusive as
its name says), not what the code returned once."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pipeline.dedup.stage import main as dedup_main
from pipeline.web.extract import ExtractConfig
from workbench.params import REQUIRED, Checked, parse_flags, setting


@dataclasses.dataclass(frozen=True)
class Planted(Checked):
    SECTION = "planted"

    count: int = setting(1, "a count", at_least=1)
    rate: float = setting(0.5, "a rate in (0, 1)", above=0, below=1)
    share: float | None = setting(None, "a share in [0, 1] or none", at_least=0, at_most=1)
    mode: str = setting("a", "one of a, b", choices=("a", "b"))
    modes: tuple[str, ...] = setting(("a",), "some of a, b", choices=("a", "b"))
    flag: bool = setting(False, "a switch")
    widths: tuple[int, ...] = setting((8,), "widths", at_least=1, nonempty=True)
    source: Path | None = setting(None, "a file that exists", exists=True)


@pytest.mark.parametrize("changes, message", [
    ({"count": 0}, "planted.count must be >= 1, got 0"),
    ({"count": 1.5}, "planted.count must be an integer >= 1, got 1.5"),
    ({"count": True}, "planted.count must be an integer >= 1, got True"),
    ({"rate": 0}, "planted.rate must be > 0 and < 1, got 0"),
    ({"rate": 1}, "planted.rate must be > 0 and < 1, got 1"),
    ({"rate": "0.5"}, "planted.rate must be a number > 0 and < 1, got '0.5'"),
    ({"rate": float("nan")}, "planted.rate must be a finite number > 0 and < 1, got nan"),
    ({"share": float("inf")}, "planted.share must be a finite number >= 0 and <= 1, got inf"),
    ({"share": 1.01}, "planted.share must be >= 0 and <= 1, got 1.01"),
    ({"mode": "c"}, "planted.mode must be one of a, b, got 'c'"),
    ({"modes": ("a", "c")}, "planted.modes must be one of a, b, got 'c'"),
    ({"flag": 1}, "planted.flag must be true or false, got 1"),
    ({"widths": (8, 0)}, "planted.widths must be >= 1, got 0"),
    ({"widths": ()}, "planted.widths needs at least one value"),
])
def test_a_value_its_declaration_rules_out_is_one_error_naming_the_setting(changes, message):
    with pytest.raises(ValueError) as caught:
        Planted(**changes)
    assert str(caught.value) == message


def test_the_edges_a_declaration_allows_pass():
    Planted(count=1, rate=0.999, share=0, modes=("a", "b"), widths=(1, 2))
    Planted(share=1, rate=1e-9)
    Planted(share=None)  # an optional setting left out


def test_the_parser_checks_flags_against_the_same_declarations(tmp_path, capsys):
    assert parse_flags(Planted, ["--count", "3", "--flag", "--modes", "b", "a"]) == Planted(count=3, flag=True,
                                                                                            modes=("b", "a"))
    for argv, wrong in ((["--count", "0"], "--count must be >= 1, got 0"),
                        (["--source", str(tmp_path / "missing.txt")], "missing.txt: no such file or folder"),
                        (["--mode", "c"], "--mode must be one of a, b, got 'c'")):
        with pytest.raises(SystemExit) as exited:
            parse_flags(Planted, argv)
        err = capsys.readouterr().err
        assert exited.value.code == 2 and err.count("\n") == 1 and wrong in err


def test_a_required_setting_after_defaults_is_keyword_only_and_named_when_missing(capsys):
    @dataclasses.dataclass(frozen=True)
    class Needs:
        level: int = setting(1, "a level")
        target: str = setting(REQUIRED, "the target", kw_only=True)

    assert Needs(target="x").target == "x"
    with pytest.raises(SystemExit) as exited:
        parse_flags(Needs, [])
    assert exited.value.code == 2 and "--target is required" in capsys.readouterr().err


def test_a_stage_config_made_in_python_is_checked_like_one_read_from_a_file(tmp_path, capsys):
    with pytest.raises(ValueError, match=r"^extract.workers must be >= 1, got 0$"):
        ExtractConfig(workers=0)
    params = tmp_path / "params.yaml"
    params.write_text("dedup:\n  num_bands: 0\n")
    assert dedup_main(["--params", str(params), str(tmp_path), "--out-dir", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.strip() == "error: dedup.num_bands must be >= 1, got 0"
