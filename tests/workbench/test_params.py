"""workbench.params: dataclass defaults < params.yaml section < flags, strict about unknown keys."""

import argparse
from dataclasses import dataclass, field

import pytest

from workbench.params import ParamsError, apply_section, load_section, parse_config, read_params


@dataclass(frozen=True)
class Toy:
    data: str = field(default="data/in", metadata={"help": "input folder"})
    steps: int = 10
    lr: float = 1e-3
    shuffle: bool = True
    limit: int | None = None
    langs: tuple[str, ...] = ("en",)


def _params(tmp_path, text: str):
    path = tmp_path / "params.yaml"
    path.write_text(text)
    return str(path)


def test_precedence_is_dataclass_then_section_then_flags(tmp_path):
    p = _params(tmp_path, "toy:\n  steps: 20\n  lr: 0.5\n  limit: 7\n")
    cfg, _ = parse_config(Toy, "toy", ["--params", p, "--lr", "0.25"])
    assert cfg == Toy(steps=20, lr=0.25, limit=7)


def test_flags_parse_types_bools_none_and_lists(tmp_path):
    p = _params(tmp_path, "toy:\n  limit: 3\n")
    cfg, _ = parse_config(Toy, "toy", ["--params", p, "--shuffle", "false", "--limit", "none", "--langs", "en", "de"])
    assert (cfg.shuffle, cfg.limit, tuple(cfg.langs)) == (False, None, ("en", "de"))


def test_unknown_key_names_key_section_and_file(tmp_path):
    p = _params(tmp_path, "toy:\n  stepz: 3\n")
    with pytest.raises(ParamsError, match=r"params.yaml: section 'toy' has unknown key\(s\) stepz"):
        parse_config(Toy, "toy", ["--params", p])


def test_help_shows_the_value_a_run_will_use(tmp_path, capsys):
    p = _params(tmp_path, "toy:\n  steps: 99\n")
    with pytest.raises(SystemExit):
        parse_config(Toy, "toy", ["--params", p, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "(default: 99)" in out and "input folder (default: data/in)" in out


def test_params_none_gives_the_built_in_defaults_and_a_missing_file_is_an_error(tmp_path, monkeypatch):
    p = _params(tmp_path, "toy:\n  steps: 5\n")
    assert parse_config(Toy, "toy", ["--params", "none"])[0] == Toy()
    assert parse_config(Toy, "toy", ["--params", p])[0].steps == 5
    with pytest.raises(ParamsError, match=r"paramz.yaml: no such params file \(did you mean params.yaml\?\)"):
        parse_config(Toy, "toy", ["--params", str(tmp_path / "paramz.yaml")])  # once silently the defaults
    monkeypatch.chdir(tmp_path / "..")  # no params.yaml here: the built-in defaults, as in a fresh folder
    assert parse_config(Toy, "toy", [])[0] == Toy()


def test_a_mistyped_key_names_the_nearest_one_not_every_key(tmp_path):
    with pytest.raises(ParamsError) as info:
        parse_config(Toy, "toy", ["--params", _params(tmp_path, "toy:\n  stepz: 3\n")])
    assert str(info.value).endswith("unknown key(s) stepz (did you mean steps?)") and "langs" not in str(info.value)


def test_a_flag_is_never_abbreviated_and_a_mistyped_one_is_one_line(tmp_path, capsys):
    p = _params(tmp_path, "toy:\n  steps: 5\n")
    with pytest.raises(SystemExit) as exit_info:
        parse_config(Toy, "toy", ["--params", p, "--step", "3"])  # once silently taken for --steps
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and len(err) == 1
    assert err[0].startswith("error: unrecognized arguments: --step 3 (did you mean --steps?)")


def test_required_field_is_a_clear_error(tmp_path):
    @dataclass(frozen=True)
    class Needs:
        model: str
        steps: int = 1

    with pytest.raises(ParamsError, match="--model is required"):
        parse_config(Needs, "needs", ["--params", "none"])
    assert parse_config(Needs, "needs", ["--params", "none", "--model", "m"])[0] == Needs(model="m")


def test_bad_yaml_and_bad_section_name_the_file(tmp_path):
    with pytest.raises(ParamsError, match="invalid YAML"):
        read_params(_params(tmp_path, "toy: [unclosed\n"))
    with pytest.raises(ParamsError, match="section 'toy' must be a mapping"):
        load_section("toy", _params(tmp_path, "toy: 3\n"))


def test_apply_section_on_a_hand_written_parser(tmp_path):
    p = _params(tmp_path, "dedup:\n  num_bands: 7\n  steps: {a: 1}\n")
    parser = argparse.ArgumentParser()
    parser.add_argument("--num-bands", type=int, default=14)
    section = apply_section(parser, "dedup", p, extra_keys=("steps",))
    assert parser.parse_args([]).num_bands == 7 and parser.parse_args(["--num-bands", "3"]).num_bands == 3
    assert section["steps"] == {"a": 1}
    with pytest.raises(ParamsError, match="unknown key\\(s\\) num_band "):
        apply_section(parser, "dedup", _params(tmp_path, "dedup:\n  num_band: 7\n"))


def test_unknown_keys_are_on_the_error(tmp_path):
    with pytest.raises(ParamsError) as info:
        load_section("toy", _params(tmp_path, "toy:\n  b: 1\n  a: 2\n  steps: 3\n"), known=Toy)
    assert info.value.unknown == ["a", "b"]
    with pytest.raises(ParamsError) as info:
        load_section("toy", _params(tmp_path, "toy: 3\n"))
    assert info.value.unknown == []


def test_bool_switches_are_value_less_flag_pairs(tmp_path):
    from workbench.params import add_config_flags, add_params_flag

    parser = argparse.ArgumentParser()
    add_params_flag(parser, "toy")
    add_config_flags(parser, Toy, bool_switches=True)
    p = _params(tmp_path, "toy:\n  shuffle: false\n")
    assert parse_config(Toy, "toy", ["--params", p], parser=parser)[0].shuffle is False
    assert parse_config(Toy, "toy", ["--params", p, "--shuffle"], parser=parser)[0].shuffle is True
    assert parse_config(Toy, "toy", ["--params", "none", "--no-shuffle"], parser=parser)[0].shuffle is False


@dataclass(frozen=True)
class Inner:
    width: int | None = field(default=None, metadata={"help": "width (none: the preset's)"})
    fast: bool = False


@dataclass(frozen=True)
class Outer:
    steps: int = 10
    inner: Inner = field(default_factory=Inner)


def test_a_nested_config_is_a_nested_mapping_and_dotted_flags(tmp_path):
    p = _params(tmp_path, "outer:\n  steps: 3\n  inner:\n    width: 7\n")
    assert parse_config(Outer, "outer", ["--params", p, "--inner.fast", "true"])[0] == \
        Outer(steps=3, inner=Inner(width=7, fast=True))
    assert parse_config(Outer, "outer", ["--params", p, "--inner.width", "none"])[0].inner.width is None
    with pytest.raises(ParamsError, match=r"unknown key\(s\) inner.widht"):
        parse_config(Outer, "outer", ["--params", _params(tmp_path, "outer:\n  inner:\n    widht: 7\n")])


def test_a_profile_merges_a_nested_mapping_key_by_key(tmp_path):
    _params(tmp_path, "outer:\n  inner:\n    width: 7\n    fast: true\n")
    profile = tmp_path / "gpu.yaml"
    profile.write_text("base: params.yaml\nouter:\n  inner:\n    width: null\n")
    assert parse_config(Outer, "outer", ["--params", str(profile)])[0] == Outer(inner=Inner(width=None, fast=True))
