"""Scaling-law families, one module each, behind one protocol (scaling/laws/base.py).

Every module of this package is imported here, and each registers its law with ``@register``: adding a law is one
file (and its test). ``LAWS``: name -> law, in registration order (module name order).
"""

from __future__ import annotations

import importlib
import pkgutil

from scaling.laws.base import Bound, Fitted, Law, LawError

LAWS: dict[str, Law] = {}


def register(cls: type[Law]) -> type[Law]:
    """Class decorator: add one instance of the law to LAWS under its ``name``."""
    if cls.name in LAWS and type(LAWS[cls.name]) is not cls:
        raise ValueError(f"two scaling laws named {cls.name!r}")
    LAWS[cls.name] = cls()
    return cls


def unregister(name: str) -> None:
    LAWS.pop(name, None)


def discover() -> None:
    """Import every module of this package (each registers its law)."""
    for module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        if module != "base":
            importlib.import_module(f"{__name__}.{module}")


discover()

__all__ = ["LAWS", "Bound", "Fitted", "Law", "LawError", "discover", "register", "unregister"]
