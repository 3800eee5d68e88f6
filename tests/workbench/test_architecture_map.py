"""docs/architecture.md's package map names every module of every package (a newcomer can walk it)."""

import re
from pathlib import Path

from workbench.import_names import PACKAGES

ROOT = Path(__file__).resolve().parents[2]


def test_the_package_map_lists_every_module():
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = doc.split("## Package map", 1)[1].split("\n## ", 1)[0]
    missing = [str(path.relative_to(ROOT)) for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
               if path.name not in ("__init__.py", "__main__.py")
               and not re.search(rf"(?<![\w.]){re.escape(path.stem)}(?!\w)", section)]
    assert not missing, f"docs/architecture.md's package map does not name: {missing}"
