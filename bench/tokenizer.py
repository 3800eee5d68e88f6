"""Benchmarks for ``pipeline.bpe`` and ``pipeline.tokenizer`` against tiktoken and HF tokenizers.

* BPE training: seconds and peak RSS of ``train_bpe`` vs the Hugging Face ``tokenizers`` byte-level
  BPE trainer, each run in a fresh subprocess so their memory peaks are measured apart.
* Encoding: MB/s of ``Tokenizer`` vs tiktoken ``gpt2`` vs HF ``tokenizers`` (loading our exported
  ``tokenizer.json``), on one core and on all cores, after checking that all three give the same
  ids. Every timed run of ours starts with a cold pre-token cache, except the "warm cache" row
  (the steady state when encoding a large corpus, where nearly every pre-token has been seen).

tiktoken cannot download its ``gpt2`` files here, so ``tiktoken_gpt2`` builds the same encoding
from GPT-2's ``vocab.json`` (tiktoken ``load.data_gym_to_mergeable_bpe_ranks`` does the same).

    python -m bench.tokenizer --corpus ../shared/data/tinystories/tinystories_sample_2M.txt
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pipeline.bpe import GPT2_PAT, train_bpe
from pipeline.tokenizer import Tokenizer, unicode_to_token
from workbench.files import write_json

EOT = "<|endoftext|>"
SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
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


def _peak_rss_mb() -> float:
    """This process's peak resident set size (VmHWM) in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _train_in_child(impl: str, corpus: str, vocab_size: int, special_tokens: list[str]) -> None:
    """Subprocess entry: train once, print one JSON line with seconds and peak RSS."""
    import resource

    start = time.perf_counter()
    if impl == "ours":
        train_bpe(corpus, vocab_size, special_tokens)
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
    print(json.dumps({"seconds": seconds, "peak_rss_mb": _peak_rss_mb(), "worker_peak_rss_mb": workers}))


def bench_bpe_training(
    corpus_path: str | os.PathLike, vocab_size: int = 10000, special_tokens: list[str] | None = None
) -> list[dict]:
    """Train ours and HF's byte-level BPE on ``corpus_path``, each in a fresh subprocess.

    ``peak_rss_mb`` is the training process's peak; ours also reports its largest worker process
    (``worker_peak_rss_mb``; HF trains with threads inside one process).
    """
    special_tokens = [EOT] if special_tokens is None else list(special_tokens)
    code = "import sys, json; from bench.tokenizer import _train_in_child as t; t(*json.loads(sys.argv[1]))"
    rows = []
    for impl in ("ours", "hf"):
        args = json.dumps([impl, str(corpus_path), vocab_size, special_tokens])
        done = subprocess.run([sys.executable, "-c", code, args], capture_output=True, text=True, check=True,
                              cwd=Path(__file__).resolve().parents[1])
        result = json.loads(done.stdout.strip().splitlines()[-1])
        rows.append({"impl": impl, "corpus": Path(corpus_path).name, "vocab_size": vocab_size, **result})
    for row in rows:
        row["ratio_vs_hf"] = row["seconds"] / rows[-1]["seconds"]
    return rows


def _best_seconds(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def bench_encode(text: str, tokenizer_files: tuple = DEFAULT_GPT2, repeat: int = 5) -> list[dict]:
    """Encoding throughput (MB/s) of ours, tiktoken and HF on ``text``, one core and all cores.

    ``tokenizer_files`` is GPT-2's ``(vocab.json, merges.txt)``. All cores: the text is cut into
    documents at ``<|endoftext|>`` and encoded as a batch (tiktoken and HF with threads, ours on
    a process pool started before timing). Raises AssertionError if the ids differ.
    """
    from tokenizers import Tokenizer as HFTokenizer

    ours = Tokenizer.from_files(*tokenizer_files, special_tokens=[EOT])
    tiktok = tiktoken_gpt2(tokenizer_files[0])
    with tempfile.TemporaryDirectory() as tmp:
        ours.to_hf_json(Path(tmp) / "tokenizer.json")
        hf = HFTokenizer.from_file(str(Path(tmp) / "tokenizer.json"))
    docs = [d for d in text.split(EOT) if d]
    reference = tiktok.encode(text, allowed_special="all")
    assert ours.encode(text) == reference, "ours != tiktoken"
    assert hf.encode(text).ids == reference, "hf != tiktoken"
    cores = os.cpu_count() or 1

    def cold(fn):
        def run():
            ours._cache.clear()
            fn()
        return run

    batch = tiktok.encode_ordinary_batch(docs, num_threads=cores)
    assert [e.ids for e in hf.encode_batch(docs)] == batch, "hf batch != tiktoken"
    timings = {
        ("tiktoken", 1): _best_seconds(lambda: tiktok.encode(text, allowed_special="all"), repeat),
        ("hf", 1): _best_seconds(lambda: hf.encode(text), repeat),
        ("ours", 1): _best_seconds(cold(lambda: ours.encode(text)), repeat),
        ("ours (warm cache)", 1): _best_seconds(lambda: ours.encode(text), repeat),
        ("tiktoken", cores): _best_seconds(lambda: tiktok.encode_ordinary_batch(docs, num_threads=cores), repeat),
        ("hf", cores): _best_seconds(lambda: hf.encode_batch(docs), repeat),
        ("ours", cores): _best_pool_seconds(ours, docs, cores, batch, repeat),
    }
    mb = len(text.encode("utf-8")) / 1e6
    rows = []
    for (impl, workers), seconds in timings.items():
        rows.append({"impl": impl, "workers": workers, "mb": mb, "seconds": seconds, "mb_per_s": mb / seconds})
    for row in rows:
        base = next(r for r in rows if r["impl"] == "tiktoken" and r["workers"] == row["workers"])
        row["ratio_vs_tiktoken"] = row["mb_per_s"] / base["mb_per_s"]
    return rows


def _best_pool_seconds(tok: Tokenizer, docs: list[str], cores: int, expected: list, repeat: int) -> float:
    """Best time of ``encode_batch`` on a fresh, started pool (cold worker caches; start-up untimed)."""
    best = float("inf")
    for _ in range(repeat):
        with tok.pool(cores) as pool:
            pool.map(time.sleep, [0.1] * cores, chunksize=1)  # every worker up and initialized
            start = time.perf_counter()
            ids = tok.encode_batch(docs, pool=pool)
            best = min(best, time.perf_counter() - start)
        assert ids == expected, "ours batch != tiktoken"
    return best


def format_table(rows: list[dict]) -> str:
    """Rows of dicts as an aligned text table (floats with 3 significant decimals)."""
    cols = list(dict.fromkeys(k for row in rows for k in row))
    cell = lambda v: f"{v:.3f}" if isinstance(v, float) else str(v)  # noqa: E731
    widths = {c: max(len(c), *(len(cell(r.get(c, ""))) for r in rows)) for c in cols}
    lines = ["  ".join(c.ljust(widths[c]) for c in cols)]
    lines += ["  ".join(cell(r.get(c, "")).ljust(widths[c]) for c in cols) for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tokenizer", description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS,
                        help="UTF-8 text for training and encoding (default: the shared 2 MB TinyStories sample)")
    parser.add_argument("--vocab-size", type=int, default=10000, help="BPE training vocabulary size (default 10000)")
    parser.add_argument("--gpt2-vocab", type=Path, default=DEFAULT_GPT2[0], help="GPT-2 vocab.json for encoding")
    parser.add_argument("--gpt2-merges", type=Path, default=DEFAULT_GPT2[1], help="GPT-2 merges.txt for encoding")
    parser.add_argument("--skip-train", action="store_true", help="skip the BPE training benchmark")
    parser.add_argument("--skip-encode", action="store_true", help="skip the encoding benchmark")
    parser.add_argument("--json", type=Path, help="also write all rows to this JSON file")
    args = parser.parse_args(argv)
    for path in (args.corpus, args.gpt2_vocab, args.gpt2_merges):
        if not path.is_file():
            print(f"error: {path} is not a file", file=sys.stderr)
            return 2
    results = {}
    if not args.skip_train:
        results["bpe_training"] = bench_bpe_training(args.corpus, args.vocab_size)
        print(format_table(results["bpe_training"]), end="\n\n")
    if not args.skip_encode:
        text = args.corpus.read_text(encoding="utf-8")
        results["encode"] = bench_encode(text, (args.gpt2_vocab, args.gpt2_merges))
        print(format_table(results["encode"]))
    if args.json:
        write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
