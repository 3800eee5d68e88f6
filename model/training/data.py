"""Training batches from the token shards (``train.bin`` / ``val.bin`` + ``meta.json``).

Shards are read through ``np.memmap``, so a corpus larger than RAM costs only the pages touched.
Batch ``i`` of a run is drawn from an RNG seeded by ``(seed, i)``: the data order depends on
nothing but the seed and the step, which makes resuming exact with no sampler state to save.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

DTYPES = {"uint16": np.uint16, "uint32": np.uint32}


def read_meta(shard_dir: str | Path) -> dict:
    path = Path(shard_dir) / "meta.json"
    if not path.is_file():
        raise FileNotFoundError(f"shard metadata missing: {path} (run `python -m pipeline tokenize`)")
    meta = json.loads(path.read_text(encoding="utf-8"))
    for key in ("dtype", "vocab_size"):
        if key not in meta:
            raise ValueError(f"{path}: missing field {key!r}")
    if meta["dtype"] not in DTYPES:
        raise ValueError(f"{path}: dtype {meta['dtype']!r} is not one of {', '.join(DTYPES)}")
    return meta


def load_tokens(shard_dir: str | Path, split: str) -> np.ndarray:
    """Memory-map ``<shard_dir>/<split>.bin`` with the dtype from meta.json."""
    meta = read_meta(shard_dir)
    path = Path(shard_dir) / f"{split}.bin"
    if not path.is_file():
        raise FileNotFoundError(f"token shard missing: {path}")
    itemsize = np.dtype(DTYPES[meta["dtype"]]).itemsize
    if path.stat().st_size % itemsize:
        raise ValueError(f"{path}: size {path.stat().st_size} is not a multiple of {itemsize} ({meta['dtype']})")
    if path.stat().st_size == 0:
        raise ValueError(f"{path}: empty token shard")
    expected = meta.get(f"{split}_tokens")  # shards written before meta.json counted them: not checked
    if expected is not None and path.stat().st_size // itemsize != int(expected):
        raise ValueError(f"{path}: {path.stat().st_size // itemsize:,} tokens, but meta.json says {int(expected):,} "
                         "(truncated or replaced): encode the shards again")
    return np.memmap(path, dtype=DTYPES[meta["dtype"]], mode="r")


def get_batch(data: np.ndarray, batch_size: int, context_length: int, device: str | torch.device = "cpu",
              rng: np.random.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Random windows of ``context_length + 1`` tokens: inputs x and next-token targets y, (B, T) int64."""
    if len(data) <= context_length:
        raise ValueError(f"token shard has {len(data)} tokens, fewer than context_length + 1 = {context_length + 1}")
    rng = rng if rng is not None else np.random.default_rng()
    starts = rng.integers(0, len(data) - context_length, size=batch_size)
    windows = np.asarray(data[starts[:, None] + np.arange(context_length + 1)], dtype=np.int64)  # (B, T+1)
    batch = torch.from_numpy(windows)
    device = torch.device(device)
    if device.type == "cuda":
        batch = batch.pin_memory().to(device, non_blocking=True)
    else:
        batch = batch.to(device)
    return batch[:, :-1], batch[:, 1:]


def batch_rng(seed: int, step: int, micro_step: int = 0, split: str = "train") -> np.random.Generator:
    """The RNG for one (micro-)batch: a pure function of seed, split and position in the run."""
    return np.random.default_rng([seed, ("train", "val").index(split), step, micro_step])


def unigram_entropy(data: np.ndarray, vocab_size: int, chunk: int = 1 << 24) -> float:
    """Entropy (nats/token) of the empirical token distribution: the loss of the best model that
    ignores context, which a language model must beat."""
    counts = np.zeros(vocab_size, dtype=np.int64)
    for start in range(0, len(data), chunk):
        counts += np.bincount(np.asarray(data[start:start + chunk]), minlength=vocab_size)[:vocab_size]
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())
