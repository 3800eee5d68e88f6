"""Documents → token shards: ``train.bin`` / ``val.bin`` (flat little-endian uint16/uint32) + ``meta.json``.

Each document is encoded, followed by the end-of-text id, and appended to the split chosen by a
seeded hash of its id, so the split does not depend on file order, worker count or chunking.
Encoding fans out to a process pool over batches of documents; results come back in order, so the
shards are byte-identical for any ``workers``. Read them with ``np.memmap(path, dtype=meta["dtype"])``
(the layout nanoGPT's ``prepare.py`` uses). ``python -m tokenizer.shards`` is the tokenize stage (defaults: the
``shards`` section of params.yaml). Bad lines and files are skipped and counted (``workbench.bad_input``).
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import multiprocessing as mp
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from tqdm import tqdm

from tokenizer.encoder import Tokenizer
from workbench.bad_input import InputIssues, require_readable, summary_note
from workbench.documents import EOT, document_paths, iter_texts
from workbench.files import atomic_path, write_json, write_metrics
from workbench.stage_cli import need, run_step, step_parser

log = logging.getLogger(__name__)

_BATCH_DOCS = 64


def is_val(doc_id: str, val_fraction: float, seed: int) -> bool:
    digest = hashlib.blake2b(f"{seed}:{doc_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") / 2**64 < val_fraction


def tokenizer_checksum(tokenizer_dir: str | Path) -> str:
    h = hashlib.sha256()
    for name in ("vocab.json", "merges.txt"):
        h.update((Path(tokenizer_dir) / name).read_bytes())
    return h.hexdigest()


def load_tokenizer(tokenizer_dir: str | Path, special_tokens: list[str] | None = None) -> Tokenizer:
    d = Path(tokenizer_dir)
    for name in ("vocab.json", "merges.txt"):
        if not (d / name).is_file():
            raise FileNotFoundError(f"tokenizer file missing: {d / name}")
    return Tokenizer.from_files(d / "vocab.json", d / "merges.txt", special_tokens or [EOT])


_tok: Tokenizer | None = None


def _init(tokenizer: Tokenizer) -> None:
    global _tok
    _tok = tokenizer


def _encode_batch(batch: tuple[list[str], list[bool]]) -> tuple[list[list[int]], list[bool]]:
    texts, flags = batch
    return [_tok.encode(t) for t in texts], flags


def _batches(docs: Iterator[tuple[str, str]], val_fraction: float, seed: int):
    """Yield (texts, is_val flags) batches for the pool."""
    texts, flags = [], []
    for doc_id, text in docs:
        texts.append(text)
        flags.append(is_val(doc_id, val_fraction, seed))
        if len(texts) == _BATCH_DOCS:
            yield texts, flags
            texts, flags = [], []
    if texts:
        yield texts, flags


def write_shards(input_path, tokenizer_dir, out_dir, val_fraction=0.05, seed=0, workers=1) -> dict:
    """Tokenize every document into ``out_dir/{train,val}.bin`` + ``meta.json``.

    Returns the meta plus this run's ``seconds`` and ``tokens_per_s`` (kept out of ``meta.json``,
    which must be byte-identical on a rerun).
    """
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"shards.val_fraction must be in [0, 1), got {val_fraction}")
    tokenizer = load_tokenizer(tokenizer_dir)
    eot = tokenizer.special_token_ids[EOT]
    dtype = np.dtype("<u2") if tokenizer.vocab_size <= 2**16 else np.dtype("<u4")
    out_dir = Path(out_dir)
    counts = {"train": [0, 0], "val": [0, 0]}  # documents, tokens
    start = time.perf_counter()
    issues = InputIssues()
    batches = _batches(iter_texts(input_path, issues), val_fraction, seed)
    pool = mp.get_context("fork").Pool(workers, _init, (tokenizer,)) if workers > 1 else None
    _init(tokenizer)
    try:
        with atomic_path(out_dir / "train.bin") as train_tmp, atomic_path(out_dir / "val.bin") as val_tmp, \
                open(train_tmp, "wb") as train_fh, open(val_tmp, "wb") as val_fh, \
                tqdm(desc="tokenize", unit="doc", dynamic_ncols=True) as bar:
            encoded = pool.imap(_encode_batch, batches) if pool else map(_encode_batch, batches)
            for ids_batch, flags in encoded:
                for ids, val in zip(ids_batch, flags, strict=False):
                    split = "val" if val else "train"
                    arr = np.asarray(ids + [eot], dtype=dtype)
                    (val_fh if val else train_fh).write(arr.tobytes())
                    counts[split][0] += 1
                    counts[split][1] += len(arr)
                bar.update(len(ids_batch))
    finally:
        if pool:
            pool.close()
            pool.join()
    seconds = time.perf_counter() - start
    issues.warn(log)
    require_readable(issues.stats(), len(document_paths(input_path)))
    meta = {
        "dtype": dtype.name,
        "vocab_size": tokenizer.vocab_size,
        "eot_id": eot,
        "train_tokens": counts["train"][1],
        "val_tokens": counts["val"][1],
        "train_docs": counts["train"][0],
        "val_docs": counts["val"][0],
        "val_fraction": val_fraction,
        "seed": seed,
        "tokenizer_sha256": tokenizer_checksum(tokenizer_dir),
    }
    write_json(out_dir / "meta.json", meta)
    tokens = counts["train"][1] + counts["val"][1]
    return {**meta, "seconds": round(seconds, 3), "tokens_per_s": round(tokens / max(seconds, 1e-9)),
            **issues.stats(with_skipped=True)}


def headline(metrics: dict) -> dict:
    """The numbers ``dvc metrics show`` prints for the stage (the rest is in metrics/details/shards.json)."""
    return {"docs_in": metrics["train_docs"] + metrics["val_docs"],
            "tokens": metrics["train_tokens"] + metrics["val_tokens"], "vocab_size": metrics["vocab_size"],
            "seconds": metrics["seconds"], "tokens_per_s": metrics["tokens_per_s"]}


# -- CLI ---------------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = step_parser("python -m tokenizer.shards", "shards",
                    "Encode documents into uint16/uint32 token shards plus meta.json.")
    p.add_argument("--input", type=Path, help="documents file or folder (default: %(default)s)")
    p.add_argument("--tokenizer", type=Path, help="folder with vocab.json + merges.txt (default: %(default)s)")
    p.add_argument("--out-dir", type=Path, help="writes train.bin, val.bin, meta.json (default: %(default)s)")
    p.add_argument("--metrics", type=Path, help="stage metrics JSON; details beside it (default: %(default)s)")
    p.add_argument("--val-fraction", type=float, default=0.05,
                   help="share of documents in val.bin (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="seed of the train/val split (default: %(default)s)")
    p.add_argument("--workers", type=int, default=1, help="encoding processes (default: %(default)s)")
    return p


def run_command(args: argparse.Namespace, section: dict) -> str:
    need(args, "input", "tokenizer", "out_dir")
    meta = write_shards(Path(args.input), Path(args.tokenizer), Path(args.out_dir), float(args.val_fraction),
                        int(args.seed), int(args.workers))
    if args.metrics:
        stats = {"stage": "shards", **meta}
        write_metrics(Path(args.metrics), stats, headline(stats))
    return (f"tokenize: {meta['train_tokens']:,} train + {meta['val_tokens']:,} val tokens "
            f"({meta['dtype']}) at {meta['tokens_per_s']:,} tokens/s -> {args.out_dir}{summary_note(meta)}")


def main(argv: list[str] | None = None) -> int:
    return run_step(build_parser(), "shards", argv, run_command)


if __name__ == "__main__":
    raise SystemExit(main())
