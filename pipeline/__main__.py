"""``python -m pipeline <step>``: extract, filter, dedup, train-classifier, report, train-tokenizer, tokenize.

Each step reads its defaults from a section of ``params.yaml`` (``--params`` picks another file)
and every default can be overridden by a flag. Exit 0 on success, 2 on bad usage or input.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from workbench.params import DEFAULT_PARAMS, load_section


def _add_extract(sub) -> None:
    p = sub.add_parser("extract", help="WARC/WET files -> documents (gzip JSONL)",
                       description="Extract main text from WARC response / WET conversion records.")
    p.add_argument("inputs", nargs="*", type=Path, help="WARC/WET files (default: extract.inputs)")
    p.add_argument("--out-dir", type=Path, help="folder for <input>.jsonl.gz documents (extract.out_dir)")
    p.add_argument("--metrics", type=Path, help="stage metrics JSON (extract.metrics)")
    p.add_argument("--extractor", choices=("trafilatura", "resiliparse"), help="main-text extractor")
    p.add_argument("--workers", type=int, help="extraction processes")
    p.add_argument("--max-bytes", type=int, help="per-record byte cap (also after Content-Encoding)")
    p.add_argument("--timeout-s", type=float, help="per-record extraction time limit in seconds")
    p.add_argument("--force", action="store_true", help="redo inputs whose output already exists")


def _add_filter(sub) -> None:
    p = sub.add_parser("filter", help="documents -> kept + rejected (langid, Gopher, classifiers, PII)",
                       description="Run the filter chain (pipeline/filter.py) over every documents file.")
    p.add_argument("inputs", nargs="*", type=Path, help="documents files or folders (filter.inputs)")
    p.add_argument("--out-dir", type=Path, help="kept documents, one file per input (filter.out_dir)")
    p.add_argument("--rejected-dir", type=Path, help="dropped documents with their reason (filter.rejected_dir)")
    p.add_argument("--metrics", type=Path, help="stage metrics JSON (filter.metrics)")
    p.add_argument("--workers", type=int, help="processes; each input file is one task")
    p.add_argument("--executor", choices=("local", "ray", "dask"), help="where tasks run (default local)")
    p.add_argument("--address", help="ray/dask cluster address (default: start a local one)")
    p.add_argument("--force", action="store_true", help="redo inputs whose output already exists")


def _add_dedup(sub) -> None:
    p = sub.add_parser("dedup", help="exact + MinHash LSH near-duplicate removal across all documents",
                       description="Drop exact and near duplicates (pipeline/dedup.py) across every documents file.")
    p.add_argument("inputs", nargs="*", type=Path, help="documents files or folders (dedup.inputs)")
    p.add_argument("--out-dir", type=Path, help="kept documents, one file per input (dedup.out_dir)")
    p.add_argument("--rejected-dir", type=Path, help="dropped documents with reason and cluster (dedup.rejected_dir)")
    p.add_argument("--metrics", type=Path, help="stage metrics JSON (dedup.metrics)")
    p.add_argument("--num-hashes", type=int, help="MinHash permutations (bands x rows)")
    p.add_argument("--num-bands", type=int, help="LSH bands")
    p.add_argument("--ngrams", type=int, help="word n-gram shingle size")
    p.add_argument("--jaccard-threshold", type=float, help="verified Jaccard similarity to call a pair duplicates")
    p.add_argument("--workers", type=int, help="signature processes")
    p.add_argument("--force", action="store_true", help="redo even if the outputs are complete")


def _add_report(sub) -> None:
    p = sub.add_parser("report", help="data funnel CSV + PNG from the stage metrics",
                       description="How many records, documents, characters and tokens survive each data step.")
    p.add_argument("--metrics-dir", type=Path, help="folder of stage metrics JSON (report.metrics_dir)")
    p.add_argument("--out-dir", type=Path, help="writes data_funnel.csv and data_funnel.png (report.out_dir)")


def _add_train_tokenizer(sub) -> None:
    p = sub.add_parser("train-tokenizer", help="train a byte-level BPE on documents",
                       description="Train a byte-level BPE tokenizer (GPT-2 pre-tokenization) on documents.")
    p.add_argument("--input", type=Path, help="documents file or folder (tokenizer.input)")
    p.add_argument("--out-dir", type=Path, help="writes vocab.json, merges.txt, tokenizer.json")
    p.add_argument("--metrics", type=Path, help="stage metrics JSON (tokenizer.metrics)")
    p.add_argument("--vocab-size", type=int, help="final vocabulary size, bytes and specials included")
    p.add_argument("--special-tokens", nargs="*", help="special tokens (default: <|endoftext|>)")
    p.add_argument("--workers", type=int, help="pre-tokenization processes")


def _add_tokenize(sub) -> None:
    p = sub.add_parser("tokenize", help="documents -> train.bin/val.bin token shards",
                       description="Encode documents into uint16/uint32 token shards plus meta.json.")
    p.add_argument("--input", type=Path, help="documents file or folder (shards.input)")
    p.add_argument("--tokenizer", type=Path, help="folder with vocab.json + merges.txt")
    p.add_argument("--out-dir", type=Path, help="writes train.bin, val.bin, meta.json")
    p.add_argument("--metrics", type=Path, help="stage metrics JSON (shards.metrics)")
    p.add_argument("--val-fraction", type=float, help="share of documents in val.bin")
    p.add_argument("--seed", type=int, help="seed of the train/val split")
    p.add_argument("--workers", type=int, help="encoding processes")


SECTIONS = {"extract": "extract", "filter": "filter", "dedup": "dedup", "report": "report",
            "train-tokenizer": "tokenizer", "tokenize": "shards"}


def _settings(args: argparse.Namespace) -> dict:
    """params.yaml section, overridden by the flags that were given."""
    settings = dict(load_section(SECTIONS[args.step], args.params))
    for key, value in vars(args).items():
        if key in ("step", "params", "force", "verbose", "executor", "address"):
            continue
        if value is not None and value != []:
            settings[key] = value
    return settings


def _need(settings: dict, *keys: str) -> None:
    missing = [k for k in keys if settings.get(k) in (None, "", [])]
    if missing:
        raise ValueError(f"missing setting(s) {', '.join(missing)}: give flags or a params.yaml section")


def run_extract_cmd(s: dict, force: bool) -> str:
    from pipeline.extract import ExtractConfig, run_extract

    _need(s, "inputs", "out_dir", "metrics")
    cfg = ExtractConfig(extractor=s.get("extractor", "trafilatura"), workers=int(s.get("workers", 1)),
                        max_bytes=int(s.get("max_bytes", 4 << 20)), timeout_s=float(s.get("timeout_s", 10.0)))
    m = run_extract([Path(p) for p in s["inputs"]], Path(s["out_dir"]), Path(s["metrics"]), cfg, force=force)
    return (f"extract: {m['records_read']} records -> {m['docs_out']} documents in {s['out_dir']} "
            f"({m['docs_per_s']} docs/s); drops {m['drops']}")


def run_filter_cmd(s: dict, args: argparse.Namespace) -> str:
    from pipeline.executor import make_executor
    from pipeline.filter import FilterConfig, run_filter

    _need(s, "inputs", "out_dir", "rejected_dir", "metrics")
    cfg = FilterConfig(steps=s.get("steps", FilterConfig().steps), workers=int(s.get("workers", 1)))
    executor = make_executor(args.executor or s.get("executor", "local"), cfg.workers, args.address)
    m = run_filter([Path(p) for p in _paths(s["inputs"])], Path(s["out_dir"]), Path(s["rejected_dir"]),
                   Path(s["metrics"]), cfg, executor, force=args.force)
    return (f"filter: {m['docs_in']} -> {m['docs_out']} documents in {s['out_dir']} ({m['docs_per_s']} docs/s); "
            f"drops {m['drops']}")


def run_dedup_cmd(s: dict, force: bool) -> str:
    from pipeline.dedup import DedupConfig, run_dedup

    _need(s, "inputs", "out_dir", "rejected_dir", "metrics")
    known = DedupConfig.__dataclass_fields__
    cfg = DedupConfig(**{k: v for k, v in s.items() if k in known})
    m = run_dedup([Path(p) for p in _paths(s["inputs"])], Path(s["out_dir"]), Path(s["metrics"]), cfg,
                  rejected_dir=Path(s["rejected_dir"]), force=force)
    return f"dedup: {m['docs_in']} -> {m['docs_out']} documents in {s['out_dir']}; drops {m['drops']}"


def run_report_cmd(s: dict) -> str:
    from pipeline.report import write_funnel

    _need(s, "metrics_dir", "out_dir")
    frame, paths = write_funnel(Path(s["metrics_dir"]), Path(s["out_dir"]))
    return f"report: {len(frame)} funnel rows -> {', '.join(map(str, paths))}"


def _paths(value) -> list:
    return [value] if isinstance(value, (str, Path)) else list(value)


def run_train_tokenizer_cmd(s: dict) -> str:
    from pipeline.train_tokenizer import train_tokenizer

    _need(s, "input", "out_dir", "vocab_size")
    m = train_tokenizer(Path(s["input"]), Path(s["out_dir"]), int(s["vocab_size"]),
                        list(s.get("special_tokens") or ["<|endoftext|>"]), int(s.get("workers", 1)),
                        metrics_path=Path(s["metrics"]) if s.get("metrics") else None)
    return f"train-tokenizer: {m['vocab_size']} tokens ({m['merges']} merges) in {m['seconds']} s -> {s['out_dir']}"


def run_tokenize_cmd(s: dict) -> str:
    from pipeline.shards import write_shards
    from workbench.files import write_json

    _need(s, "input", "tokenizer", "out_dir")
    meta = write_shards(Path(s["input"]), Path(s["tokenizer"]), Path(s["out_dir"]),
                        float(s.get("val_fraction", 0.05)), int(s.get("seed", 0)), int(s.get("workers", 1)))
    if s.get("metrics"):
        write_json(Path(s["metrics"]), {"stage": "shards", **meta})
    return (f"tokenize: {meta['train_tokens']:,} train + {meta['val_tokens']:,} val tokens "
            f"({meta['dtype']}) at {meta['tokens_per_s']:,} tokens/s -> {s['out_dir']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline", description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", type=Path, default=DEFAULT_PARAMS, help="params file with stage defaults")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = parser.add_subparsers(dest="step", required=True)
    _add_extract(sub)
    _add_filter(sub)
    _add_dedup(sub)
    sub.add_parser("train-classifier", add_help=False, help="train a fastText quality/toxicity/nsfw classifier "
                   "(python -m pipeline train-classifier --help)")
    _add_report(sub)
    _add_train_tokenizer(sub)
    _add_tokenize(sub)
    argv = sys.argv[1:] if argv is None else list(argv)
    if "train-classifier" in argv[:3]:  # its own CLI (pipeline/classify.py), flags passed through
        from pipeline.classify import main as train_classifier_main

        return train_classifier_main(argv[argv.index("train-classifier") + 1:])
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    start = time.perf_counter()
    try:
        settings = _settings(args)
        if args.step == "extract":
            summary = run_extract_cmd(settings, args.force)
        elif args.step == "filter":
            summary = run_filter_cmd(settings, args)
        elif args.step == "dedup":
            summary = run_dedup_cmd(settings, args.force)
        elif args.step == "report":
            summary = run_report_cmd(settings)
        elif args.step == "train-tokenizer":
            summary = run_train_tokenizer_cmd(settings)
        else:
            summary = run_tokenize_cmd(settings)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{summary} [{time.perf_counter() - start:.1f} s]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
