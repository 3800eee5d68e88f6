"""Every command the docs print runs: `python -m lmw_cli.doc_commands [--check]`.

Each `python -m MODULE ...` in README.md and docs/ (fenced blocks, with `\\` continuations joined, and inline code
spans) is read up to the first shell operator or comment. For a first-party module the check is that the module
exists and that every `--flag` it is given is one of its CLI's flags: the parser its `main(["--help"])` would
print, captured by lmw_cli.cli_docs (nothing runs). In a generated results section, whose "Measured ... by" lines
quote a command as it ran at a named commit, only the module is checked. `python -m pipeline STEP` is checked
against the step's own CLI; a subcommand (`show`, `predict`) against its sub-parser. `make test` runs the check
through tests/workbench/test_doc_commands.py; without `--check` the problems are printed, one a line.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import itertools
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from lmw_cli.cli_docs import ROOT, capture_parser
from workbench.import_names import PACKAGES
from workbench.params import CheckOnly, parse_flags

COMMAND = re.compile(r"python3? -m ([\w.]+)(.*)")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
INLINE = re.compile(r"`([^`\n]*python3? -m [^`\n]*)`")
FLAG = re.compile(r"--[\w.-]+")  # "--lr=3e-4", "--check]`." (a usage line in prose): the flag itself
GENERATED = re.compile(r"<!-- results .*?<!-- /results -->", re.S)
OPERATORS = {"|", "||", "&&", ";", ">", ">>", "2>", "2>&1", "<", "&", "#"}


@dataclass(frozen=True)
class DocCommand:
    path: Path
    line: int
    module: str
    args: tuple[str, ...]
    generated: bool = False  # inside a <!-- results --> section (bench.tools.report): only the module is checked

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}: python -m {self.module} {' '.join(self.args)}".rstrip()


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _words(rest: str) -> tuple[str, ...]:
    """The command's arguments up to the first shell operator or comment (placeholders kept as words)."""
    try:
        words = shlex.split(rest, comments=True)
    except ValueError:  # an unbalanced quote in prose
        words = rest.split()
    return tuple(itertools.takewhile(lambda w: w not in OPERATORS and not w.startswith((">", "2>", "|")), words))


def commands(path: Path) -> list[DocCommand]:
    """Every `python -m` command of one Markdown file, with its line number."""
    text = path.read_text(encoding="utf-8")
    found = []
    for block in FENCE.finditer(text):
        start = text.count("\n", 0, block.start(1)) + 1
        lines = block.group(1).split("\n")
        i = 0
        while i < len(lines):
            line, first = lines[i], i
            while line.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line.rstrip()[:-1] + " " + lines[i].strip()
            match = COMMAND.search(line)
            if match and not line.lstrip().startswith("#"):
                found.append(DocCommand(path, start + first, match.group(1), _words(match.group(2))))
            i += 1
    prose = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    sections = [(m.start(), m.end()) for m in GENERATED.finditer(prose)]
    for span in INLINE.finditer(prose):
        match = COMMAND.search(span.group(1))
        generated = any(a <= span.start() < b for a, b in sections)
        found.append(DocCommand(path, prose.count("\n", 0, span.start()) + 1, match.group(1),
                                _words(match.group(2)), generated))
    return found


def _parser(module: str) -> argparse.ArgumentParser:
    """The parser of `module`'s CLI; a package run by its __main__.py (`from X import main`) is X's."""
    spec = importlib.util.find_spec(module)
    if spec.submodule_search_locations:
        main = Path(spec.submodule_search_locations[0]) / "__main__.py"
        target = re.search(r"^from ([\w.]+) import main$", main.read_text(encoding="utf-8"), re.M) \
            if main.is_file() else None
        if target and target.group(1) != module:
            return capture_parser(target.group(1))
    return capture_parser(module)


def _pipeline_step(step: str) -> str | None:
    """The module `python -m pipeline STEP` runs (pipeline/__main__.py's STEPS: its help ends with the module)."""
    from pipeline.__main__ import STEPS as steps  # imports every stage: only when a doc names a step

    return steps[step][1].rsplit(": ", 1)[1] if step in steps else None


def problem(cmd: DocCommand, parsers: dict[str, argparse.ArgumentParser]) -> str | None:
    """Why `cmd` would not run as written, or None."""
    module, args = cmd.module, [a.lstrip("[") for a in cmd.args]  # a usage line's [--flag] is the flag
    if module.split(".")[0] not in PACKAGES or module.endswith(".") or (args and args[0].startswith("<")):
        return None  # not ours, or a placeholder (`python -m alignment.<name>`, `python -m pipeline <step>`)
    if importlib.util.find_spec(module) is None:
        return f"no module {module}"
    if module == "pipeline":
        if not args or args[0].startswith("-") or args[0] == "STEP":
            return None
        step = _pipeline_step(args[0])
        if step is None:
            return f"python -m pipeline has no step {args[0]!r}"
        module, args = step, args[1:]
    if cmd.generated:
        return None  # a results section's "Measured ... by" line: the command as it ran then (its commit is named)
    if module not in parsers:
        try:
            parsers[module] = _parser(module)
        except Exception as exc:  # noqa: BLE001 - a CLI that cannot even print its help is the problem to report
            return f"{module} --help fails: {type(exc).__name__}: {exc}"
    parser = parsers[module]
    sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    if sub is not None:
        name = next((a for a in args if a in sub.choices), None)
        if name is not None:
            parser = sub.choices[name]
    known = {s for a in parser._actions for s in a.option_strings}
    unknown = [m.group(0) for a in args if (m := FLAG.match(a)) and m.group(0) not in known]
    return f"{module}: unrecognized flag(s) {' '.join(unknown)}" if unknown else None


def check() -> list[str]:
    """One line per documented command that would not run: file:line: command -- why."""
    parsers: dict[str, argparse.ArgumentParser] = {}
    return [f"{cmd} -- {why}" for path in doc_files() for cmd in commands(path)
            if (why := problem(cmd, parsers))]


def main(argv: list[str] | None = None) -> int:
    args = parse_flags(CheckOnly, argv, prog="python -m lmw_cli.doc_commands", description=__doc__.splitlines()[0])
    problems = check()
    for line in problems:
        print(line, file=sys.stderr if args.check else sys.stdout)
    print(f"doc_commands: {len(problems)} documented command(s) would not run", file=sys.stderr)
    return 1 if problems and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
