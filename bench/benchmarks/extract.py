"""Extraction quality and speed: our extractors vs plain trafilatura and Resiliparse, and what else was tried.

Quality follows trafilatura's own evaluation (``tests/comparison.py``): for each page of
``trafilatura-evaldata.json``, the share of ``with`` snippets found in the extracted text ("kept") and the
share of ``without`` snippets absent from it ("dropped"), over the fixed test half (``eval_half``: every choice
of the cascade was made on the validation half) and over all pages. Speed is pages/s on one core: every page
goes through every extractor in turn (rotating the order page by page) so drift on a shared machine hits all of
them alike, ``--repeats`` times; the ratio is against ours with trafilatura in the same run.

    python -m bench.benchmarks.extract --web-dir ../shared/data/web [--repeats 2] [--plot docs/extraction_frontier.png]
    python -m bench.benchmarks.extract --stage
        # the extract stage on ../shared/data/web/*.warc.gz, cascade vs trafilatura
    python -m bench.benchmarks.extract --scrapinghub DIR
        # F1 on ScrapingHub's article-extraction benchmark (a checkout of
        # github.com/scrapinghub/article-extraction-benchmark: html/*.html.gz, ground-truth.json, evaluate.py),
        # scored by that benchmark's own evaluate.py
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import logging
import statistics
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bench.tools.results import BenchSettings, Result, finish, parse_bench
from pipeline.web.distill import HALVES, eval_half
from pipeline.web.extract import ExtractConfig, decode_html, extract_text, main_text
from pipeline.web.extract_cascade import DROP_TAGS, prune_html
from pipeline.web.warc import iter_payloads
from workbench.files import atomic_path
from workbench.params import setting

DEFAULT_WEB = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "web"
BASELINE = "ours (trafilatura)"


def load_eval_pages(web_dir: Path) -> tuple[list[tuple[bytes, str | None, dict]], int]:
    """(html, declared charset, expectations + ``url``) for each evaluable page; and the page count read."""
    evaldata = json.loads((web_dir / "trafilatura-evaldata.json").read_text(encoding="utf-8"))
    pages, seen = [], 0
    for path in sorted(web_dir.glob("trafilatura-pages-*.warc.gz")):
        for payload in iter_payloads(path, Counter()):
            seen += 1
            if payload.url in evaldata:
                pages.append((payload.body, payload.charset, {**evaldata[payload.url], "url": payload.url}))
    return pages, seen


def _plain_trafilatura(html: bytes, charset: str | None) -> str | None:
    import trafilatura

    return trafilatura.extract(html)


def _plain_resiliparse(html: bytes, charset: str | None) -> str | None:
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.encoding import bytes_to_str, detect_encoding
    from resiliparse.parse.html import HTMLTree

    return extract_plain_text(HTMLTree.parse(bytes_to_str(html, detect_encoding(html))), main_content=True)


def _trafilatura(html: str, fast: bool) -> str | None:
    import trafilatura

    return trafilatura.extract(html, fast=fast, include_comments=False, include_tables=True, deduplicate=False)


def _naive_prune(html: str) -> str:
    """The issue's naive pre-pass: every script/style/.../nav/aside/header/footer/form subtree removed."""
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(html)
    tree.strip_tags([*DROP_TAGS, "nav", "aside", "header", "footer", "form"])
    return tree.html or ""


def _decoded(fn):
    """An extractor of decoded HTML as one of page bytes (our decoding first, as in ``extract_text``)."""
    def run(html: bytes, charset: str | None) -> str | None:
        text = decode_html(html, charset)
        return fn(text) if text is not None else None
    return run


EXTRACTORS = {
    BASELINE: lambda html, cs: extract_text(html, "trafilatura", cs),
    "ours (cascade)": lambda html, cs: extract_text(html, "cascade", cs),
    "ours (resiliparse)": lambda html, cs: extract_text(html, "resiliparse", cs),
    "ours (distilled)": lambda html, cs: extract_text(html, "distilled", cs),
    "plain trafilatura": _plain_trafilatura,
    "plain resiliparse": _plain_resiliparse,
}
# tried on the way to the cascade (docs/benchmarks/pipeline.md, its decision log): on the frontier, not extractors of
# the stage
TRIED = {
    "trafilatura fast=True": _decoded(lambda h: _trafilatura(h, fast=True)),
    "naive pre-pass + fast": _decoded(lambda h: _trafilatura(_naive_prune(h), fast=True)),
    "smart pre-pass + fast": _decoded(lambda h: _trafilatura(prune_html(h)[0], fast=True)),
    "smart pre-pass + full": _decoded(lambda h: _trafilatura(prune_html(h)[0], fast=False)),
}


def quality(texts: list[str], pages) -> dict:
    """kept / dropped shares on each half and on all pages."""
    out = {}
    for subset in (*HALVES, "all"):
        kept = n_with = dropped = n_without = 0
        for text, (_, _, expect) in zip(texts, pages, strict=True):
            if subset != "all" and eval_half(expect["url"]) != subset:
                continue
            kept += sum(s in text for s in expect["with"])
            n_with += len(expect["with"])
            dropped += sum(s not in text for s in expect["without"])
            n_without += len(expect["without"])
        out[f"kept_{subset}"] = kept / max(n_with, 1)
        out[f"dropped_{subset}"] = dropped / max(n_without, 1)
    return out


def measure(extractors: dict, pages, repeats: int) -> tuple[dict[str, list[str]], dict[str, list[float]]]:
    """Texts of the first repeat and seconds per repeat of each extractor, interleaved page by page."""
    names = list(extractors)
    texts = {n: [] for n in names}
    seconds = {n: [0.0] * repeats for n in names}
    for r in range(repeats):
        for i, (html, charset, _) in enumerate(pages):
            shift = i % len(names)
            for name in names[shift:] + names[:shift]:
                start = time.perf_counter()
                text = extractors[name](html, charset) or ""
                seconds[name][r] += time.perf_counter() - start
                if r == 0:
                    texts[name].append(text)
    return texts, seconds


def bench_extract(web_dir: Path = DEFAULT_WEB, only: list[str] | None = None, repeats: int = 1,
                  tried: bool = False, limit: int | None = None, pages=None) -> list[dict]:
    """The rows of each extractor on the evaluation pages (``pages``: ``load_eval_pages``'s, when already read)."""
    logging.getLogger("trafilatura").setLevel(logging.CRITICAL)
    pages = (pages if pages is not None else load_eval_pages(web_dir)[0])[:limit]
    extractors = {**EXTRACTORS, **(TRIED if tried else {})}
    extractors = {n: fn for n, fn in extractors.items() if not only or n in only or n == BASELINE}
    texts, seconds = measure(extractors, pages, repeats)
    rows = []
    for name in extractors:
        rates = [len(pages) / s for s in seconds[name]]
        rows.append({"impl": name, "pages": len(pages), **quality(texts[name], pages),
                     "docs_per_s": statistics.median(rates), "docs_per_s_min": min(rates),
                     "docs_per_s_max": max(rates), "repeats": repeats})
    base = statistics.median(len(pages) / s for s in seconds[BASELINE])
    for r in rows:
        r["speed_vs_trafilatura"] = r["docs_per_s"] / base
    return rows


def bench_stage(warcs: list[Path], repeats: int = 2, extractors=("distilled", "cascade", "trafilatura"),
                label: str = "") -> list[Result]:
    """``python -m pipeline extract`` on ``warcs`` with one worker for each extractor in turn, ``repeats`` times:
    records/s (against trafilatura, same run), and the records lost to exceptions or the time limit. Rows are named
    ``stage{label} --extractor X``."""
    import tempfile

    from pipeline.web.extract import run_extract

    seconds = {e: [] for e in extractors}
    metrics = {}
    with tempfile.TemporaryDirectory() as scratch:
        for r in range(repeats):
            for e in extractors:
                out = Path(scratch) / f"{e}-{r}"
                start = time.perf_counter()
                metrics[e] = run_extract(warcs, out, out / "metrics.json", ExtractConfig(extractor=e, workers=1))
                seconds[e].append(time.perf_counter() - start)
    base = extractors[-1]
    rows = []
    for e in extractors:
        m = metrics[e]
        rates = [m["records_read"] / s for s in seconds[e]]
        vs = (f"stage{label} --extractor {base}", statistics.median(m["records_read"] / s for s in seconds[base])) \
            if e != base else (None, None)
        rows.append(Result(f"stage{label} --extractor {e}", "records_per_s", round(statistics.median(rates), 1),
                           f"records/s, 1 worker, {len(warcs)} WARCs", *vs, None, repeats, round(min(rates), 1),
                           round(statistics.median(rates), 1), round(max(rates), 1)))
        for reason in ("extract_error", "extract_timeout", "extract_crash"):
            rows.append(Result(f"stage{label} --extractor {e}", reason, m["drops"].get(reason, 0),
                               f"of {m['records_read']} records"))
        rows.append(Result(f"stage{label} --extractor {e}", "docs_out", m["docs_out"],
                           f"of {m['records_read']} records"))
    for r in rows:
        if r.metric == "records_per_s" and r.baseline_value:
            r.ratio = round(r.value / r.baseline_value, 3)
    return rows


def distilled_profile(pages, repeats: int, name: str = "ours (distilled)") -> list[Result]:
    """Where the distilled extractor's time goes, page by page (decode, parse and walk, features, the trees, the
    trafilatura fallback), the median of ``repeats`` passes, as shares and in ms a page; and the share of pages
    that fall back. Rows are named ``name``."""
    from pipeline.web.blocks import features, page_blocks
    from pipeline.web.distilled import keep_probabilities, kept_text, load_model

    model = load_model()
    parts = ("decode", "parse and walk", "features", "trees", "fallback")
    passes, fallback = [], 0
    for _ in range(repeats):
        seconds, fallback = dict.fromkeys(parts, 0.0), 0
        for html, charset, _ in pages:
            t0 = time.perf_counter()
            text = decode_html(html, charset)
            t1 = time.perf_counter()
            page = page_blocks(text) if text else None
            t2 = time.perf_counter()
            x = features(page) if page and page.texts else None
            t3 = time.perf_counter()
            p = keep_probabilities(model, *x) if x is not None else None
            t4 = time.perf_counter()
            if p is None or kept_text(model, page, p)[1]:
                fallback += 1
                extract_text(html, "trafilatura", charset)
            t5 = time.perf_counter()
            for part, (a, b) in zip(parts, ((t0, t1), (t1, t2), (t2, t3), (t3, t4), (t4, t5)), strict=True):
                seconds[part] += b - a
        passes.append(seconds)
    total = statistics.median(sum(s.values()) for s in passes)
    rows = []
    for part in parts:
        seconds = statistics.median(s[part] for s in passes)
        rows += [Result(name, f"time share: {part}", round(seconds / total, 3), "of its time"),
                 Result(name, f"ms per page: {part}", round(1000 * seconds / len(pages), 3), "ms, one core")]
    rows.append(Result(name, "fallback_share", round(fallback / len(pages), 4), "of pages"))
    return rows


def load_scrapinghub(root: Path):
    """(ground truth by page id, each page's HTML, the benchmark's own ``evaluate``) from a checkout of
    scrapinghub/article-extraction-benchmark."""
    spec = importlib.util.spec_from_file_location("article_extraction_benchmark_evaluate", root / "evaluate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    truth = json.loads((root / "ground-truth.json").read_text(encoding="utf-8"))
    html = {}
    for key in truth:
        with gzip.open(root / "html" / f"{key}.html.gz", "rt", encoding="utf-8") as fh:
            html[key] = fh.read()
    return truth, html, module.evaluate


def _scrapinghub_trafilatura(html: str, charset: str | None) -> str | None:
    """Plain trafilatura as the benchmark's own extractors/run_trafilatura.py calls it."""
    import trafilatura

    return trafilatura.extract(html, include_comments=False)


SCRAPINGHUB_EXTRACTORS = {  # the pages are decoded text
    BASELINE: lambda html, cs: main_text(html, "trafilatura"),
    "ours (distilled)": lambda html, cs: main_text(html, "distilled"),
    "plain trafilatura": _scrapinghub_trafilatura,
}


def bench_scrapinghub(root: Path, repeats: int) -> list[Result]:
    """F1, precision and recall (the benchmark's ``evaluate``: word 4-gram shingles, ± a bootstrap's std) and
    pages/s on one core, interleaved, of each of ``SCRAPINGHUB_EXTRACTORS``."""
    logging.getLogger("trafilatura").setLevel(logging.CRITICAL)
    truth, html, evaluate = load_scrapinghub(root)
    keys = sorted(truth)
    texts, seconds = measure(SCRAPINGHUB_EXTRACTORS, [(html[k], None, {}) for k in keys], repeats)
    base_rate = statistics.median(len(keys) / s for s in seconds[BASELINE])
    rows = []
    for name in SCRAPINGHUB_EXTRACTORS:
        scores = evaluate(truth, {k: {"articleBody": t} for k, t in zip(keys, texts[name], strict=True)}, 1000)
        vs = (None,) if name == BASELINE else (BASELINE,)
        for metric in ("f1", "precision", "recall"):
            rows.append(Result(name, f"scrapinghub_{metric}", round(scores[metric], 4),
                               f"± {scores[metric + '_std']:.3f} (bootstrap std), {len(keys)} pages", *vs))
        rates = [len(keys) / s for s in seconds[name]]
        rows.append(Result(name, "scrapinghub_pages_per_s", round(statistics.median(rates), 1), "pages/s, one core",
                           *vs, round(base_rate, 1) if name != BASELINE else None, None, repeats,
                           round(min(rates), 1), round(statistics.median(rates), 1), round(max(rates), 1)))
    base = {r.metric: r.value for r in rows if r.name == BASELINE}
    for r in rows:
        if r.name != BASELINE:
            r.baseline_value = base[r.metric]
            r.ratio = round(r.value / r.baseline_value, 3)
    return rows


def format_rows(rows: list[dict]) -> str:
    lines = [f"{'extractor':<24}{'kept test':>10}{'dropped test':>13}{'kept all':>10}{'dropped all':>12}"
             f"{'pages/s':>9}{'x ours-trafilatura':>20}"]
    for r in rows:
        lines.append(f"{r['impl']:<24}{r['kept_test']:>10.3f}{r['dropped_test']:>13.3f}{r['kept_all']:>10.3f}"
                     f"{r['dropped_all']:>12.3f}{r['docs_per_s']:>9.1f}{r['speed_vs_trafilatura']:>19.2f}x")
    return "\n".join(lines)


def results_rows(rows: list[dict]) -> list[Result]:
    """Quality per half and pages/s (ratio: against ours with trafilatura, same run) for each extractor."""
    base = next(r for r in rows if r["impl"] == BASELINE)
    out = []
    for r in rows:
        vs = (BASELINE,) if r is not base else (None,)
        for metric in ("kept_test", "dropped_test", "kept_all", "dropped_all"):
            out.append(Result(r["impl"], metric, round(r[metric], 4), "share of snippets",
                              *vs, round(base[metric], 4) if r is not base else None))
        out.append(Result(r["impl"], "pages_per_s", round(r["docs_per_s"], 1), "pages/s, one core", *vs,
                          round(base["docs_per_s"], 1) if r is not base else None,
                          round(r["speed_vs_trafilatura"], 3) if r is not base else None, r["repeats"],
                          round(r["docs_per_s_min"], 1), round(r["docs_per_s"], 1), round(r["docs_per_s_max"], 1)))
    return out


def plot_frontier(rows: list[dict], path: Path) -> None:
    """Speed (x ours with trafilatura) against kept and dropped on all pages, one point per extractor; the stage's
    default extractor in red."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    default = f"ours ({ExtractConfig().extractor})"
    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    for ax, metric, bar in ((axes[0], "kept_all", 0.933), (axes[1], "dropped_all", 0.900)):
        for r in rows:
            ax.scatter(r["speed_vs_trafilatura"], r[metric], color="#c44e52" if r["impl"] == default else "#4c72b0")
            ax.annotate(r["impl"], (r["speed_vs_trafilatura"], r[metric]), fontsize=7, xytext=(4, 2),
                        textcoords="offset points")
        ax.axhline(bar, color="grey", ls="--", lw=0.8)
        ax.axvline(2.0, color="grey", ls="--", lw=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("pages/s relative to ours (trafilatura), one core")
        ax.set_ylabel(metric.replace("_all", " (all pages)"))
    fig.suptitle(f"Extraction: speed vs quality (red: the default, {default}; dashed: the bar, 2x at kept 0.933 / "
                 "dropped 0.900)")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)


@dataclass(frozen=True)
class ExtractBench(BenchSettings):
    web_dir: Path = setting(DEFAULT_WEB, "folder with trafilatura-pages-*.warc.gz and trafilatura-evaldata.json")
    repeats: int = setting(2, "timed passes over the pages", at_least=1)
    tried: bool = setting(True, "also the extractors that were tried (--no-tried: only the stage's extractors and "
                                "the plain ones)")
    limit: int | None = setting(None, "only the first N pages (a smoke run; not recorded)", at_least=1)
    plot: Path | None = setting(None, "write the speed-vs-quality PNG here")
    stage: bool = setting(False, "instead: time the extract stage on every WARC of --web-dir (and on --sample, with "
                                 "where the distilled extractor's time goes there), each extractor against trafilatura")
    sample: Path = setting(Path("data/raw/sample.warc.gz"),
                           "with --stage: the pipeline's sample WARC too, where it exists (make repro writes it)")
    scrapinghub: Path | None = setting(None, "instead: F1 on ScrapingHub's article-extraction benchmark checked out "
                                             "in DIR", metavar="DIR")


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(ExtractBench, argv)
    if args.scrapinghub:
        if not (args.scrapinghub / "ground-truth.json").is_file():
            print(f"error: {args.scrapinghub}/ground-truth.json not found (a checkout of "
                  "github.com/scrapinghub/article-extraction-benchmark)", flush=True)
            return 2
        return finish("extract", bench_scrapinghub(args.scrapinghub, args.repeats), args,
                      f"python -m bench.benchmarks.extract --scrapinghub DIR --repeats {args.repeats}")
    if not (args.web_dir / "trafilatura-evaldata.json").is_file():
        print(f"error: {args.web_dir}/trafilatura-evaldata.json not found", flush=True)
        return 2
    if args.stage:
        stage_rows = bench_stage(sorted(args.web_dir.glob("*.warc.gz")), args.repeats)
        if args.sample.is_file():
            stage_rows += bench_stage([args.sample], args.repeats, label=" (sample)")
            sample = [(p.body, p.charset, {}) for p in iter_payloads(args.sample, Counter()) if p.kind == "html"]
            stage_rows += distilled_profile(sample, args.repeats, name="ours (distilled) on the sample")
        command = f"python -m bench.benchmarks.extract --stage --repeats {args.repeats}"
        return finish("extract", stage_rows, args, command)
    pages = load_eval_pages(args.web_dir)[0]
    rows = bench_extract(args.web_dir, repeats=args.repeats, tried=args.tried, limit=args.limit, pages=pages)
    print(format_rows(rows))
    if args.plot:
        plot_frontier(rows, args.plot)
        print(f"plot written to {args.plot}")
    if args.limit is not None:  # a smoke run: not recorded
        return 0
    results = results_rows(rows)
    if "ours (distilled)" in {r["impl"] for r in rows}:
        results += distilled_profile(pages, args.repeats)
    return finish("extract", results, args, f"python -m bench.benchmarks.extract --repeats {args.repeats}")


if __name__ == "__main__":
    raise SystemExit(main())
