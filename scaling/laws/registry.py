"""The scaling laws by name: ``LAWS`` (name -> law, in registration order), filled by each law module's
``@register`` when ``scaling.laws`` imports it. A law module imports this module, never its package, so the package's
import of every law module closes no circle."""

from __future__ import annotations

from scaling.laws.base import Law

LAWS: dict[str, Law] = {}


def register(cls: type[Law]) -> type[Law]:
    """Class decorator: add one instance of the law to LAWS under its ``name``."""
    if cls.name in LAWS and type(LAWS[cls.name]) is not cls:
        raise ValueError(f"two scaling laws named {cls.name!r}")
    LAWS[cls.name] = cls()
    return cls


def unregister(name: str) -> None:
    LAWS.pop(name, None)
