"""The one params.yaml loader: dataclass defaults < the stage's section of params.yaml < flags given.

Every CLI reads its defaults through here, so every section is equally strict: a key the stage does not know is
an error naming the key, the section and the file, and ``--help`` shows the value a run would use (the
section's value where there is one). ``--params FILE`` picks another file; ``--params none`` uses only the
built-in defaults. A missing file is an empty file, so the CLIs also run outside the repository with flags.

A profile (params-gpu.yaml, params-cc.yaml) states only what differs from the file it names in ``base:``: its
sections merge onto the base's key by key, lists and values replace, and ``key: null`` removes a key so the
built-in default applies (``read_params``). ``python -m lmw_cli.config show SECTION.KEY`` prints a value and
the layer it came from.

Two ways in:
- ``parse_config(ConfigClass, "sft", argv)``: one flag per dataclass field (``--grad-accum``; ``X | None``
  fields accept ``none``; bools take ``true``/``false``), parsed into a validated config. A field that holds a
  dataclass (``TrainConfig.model``) is a nested mapping in the section (``train: {model: {d_model: 64}}``) and one
  flag per field of it (``--model.d-model 64``).
- ``apply_section(parser, "dedup", params_path)``: a parser built from several such dataclasses
  (``workbench.stage_cli.StageCommand.parser``) whose flag destinations are the section's keys (plus ``extra_keys`` that
  have no flag, such as ``filter.steps``).
"""

from __future__ import annotations

import argparse
import contextvars
import copy
import dataclasses
import difflib
import functools
import math
import operator
import sys
import types
import typing
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_PARAMS = Path("params.yaml")
NO_PARAMS = "none"


class _Required:
    """The default of a field without one: ``--help`` shows it as "required"."""

    def __repr__(self) -> str:
        return "required"


REQUIRED = _Required()


def nearest(name: str, valid: Iterable[str]) -> str:
    """" (did you mean X?)" for the valid name closest to a mistyped ``name``, or "" when none is close."""
    match = difflib.get_close_matches(name, list(valid), n=1, cutoff=0.6)
    return f" (did you mean {match[0]}?)" if match else ""


# the command as the user typed it, when a dispatcher (``python -m pipeline STEP``) runs a CLI that has its own name
invoked_as: contextvars.ContextVar[str | None] = contextvars.ContextVar("invoked_as", default=None)


class Parser(argparse.ArgumentParser):
    """The command line of a CLI that reads params: a flag is spelled out (``--max-step`` is not taken for
    ``--max-steps``), and a mistake is one line naming the nearest flag, exit 2, instead of the whole usage. The
    usage and errors name the command as typed (``invoked_as``), not the module that implements it."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        if invoked_as.get():
            kwargs["prog"] = invoked_as.get()
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        flags = [s for a in self._actions for s in a.option_strings]
        wrong = next((w for w in message.replace(",", " ").replace(":", " ").split() if w.startswith("--")), None)
        hint = nearest(wrong.split("=")[0], flags) if wrong and wrong.split("=")[0] not in flags else ""
        self.exit(2, f"error: {message}{hint} ({self.prog} --help lists the flags)\n")


def says_its_default(help_text: str | None) -> bool:
    """The help text already says what its default means ("(default: the cores left free)"): no "(default: None)"
    follows it."""
    return "(default" in (help_text or "")


class OneDefaultFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Help that shows each flag's default once (``says_its_default``)."""

    def _get_help_string(self, action):
        return action.help if says_its_default(action.help) else super()._get_help_string(action)


class ParamsError(ValueError):
    """A params file or section that cannot be used; the message names the file, section and key.

    ``unknown`` lists a section's unknown keys (empty for other problems), for callers that report them."""

    def __init__(self, message: str, unknown: Iterable[str] = ()):
        super().__init__(message)
        self.unknown = list(unknown)


def setting(default, help: str, *, choices: Sequence[Any] | None = None, at_least: float | None = None,
            above: float | None = None, at_most: float | None = None, below: float | None = None,
            nonempty: bool = False, exists: bool = False, positional: bool = False, repeatable: bool = False,
            parse: Callable[[str], Any] | None = None, metavar: str | None = None, params_only: bool = False,
            factory: Callable[[], Any] | None = None, kw_only: bool = False):
    """A dataclass field with its default, the help text its `--help` flag shows (``add_config_flags``) and its
    constraints; the only way a setting is declared (tests/workbench/test_config_style.py). Constraints, checked by
    the parser (``config_from_args``) and, for a ``Checked`` dataclass, whenever one is made (``check_settings``):
    ``choices``: the values it takes; ``at_least`` / ``above`` / ``at_most`` / ``below``: a number (an ``int`` where the
    annotation says so; ``None`` passes where the annotation allows it) in that range; ``nonempty``: a tuple
    setting given at least one value; ``exists``: a path that must exist (checked by the parser only: a config made
    in Python may name a file still to be written). Shape:
    ``positional``: a positional argument (a stage's inputs) instead of a ``--flag``; ``repeatable``: a tuple
    setting whose flag may be given several times, each adding values (``--model a=x --model b=y``); ``parse``: how
    one value's text is read when the annotation does not say (``64,4,2`` -> [64, 4, 2]), shown as ``metavar``.
    ``params_only``: no flag; only a params file gives it (a mapping such as ``filter.steps``).
    ``default=REQUIRED``: no default; a run must give it (a flag or the params section); ``kw_only``: such a
    setting after ones with defaults. A mapping or list default is copied for each instance; ``factory`` makes the
    default instead (``factory=ModelConfig``)."""
    metadata = {"help": help, "choices": tuple(choices) if choices else None, "at_least": at_least, "above": above,
                "at_most": at_most, "below": below, "nonempty": nonempty, "exists": exists, "positional": positional,
                "repeatable": repeatable, "parse": parse, "metavar": metavar}
    metadata = {k: v for k, v in metadata.items() if v is not None and v is not False}
    if params_only:
        metadata["flag"] = False
    if factory is None and isinstance(default, dict | list):
        factory = functools.partial(copy.deepcopy, default)
    kw_only = True if kw_only else dataclasses.MISSING  # MISSING: the class's own kw_only applies
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata, kw_only=kw_only)
    return dataclasses.field(default=dataclasses.MISSING if default is REQUIRED else default, metadata=metadata,
                             kw_only=kw_only)


# a setting's bounds: the keyword, the comparison its value must pass, and how an error states it
BOUNDS = (("above", operator.gt, ">"), ("at_least", operator.ge, ">="), ("at_most", operator.le, "<="),
          ("below", operator.lt, "<"))


def _bounds(meta) -> list[tuple]:
    """(comparison, limit, text) of each bound the setting declares, lower ones first."""
    return [(compare, meta[key], f"{sign} {meta[key]}") for key, compare, sign in BOUNDS if key in meta]


def _range_text(bounds: list[tuple]) -> str:
    return " and ".join(text for _, _, text in bounds)


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def setting_problem(f: dataclasses.Field, value, annotation=None, check_paths: bool = False) -> str | None:
    """What is wrong with ``value`` for the setting ``f`` declares ("must be >= 1, got 0"), or None."""
    meta = f.metadata
    if value is None:
        return None
    if isinstance(value, tuple | list):  # each value of a tuple setting (--presets xl 2.7B)
        if meta.get("nonempty") and not value:
            return "needs at least one value"
        return next((why for item in value if (why := setting_problem(f, item, _element_type(annotation),
                                                                      check_paths))), None)
    if annotation is bool and not isinstance(value, bool):
        return f"must be true or false, got {value!r}"
    if (choices := meta.get("choices")) and value not in choices:
        return f"must be one of {', '.join(map(str, choices))}, got {value!r}"
    kinds = _kinds(annotation)
    bounds = _bounds(meta)
    whole = int in kinds and float not in kinds
    if (whole and not (_is_number(value) and isinstance(value, int))) or (bounds and not _is_number(value)):
        return f"must be {'an integer' if whole else 'a number'}{' ' + _range_text(bounds) if bounds else ''}, " \
               f"got {value!r}"
    if bounds and not math.isfinite(value):
        return f"must be a finite number {_range_text(bounds)}, got {value!r}"
    if not all(compare(value, limit) for compare, limit, _ in bounds):
        return f"must be {_range_text(bounds)}, got {value!r}"
    if check_paths and meta.get("exists") and not Path(value).exists():
        return f"{value}: no such file or folder"
    return None


def _kinds(annotation) -> tuple:
    """The types an annotation allows: ``int | None`` -> (int, NoneType); ``int`` -> (int,)."""
    return typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) \
        else (annotation,)


def _element_type(annotation):
    """X of a ``tuple[X, ...]`` / ``list[X]`` annotation (also ``| None``), else None (a fixed tuple's items differ)."""
    annotation = next((a for a in _kinds(annotation) if a is not type(None)), None)
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is list or (typing.get_origin(annotation) is tuple and args[1:] == (...,)):
        return args[0] if args else None
    return None


def _is_tuple(annotation) -> bool:
    """A ``tuple[...]`` annotation, or one ``| None``."""
    return any(typing.get_origin(kind) is tuple for kind in _kinds(annotation))


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def check_settings(config, where: str = "") -> None:
    """A ValueError naming the first setting of the dataclass ``config`` its declaration rules out
    (``setting_problem``), as ``where`` + name (default: the class's name and a dot)."""
    where = where or f"{type(config).__name__}."
    hints = _hints(type(config))
    for f in dataclasses.fields(config):
        problem = setting_problem(f, getattr(config, f.name), hints.get(f.name))
        if problem:
            raise ValueError(f"{where}{f.name} {problem}")


class Checked:
    """A settings dataclass whose declared constraints (``setting(at_least=..., choices=...)``) hold for every
    instance, however it was made: a flag, a params file, or Python. ``SECTION`` names it in errors
    (``extract.workers must be >= 1, got 0``). A subclass with a rule across settings extends ``__post_init__``."""

    SECTION: typing.ClassVar[str | None] = None

    def __post_init__(self) -> None:
        check_settings(self, self.settings_prefix())

    def settings_prefix(self) -> str:
        return f"{self.SECTION or type(self).__name__}."

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict):
        """From ``to_dict``'s form; a key that is not a setting is a ValueError naming it."""
        check_fields(cls, data, cls.__name__)
        return cls(**data)


def check_fields(cls: type, data: dict, label: str) -> None:
    """Raise ValueError naming any key of ``data`` that is not a field of dataclass ``cls``."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{label}: unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")


def override(cls: type, name: str, default, help: str | None = None):
    """A subclass's own default (and, given, help text) for a setting ``cls`` declares; the rest of its declaration
    (choices, positional) stays."""
    base = next(f for f in dataclasses.fields(cls) if f.name == name)
    return dataclasses.field(default=default, metadata={**base.metadata, **({"help": help} if help else {})})


@dataclass(frozen=True)
class CheckOnly:
    """The one setting of the project's checkers (lmw_cli.cli_docs, lmw_cli.doc_commands)."""

    check: bool = setting(False, "change nothing; exit 1 on a problem (cli_docs: a stale docs/cli.md or a bare flag; "
                                 "doc_commands: a documented command that would not run)")


def _read_yaml(path: Path) -> dict[str, Any]:
    import yaml  # pyyaml: not a dependency of model/ or lmw_kernels/ unless a CLI reads params

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ParamsError(f"{path}: invalid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ParamsError(f"{path}: expected a mapping of sections, got {type(data).__name__}")
    return data


def overlay(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``changes`` merged in: mappings merge key by key, anything else replaces, and a ``null``
    removes the key (the stage's built-in default applies again)."""
    merged = dict(base)
    for key, value in changes.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = overlay(merged[key], value)
        else:
            merged[key] = value
    return merged


def read_layers(path: str | Path = DEFAULT_PARAMS) -> list[tuple[Path, dict[str, Any]]]:
    """[(file, its mapping)] from the bottom layer up: a profile names the file it changes in its ``base:`` key
    (relative to the profile's folder), and states only what differs."""
    layers, seen = [], set()
    path = Path(path)
    while True:
        if path.resolve() in seen:
            raise ParamsError(f"{path}: its base: chain loops back to itself")
        seen.add(path.resolve())
        data = _read_yaml(path)
        base = data.pop("base", None)
        layers.insert(0, (path, data))
        if base is None:
            return layers
        path = path.parent / str(base)
        if not path.exists():
            raise ParamsError(f"{layers[0][0]}: base: {base} does not exist ({path})")


def params_layers(path: str | Path = DEFAULT_PARAMS) -> list[tuple[Path, dict[str, Any]]]:
    """``read_layers``; none for ``none`` and for the default params.yaml where there is none (the built-in
    defaults). A file given that does not exist is a ParamsError naming the nearest one beside it."""
    if str(path).lower() == NO_PARAMS:
        return []
    if not Path(path).exists():
        if Path(path) == DEFAULT_PARAMS:
            return []
        beside = [p.name for p in Path(path).parent.glob("*.y*ml")] if Path(path).parent.is_dir() else []
        raise ParamsError(f"{path}: no such params file{nearest(Path(path).name, beside)}; --params none runs on the "
                          "built-in defaults")
    return read_layers(path)


def merge_layers(layers: list[tuple[Path, dict[str, Any]]]) -> dict[str, Any]:
    """The layers as one mapping, each profile overlaid on its base ({} for none)."""
    if not layers:
        return {}
    (_, merged), *profiles = layers  # the base file as written: its own nulls are values
    for _, data in profiles:
        merged = overlay(merged, data)
    return merged


def read_params(path: str | Path = DEFAULT_PARAMS) -> dict[str, Any]:
    """The whole params file as a mapping, a profile merged onto its base (``params_layers``, ``merge_layers``)."""
    return merge_layers(params_layers(path))


# The sections a params file may have, one per command that reads one (lmw_cli.config names each one's CLI).
SECTIONS = ("sample", "extract", "filter", "classify", "dedup", "report", "tokenizer", "shards", "train", "sweep",
            "scaling_fit", "alignment", "sft", "dpo", "grpo", "rft", "alignment_report", "leaderboard")

# A section that inherits the settings its stages share from another: the alignment trainers' and report's common
# settings (tokenizer, task, template ...) are stated once, in `alignment:`; a section's own keys win.
SECTION_BASES = {name: "alignment" for name in ("sft", "dpo", "grpo", "rft", "alignment_report")}


def load_section(section: str, path: str | Path = DEFAULT_PARAMS, known: Iterable[str] | type | None = None
                 ) -> dict[str, Any]:
    """The ``section`` mapping of the params file ({} when absent), over the keys it inherits from its base section
    (``SECTION_BASES``: with ``known``, only the base's keys this section knows). With ``known`` (key names, dotted
    for a nested dataclass's fields, or a dataclass), a key outside it is a ParamsError naming the key, the section
    and the file. A section the file has beside it that no command reads (``SECTIONS``) is a ParamsError naming the
    nearest section, so a mistyped ``trian:`` is not silently ignored."""
    layers = params_layers(path)
    check_sections(layers, section)
    params = merge_layers(layers)
    values = _mapping(params, section, path)
    names = (set(field_names(known)) if isinstance(known, type) else set(known)) if known is not None else None
    if section in SECTION_BASES:
        base = _mapping(params, SECTION_BASES[section], path)
        values = {k: v for k, v in base.items() if names is None or k in names} | values
    if names is not None:
        unknown = sorted(set(flatten(values, names)) - names)
        if unknown:
            raise ParamsError(f"{path}: section {section!r} has unknown key(s) {', '.join(unknown)}"
                              f"{nearest(unknown[0], names)}", unknown)
    return dict(values)


def check_sections(layers: list[tuple[Path, dict[str, Any]]], section: str) -> None:
    """A ParamsError naming the file (a profile or its base) and the first section no command reads."""
    known = (*SECTIONS, section)
    for file, data in layers:
        unknown = [key for key in data if key not in known]
        if unknown:
            raise ParamsError(f"{file}: unknown section {unknown[0]!r}{nearest(unknown[0], known)}", unknown)


def _mapping(params: dict[str, Any], section: str, path: str | Path) -> dict[str, Any]:
    values = params.get(section) or {}
    if not isinstance(values, dict):
        raise ParamsError(f"{path}: section {section!r} must be a mapping, got {type(values).__name__}")
    return dict(values)


def nested_config(annotation) -> type | None:
    """The dataclass a field holds (TrainConfig.model: ModelConfig), else None."""
    return annotation if isinstance(annotation, type) and dataclasses.is_dataclass(annotation) else None


def field_names(config_cls: type, prefix: str = "") -> list[str]:
    """Every setting of ``config_cls``: its fields, a nested dataclass's as ``field.subfield`` (model.d_model)."""
    hints = typing.get_type_hints(config_cls)
    names = []
    for f in dataclasses.fields(config_cls):
        inner = nested_config(hints[f.name])
        names += field_names(inner, f"{prefix}{f.name}.") if inner else [prefix + f.name]
    return names


def flatten(values: dict[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """``values`` with each mapping under a nested config's key spelled out as dotted keys, as ``names`` has them:
    {"model": {"d_model": 64}} -> {"model.d_model": 64}. Other mappings (filter.steps) stay values."""
    names = set(names)
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, dict) and any(name.startswith(key + ".") for name in names):
            out.update(flatten({f"{key}.{k}": v for k, v in value.items()}, names))
        else:
            out[key] = value
    return out


def parse_bool(text: str) -> bool:
    value = str(text).strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _optional(kind):
    def parse(text: str):
        return None if str(text).strip().lower() in ("", "none", "null") else kind(text)
    parse.__name__ = getattr(kind, "__name__", "value")
    return parse


def _flag_type(annotation) -> tuple[Any, str | None]:
    """(argparse type, nargs) for a field annotation: int, float, str, Path, bool, X | None, tuple[X, ...],
    list[X]."""
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        inner = next(a for a in args if a is not type(None))
        kind, nargs = _flag_type(inner)
        return _optional(kind), "+" if nargs == "*" else nargs  # a list that may be absent: given, it has values
    if origin in (tuple, list):
        return _flag_type(args[0])[0] if args else str, "*"
    if annotation is bool:
        return parse_bool, "?"  # "--flag" alone is "--flag true"
    if annotation in (int, float, str, Path):
        return annotation, None
    return str, None


def nest(values: dict[str, Any]) -> dict[str, Any]:
    """``flatten``'s inverse: {"model.d_model": 64, "lr": 0.1} -> {"model": {"d_model": 64}, "lr": 0.1}."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        *parents, name = key.split(".")
        inner = out
        for parent in parents:
            inner = inner.setdefault(parent, {})
        inner[name] = value
    return out


def add_config_flags(parser: argparse.ArgumentParser, config_cls: type, bool_switches: bool = False,
                     prefix: str = "", defaults: Any = None) -> None:
    """One ``--field-name`` flag per dataclass field, defaulting to the field's default; the help line shows the
    default a run will use (after ``apply_section``). ``bool_switches``: a ``bool`` field is a value-less
    ``--field / --no-field`` pair instead of ``--field true|false``. A field holding a dataclass gets one flag per
    field of it, ``--field.sub-field`` (dest ``field.sub_field``, the key ``apply_section`` reads from a nested
    mapping of the section); ``prefix`` and ``defaults`` (the nested default instance) are for that recursion."""
    hints = typing.get_type_hints(config_cls)
    for f in dataclasses.fields(config_cls):
        if defaults is not None:
            default = getattr(defaults, f.name)
        elif f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = REQUIRED
        dest = prefix + f.name
        if f.metadata.get("flag") is False:  # a mapping only a params file can give (filter.steps)
            continue
        if inner := nested_config(hints[f.name]):
            add_config_flags(parser, inner, bool_switches, dest + ".",
                             None if default is REQUIRED else default)
            continue
        kind, nargs = _flag_type(hints[f.name])
        kind = f.metadata.get("parse", kind)
        text = f.metadata.get("help") or f.name.replace("_", " ")
        flag = "--" + prefix + f.name.replace("_", "-")
        help_text = text if says_its_default(text) else f"{text} (default: %(default)s)"
        choices = f.metadata.get("choices")
        if f.metadata.get("positional"):
            action = parser.add_argument(dest, type=kind, nargs=nargs or "?", default=default, choices=choices,
                                         help=help_text)
        elif f.metadata.get("repeatable"):  # None when not given: config_from_args puts the default back
            action = parser.add_argument(flag, dest=dest, type=kind, nargs="+", action="extend", default=None,
                                         metavar=f.metadata.get("metavar", f.name.upper()), help=help_text)
        elif bool_switches and hints[f.name] is bool:
            action = parser.add_argument(flag, dest=dest, action=argparse.BooleanOptionalAction, default=default,
                                         help=help_text)
        else:  # choices are checked by config_from_args, for a flag's value and a params file's alike: one line
            action = parser.add_argument(flag, dest=dest, type=kind, nargs=nargs, default=default,
                                         **({"const": True} if nargs == "?" else {}),
                                         metavar="{" + ",".join(map(str, choices)) + "}" if choices else
                                         f.metadata.get("metavar", f.name.upper()),
                                         help=help_text)
        action.setting = f  # the field that declares it: what the config-style test checks


def params_path(argv: Sequence[str] | None) -> str:
    """The ``--params`` value in ``argv`` (params.yaml when absent), read before the real parse."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--params", default=str(DEFAULT_PARAMS))
    return pre.parse_known_args(list(sys.argv[1:] if argv is None else argv))[0].params


def add_params_flag(parser: argparse.ArgumentParser, section: str | None = None) -> None:
    """``--params FILE``: the parser's own flag, which file the settings come from (not a setting itself)."""
    whose = f"whose {section!r} section gives the defaults" if section else "or profile to run with"
    parser.add_argument("--params", default=str(DEFAULT_PARAMS),
                        help=f"params file {whose} (default %(default)s; flags win; 'none': only the built-in "
                             "defaults)")


def add_verbose_flag(parser: argparse.ArgumentParser) -> None:
    """``-v/--verbose``: the parser's own flag for logging, not a setting of the run."""
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")


def parse_dispatch(argv: Sequence[str], prog: str, description: str, steps: dict[str, str]
                   ) -> tuple[str, list[str]]:
    """A dispatcher's command line (``python -m pipeline [--params F] [-v] STEP ...``): the step and the
    arguments it gets, ``--params`` and ``-v`` given before the step passed on in front."""
    parser = Parser(prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter,
                    epilog="steps:\n" + "\n".join(f"  {name:<17} {text}" for name, text in steps.items())
                           + f"\n\n`{prog} STEP --help` lists the step's flags.")
    parser.add_argument("--params", help="params file with the stage defaults (default: params.yaml)")
    add_verbose_flag(parser)
    parser.add_argument("step", choices=steps, help="the step to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the step's flags")
    args = parser.parse_args(list(argv))
    return args.step, (["--params", args.params] if args.params else []) + (["-v"] if args.verbose else []) + args.args


def apply_section(parser: argparse.ArgumentParser, section: str, path: str | Path,
                  extra_keys: Iterable[str] = ()) -> dict[str, Any]:
    """Make the ``section`` of ``path`` the parser's defaults (so ``--help`` shows them); a key that is neither
    a flag destination nor in ``extra_keys`` is a ParamsError. Returns the section."""
    dests = {a.dest for a in parser._actions if a.dest not in ("help", "params", argparse.SUPPRESS)}
    values = load_section(section, path, known=dests | set(extra_keys))
    parser.set_defaults(**{k: v for k, v in flatten(values, dests).items() if k in dests})
    return values


def build_config_parser(config_cls: type, section: str, prog: str | None = None, description: str = ""
                        ) -> argparse.ArgumentParser:
    parser = Parser(prog=prog, description=description)
    add_params_flag(parser, section)
    add_config_flags(parser, config_cls)
    return parser


def config_from_args(config_cls: type, args: argparse.Namespace, section: str = "", prefix: str = "",
                     params_only: dict | None = None):
    """The dataclass built from the parsed flags (a nested dataclass from its ``--field.sub-field`` flags); a
    field left without a value is a ParamsError naming its flag. A field without a flag takes its value from
    ``params_only`` (the params section) when it is there, else its default."""
    hints = typing.get_type_hints(config_cls)
    values = {}
    for f in dataclasses.fields(config_cls):
        if f.metadata.get("flag") is False:
            if params_only and f.name in params_only:
                values[f.name] = params_only[f.name]
            continue
        inner = nested_config(hints[f.name])
        values[f.name] = config_from_args(inner, args, section, f"{prefix}{f.name}.") if inner else \
            getattr(args, prefix + f.name)
        if f.metadata.get("repeatable"):
            if values[f.name] is not None:
                values[f.name] = tuple(values[f.name])
            else:
                values[f.name] = REQUIRED if f.default is dataclasses.MISSING else f.default
        elif isinstance(values[f.name], list) and _is_tuple(hints[f.name]):
            values[f.name] = tuple(values[f.name])  # a tuple setting's flag values, as the annotation says
    positional = {f.name for f in dataclasses.fields(config_cls) if f.metadata.get("positional")}
    missing = [prefix + name for name, value in values.items() if value is REQUIRED]
    if missing:
        flags = " and ".join(name if name in positional else "--" + name.replace("_", "-") for name in missing)
        keys = ", ".join(f"{section}.{name}" for name in missing)
        where = f" or {keys} in {getattr(args, 'params', DEFAULT_PARAMS)}" if section else ""
        given = "on the command line" if set(missing) <= positional else "a flag"
        raise ParamsError(f"{flags} {'is' if len(missing) == 1 else 'are'} required ({given}{where})")
    for f in dataclasses.fields(config_cls):  # a flag's value and a params file's alike, in one line
        if f.name in values and not nested_config(hints[f.name]):
            problem = setting_problem(f, values[f.name], hints[f.name], check_paths=True)
            if problem:
                name = prefix + f.name
                raise ParamsError(f"{section + '.' + name if section else '--' + name.replace('_', '-')} {problem}")
    return config_cls(**values)


def parse_flags(config_cls: type, argv: Sequence[str] | None = None, prog: str | None = None,
                description: str = ""):
    """The settings of a CLI that reads no params section (a benchmark, a checker): its flags over the dataclass
    defaults, a ``bool`` setting as a ``--name / --no-name`` switch. A bad value is one line and exit 2."""
    parser = Parser(prog=prog, description=description, formatter_class=OneDefaultFormatter)
    add_config_flags(parser, config_cls, bool_switches=True)
    args = parser.parse_args(argv)
    try:
        return config_from_args(config_cls, args)
    except ValueError as e:
        usage_error(str(e))


def usage_error(message: str) -> typing.NoReturn:
    """A bad setting found after parsing (a folder without the files a run needs): one line, exit 2, as the
    parser's own errors."""
    sys.stderr.write(f"error: {message}\n")
    raise SystemExit(2)


def parse_config(config_cls: type, section: str, argv: Sequence[str] | None = None, prog: str | None = None,
                 description: str = "",
                 parser: argparse.ArgumentParser | None = None):
    """Flags over the ``section`` of ``--params`` over the dataclass defaults, as a validated ``config_cls``.
    ``parser`` may bring extra flags of its own (they are returned in ``args``). Returns (config, args)."""
    parser = parser or build_config_parser(config_cls, section, prog, description)
    apply_section(parser, section, params_path(argv))
    args = parser.parse_args(argv)
    return config_from_args(config_cls, args, section), args
