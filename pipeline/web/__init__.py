"""Web pages → documents: WARC/WET records (``warc``), main-text extraction and the extract stage
(``extract``, ``python -m pipeline.web.extract``), the cascade extractor's parts (``extract_cascade``).

CS336 assignment 4's ``extract_text`` (HTML bytes → main text, or None) is importable from here.
"""

import importlib

__all__ = ["extract_text"]


def __getattr__(name: str):
    """The CS336 names, imported on first use: an eager import would load ``pipeline.web.extract`` before
    ``python -m pipeline.web.extract`` runs it (runpy's "found in sys.modules" warning)."""
    if name in __all__:
        return getattr(importlib.import_module("pipeline.web.extract"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
