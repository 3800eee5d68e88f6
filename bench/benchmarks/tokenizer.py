"""Benchmarks for ``tokenizer.bpe`` and ``tokenizer.encoder`` against HF tokenizers, tiktoken and rustbpe.

* BPE training: seconds and peak RSS of ``train_bpe`` vs the Hugging Face ``tokenizers`` byte-level BPE trainer
  (and rustbpe, a GPT-4-style Rust trainer, when installed: ``pip install -e '.[bench]'``), each run in a fresh
  subprocess, in turns, so memory peaks are measured apart and drift on a shared machine hits all of them.
* Encoding: MB/s of ``Tokenizer`` vs tiktoken ``gpt2`` on one core, cold (a new tokenizer: empty pre-token
  cache) and warm, in turns, after checking the ids are equal; ``encode_batch`` on a process pool vs tiktoken's
  threads; the one-off cost of importing the tokenizer and loading GPT-2's files, in a fresh process.
* Corpora: TinyStories, the generated crawl (``make repro``'s documents) and the text of the real pages in
  ``../shared/data/web`` (extracted once by our extract stage into ``--cache-dir``).

tiktoken cannot download its ``gpt2`` files here, so ``tiktoken_gpt2`` builds the same encoding
from GPT-2's ``vocab.json`` (tiktoken ``load.data_gym_to_mergeable_bpe_ranks`` does the same).

    python -m bench.benchmarks.tokenizer --record && python -m bench.tools.report
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.tools.results import RESULTS_DIR, BenchSettings, Result, finish, interleaved, parse_bench, timing_result
from tokenizer.bpe import GPT2_PAT, train_bpe
from tokenizer.encoder import Tokenizer, unicode_to_token
from workbench.files import write_text
from workbench.memory import peak_rss_mb
from workbench.params import override, setting, usage_error

EOT = "<|endoftext|>"
SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
DEFAULT_CORPUS = SHARED / "tinystories" / "tinystories_sample_2M.txt"
DEFAULT_GPT2 = (SHARED / "tokenizer" / "gpt2_vocab.json", SHARED / "tokenizer" / "gpt2_merges.txt")


def tiktoken_gpt2(vocab_path: str | os.PathLike):
    """tiktoken's ``gpt2`` encoding, built offline from GPT-2's ``vocab.json``."""
    import tiktoken

    with open(vocab_path, encoding="utf-8") as fh:
        vocab = json.load(fh)
    ranks = {unicode_to_token(s): i for s, i in vocab.items() if s != EOT}
    return tiktoken.Encoding(
        name="gpt2_local", pat_str=GPT2_PAT, mergeable_ranks=ranks, special_tokens={EOT: vocab[EOT]}
    )


def _train_in_child(impl: str, corpus: str, vocab_size: int, special_tokens: list[str]) -> None:
    """Subprocess entry: train once, print one JSON line with seconds and peak RSS."""
    import resource

    start = time.perf_counter()
    if impl == "ours":
        train_bpe(corpus, vocab_size, special_tokens)
    elif impl == "rustbpe":  # GPT-4-style trainer (its own split pattern); an anchor, not the same merges
        import rustbpe

        docs = Path(corpus).read_text(encoding="utf-8").split(special_tokens[0] if special_tokens else "\0")
        rustbpe.Tokenizer().train_from_iterator(iter(docs), vocab_size)
    else:
        from tokenizers import Tokenizer as HFTokenizer
        from tokenizers import models, pre_tokenizers, trainers

        tok = HFTokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size, special_tokens=special_tokens, show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        )
        tok.train([corpus], trainer)
    seconds = time.perf_counter() - start
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "peak_rss_mb": peak_rss_mb(), "worker_peak_rss_mb": workers}))


def _train_once(impl: str, corpus_path, vocab_size: int, special_tokens: list[str]) -> dict:
    code = "import sys, json; from bench.benchmarks.tokenizer import _train_in_child as t; t(*json.loads(sys.argv[1]))"
    args = json.dumps([impl, str(corpus_path), vocab_size, special_tokens])
    done = subprocess.run([sys.executable, "-c", code, args], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[2])
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_bpe_training(
    corpus_path: str | os.PathLike, vocab_size: int = 10000, special_tokens: list[str] | None = None,
    repeats: int = 3, label: str | None = None,
) -> list[Result]:
    """Train ours, HF's byte-level BPE and (when installed) rustbpe on ``corpus_path``, each in a fresh subprocess,
    in turns (ours, HF, rustbpe, ours, ...) ``repeats`` times: seconds (median, min-max) and peak RSS (max).

    ``peak_rss_mb`` is the training process's peak; ours also reports its largest worker process (HF and rustbpe
    train with threads inside one process).
    """
    special_tokens = [EOT] if special_tokens is None else list(special_tokens)
    label = label or Path(corpus_path).name
    impls = ["ours", "hf"] + (["rustbpe"] if importlib.util.find_spec("rustbpe") else [])
    runs: dict[str, list[dict]] = {impl: [] for impl in impls}
    for _ in range(repeats):
        for impl in impls:
            runs[impl].append(_train_once(impl, corpus_path, vocab_size, special_tokens))
    seconds = {impl: [r["seconds"] for r in rs] for impl, rs in runs.items()}
    rss = {impl: max(r["peak_rss_mb"] + r["worker_peak_rss_mb"] * (impl == "ours") for r in rs)
           for impl, rs in runs.items()}
    rows = []
    for impl in impls:
        name = f"{impl}, {label}"
        if impl == "hf":
            rows += [timing_result(name, "train_s", seconds[impl]), Result(name, "peak_rss_mb", rss[impl], "MB")]
        else:  # train_s ratio = HF median / this median (> 1: faster than HF); peak_rss_mb ratio = this / HF
            rows += [timing_result(name, "train_s", seconds[impl], "HF tokenizers", seconds["hf"]),
                     Result(name, "peak_rss_mb", rss[impl], "MB", "HF tokenizers", rss["hf"])]
    return rows


def _best_seconds(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def load_seconds(tokenizer_files: tuple = DEFAULT_GPT2) -> dict:
    """One-off costs in a fresh process: importing the tokenizer (with the compiled core) and loading GPT-2."""
    code = ("import time, json, sys; t0 = time.perf_counter(); from tokenizer.encoder import Tokenizer; "
            "t1 = time.perf_counter(); tok = Tokenizer.from_files(sys.argv[1], sys.argv[2], ['<|endoftext|>']); "
            "print(json.dumps({'import_s': t1 - t0, 'load_gpt2_s': time.perf_counter() - t1, 'backend': tok.backend}))")
    done = subprocess.run([sys.executable, "-c", code, *map(str, tokenizer_files)], capture_output=True, text=True,
                          check=True, cwd=Path(__file__).resolve().parents[2])
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_encode(text: str, label: str, tokenizer_files: tuple = DEFAULT_GPT2, repeats: int = 5,
                 workers: int | None = None) -> list[Result]:
    """MB/s of ours (cold: a new tokenizer's empty pre-token cache; warm: every pre-token cached) against tiktoken
    ``gpt2`` on one core, timed in turns; then ``encode_batch`` on ``workers`` processes against tiktoken's threads.
    Raises AssertionError if the ids differ from tiktoken's."""
    ours = Tokenizer.from_files(*tokenizer_files, special_tokens=[EOT])
    tiktok = tiktoken_gpt2(tokenizer_files[0])
    reference = tiktok.encode(text, allowed_special="all")
    assert ours.encode(text) == reference, "ours != tiktoken"
    mb = len(text.encode("utf-8")) / 1e6

    def cold():
        ours.clear_cache()
        ours.encode(text)

    base = lambda: tiktok.encode(text, allowed_special="all")  # noqa: E731
    t_cold, t_base = interleaved(cold, base, repeats)
    t_warm, t_base2 = interleaved(lambda: ours.encode(text), base, repeats)
    rate = lambda ts: [mb / t for t in ts]  # noqa: E731
    rows = [
        timing_result(f"ours ({ours.backend}), cold, 1 core, {label}", "encode_mb_per_s", rate(t_cold), "tiktoken",
                      rate(t_base), unit="MB/s"),
        timing_result(f"ours ({ours.backend}), warm cache, 1 core, {label}", "encode_mb_per_s", rate(t_warm),
                      "tiktoken", rate(t_base2), unit="MB/s"),
    ]
    for row in rows:  # MB/s: higher is better, so the ratio is ours / tiktoken
        row.ratio = row.value / row.baseline_value
    workers = workers or os.cpu_count() or 1
    docs = [d for d in text.split(EOT) if d]
    batch = tiktok.encode_ordinary_batch(docs, num_threads=workers)
    t_pool = _pool_seconds(ours, docs, workers, batch, repeats)
    t_threads = []
    for _ in range(repeats):
        start = time.perf_counter()
        tiktok.encode_ordinary_batch(docs, num_threads=workers)
        t_threads.append(time.perf_counter() - start)
    row = timing_result(f"ours ({ours.backend}), cold, {workers} processes, {label}", "encode_mb_per_s",
                        rate(t_pool), f"tiktoken, {workers} threads", rate(t_threads), unit="MB/s")
    row.ratio = row.value / row.baseline_value
    return rows + [row]


def _pool_seconds(tok: Tokenizer, docs: list[str], cores: int, expected: list, repeat: int) -> list[float]:
    """Times of ``encode_batch`` on a fresh, started pool (cold worker caches; start-up untimed)."""
    times = []
    for _ in range(repeat):
        with tok.pool(cores) as pool:
            pool.map(time.sleep, [0.1] * cores, chunksize=1)  # every worker up and initialized
            start = time.perf_counter()
            ids = tok.encode_batch(docs, pool=pool)
            times.append(time.perf_counter() - start)
        assert ids == expected, "ours batch != tiktoken"
    return times


def format_table(rows: list[dict]) -> str:
    """Rows of dicts as an aligned text table (floats with 3 significant decimals)."""
    cols = list(dict.fromkeys(k for row in rows for k in row))
    cell = lambda v: f"{v:.3f}" if isinstance(v, float) else str(v)  # noqa: E731
    widths = {c: max(len(c), *(len(cell(r.get(c, ""))) for r in rows)) for c in cols}
    lines = ["  ".join(c.ljust(widths[c]) for c in cols)]
    lines += ["  ".join(cell(r.get(c, "")).ljust(widths[c]) for c in cols) for r in rows]
    return "\n".join(lines)


def real_page_text(cache_dir: Path, web_dir: Path = SHARED / "web") -> Path | None:
    """The text of every page in ``web_dir``'s WARCs (our extract stage), one file, documents separated by
    ``<|endoftext|>``; extracted once into ``cache_dir`` and reused. ``None`` when there are no WARCs."""
    out = Path(cache_dir) / "real_pages.txt"
    if out.is_file():
        return out
    warcs = sorted(Path(web_dir).glob("*.warc.gz"))
    if not warcs:
        return None
    from bench.tools.real_pages import real_documents

    docs = real_documents(warcs, Path(cache_dir) / "extract")
    write_text(out, "".join(doc["text"] + EOT for doc in docs if doc.get("text")))
    return out


def crawl_text(docs_dir: Path, cache_dir: Path) -> Path | None:
    """The generated crawl's documents (``make repro``'s data/documents) as one corpus file, or ``None``."""
    if not any(Path(docs_dir).glob("*.jsonl.gz")):
        return None
    from tokenizer.train import write_corpus

    out = Path(cache_dir) / "crawl.txt"
    write_corpus(Path(docs_dir), out, EOT)
    return out


def corpus_rows(corpora: dict[str, Path]) -> list[Result]:
    """Each corpus's size: MB of UTF-8 text and its documents (the parts between ``<|endoftext|>``)."""
    rows = []
    for label, path in corpora.items():
        text = path.read_text(encoding="utf-8")
        rows += [Result(label, "corpus_mb", round(len(text.encode("utf-8")) / 1e6, 2), "MB"),
                 Result(label, "documents", sum(1 for doc in text.split(EOT) if doc.strip()), "documents")]
    return rows


def rows_table(rows: list[Result]) -> str:
    return format_table([{"name": r.name, "metric": r.metric, "value": r.value, "baseline": r.baseline or "",
                          "baseline_value": r.baseline_value or 0.0, "ratio": r.ratio or 0.0,
                          "min": r.min or 0.0, "max": r.max or 0.0} for r in rows])


@dataclass(frozen=True, kw_only=True)
class TokenizerBench(BenchSettings):
    record: bool = override(BenchSettings, "record", False, f"append the rows to {RESULTS_DIR.name}/tokenizer.jsonl "
                                                            "(then: python -m bench.tools.report)")
    tinystories: Path = setting(DEFAULT_CORPUS, "TinyStories text")
    docs: Path = setting(Path("data/documents"), "generated-crawl documents (make repro's; skipped when absent)")
    cache_dir: Path = setting(Path(tempfile.gettempdir()) / "lmw-bench-tokenizer",
                              "where the real pages' text is extracted once")
    vocab_size: int = setting(10000, "BPE training vocabulary size")
    repeats: int = setting(3, "timed runs of each, in turns", at_least=1)
    skip_train: bool = setting(False, "skip the BPE training benchmark")
    skip_encode: bool = setting(False, "skip the encoding benchmark")


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(TokenizerBench, argv)
    for path in (args.tinystories, *DEFAULT_GPT2):
        if not path.is_file():
            usage_error(f"{path} is not a file")
    args.cache_dir.mkdir(parents=True, exist_ok=True)
    corpora = {"TinyStories": args.tinystories, "generated crawl": crawl_text(args.docs, args.cache_dir),
               "real pages": real_page_text(args.cache_dir)}
    corpora = {label: path for label, path in corpora.items() if path is not None}
    rows = corpus_rows(corpora)
    if not args.skip_train:
        for label, path in corpora.items():
            rows += bench_bpe_training(path, args.vocab_size, [EOT], args.repeats, label)
    if not args.skip_encode:
        rows.append(Result("ours, one-off", "import_and_load_s", **_load_row()))
        for label, path in corpora.items():
            rows += bench_encode(path.read_text(encoding="utf-8"), label, repeats=args.repeats)
    command = "python -m bench.benchmarks.tokenizer --record" + " --skip-train" * args.skip_train + \
        " --skip-encode" * args.skip_encode
    print(rows_table(rows))
    return finish("tokenizer", rows, args, command, show=False)


def _load_row() -> dict:
    costs = [load_seconds() for _ in range(3)]
    return {"value": statistics.median(c["import_s"] + c["load_gpt2_s"] for c in costs), "unit": "s",
            "extra": {"backend": costs[0]["backend"], "import_s": statistics.median(c["import_s"] for c in costs)}}


if __name__ == "__main__":
    sys.exit(main())
