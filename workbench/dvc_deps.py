"""``python -m workbench.dvc_deps [--check | --write]``: each DVC stage's code deps are its command's import closure.

A stage runs ``python -m some.module ...``; the files that can change its results are that module, every
first-party module it imports (at module top or inside a function, followed transitively), the packages'
``__init__.py`` files, and modules named by string literal (``importlib.import_module("lmw_kernels.rmsnorm")``).
``--check`` (run by ``make test``) exits 1 naming each stage whose ``deps`` lack a file of its closure, or list
a ``.py`` file outside it; ``--write`` rewrites the ``.py`` entries of every stage's ``deps`` in ``dvc.yaml``
(other deps, comments and order kept). So no hand-kept list can go stale.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from workbench.import_names import PACKAGES
from workbench.params import add_config_flags, setting

MODULE_FLAG = re.compile(r"python3?\s+-m\s+([\w.]+)")
DOTTED = re.compile(r"\w+(?:\.\w+)+")  # a string naming a submodule, e.g. "lmw_kernels.rmsnorm"


def module_file(root: Path, module: str) -> Path | None:
    """The file that ``import module`` runs (a package means its ``__init__.py``), relative to ``root``."""
    base = root.joinpath(*module.split("."))
    return next((c.relative_to(root) for c in (base.with_suffix(".py"), base / "__init__.py") if c.is_file()), None)


def _package_inits(root: Path, module: str) -> list[Path]:
    parts = module.split(".")
    inits = [Path(*parts[:i], "__init__.py") for i in range(1, len(parts))]
    return [p for p in inits if (root / p).is_file()]


def imported_modules(root: Path, path: Path) -> set[str]:
    """First-party modules that ``path`` imports anywhere in its body, or names as a string literal."""
    tree = ast.parse((root / path).read_text(encoding="utf-8"), filename=str(path))
    package = ".".join(path.with_suffix("").parts[:-1] if path.name != "__init__.py" else path.parts[:-1])
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            found.add(mod)
            found.update(f"{mod}.{alias.name}" for alias in node.names)  # `from pkg import module`
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and DOTTED.fullmatch(node.value):
            found.add(node.value)
    return {m for m in found if m.split(".")[0] in PACKAGES and module_file(root, m) is not None}


def closure(root: Path, modules: Iterable[str]) -> set[Path]:
    """Every first-party file that running ``modules`` can execute (``python -m pkg`` runs pkg/__main__.py)."""
    todo = [name for module in modules for name in (module, f"{module}.__main__")]  # no __main__: skipped below
    seen: set[str] = set()
    files: set[Path] = set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        path = module_file(root, module)
        if path is None:
            continue
        files.add(path)
        files.update(_package_inits(root, module))
        todo.extend(imported_modules(root, path))
    return files


def stage_modules(stage: dict) -> list[str]:
    cmds = stage.get("cmd", [])
    cmds = [cmds] if isinstance(cmds, str) else list(cmds)
    return [m for cmd in cmds for m in MODULE_FLAG.findall(cmd)]


def _code_deps(deps: list) -> set[str]:
    return {str(d) for d in deps if isinstance(d, str) and d.endswith(".py")}


def stage_root(root: Path, stage: dict) -> Path:
    """Where a stage runs and its paths start: the pipeline file's folder, or its ``wdir`` below that."""
    return (root / stage.get("wdir", ".")).resolve()


def check(root: Path, stages: dict) -> list[str]:
    """One line per problem: a closure file a stage's deps lack, or a listed .py outside its closure."""
    problems = []
    for name, stage in stages.items():
        modules = stage_modules(stage)
        if not modules:
            continue
        want = {str(p) for p in closure(stage_root(root, stage), modules)}
        have = _code_deps(stage.get("deps", []))
        problems += [f"stage {name!r}: deps lack {path} (imported by {' '.join(modules)})"
                     for path in sorted(want - have)]
        problems += [f"stage {name!r}: deps list {path}, which {' '.join(modules)} never imports"
                     for path in sorted(have - want)]
    return problems


def write(root: Path, dvc_yaml: Path) -> int:
    """Rewrite the .py deps of every stage with a command module; returns how many stages changed."""
    from ruamel.yaml import YAML  # a DVC dependency; keeps comments and layout

    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096  # never fold a long command
    yaml.indent(mapping=2, sequence=4, offset=2)  # the layout dvc.yaml is written in
    doc = yaml.load(dvc_yaml.read_text(encoding="utf-8"))
    changed = 0
    for stage in doc["stages"].values():
        modules = stage_modules(stage)
        if not modules:
            continue
        deps = stage.setdefault("deps", [])
        want = sorted(str(p) for p in closure(stage_root(root, stage), modules))
        if sorted(_code_deps(deps)) == want:
            continue
        for dep in [d for d in deps if isinstance(d, str) and d.endswith(".py")]:
            deps.remove(dep)
        deps.extend(want)
        changed += 1
    from workbench.files import atomic_open

    with atomic_open(dvc_yaml) as fh:
        yaml.dump(doc, fh)
    return changed


@dataclass(frozen=True)
class DepsSettings:
    dvc_yaml: Path = setting(Path("dvc.yaml"), "pipeline file")
    check: bool = setting(False, "exit 1 if any stage's code deps differ (what runs without --write)")
    write: bool = setting(False, "rewrite the code deps in place")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench.dvc_deps", description=__doc__.split("\n\n")[0])
    add_config_flags(parser, DepsSettings, bool_switches=True)
    args = parser.parse_args(argv)
    if args.check and args.write:
        parser.error("--check and --write: one or the other")
    root = args.dvc_yaml.resolve().parent
    if not args.dvc_yaml.is_file():
        print(f"error: {args.dvc_yaml}: no such file", file=sys.stderr)
        return 2
    if args.write:
        changed = write(root, args.dvc_yaml)
        print(f"dvc_deps: {changed} stage(s) updated in {args.dvc_yaml}")
        return 0
    import yaml

    stages = (yaml.safe_load(args.dvc_yaml.read_text(encoding="utf-8")) or {}).get("stages", {})
    problems = check(root, stages)
    for line in problems:
        print(f"{args.dvc_yaml}: {line}", file=sys.stderr)
    if problems:
        print("fix: python -m workbench.dvc_deps --write", file=sys.stderr)
        return 1
    print(f"dvc_deps: the code deps of {len(stages)} stages match their import closures")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
