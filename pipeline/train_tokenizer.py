"""Documents → a trained byte-level BPE tokenizer on disk (vocab.json, merges.txt, tokenizer.json).

The documents' texts are streamed into one temporary corpus file, separated by the end-of-text
special token, so ``train_bpe`` can cut it into chunks at document boundaries and pre-tokenize
them in parallel without holding the corpus in memory.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from pipeline.bpe import train_bpe
from pipeline.shards import iter_texts
from pipeline.tokenizer import Tokenizer
from workbench.files import write_json


def write_corpus(input_path: Path, corpus_path: Path, separator: str) -> tuple[int, int]:
    """Stream every document's text into one file, each followed by ``separator``; (docs, bytes)."""
    docs = n_bytes = 0
    with open(corpus_path, "w", encoding="utf-8", newline="") as fh:
        for _, text in iter_texts(input_path):
            fh.write(text)
            fh.write(separator)
            docs += 1
            n_bytes += len(text.encode("utf-8"))
    return docs, n_bytes


def train_tokenizer(input_path: Path, out_dir: Path, vocab_size: int, special_tokens: list[str],
                    workers: int = 1, metrics_path: Path | None = None) -> dict:
    """Train on every document under ``input_path``; write the tokenizer files; return metrics."""
    if not special_tokens:
        raise ValueError("tokenizer.special_tokens must hold at least the end-of-text token")
    separator = special_tokens[0]
    out_dir = Path(out_dir)
    start = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".corpus-") as scratch:
        corpus = Path(scratch) / "corpus.txt"
        docs, n_bytes = write_corpus(input_path, corpus, separator)
        vocab, merges = train_bpe(corpus, vocab_size, special_tokens, num_workers=workers)
    tokenizer = Tokenizer(vocab, merges, special_tokens)
    tokenizer.save(out_dir / "vocab.json", out_dir / "merges.txt")
    tokenizer.to_hf_json(out_dir / "tokenizer.json")
    seconds = time.perf_counter() - start
    metrics = {"stage": "tokenizer", "docs_in": docs, "bytes_in": n_bytes, "vocab_size": len(vocab),
               "merges": len(merges), "special_tokens": special_tokens, "seconds": round(seconds, 3)}
    if metrics_path:
        write_json(metrics_path, metrics)
    return metrics
