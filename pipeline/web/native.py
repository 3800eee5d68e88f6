"""The distilled extractor's compiled core (``pipeline/web/csrc/blocks_native.c``, built by ``pip install -e .``), or
``None``: then ``blocks.features``, ``trees.Forest.margin`` and ``distilled.context_features`` run their NumPy
references, which give the same numbers, slower (``workbench.native``; ``LMW_NO_NATIVE=1`` forces them)."""

from __future__ import annotations

from pathlib import Path

from workbench.native import load_extension

CSRC = Path(__file__).with_name("csrc")
SOURCES = ("blocks_native.c",)  # setup.py's order

NATIVE = load_extension("pipeline.web._blocks_native", CSRC, SOURCES)
