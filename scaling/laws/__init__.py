"""Scaling-law families, one module each, behind one protocol (scaling/laws/base.py).

Every law module of this package is imported here, and each registers its law with ``registry.register``: adding a
law is one file (and its test). ``LAWS``: name -> law, in registration order (module name order).
"""

from __future__ import annotations

import importlib
import pkgutil

from scaling.laws.base import Bound, Fitted, Law, LawError
from scaling.laws.registry import LAWS, register, unregister


def discover() -> None:
    """Import every law module of this package (each registers its law in ``registry.LAWS``)."""
    for module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        if module not in ("base", "registry"):
            importlib.import_module(f"{__name__}.{module}")


discover()

__all__ = ["LAWS", "Bound", "Fitted", "Law", "LawError", "discover", "register", "unregister"]
