"""Language identification on real pages: each backend's agreement with the pages' ``<html lang>`` and its docs/s.

The pages are every HTML response of the given WARCs (default: ../shared/data/web/*.warc.gz) that declares a
language and has at least 50 words of trafilatura text; the table in pipeline/langid.py came from here.

    python -m bench.langid [WARC ...] [--model-path lid.176.ftz]
"""

from __future__ import annotations

import argparse
import logging
import time
from collections import Counter
from pathlib import Path

from bench.extract import DEFAULT_WEB
from pipeline.extract import extract_text
from pipeline.langid import BACKENDS, UNKNOWN, declared_language, get_identifier
from pipeline.warc import iter_payloads


def real_pages(paths, min_words: int = 50) -> list[tuple[str, str]]:
    """(declared language, trafilatura text) for every page of ``paths`` with a declaration and >= ``min_words``."""
    logging.getLogger("trafilatura").setLevel(logging.CRITICAL)
    out = []
    for path in paths:
        for p in iter_payloads(path, Counter()):
            declared = declared_language(p.body) if p.kind == "html" else None
            if declared and declared != UNKNOWN:
                text = extract_text(p.body, declared_charset=p.charset)
                if text and len(text.split()) >= min_words:
                    out.append((declared, text))
    return out


def agreement(pages: list[tuple[str, str]], backend: str, model_path=None) -> tuple[float, float]:
    """(share of pages whose identified language equals the truth, docs/s) for one backend."""
    ident = get_identifier(backend, model_path)
    ident.predict("warm up: load the model before the clock starts")
    start = time.perf_counter()
    hits = sum(ident.predict(text)[0] == truth for truth, text in pages)
    return hits / max(len(pages), 1), len(pages) / max(time.perf_counter() - start, 1e-9)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.langid", description=__doc__.split("\n\n")[0])
    ap.add_argument("warcs", nargs="*", type=Path, help=f"WARC files (default: {DEFAULT_WEB}/*.warc.gz)")
    ap.add_argument("--model-path", default=None, help="lid.176.bin/.ftz: also measure the fasttext backend")
    args = ap.parse_args(argv)
    paths = args.warcs or sorted(DEFAULT_WEB.glob("*.warc.gz"))
    if not paths:
        ap.error("no WARC files to benchmark")
    pages = real_pages(paths)
    print(f"{len(pages)} pages with <html lang> and >= 50 words")
    for backend in BACKENDS:
        if backend == "fasttext" and not args.model_path:
            continue
        try:
            acc, rate = agreement(pages, backend, args.model_path if backend == "fasttext" else None)
        except ImportError as e:
            print(f"{backend:12s} skipped: {e}")
            continue
        print(f"{backend:12s} agreement {acc:.4f}  {rate:8.0f} docs/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
