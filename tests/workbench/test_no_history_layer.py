"""The code says what it does now: issue numbers belong to the tracker and the docs, not to the code, its settings or
its build files (the tests may name the issue whose bug they pin)."""

import re
from pathlib import Path

from workbench.import_names import PACKAGES

ROOT = Path(__file__).resolve().parents[2]
ISSUE_NUMBER = re.compile(r"\bissues?[- ]?#?\d+", re.IGNORECASE)
TOP_LEVEL = ("Makefile", "pyproject.toml", "dvc.yaml", ".ci/run", *(p.name for p in ROOT.glob("params*.yaml")),
             *(f"recipes/{p.name}" for p in (ROOT / "recipes").glob("*.yaml")))


def code_files() -> list[Path]:
    files = [path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))]
    return files + [ROOT / name for name in TOP_LEVEL if (ROOT / name).is_file()]


def test_no_issue_number_outside_the_tests():
    found = [f"{path.relative_to(ROOT)}:{i}: {match.group(0)}" for path in code_files()
             for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             for match in ISSUE_NUMBER.finditer(line)]
    assert not found, f"issue numbers in the code (say what the code does, not which issue asked): {found}"
