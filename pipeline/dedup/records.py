"""What both dedup engines share (``stage``: one process; ``sharded``: tasks over intermediate files): the
settings, reading a documents file line by line, a text's fingerprint and LSH keys, line dedup's rule, and
writing a record. Both engines make their decisions from these same per-document values.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import zlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from pipeline.dedup.minhash import (
    EMPTY,
    band_keys,
    normalize_text,
    signatures_of_shingles,
    text_words,
    word_shingle_hashes,
)
from workbench.params import setting

ENGINES = ("single", "sharded")


@dataclass(frozen=True)
class DedupConfig:
    """Dedup stage settings. Defaults: FineWeb's MinHash (5-grams, 14 bands x 8 rows), Jaccard-verified at 0.8.

    With 14 x 8 banding a pair becomes a candidate with probability 0.50 at Jaccard 0.68, 0.92 at 0.8 and
    0.99 at 0.85 (``lsh_probability``); FineWeb drops every candidate, we drop those whose true Jaccard is
    >= ``jaccard_threshold`` (CS336's 0.8). More bands of fewer rows find more pairs near the threshold at the
    cost of more comparisons.
    """

    ngrams: int = setting(5, "word n-gram shingle size")
    num_hashes: int = setting(112, "MinHash permutations (bands x rows)")
    num_bands: int = setting(14, "LSH bands")
    jaccard_threshold: float = setting(0.8, "verified Jaccard similarity to call a pair duplicates")
    exact: bool = setting(True, "drop exact duplicates (normalized text) before MinHash")
    line_dedup: str = setting("none", "first: drop lines an earlier kept document had; none", choices=("none", "first"))
    seed: int = setting(0, "hash seed")
    workers: int = setting(1, "single: signature processes; sharded: local task processes (outputs do not depend "
                              "on it)")
    engine: str = setting("single", "single: one process (the reference); sharded: resumable tasks over "
                                    "intermediate files on --executor (pipeline/dedup/sharded.py), the same outputs "
                                    "byte for byte", choices=ENGINES)
    shards: int = setting(4, "sharded: hash-range shards of exact dedup, line dedup and each LSH band (outputs do "
                             "not depend on it)")

    def __post_init__(self):
        for name in ("ngrams", "num_hashes", "num_bands", "workers", "shards"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"dedup.{name} must be an integer >= 1, got {value!r}")
        if self.num_hashes % self.num_bands:
            raise ValueError(f"dedup.num_hashes ({self.num_hashes}) must be a multiple of dedup.num_bands "
                             f"({self.num_bands})")
        if not isinstance(self.jaccard_threshold, (int, float)) or not 0.0 < self.jaccard_threshold <= 1.0:
            raise ValueError(f"dedup.jaccard_threshold must be in (0, 1], got {self.jaccard_threshold!r}")
        if self.line_dedup not in ("none", "first"):
            raise ValueError(f"dedup.line_dedup must be 'none' or 'first', got {self.line_dedup!r}")
        if not isinstance(self.exact, bool):
            raise ValueError(f"dedup.exact must be true or false, got {self.exact!r}")
        if self.engine not in ENGINES:
            raise ValueError(f"dedup.engine must be one of {ENGINES}, got {self.engine!r}")
        if not isinstance(self.seed, int):
            raise ValueError(f"dedup.seed must be an integer, got {self.seed!r}")

    @property
    def rows(self) -> int:
        return self.num_hashes // self.num_bands

    def settings(self) -> dict:
        """The fields that decide the output (not ``workers``, ``engine``, ``shards``: both engines agree)."""
        return {k: v for k, v in asdict(self).items() if k not in ("workers", "engine", "shards")}


def text_fingerprint(text: str) -> int:
    """64-bit blake2b of the normalized text (what ``exact_duplicate`` compares); 0 when it is empty."""
    return fingerprint(normalize_text(text))


def fingerprint(norm: str) -> int:
    if not norm:
        return 0
    return int.from_bytes(hashlib.blake2b(norm.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


def sketch(args: tuple[list[str], DedupConfig]) -> tuple[np.ndarray, np.ndarray]:
    """Fingerprints (uint64) and LSH band keys (uint64, (n, bands); EMPTY texts get key 0 in every band)."""
    texts, cfg = args
    words = [text_words(t) for t in texts]
    fps = np.array([fingerprint(" ".join(w)) for w in words], dtype=np.uint64)
    sig = signatures_of_shingles([word_shingle_hashes(w, cfg.ngrams) for w in words], cfg.num_hashes, cfg.seed)
    keys = band_keys(sig, cfg.num_bands)
    keys[sig[:, 0] == EMPTY] = 0
    return fps, keys



def dumps(doc: dict) -> bytes:
    line = json.dumps(doc, ensure_ascii=False)
    try:
        return (line + "\n").encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: keep them as \\udcxx escapes
        return (json.dumps(doc) + "\n").encode("utf-8")


def document_lines(path: Path, errors: list[tuple[int, str]] | None = None) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes) of every non-blank line; an unreadable tail (e.g. truncated gzip) ends the file, and
    (its line number, the error) goes to ``errors``."""
    opener = gzip.open if path.name.endswith(".gz") else open
    lineno = 0
    try:
        with opener(path, "rb") as fh:
            for lineno, line in enumerate(fh, 1):
                if line.strip():
                    yield lineno, line
    except (OSError, EOFError, zlib.error) as e:
        if errors is not None:
            errors.append((lineno + 1, f"{type(e).__name__}: {e}"))


def drop_seen_lines(text: str, seen: set[int]) -> tuple[str, int]:
    """``text`` without the lines whose normalized form is in ``seen`` (lines of earlier documents), and how
    many were dropped; then this text's lines join ``seen``. Lines without words (blank) are always kept."""
    kept, removed, keys = without_lines(text, seen)
    seen.update(k for k in keys if k)
    return kept, removed


def line_keys(text: str) -> list[int]:
    """Line dedup's key of every line of ``text`` (split on "\n"): the fingerprint of its normalized form (0: no
    words)."""
    return [fingerprint(normalize_text(line)) for line in text.split("\n")]


def without_lines(text: str, drop) -> tuple[str, int, list[int]]:
    """``text`` without the lines whose key is in ``drop`` (lines without words always stay), how many went, and
    every line's key."""
    lines, keys = text.split("\n"), line_keys(text)
    kept = [line for line, key in zip(lines, keys, strict=True) if not key or key not in drop]
    return "\n".join(kept), len(lines) - len(kept), keys
