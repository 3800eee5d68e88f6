"""Web pages → documents: WARC/WET records (``warc``), main-text extraction and the extract stage
(``extract``, ``python -m pipeline.web.extract``), the cascade extractor's parts (``extract_cascade``).

CS336 assignment 4's ``extract_text`` (HTML bytes → main text, or None) is importable from here.
"""

from pipeline.web.extract import extract_text

__all__ = ["extract_text"]
