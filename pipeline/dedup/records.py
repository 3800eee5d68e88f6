"""What both dedup engines share (``stage``: one process; ``sharded``: tasks over intermediate files): the
settings, a text's fingerprint and LSH keys, line dedup's rule, and writing one input's documents as decided
(``write_decided``). Both engines make their decisions from these same per-document values.
"""

from __future__ import annotations

import json
import multiprocessing as mp
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from pipeline.dedup.minhash import (
    EMPTY,
    band_keys,
    chunked,
    digest,
    normalize_text,
    signatures_of_shingles,
    text_words,
    word_shingle_hashes,
)
from workbench.bad_input import InputIssues
from workbench.documents import read_lines
from workbench.params import Checked, setting
from workbench.stage import TaskWriter, sum_counts, sum_stats

ENGINES = ("single", "sharded")


@dataclass(frozen=True)
class DedupConfig(Checked):
    """Dedup stage settings. Defaults: FineWeb's MinHash (5-grams, 14 bands x 8 rows), Jaccard-verified at 0.8.

    With 14 x 8 banding a pair becomes a candidate with probability 0.50 at Jaccard 0.68, 0.92 at 0.8 and
    0.99 at 0.85 (``lsh_probability``); FineWeb drops every candidate, we drop those whose true Jaccard is
    >= ``jaccard_threshold`` (CS336's 0.8). More bands of fewer rows find more pairs near the threshold at the
    cost of more comparisons.
    """

    SECTION = "dedup"

    ngrams: int = setting(5, "word n-gram shingle size", at_least=1)
    num_hashes: int = setting(112, "MinHash permutations (bands x rows)", at_least=1)
    num_bands: int = setting(14, "LSH bands", at_least=1)
    jaccard_threshold: float = setting(0.8, "verified Jaccard similarity to call a pair duplicates", above=0,
                                       at_most=1)
    exact: bool = setting(True, "drop exact duplicates (normalized text) before MinHash")
    line_dedup: str = setting("none", "first: drop lines an earlier kept document had; none", choices=("none", "first"))
    seed: int = setting(0, "hash seed")
    workers: int = setting(1, "single: signature processes; sharded: local task processes (outputs do not depend "
                              "on it)", at_least=1)
    engine: str = setting("single", "single: one process (the reference); sharded: resumable tasks over "
                                    "intermediate files on --executor (pipeline/dedup/sharded.py), the same outputs "
                                    "byte for byte", choices=ENGINES)
    shards: int = setting(4, "sharded: hash-range shards of exact dedup, line dedup and each LSH band (outputs do "
                             "not depend on it)", at_least=1)

    def __post_init__(self):
        super().__post_init__()
        if self.num_hashes % self.num_bands:  # a rule across two settings: no one declaration states it
            raise ValueError(f"dedup.num_hashes ({self.num_hashes}) must be a multiple of dedup.num_bands "
                             f"({self.num_bands})")

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
    return digest(norm) if norm else 0


def sketch(args: tuple[list[str], DedupConfig]) -> tuple[np.ndarray, np.ndarray]:
    """Fingerprints (uint64) and LSH band keys (uint64, (n, bands); EMPTY texts get key 0 in every band)."""
    texts, cfg = args
    words = [text_words(t) for t in texts]
    fps = np.array([fingerprint(" ".join(w)) for w in words], dtype=np.uint64)
    sig = signatures_of_shingles([word_shingle_hashes(w, cfg.ngrams) for w in words], cfg.num_hashes, cfg.seed)
    keys = band_keys(sig, cfg.num_bands)
    keys[sig[:, 0] == EMPTY] = 0
    return fps, keys


def sketch_all(texts: Iterable[str], cfg: DedupConfig, workers: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """``sketch`` of every text, in chunks of 256 texts (over a fork pool of ``workers`` processes when > 1)."""
    tasks = ((c, cfg) for c in chunked(texts, 256))
    if workers > 1:
        with mp.get_context("fork").Pool(workers) as pool:
            parts = list(pool.imap(sketch, tasks))
    else:
        parts = [sketch(t) for t in tasks]
    if not parts:
        return np.empty(0, np.uint64), np.empty((0, cfg.num_bands), np.uint64)
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def dumps(doc: dict) -> bytes:
    line = json.dumps(doc, ensure_ascii=False)
    try:
        return (line + "\n").encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: keep them as \\udcxx escapes
        return (json.dumps(doc) + "\n").encode("utf-8")


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


def write_decided(path: Path, kept: Path, rejected: Path | None, rejection: Callable[[int], dict | None],
                  cluster: Callable[[int], str | None], strip_lines: Callable[[int, str], tuple[str, int]] | None
                  ) -> dict:
    """Write the documents of input ``path`` as an engine decided them, by their position k in the file: dropped
    with ``rejection(k)``'s fields (reason, duplicate_of, minhash_cluster); else, with line dedup
    (``strip_lines``: the text without its seen lines, how many went), without those lines, or dropped as
    ``line_dedup_empty`` when no word is left; kept with ``minhash_cluster`` = ``cluster(k)`` when it is in a
    cluster; copied byte for byte when nothing changed. The file's counts."""
    drops: Counter = Counter()
    docs_out = chars_out = lines_removed = 0
    with TaskWriter(kept=kept, rejected=rejected) as out:
        for k, (line, doc, clean) in enumerate(read_lines(path, InputIssues())):
            fields = rejection(k)
            if fields is None and strip_lines is not None:
                text, removed = strip_lines(k, doc["text"])
                lines_removed += removed
                if removed and not normalize_text(text):
                    fields = {"reason": "line_dedup_empty"}
                else:
                    doc["text"] = text
            if fields is not None:
                drops[fields["reason"]] += 1
                out.reject(dumps({**doc, **fields}))
                continue
            root = cluster(k)
            if root is None and clean and strip_lines is None:
                out.keep(line if line.endswith(b"\n") else line + b"\n")  # unchanged: copied as it is
            else:
                out.keep(dumps(doc if root is None else {**doc, "minhash_cluster": root}))
            docs_out += 1
            chars_out += len(doc["text"])
    return {"docs_out": docs_out, "chars_out": chars_out, "drops": dict(drops), "lines_removed": lines_removed}


def stage_metrics(cfg: DedupConfig, files: int, read: dict, written: list[dict], issues: InputIssues, wall: float,
                  **clustering) -> dict:
    """The stage's metrics, the same from both engines: documents and characters in (``read``) and out (the files'
    ``write_decided`` counts), drops per reason (bad lines as ``bad_json``), the ``clustering`` counts, the settings
    and this run's speed."""
    drops = sum_counts(written)
    if issues.skipped:
        drops["bad_json"] = len(issues.skipped)
    lines = {"lines_removed": sum(w["lines_removed"] for w in written)} if cfg.line_dedup == "first" else {}
    return {"stage": "dedup", "files": files, **read, **sum_stats(written, ("docs_out", "chars_out")),
            "drops": dict(sorted(drops.items())), **clustering, **lines, "settings": cfg.settings(),
            "seconds": round(wall, 3), "docs_per_s": round(read["docs_in"] / wall, 1) if wall > 0 else None,
            **issues.stats()}
