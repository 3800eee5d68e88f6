"""The compiled BPE core (``tokenizer/csrc/bpe_native.c``, built by ``pip install -e .``), or ``None``.

``NATIVE`` is the extension module when it is built and up to date; else ``None`` and the tokenizer runs the
pure-Python reference (``tokenizer.encoder``, ``tokenizer.bpe``), which gives the same ids and merges, slower.
``LMW_NO_NATIVE=1`` forces the reference (CI tests both). A build whose compiled-in source hash differs from the
sources beside it (edited since ``pip install``) is not used, with a warning naming the rebuild command.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from pathlib import Path
from types import ModuleType

CSRC = Path(__file__).with_name("csrc")
SOURCES = ("bpe_native.c", "bpe_train.c", "bpe_train.h", "pretokenizer.h", "unicode_classes.h")  # setup.py's order


def source_sha256() -> str | None:
    """SHA-256 of the C sources in this checkout (``None`` when they are not shipped, as in a wheel)."""
    digest = hashlib.sha256()
    for name in SOURCES:
        try:
            digest.update((CSRC / name).read_bytes())
        except OSError:
            return None
    return digest.hexdigest()


def load() -> ModuleType | None:
    if os.environ.get("LMW_NO_NATIVE", "") not in ("", "0"):
        return None
    try:
        from tokenizer import _bpe_native
    except ImportError:
        return None
    expected = source_sha256()
    if expected is not None and _bpe_native.SOURCE_SHA256 != expected:
        warnings.warn("tokenizer._bpe_native is older than tokenizer/csrc; using the pure-Python tokenizer. "
                      "Rebuild: pip install -e . (or python setup.py build_ext --inplace)", stacklevel=2)
        return None
    return _bpe_native


NATIVE = load()
