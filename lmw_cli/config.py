"""Where a setting comes from: `python -m lmw_cli.config show SECTION.KEY [--params FILE]`.

A stage's value is its CLI's built-in default, unless params.yaml's section sets it, unless a profile
(params-gpu.yaml, params-cc.yaml: they name params.yaml as their `base:`) changes it, unless a flag is given on the
command line (flags are the command's own: this shows what a run with no flags would use). For example

    $ python -m lmw_cli.config show train.lr --params params-gpu.yaml
    train.lr = 0.0006
      from params-gpu.yaml
      over params.yaml: 0.006
      over the built-in default of python -m model.train: 0.001

`python -m lmw_cli.config show train` lists every key of a section that way. A trainer's section (sft, dpo, grpo,
rft, alignment_report) inherits the keys it knows from the shared `alignment:` section (workbench.params.SECTION_BASES):
its own keys win, then `alignment:`'s, then the built-in default. A nested config's keys
(train.model.d_model) have flags and so built-in defaults; other nested keys (filter.steps.langid, sweep.train.device)
are looked up in the files, and their built-in defaults live in the stage's code.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmw_cli.cli_docs import capture_parser
from lmw_cli.registry import SECTION_CLIS
from workbench.params import (
    DEFAULT_PARAMS,
    NO_PARAMS,
    REQUIRED,
    SECTION_BASES,
    ParamsError,
    Parser,
    add_config_flags,
    add_params_flag,
    config_from_args,
    read_layers,
    setting,
)

_UNSET = object()


def built_in_defaults(section: str) -> dict[str, Any]:
    """{key: default} of the section's CLI with no params file (its flags' and arguments' defaults)."""
    parser = capture_parser(SECTION_CLIS[section], ("--params", NO_PARAMS, "--help"))
    return {a.dest: a.default for a in parser._actions
            if a.dest not in ("help", "params", argparse.SUPPRESS) and not isinstance(a, argparse._HelpAction)}


def _lookup(mapping: dict, keys: list[str]):
    for key in keys:
        if not isinstance(mapping, dict) or key not in mapping:
            return _UNSET
        mapping = mapping[key]
    return mapping


def provenance(dotted: str, params: str | Path = DEFAULT_PARAMS) -> tuple[Any, str, list[tuple[str, Any]]]:
    """(the value a run with no flags uses, where it comes from, [(source, value)] of every layer that sets it,
    the profile first, then the built-in default). A profile's `null` drops the key: the default applies."""
    section, *keys = dotted.split(".")
    if section not in SECTION_CLIS:
        raise ParamsError(f"unknown section {section!r} (sections: {', '.join(SECTION_CLIS)})")
    if not keys:
        raise ParamsError(f"{dotted!r}: give SECTION.KEY (or show SECTION to list its keys)")
    layers = [] if str(params).lower() == NO_PARAMS or not Path(params).exists() else read_layers(params)
    sources = [(str(path), value) for path, data in reversed(layers)
               if (value := _lookup(data.get(section) or {}, keys)) is not _UNSET]
    default_source = f"the built-in default of python -m {SECTION_CLIS[section]}"
    defaults = built_in_defaults(section)
    base = SECTION_BASES.get(section)
    if base is not None and keys[0] in defaults:  # what the stage inherits, under its own keys
        sources += [(f"{path} ({base}:)", value) for path, data in reversed(layers)
                    if (value := _lookup(data.get(base) or {}, keys)) is not _UNSET]
    default = defaults.get(".".join(keys), _UNSET)  # a nested config's flag: model.d_model
    known = set(defaults) | {k for _, data in layers for k in (data.get(section) or {})}
    if not sources and default is _UNSET and keys[0] not in known and ".".join(keys) not in known:
        near = difflib.get_close_matches(".".join(keys), sorted(known), n=1, cutoff=0.5)
        hint = f"did you mean {section}.{near[0]}?" if near else f"keys: {', '.join(sorted(known))}"
        raise ParamsError(f"{dotted!r}: no such key in section {section!r} ({hint})")
    if default is not _UNSET:
        sources.append((default_source, default))
    if not sources:
        return _UNSET, "", []
    base = str(layers[0][0]) if layers else None
    (source, value) = sources[0]
    if value is None and source != base and source != default_source:  # a profile drops the key
        value, source = (default, default_source) if default is not _UNSET else (None, "the stage's code")
    return value, source, sources


def describe(dotted: str, params: str | Path = DEFAULT_PARAMS) -> str:
    value, source, sources = provenance(dotted, params)
    if value is _UNSET:
        return f"{dotted}: not set in {params} (a nested key: its default is in the stage's code)"
    base = str(read_layers(params)[0][0]) if str(params).lower() != NO_PARAMS and Path(params).exists() else None
    lines = [f"{dotted} = {value!r}", f"  from {source}"]
    for s, v in sources:
        if s == source:
            continue
        dropped = v is None and s != base and not s.startswith("the built-in")  # a profile's null
        lines.append(f"  dropped by {s}" if dropped else f"  over {s}: {v!r}")
    return "\n".join(lines)


@dataclass(frozen=True)
class ShowSettings:
    command: str = setting(REQUIRED, "show: a setting's value and the layer it comes from", choices=("show",),
                           positional=True)
    key: str = setting(REQUIRED, "SECTION.KEY (e.g. train.lr, train.model.d_model, filter.steps.langid.min_score) "
                                 "or a SECTION", positional=True)


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog="python -m lmw_cli.config", description=__doc__.splitlines()[0])
    add_config_flags(ap, ShowSettings)
    add_params_flag(ap)
    args = ap.parse_args(argv)
    try:
        key = config_from_args(ShowSettings, args).key  # the command and the key are required
    except ParamsError as exc:
        ap.error(f"{exc}, e.g. python -m lmw_cli.config show train.lr")
    try:
        if "." in key:
            print(describe(key, args.params))
        else:
            if key not in SECTION_CLIS:
                raise ParamsError(f"unknown section {key!r} (sections: {', '.join(SECTION_CLIS)})")
            for name in built_in_defaults(key):
                print(describe(f"{key}.{name}", args.params))
    except ParamsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
