"""Extraction quality and speed: our ``extract_text`` vs plain trafilatura vs plain Resiliparse.

Quality follows trafilatura's own evaluation (``tests/comparison.py``): for each page of
``trafilatura-evaldata.json``, the share of ``with`` snippets found in the extracted text and the
share of ``without`` snippets absent from it. Speed is pages/s on one core, same pages, same run.

    python -m bench.extract --web-dir ../shared/data/web
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections import Counter
from pathlib import Path

from pipeline.extract import extract_text
from pipeline.warc import iter_payloads

DEFAULT_WEB = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "web"


def load_eval_pages(web_dir: Path) -> tuple[list[tuple[bytes, str | None, dict]], int]:
    """(html, declared charset, expectations) for each evaluable page; and the page count read."""
    evaldata = json.loads((web_dir / "trafilatura-evaldata.json").read_text(encoding="utf-8"))
    pages, seen = [], 0
    for path in sorted(web_dir.glob("trafilatura-pages-*.warc.gz")):
        for payload in iter_payloads(path, Counter()):
            seen += 1
            if payload.url in evaldata:
                pages.append((payload.body, payload.charset, evaldata[payload.url]))
    return pages, seen


def _plain_trafilatura(html: bytes, charset: str | None) -> str | None:
    import trafilatura

    return trafilatura.extract(html)


def _plain_resiliparse(html: bytes, charset: str | None) -> str | None:
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.encoding import bytes_to_str, detect_encoding
    from resiliparse.parse.html import HTMLTree

    return extract_plain_text(HTMLTree.parse(bytes_to_str(html, detect_encoding(html))), main_content=True)


EXTRACTORS = {
    "ours (trafilatura)": lambda html, cs: extract_text(html, "trafilatura", cs),
    "ours (resiliparse)": lambda html, cs: extract_text(html, "resiliparse", cs),
    "plain trafilatura": _plain_trafilatura,
    "plain resiliparse": _plain_resiliparse,
}


def score(extract, pages) -> dict:
    kept = n_with = dropped = n_without = 0
    start = time.perf_counter()
    texts = [extract(html, charset) or "" for html, charset, _ in pages]
    seconds = time.perf_counter() - start
    for text, (_, _, expect) in zip(texts, pages, strict=False):
        kept += sum(s in text for s in expect["with"])
        n_with += len(expect["with"])
        dropped += sum(s not in text for s in expect["without"])
        n_without += len(expect["without"])
    return {"kept": kept / n_with, "dropped": dropped / n_without, "docs_per_s": len(pages) / seconds}


def bench_extract(web_dir: Path = DEFAULT_WEB, only: list[str] | None = None) -> list[dict]:
    logging.getLogger("trafilatura").setLevel(logging.CRITICAL)
    pages, seen = load_eval_pages(web_dir)
    rows = []
    for name, fn in EXTRACTORS.items():
        if only and name not in only:
            continue
        rows.append({"impl": name, "pages": len(pages), **score(fn, pages)})
    base = next((r for r in rows if r["impl"] == "plain trafilatura"), None)
    for r in rows:
        r["speed_vs_trafilatura"] = r["docs_per_s"] / base["docs_per_s"] if base else None
    return rows


def format_rows(rows: list[dict]) -> str:
    lines = [f"{'extractor':<22}{'pages':>7}{'with kept':>11}{'without dropped':>17}{'docs/s':>9}{'x trafilatura':>15}"]
    for r in rows:
        ratio = f"{r['speed_vs_trafilatura']:.2f}x" if r["speed_vs_trafilatura"] else "-"
        lines.append(f"{r['impl']:<22}{r['pages']:>7}{r['kept']:>11.3f}{r['dropped']:>17.3f}"
                     f"{r['docs_per_s']:>9.1f}{ratio:>15}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--web-dir", type=Path, default=DEFAULT_WEB,
                        help="folder with trafilatura-pages-*.warc.gz and trafilatura-evaldata.json")
    args = parser.parse_args(argv)
    if not (args.web_dir / "trafilatura-evaldata.json").is_file():
        print(f"error: {args.web_dir}/trafilatura-evaldata.json not found", flush=True)
        return 2
    print(format_rows(bench_extract(args.web_dir)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
