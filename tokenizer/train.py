"""Documents → a trained byte-level BPE tokenizer on disk (vocab.json, merges.txt, tokenizer.json).

The documents' texts are streamed into one temporary corpus file, separated by the end-of-text
special token, so ``train_bpe`` can cut it into chunks at document boundaries and pre-tokenize
them in parallel without holding the corpus in memory. Bad lines and files are skipped and counted
(``workbench.bad_input``); a corpus without text is an error. ``python -m tokenizer.train`` is the stage
(defaults: the ``tokenizer`` section of params.yaml).
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tokenizer.bpe import train_bpe
from tokenizer.encoder import Tokenizer
from workbench.bad_input import InputIssues, summary_note
from workbench.documents import EOT, iter_texts
from workbench.files import write_metrics
from workbench.params import override, setting
from workbench.stage_cli import StageCommand, StageInput, need, optional_path

log = logging.getLogger(__name__)


def write_corpus(input_path: Path, corpus_path: Path, separator: str,
                 issues: InputIssues | None = None) -> tuple[int, int]:
    """Stream every document's text into one file, each followed by ``separator``; (docs, bytes). Bad lines and
    files are skipped and recorded in ``issues``."""
    docs = n_bytes = 0
    with open(corpus_path, "w", encoding="utf-8", newline="") as fh:
        for _, text in iter_texts(input_path, issues):
            fh.write(text)
            fh.write(separator)
            docs += 1
            n_bytes += len(text.encode("utf-8"))
    return docs, n_bytes


def train_tokenizer(input_path: Path, out_dir: Path, vocab_size: int, special_tokens: list[str],
                    workers: int = 1, metrics_path: Path | None = None) -> dict:
    """Train on every document under ``input_path``; write the tokenizer files; return metrics (written, when
    ``metrics_path`` is given, as the headline there and in full at ``details_path(metrics_path)``)."""
    if not special_tokens:
        raise ValueError("tokenizer.special_tokens must hold at least the end-of-text token")
    separator = special_tokens[0]
    out_dir = Path(out_dir)
    start = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    issues = InputIssues()
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".corpus-") as scratch:
        corpus = Path(scratch) / "corpus.txt"
        docs, n_bytes = write_corpus(input_path, corpus, separator, issues)
        issues.warn(log)
        if not n_bytes:  # a tokenizer of the 256 bytes and the specials only: never what was meant
            note = summary_note(issues.stats(with_skipped=True))
            raise ValueError(f"no text to train on in {input_path} ({docs} documents){note}")
        vocab, merges = train_bpe(corpus, vocab_size, special_tokens, num_workers=workers)
    tokenizer = Tokenizer(vocab, merges, special_tokens)
    tokenizer.save(out_dir / "vocab.json", out_dir / "merges.txt")
    tokenizer.to_hf_json(out_dir / "tokenizer.json")
    seconds = time.perf_counter() - start
    metrics = {"stage": "tokenizer", "docs_in": docs, "bytes_in": n_bytes, "vocab_size": len(vocab),
               "merges": len(merges), "special_tokens": special_tokens, "seconds": round(seconds, 3),
               **issues.stats(with_skipped=True)}
    if metrics_path:
        write_metrics(metrics_path, metrics, headline(metrics))
    return metrics


def headline(metrics: dict) -> dict:
    """The numbers ``dvc metrics show`` prints for the stage (the rest is in metrics/details/tokenizer.json)."""
    return {"docs_in": metrics["docs_in"], "vocab_size": metrics["vocab_size"], "seconds": metrics["seconds"]}


# -- CLI ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TokenizerSettings(StageInput):
    out_dir: str = override(StageInput, "out_dir", "tokenizer", "writes vocab.json, merges.txt, tokenizer.json")
    vocab_size: int = setting(1024, "final vocabulary size, bytes and specials included")
    special_tokens: tuple[str, ...] = setting((EOT,), "special tokens, the end-of-text separator first")
    workers: int = setting(1, "pre-tokenization processes")


def run_command(args: argparse.Namespace, section: dict) -> str:
    need(args, "input", "out_dir", "vocab_size")
    m = train_tokenizer(Path(args.input), Path(args.out_dir), int(args.vocab_size), list(args.special_tokens or [EOT]),
                        int(args.workers), metrics_path=optional_path(args.metrics))
    return (f"train-tokenizer: {m['vocab_size']} tokens ({m['merges']} merges) in {m['seconds']} s "
            f"-> {args.out_dir}{summary_note(m)}")


main = StageCommand("python -m tokenizer.train", "tokenizer",
                    "Train a byte-level BPE tokenizer (GPT-2 pre-tokenization) on documents.",
                    (TokenizerSettings,), run_command)


if __name__ == "__main__":
    raise SystemExit(main())
