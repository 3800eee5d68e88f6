"""Loading a compiled extension built by ``pip install -e .`` (setup.py), or ``None``.

The C sources' SHA-256 is compiled in; an extension whose hash differs from the sources beside it (edited since the
install) is not used, with a warning naming the rebuild command, and the caller runs its pure-Python reference, which
gives the same results, slower. ``LMW_NO_NATIVE=1`` forces the references (CI tests both).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import warnings
from pathlib import Path
from types import ModuleType


def source_sha256(csrc: Path, sources: tuple[str, ...]) -> str | None:
    """SHA-256 of the C sources in this checkout, in setup.py's order (``None`` when they are not shipped)."""
    digest = hashlib.sha256()
    for name in sources:
        try:
            digest.update((csrc / name).read_bytes())
        except OSError:
            return None
    return digest.hexdigest()


def load_extension(module: str, csrc: Path, sources: tuple[str, ...]) -> ModuleType | None:
    """The extension ``module`` when it is built from the current ``sources`` and not disabled; else ``None``."""
    if os.environ.get("LMW_NO_NATIVE", "") not in ("", "0"):
        return None
    try:
        extension = importlib.import_module(module)
    except ImportError:
        return None
    expected = source_sha256(csrc, sources)
    if expected is not None and extension.SOURCE_SHA256 != expected:
        warnings.warn(f"{module} is older than {csrc.name}/ beside it; using the pure-Python reference. "
                      "Rebuild: pip install -e . (or python setup.py build_ext --inplace)", stacklevel=3)
        return None
    return extension
