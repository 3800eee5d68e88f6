"""Exact and near-duplicate removal: MinHash, LSH banding and union-find (``minhash``) and the dedup stage
(``stage``, ``python -m pipeline.dedup.stage``).

CS336 assignment 4's ``exact_line_deduplication`` and ``minhash_deduplication`` are importable from here
(docs/architecture.md, "CS336's import paths").
"""

import importlib

__all__ = ["exact_line_deduplication", "minhash_deduplication"]


def __getattr__(name: str):
    """The CS336 names, imported on first use: an eager import would load ``pipeline.dedup.stage`` before
    ``python -m pipeline.dedup.stage`` runs it (runpy's "found in sys.modules" warning)."""
    if name in __all__:
        return getattr(importlib.import_module("pipeline.dedup.stage"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
