"""Every import path of docs/architecture.md's "CS336's import paths" table works, and names what the table says."""

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def documented_imports() -> list[tuple[str, list[str]]]:
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = doc.split("## CS336's import paths", 1)[1].split("\n## ", 1)[0]
    return [(m.group(1), [n.strip() for n in m.group(2).split(",")])
            for m in re.finditer(r"`from ([\w.]+) import ([^`]+)`", section)]


def test_every_documented_cs336_import_works():
    imports = documented_imports()
    assert {module for module, _ in imports} == {"tokenizer", "model", "pipeline.web", "pipeline.filters",
                                                "pipeline.classifiers", "pipeline.dedup", "alignment"}
    for module, names in imports:
        package = importlib.import_module(module)
        for name in names:
            assert callable(getattr(package, name)), f"from {module} import {name}"
            assert name in package.__all__, f"{module}.__all__ lacks {name}"
