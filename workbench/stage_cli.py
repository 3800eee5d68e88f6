"""What the data steps' command lines share (``python -m pipeline.web.extract`` and the others).

Each step declares its settings as ``setting()`` dataclasses (where it reads and writes: a ``StageFiles``; how it
runs: its config and ``ExecutorSettings``) and its command line as a ``StageCommand``, one flag (or positional
input) per field; the flags' destinations are the keys of its ``params.yaml`` section, which the command makes
their defaults (strictly: a key no flag takes is an error naming the key, the section and the file), so ``--help``
shows the values a run would use. The command then runs the step and prints its one-line summary with the wall
time: exit 0, or 2 with a one-line ``error:`` on bad settings or input.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from workbench.files import exit_on_error
from workbench.params import (
    ParamsError,
    Parser,
    add_config_flags,
    add_params_flag,
    add_verbose_flag,
    apply_section,
    params_path,
    setting,
)

# (parsed flags, the params section as read) -> the step's one-line summary
Command = Callable[[argparse.Namespace, dict], str]


@dataclass(frozen=True)
class StageOutputs:
    """Where a data stage writes; a stage restates the defaults and help that are its own (``override``)."""

    out_dir: str = setting("out", "kept documents, one file per input")
    metrics: str | None = setting(None, "stage metrics JSON; details beside it")


@dataclass(frozen=True)
class StageInput(StageOutputs):
    """A stage that reads one documents file or folder as a whole (train-tokenizer, tokenize)."""

    input: str | None = setting(None, "documents file or folder", positional=True)


@dataclass(frozen=True)
class StageFiles(StageOutputs):
    """A stage of one task per input file, resumable (extract, filter, dedup)."""

    inputs: tuple[str, ...] = setting((), "documents files or folders", positional=True)
    force: bool = setting(False, "redo inputs whose output already exists")


@dataclass(frozen=True)
class RejectingStageFiles(StageFiles):
    """A stage that also writes the documents it drops, with their reason."""

    rejected_dir: str = setting("rejected", "dropped documents with their reason, one file per input")


@dataclass(frozen=True)
class StageCommand:
    """A data step's ``main``: ``prog`` reads the ``section`` of the params file (and its ``extra_keys``, which no
    flag takes) under one flag per field of each ``settings`` dataclass, runs ``run`` and prints its summary."""

    prog: str
    section: str
    description: str
    settings: tuple[type, ...]
    run: Command
    extra_keys: tuple[str, ...] = ()

    def parser(self) -> argparse.ArgumentParser:
        """``--params`` (whose section gives the defaults), ``-v``, and the settings' flags (a bool is a
        ``--x / --no-x`` switch)."""
        parser = Parser(prog=self.prog, description=self.description)
        add_params_flag(parser, self.section)
        add_verbose_flag(parser)
        for config_cls in self.settings:
            add_config_flags(parser, config_cls, bool_switches=True)
        return parser

    def __call__(self, argv: Sequence[str] | None = None) -> int:
        """Parse ``argv`` over the section's values, run the step, print its summary; the exit status."""
        argv = list(sys.argv[1:] if argv is None else argv)
        parser = self.parser()
        try:
            values = apply_section(parser, self.section, params_path(argv), self.extra_keys)
        except ParamsError as e:
            return exit_on_error(e)
        args = parser.parse_args(argv)
        logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                            format="%(levelname)s %(name)s: %(message)s")
        start = time.perf_counter()
        try:
            summary = self.run(args, values)
        except Exception as e:
            return exit_on_error(e)
        print(f"{summary} [{time.perf_counter() - start:.1f} s]")
        return 0


def optional_path(value) -> Path | None:
    """A setting that may be absent (a metrics file outside the project): None, or its Path."""
    return Path(value) if value not in (None, "") else None


def need(args: argparse.Namespace, *keys: str) -> None:
    """A ValueError naming every setting among ``keys`` that neither a flag nor the params section gave."""
    missing = [k for k in keys if getattr(args, k, None) in (None, "", [], ())]
    if missing:
        raise ValueError(f"missing setting(s) {', '.join(missing)}: give flags or a params.yaml section")


def paths(value) -> list:
    """A setting that is one path or a list of them, as a list."""
    return [value] if isinstance(value, (str, Path)) else list(value)


def funnel_headline(metrics: dict, docs_in_key: str = "docs_in", as_key: str = "docs_in") -> dict:
    """The numbers ``dvc metrics show`` prints for a step that keeps some of its documents (the rest of
    ``metrics`` goes to metrics/details/): in, out, drop rate, seconds and docs/s."""
    docs_in, docs_out = metrics[docs_in_key], metrics["docs_out"]
    return {as_key: docs_in, "docs_out": docs_out, "drop_rate": round(1 - docs_out / docs_in, 4) if docs_in else 0.0,
            "seconds": metrics["seconds"], "docs_per_s": metrics["docs_per_s"]}
