"""The real pages of ../shared/data/web as documents, for the benchmarks that judge a rule on real text.

``real_documents`` runs the extract stage (pipeline/web/extract.py, its default trafilatura extractor) over the WARCs
into a folder (resumable: a second run reads what the first wrote) and returns the documents, each with the name of
its WARC; ``is_english`` asks the default ``langid`` step of the filter chain. ``RealPagesSettings`` and
``real_warcs`` are the command line such a benchmark shares.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from bench.tools.results import BenchSettings
from pipeline.filters.langid import LanguageFilter
from pipeline.web.extract import ExtractConfig, output_name, run_extract
from workbench.files import read_jsonl
from workbench.params import setting, usage_error

DEFAULT_WEB = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "web"


@dataclass(frozen=True, kw_only=True)
class RealPagesSettings(BenchSettings):
    """A real-pages benchmark's settings: the folder of WARCs, where the extracted documents are kept, how many
    processes extract them."""

    web_dir: Path = setting(DEFAULT_WEB, "folder of real-page WARCs (*.warc.gz)")
    cache: Path | None = setting(None, "keep the extracted documents here (default: a temporary folder)")
    workers: int = setting(2, "extraction processes", at_least=1)


def real_warcs(settings: RealPagesSettings) -> list[Path]:
    """The WARCs of ``--web-dir``; a usage error (exit 2) when it has none."""
    warcs = sorted(settings.web_dir.glob("*.warc.gz"))
    if not warcs:
        usage_error(f"no *.warc.gz in {settings.web_dir}")
    return warcs


def real_documents(warcs: list[Path], out_dir: Path, workers: int = 2) -> list[dict]:
    """Every document the extract stage makes of ``warcs`` (written to ``out_dir``), with ``warc`` = file name."""
    logging.getLogger("trafilatura").setLevel(logging.CRITICAL)
    out_dir = Path(out_dir)
    run_extract(warcs, out_dir / "docs", out_dir / "extract.json", ExtractConfig(workers=workers))
    return [dict(doc, warc=w.name) for w in warcs for doc in read_jsonl(out_dir / "docs" / output_name(w))]


@cache
def _langid() -> LanguageFilter:
    return LanguageFilter()


def is_english(doc: dict) -> bool:
    """Whether the filter chain's default ``langid`` step keeps ``doc`` as English (it is not modified)."""
    return _langid().reject({"text": doc.get("text")}) is None
