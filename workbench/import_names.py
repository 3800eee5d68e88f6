"""``python -m workbench.import_names``: no other installed distribution provides one of the project's import names.

Python has one namespace of top-level import names per environment: when two distributions provide the same name,
whichever comes first on ``sys.path`` wins, silently, for every importer in the process. On 2026-12-06 transformers 5
began to require Hugging Face's ``kernels``; its ``from kernels import CUDAProperties`` found this project's
``kernels/`` (then the Triton kernels' name) and every Hugging Face model path failed. The kernels are ``lmw_kernels``
since (docs/architecture.md, "Import names"), and this check, run by ``make lint``, exits 1 naming both distributions
as soon as any installed distribution provides one of ``PACKAGES``, whatever an import happens to find today. It also
fails when this project's own distribution installs a top-level name that ``PACKAGES`` does not list (a too-wide
``packages.find`` pattern in pyproject.toml).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import sys
from collections.abc import Iterable, Mapping

DISTRIBUTION = "lm-workbench"
# every top-level import name the project installs, bottom layer first (pyproject.toml's packages.find lists the same)
PACKAGES = ("workbench", "lmw_kernels", "tokenizer", "model", "pipeline", "scaling", "alignment", "leaderboard",
            "bench", "lmw_cli")


def canonical(distribution: str) -> str:
    """A distribution's name as the package index compares it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", distribution).lower()


def clashes(packages: Iterable[str] = PACKAGES,
            provided: Mapping[str, list[str]] | None = None) -> dict[str, list[str]]:
    """Each of ``packages`` that another distribution also provides, with those distributions' names.

    ``provided`` maps a top-level import name to the distributions that install it (the shape of
    ``importlib.metadata.packages_distributions()``, which it defaults to: every distribution on ``sys.path``)."""
    provided = importlib.metadata.packages_distributions() if provided is None else provided
    found = {}
    for name in packages:
        others = sorted({d for d in provided.get(name, ()) if canonical(d) != DISTRIBUTION})
        if others:
            found[name] = others
    return found


def unlisted(provided: Mapping[str, list[str]] | None = None, packages: Iterable[str] = PACKAGES) -> list[str]:
    """Top-level names that this project's installed distribution provides beyond ``packages``."""
    provided = importlib.metadata.packages_distributions() if provided is None else provided
    ours = {name for name, dists in provided.items() if DISTRIBUTION in map(canonical, dists)}
    return sorted(ours - set(packages))


def describe(distribution: str) -> str:
    """``name version (where)`` of an installed distribution, or just its name when its metadata cannot be read."""
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return distribution
    return f"{distribution} {dist.version} ({dist.locate_file('')})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench.import_names", description=__doc__.split("\n\n")[0])
    parser.parse_args(argv)
    provided = importlib.metadata.packages_distributions()  # every distribution's metadata: read once
    problems = [f"import name '{name}' of {DISTRIBUTION} is also provided by {describe(other)}: one shadows the "
                "other at import (rename ours in workbench/import_names.py and pyproject.toml, or uninstall it)"
                for name, others in clashes(provided=provided).items() for other in others]
    problems += [f"{DISTRIBUTION} installs top-level '{name}', which workbench.import_names.PACKAGES does not list "
                 "(pyproject.toml's packages.find is too wide)" for name in unlisted(provided)]
    for line in problems:
        print(f"error: {line}", file=sys.stderr)
    if problems:
        return 1
    print(f"import_names: no other installed distribution provides any of {DISTRIBUTION}'s {len(PACKAGES)} "
          "import names")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
