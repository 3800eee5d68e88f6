"""Stage defaults from ``params.yaml``: one section per stage, overridable by CLI flags."""

from __future__ import annotations

from pathlib import Path
from typing import Any

DEFAULT_PARAMS = Path("params.yaml")


def load_section(section: str, path: str | Path = DEFAULT_PARAMS) -> dict[str, Any]:
    """The ``section`` of a params file, or {} when the file is absent (CLIs then need flags)."""
    import yaml

    path = Path(path)
    if not path.exists():
        return {}
    with open(path, encoding="utf-8") as fh:
        params = yaml.safe_load(fh) or {}
    if not isinstance(params, dict) or not isinstance(params.get(section, {}), dict):
        raise ValueError(f"{path}: section {section!r} must be a mapping")
    return params.get(section, {}) or {}
