"""The whole filtering chain, ours vs datatrove's equivalent steps, on the same pages in the same run, one core.

Ours: ``extract_text`` (trafilatura or Resiliparse) → the filter chain of ``params.yaml`` (langid, Gopher quality
and repetition, the fastText classifiers whose models exist, PII masking). datatrove (PyPI): its ``Trafilatura``
extractor (same options as ours) → ``GopherRepetitionFilter`` → ``GopherQualityFilter`` → one
``FastTextClassifierFilter`` per classifier of ours (same models, same thresholds) → ``PIIFormatter``.
datatrove's ``LanguageFilter`` downloads its fastText lid.176 model at first use, which this offline machine
cannot, so its chain runs without language ID (which flatters datatrove: ours pays for langid).
Speed is input pages per second, decoding included.

    python -m bench.filter --web-dir ../shared/data/web --limit 600
"""

from __future__ import annotations

import argparse
import logging
import time
from collections import Counter
from pathlib import Path

from bench.extract import DEFAULT_WEB
from pipeline.extract import decode_html, extract_text
from pipeline.filter import CLASSIFIER_STEPS, FilterConfig, build_parser, build_steps
from pipeline.steps import run_steps
from pipeline.warc import iter_payloads
from workbench.params import ParamsError, apply_section


def load_pages(warcs: list[Path], limit: int) -> list:
    pages = []
    for path in warcs:
        for payload in iter_payloads(path, Counter()):
            if payload.kind == "html":
                pages.append(payload)
                if len(pages) >= limit:
                    return pages
    return pages


def run_ours(pages, extractor: str, steps_cfg: dict) -> dict:
    steps, stats = build_steps(FilterConfig(steps=steps_cfg)), {}
    start = time.perf_counter()

    def docs():
        for p in pages:
            text = extract_text(p.body, extractor, p.charset)
            if text:
                yield {"id": p.record_id, "url": p.url, "text": text}

    kept = sum(1 for _ in run_steps(docs(), steps, stats))
    seconds = time.perf_counter() - start
    step_s = sum(s.seconds for s in stats.values())
    return {"chain": f"ours ({extractor})", "pages": len(pages), "kept": kept, "seconds": seconds,
            "filters_s": step_s, "steps": "+".join(stats)}


KEEP_LABELS = {"quality": "wiki", "toxicity": "non-toxic", "nsfw": "non-nsfw"}


def run_datatrove(pages, models: dict[str, tuple[Path, float]]) -> dict:
    from datatrove.data import Document
    from datatrove.pipeline.extractors import Trafilatura
    from datatrove.pipeline.filters import FastTextClassifierFilter, GopherQualityFilter, GopherRepetitionFilter
    from datatrove.pipeline.formatters import PIIFormatter

    # datatrove checks for the distribution "fasttext-numpy2-wheel"; ours, fasttext-numpy2, ships the same
    # `fasttext` module (the same fastText C++ build), so skip the distribution-name check rather than install both.
    FastTextClassifierFilter._requires_dependencies = ["fasteners"]
    logging.getLogger("datatrove").setLevel(logging.WARNING)
    try:
        from loguru import logger

        logger.remove()
    except (ImportError, ValueError):
        pass
    steps = [Trafilatura(favour_precision=False, deduplicate=False, timeout=10,
                         include_tables=True), GopherRepetitionFilter(), GopherQualityFilter()]
    for task, (path, threshold) in models.items():
        keep = threshold if task == "quality" else 1 - threshold  # ours drops P(toxic) >= t: keep P(non-toxic) > 1-t
        steps.append(FastTextClassifierFilter(str(path), keep_labels=[(KEEP_LABELS[task], keep)]))
    steps.append(PIIFormatter())
    start = time.perf_counter()
    data = (Document(text=html, id=p.record_id, metadata={"url": p.url})
            for p in pages if (html := decode_html(p.body, p.charset)) is not None)
    for step in steps:
        data = step.run(data, rank=0, world_size=1)
    kept = sum(1 for _ in data)
    seconds = time.perf_counter() - start
    names = [type(s).__name__.replace("Filter", "") for s in steps]
    return {"chain": "datatrove", "pages": len(pages), "kept": kept, "seconds": seconds, "filters_s": None,
            "steps": "+".join(names)}


def format_rows(rows: list[dict], baseline: str = "datatrove") -> str:
    base = next((r for r in rows if r["chain"] == baseline), None)
    lines = [f"{'chain':<22}{'pages':>7}{'kept':>7}{'pages/s':>9}{'vs datatrove':>14}  steps",
             "-" * 90]
    for r in rows:
        rate = r["pages"] / r["seconds"]
        ratio = f"{rate / (base['pages'] / base['seconds']):.2f}x" if base else "-"
        lines.append(f"{r['chain']:<22}{r['pages']:>7}{r['kept']:>7}{rate:>9.1f}{ratio:>14}  {r['steps']}")
    return "\n".join(lines)


def bench_filter(pages, steps_cfg: dict, models: dict, extractors=("trafilatura", "resiliparse")):
    rows = [run_ours(pages, e, steps_cfg) for e in extractors]
    try:
        rows.append(run_datatrove(pages, models))
    except ImportError as e:
        print(f"(datatrove not installed: {e})")
    return rows


def default_steps(params: Path, classifiers: Path) -> tuple[dict, dict[str, tuple[Path, float]]]:
    """The chain of params.yaml's ``filter`` section without classifier steps whose model file is missing; and
    the classifiers kept, as task -> (model path, threshold). The section is read as strictly as the filter stage
    reads it (a ParamsError names an unknown key)."""
    steps = dict(apply_section(build_parser(), "filter", params, extra_keys=("steps",)).get("steps")
                 or FilterConfig().steps)
    models = {}
    for task in CLASSIFIER_STEPS:
        setting = steps.get(task)
        if not setting:
            continue
        setting = setting if isinstance(setting, dict) else {}
        model = Path(setting.get("model_path", classifiers / f"{task}.bin"))
        if model.is_file():
            models[task] = (model, float(setting.get("threshold", 0.5)))
        else:
            steps[task] = False
    return steps, models


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.filter", description=__doc__.split("\n\n")[0])
    parser.add_argument("--web-dir", type=Path, default=DEFAULT_WEB, help="folder of real-page WARCs (*.warc.gz)")
    parser.add_argument("--sample", type=Path, default=Path("data/raw/sample.warc.gz"), help="generated crawl WARC")
    parser.add_argument("--limit", type=int, default=600, help="pages per input set")
    parser.add_argument("--params", type=Path, default=Path("params.yaml"), help="params file with the filter chain")
    parser.add_argument("--classifiers", type=Path, default=Path("data/classifiers"), help="trained models folder")
    args = parser.parse_args(argv)
    try:
        steps, models = default_steps(args.params, args.classifiers)
    except ParamsError as e:
        parser.error(str(e))
    sets = {"real pages": sorted(args.web_dir.glob("*.warc.gz")), "generated crawl": [args.sample]}
    for name, warcs in sets.items():
        warcs = [w for w in warcs if w.is_file()]
        if not warcs:
            print(f"## {name}: skipped (no WARC files)\n")
            continue
        pages = load_pages(warcs, args.limit)
        print(f"## Filter chain on {name} ({len(pages)} pages, one core)\n"
              + format_rows(bench_filter(pages, steps, models)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
