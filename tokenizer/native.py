"""The compiled BPE core (``tokenizer/csrc/bpe_native.c``, built by ``pip install -e .``), or ``None``.

``NATIVE`` is the extension module when it is built and up to date; else ``None`` and the tokenizer runs the
pure-Python reference (``tokenizer.encoder``, ``tokenizer.bpe``), which gives the same ids and merges, slower.
``LMW_NO_NATIVE=1`` forces the reference (CI tests both). A build whose compiled-in source hash differs from the
sources beside it (edited since ``pip install``) is not used, with a warning naming the rebuild command.
"""

from __future__ import annotations

from pathlib import Path

from workbench import native

CSRC = Path(__file__).with_name("csrc")
SOURCES = ("bpe_native.c", "bpe_train.c", "bpe_train.h", "pretokenizer.h", "unicode_classes.h")  # setup.py's order


NATIVE = native.load_extension("tokenizer._bpe_native", CSRC, SOURCES)
