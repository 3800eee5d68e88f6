"""``python -m bench.benchmarks.data``: every pipeline benchmark, side by side with its baseline, in one run.

1. Extraction quality (trafilatura's eval snippets) and docs/s: ours vs trafilatura vs Resiliparse.
2. BPE training seconds and peak RSS: ours vs HF ``tokenizers``, on TinyStories and the generated crawl.
3. Encoding MB/s with GPT-2's vocabulary: ours vs tiktoken vs HF, one core and all cores.
4. The filter chain (extract → langid → Gopher → classifiers → PII) pages/s: ours vs datatrove
   (bench/benchmarks/filter.py).
5. MinHash dedup: signatures and clustering vs datasketch, the stage on 100k documents (bench/benchmarks/dedup.py).
6. fastText classifiers' held-out accuracy / macro-F1: the generated quality/toxicity/NSFW data and the Davidson
   tweets (hate + offensive vs neither).

Parts 4-6 append results rows (bench.tools.results) that ``python -m bench.tools.report`` turns into
the generated sections of docs/benchmarks/ (pipeline.md, data-quality.md).
"""

from __future__ import annotations

import platform
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.benchmarks import dedup as bench_dedup
from bench.benchmarks import filter as bench_filter
from bench.benchmarks.extract import DEFAULT_WEB, bench_extract, format_rows
from bench.benchmarks.tokenizer import DEFAULT_CORPUS, DEFAULT_GPT2, EOT, bench_bpe_training, bench_encode, rows_table
from bench.tools.results import BenchSettings, Result, finish, parse_bench
from pipeline.classifiers.models import DAVIDSON_CONFIG
from pipeline.classify import Source, train_source
from pipeline.sample.crawl import generate_sample
from pipeline.web.extract import ExtractConfig, run_extract
from tokenizer.train import write_corpus
from workbench.params import setting

PARTS = ("extract", "bpe", "encode", "filter", "dedup", "classify")


def sample_corpus(docs_dir: Path, scratch: Path, pages: int) -> Path:
    """The generated crawl's documents as one text file (``make repro``'s, else made here)."""
    if not any(docs_dir.glob("*.jsonl.gz")):
        generate_sample(scratch / "sample.warc.gz", scratch / "manifest.jsonl", pages=pages, seed=0)
        docs_dir = scratch / "docs"
        run_extract([scratch / "sample.warc.gz"], docs_dir, scratch / "extract.json",
                    ExtractConfig(extractor="resiliparse"))
    corpus = scratch / "sample_corpus.txt"
    write_corpus(docs_dir, corpus, EOT)
    return corpus


@dataclass(frozen=True)
class DataBench(BenchSettings):
    web_dir: Path = setting(DEFAULT_WEB, "shared web folder (trafilatura eval pages)")
    tinystories: Path = setting(DEFAULT_CORPUS, "TinyStories text for BPE/encoding")
    docs: Path = setting(Path("data/documents"), "generated-crawl documents (made on the fly when absent)")
    pages: int = setting(3000, "pages to generate when --docs is empty", at_least=1)
    vocab_size: int = setting(10000, "BPE vocabulary size")
    davidson: Path = setting(DEFAULT_WEB.parent / "toxicity" / "davidson_labeled_data.csv",
                             "Davidson et al. labeled_data.csv for the toxicity classifier")
    filter_pages: int = setting(600, "pages per input set for the filter chain", at_least=1)
    dedup_docs: int = setting(20_000, "documents for the dedup stage run", at_least=10)
    only: tuple[str, ...] = setting((), "run only these parts (default: all)", choices=PARTS)


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(DataBench, argv)
    parts = set(args.only or PARTS)
    print(f"# bench.benchmarks.data {time.strftime('%Y-%m-%d')} on {platform.node()} "
          f"({platform.processor() or platform.machine()}, python {platform.python_version()})\n")
    if "extract" in parts:
        if (args.web_dir / "trafilatura-evaldata.json").is_file():
            print("## Extraction (one core)\n" + format_rows(bench_extract(args.web_dir)) + "\n")
        else:
            print(f"## Extraction: skipped, {args.web_dir} has no trafilatura eval pages\n")
    if "bpe" in parts:
        with tempfile.TemporaryDirectory() as scratch:
            corpora = [c for c in (args.tinystories,) if c.is_file()]
            corpora.append(sample_corpus(args.docs, Path(scratch), args.pages))
            rows = [r for c in corpora for r in bench_bpe_training(c, args.vocab_size, [EOT])]
        print(f"## BPE training, vocab {args.vocab_size}\n" + rows_table(rows) + "\n")
    if "encode" in parts:
        if args.tinystories.is_file() and DEFAULT_GPT2[0].is_file():
            rows = bench_encode(args.tinystories.read_text(encoding="utf-8"), "TinyStories")
            print("## Encoding with the GPT-2 vocabulary\n" + rows_table(rows) + "\n")
        else:
            print("## Encoding: skipped, shared TinyStories / GPT-2 files absent\n")
    shared = ["--results-dir", str(args.results_dir)] + ([] if args.record else ["--no-record"])
    if "filter" in parts:
        bench_filter.main(["--web-dir", str(args.web_dir), "--limit", str(args.filter_pages)] + shared)
    if "dedup" in parts:
        print("## MinHash dedup")
        bench_dedup.main(["--docs", str(args.dedup_docs)] + shared)
    if "classify" in parts:
        rows = bench_classifiers(args.davidson)
        print("## fastText classifiers, held-out 20%\n" + format_classifiers(rows) + "\n")
        finish("classifiers", classifier_results(rows), args, CLASSIFY_COMMAND)
    return 0


def bench_classifiers(davidson: Path) -> list[dict]:
    """Train each task on generated labelled text (and toxicity on Davidson when present); held-out metrics."""
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for task in ("quality", "toxicity", "nsfw"):
            m = train_source(task, Source("generated", n=4000), out=Path(scratch) / f"{task}.bin")
            rows.append({"data": f"generated {task}", **m})
        if davidson.is_file():
            m = train_source("toxicity", Source("davidson", (davidson,)), out=Path(scratch) / "davidson.bin",
                             config=DAVIDSON_CONFIG)
            rows.append({"data": "Davidson tweets (toxicity)", **m})
    return rows


CLASSIFY_COMMAND = "python -m bench.benchmarks.data --only classify"


def classifier_results(rows: list[dict]) -> list[Result]:
    """Held-out accuracy, macro-F1, weighted F1 and AUC of each trained classifier (n = held-out examples)."""
    out = []
    for r in rows:
        name = r["data"].replace(" ", "_").replace("(", "").replace(")", "").lower()
        for metric in ("accuracy", "macro_f1", "weighted_f1", "auc"):
            if r.get(metric) is not None:
                out.append(Result(name, metric, r[metric], f"held out, n={r['n']}"))
    return out


def format_classifiers(rows: list[dict]) -> str:
    lines = [f"{'data':<28}{'n':>7}{'accuracy':>10}{'macro-F1':>10}{'weighted-F1':>13}{'AUC':>8}{'train s':>9}"]
    for r in rows:
        lines.append(f"{r['data']:<28}{r['n']:>7}{r['accuracy']:>10.3f}{r['macro_f1']:>10.3f}"
                     f"{r['weighted_f1']:>13.3f}{r.get('auc', float('nan')):>8.3f}{r['train_seconds']:>9.1f}")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
