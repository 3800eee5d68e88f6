"""Exact and near-duplicate removal: CS336 assignment 4's two functions, and the pipeline's dedup stage.

- ``exact_line_deduplication``: two passes, hashing lines as CCNet (Wenzek et al., 2020) hashes paragraphs.
  Pass 1 counts an 8-byte blake2b digest of every line (memory: one digest per distinct line, never the text);
  pass 2 keeps the lines that occur exactly once in the whole corpus (CS336 assignment 4).
- ``minhash_deduplication``: one file = one document; MinHash + LSH candidates, verified by true Jaccard,
  clustered by union-find (CS336 assignment 4; the math is in ``pipeline/dedup/minhash.py``). One file per cluster is
  kept (the first by sorted path), copied byte for byte.
- ``run_dedup``: the stage over gzip JSONL documents, global across all input files. Exact duplicates first
  (a hash of the normalized text; reason ``exact_duplicate``, the first in input order is kept), then near
  duplicates (reason ``minhash_duplicate``, the first of each cluster is kept). FineWeb's settings (Penedo et
  al., 2024: word 5-grams, 14 bands x 8 rows = 112 hashes); FineWeb removes every LSH candidate, we verify
  each candidate pair's Jaccard (>= 0.8 by default) before joining it to a cluster. Optionally
  (``line_dedup="first"``) the kept documents then lose every line already seen in an earlier kept document
  (site boilerplate: "Share this post", cookie notes), a document left without words is dropped as
  ``line_dedup_empty``.

Because dedup is global, the stage reads its inputs three times (sketch everything, collect the shingles of
candidate documents, write) and holds ~250 bytes per document (id, LSH keys) plus the shingle
sets of the candidates (measured: +25 MB over the interpreter for 100k documents).
Resumability is per stage, not per file: a rerun skips only when every output and the stage's record in its
ledger (``out_dir/_done/dedup.json``, workbench/ledger.py: the inputs by size and SHA-256, the settings) exist and
match; anything else redoes the whole stage (the sharded engine resumes its finished tasks from the ledger's work
folder for the same inputs and settings).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import logging
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from pipeline.dedup.minhash import (
    EMPTY,
    band_keys,
    candidate_buckets,
    minhash_signatures,
    shingle_hash_set,
    verified_clusters,
)
from pipeline.dedup.records import DedupConfig, drop_seen_lines, sketch_all, stage_metrics, write_decided
from pipeline.dedup.sharded import run_sharded
from workbench.bad_input import InputIssues, summary_note
from workbench.documents import input_files, output_name, read_lines
from workbench.executor import ExecutorSettings, LocalExecutor, make_executor
from workbench.files import atomic_open, atomic_path, check_unique_outputs
from workbench.ledger import Ledger, Record
from workbench.params import config_from_args, override
from workbench.stage import CorpusStage
from workbench.stage_cli import RejectingStageFiles, StageCommand, need, optional_path, paths

log = logging.getLogger(__name__)
DEFAULT_CONFIG = DedupConfig()


# -- CS336 assignment 4 -----------------------------------------------------------------------------------
def _open_lines(path: Path):
    return gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")


def _line_key(line: bytes) -> bytes:
    """A line's identity: its bytes without the line ending (so a last line without "\\n" still matches)."""
    return hashlib.blake2b(line.rstrip(b"\r\n"), digest_size=8).digest()


def exact_line_deduplication(input_files: Iterable[str | Path], output_directory: str | Path) -> None:
    """Rewrite each file into ``output_directory`` (same name) keeping only the lines that occur exactly once in
    the whole corpus. Bytes are kept as they are (any encoding); ``.gz`` files are read and written gzipped.
    Every input gets an output file, empty when no line survives; each is written atomically."""
    paths = [Path(p) for p in input_files]
    check_unique_outputs(paths, lambda p: p.name)
    counts: dict[bytes, int] = {}
    for path in paths:
        with _open_lines(path) as fh:
            for line in fh:
                key = _line_key(line)
                counts[key] = 2 if key in counts else 1  # 2 means "more than once"
    out = Path(output_directory)
    for path in paths:
        with _open_lines(path) as fh, atomic_open(out / path.name, "wb") as dst:
            for line in fh:
                if counts[_line_key(line)] == 1:
                    dst.write(line)


def minhash_deduplication(input_files: Iterable[str | Path], num_hashes: int, num_bands: int, ngrams: int,
                          jaccard_threshold: float, output_directory: str | Path, seed: int = 0) -> list[Path]:
    """Copy one file per cluster of near-duplicate files (the first by sorted path) to ``output_directory``.

    Each file is one document (decoded as UTF-8, bad bytes replaced, for shingling only). Candidates come from
    LSH with ``num_bands`` bands of ``num_hashes // num_bands`` rows; a pair is a duplicate when the Jaccard of
    its word ``ngrams`` sets is >= ``jaccard_threshold``; clusters are connected components. Returns the kept
    input paths. Files without any word (empty after normalization) are never duplicates: all are kept.
    """
    paths = sorted((Path(p) for p in input_files), key=str)
    check_unique_outputs(paths, lambda p: p.name)
    if num_bands < 1 or num_hashes % num_bands:
        raise ValueError(f"num_hashes ({num_hashes}) must be a positive multiple of num_bands ({num_bands})")
    if not 0.0 < jaccard_threshold <= 1.0:
        raise ValueError(f"jaccard_threshold must be in (0, 1], got {jaccard_threshold}")
    texts = [p.read_bytes().decode("utf-8", "replace") for p in paths]
    sig = minhash_signatures(texts, num_hashes, ngrams, seed)
    roots = verified_clusters(band_keys(sig, num_bands), lambda i: shingle_hash_set(texts[i], ngrams),
                              jaccard_threshold, active=sig[:, 0] != EMPTY if len(sig) else None)
    kept = [p for i, p in enumerate(paths) if roots[i] == i]
    out = Path(output_directory)
    for path in kept:
        with atomic_path(out / path.name) as tmp:
            tmp.write_bytes(path.read_bytes())
    return kept


# -- documents ----------------------------------------------------------------------------------------------
def exact_duplicate_of(fingerprints: Iterable[int]) -> list[int]:
    """For each text, the index of the first text with the same fingerprint, or -1 if it is that first one.
    Texts that normalize to nothing (fingerprint 0) are never duplicates."""
    first: dict[int, int] = {}
    out = []
    for i, fp in enumerate(fingerprints):
        j = first.setdefault(fp, i) if fp else i
        out.append(j if j != i else -1)
    return out


def near_duplicate_clusters(docs: Sequence[dict], cfg: DedupConfig = DEFAULT_CONFIG) -> list[int]:
    """Cluster id of every document: the index of the first document of its near-duplicate cluster (its own
    index when it has none). Exact copies are in the same cluster as their original; texts without words
    are alone. Documents are dicts with a ``text``."""
    texts = [d["text"] for d in docs]
    _, keys = sketch_all(texts, cfg, cfg.workers)
    return verified_clusters(keys, lambda i: shingle_hash_set(texts[i], cfg.ngrams), cfg.jaccard_threshold,
                             keys[:, 0] != 0 if len(keys) else None)


# -- the stage ----------------------------------------------------------------------------------------------


@dataclass
class _Corpus:
    """What the first read learns about every readable document, numbered in input order."""

    files: list[Path]
    ids: list[str] = field(default_factory=list)
    offsets: list[int] = field(default_factory=lambda: [0])  # each file's first document, then the total
    chars: int = 0
    issues: InputIssues = field(default_factory=InputIssues)  # lines skipped or repaired, bad files

    def texts(self) -> Iterator[str]:
        """Every document's text, recording its id as it goes."""
        for path in self.files:
            for _, doc, _ in read_lines(path, self.issues):
                self.ids.append(str(doc.get("id", len(self.ids))))
                self.chars += len(doc["text"])
                yield doc["text"]
            self.offsets.append(len(self.ids))


def _cluster_phase(corpus: _Corpus, fps: np.ndarray, keys: np.ndarray, cfg: DedupConfig,
                   stats: dict) -> tuple[list[int], list[int]]:
    """Read 2: exact duplicates by fingerprint; the shingle sets of the documents that share a band with another
    one, verified by Jaccard and joined into clusters. Every document's exact original (-1: none) and cluster root."""
    n = len(corpus.ids)
    exact_of = exact_duplicate_of(fps.tolist()) if cfg.exact else [-1] * n
    active = (keys[:, 0] != 0) & (np.array(exact_of, dtype=np.int64) < 0) if n else None
    candidates = {int(i) for bucket in candidate_buckets(keys, active) for i in bucket} if n else set()
    shingles: dict[int, np.ndarray] = {}
    for first, path in zip(corpus.offsets, corpus.files, strict=False):
        for k, (_, doc, _) in enumerate(read_lines(path, InputIssues())):
            if first + k in candidates:
                shingles[first + k] = shingle_hash_set(doc["text"], cfg.ngrams)
    return exact_of, verified_clusters(keys, shingles.__getitem__, cfg.jaccard_threshold, active, stats)


def _run_single(files: list[Path], out_dir: Path, rejected_dir: Path | None, names: list[str],
                cfg: DedupConfig) -> dict:
    start = time.perf_counter()
    corpus, stats = _Corpus(files), {}
    # read 1: fingerprint and LSH keys of every document
    bar = tqdm(corpus.texts(), desc="dedup sketch", unit="doc", dynamic_ncols=True, mininterval=2.0, disable=None)
    fps, keys = sketch_all(bar, cfg, cfg.workers)
    exact_of, roots = _cluster_phase(corpus, fps, keys, cfg, stats)
    size, ids, seen = Counter(roots), corpus.ids, set()
    written = []
    for first, path, name in zip(corpus.offsets, files, names, strict=False):
        written.append(write_decided(
            path, out_dir / name, rejected_dir / name if rejected_dir is not None else None,
            lambda k, first=first: _decide(first + k, exact_of, roots, size, ids),
            lambda k, first=first: ids[roots[first + k]] if size[roots[first + k]] > 1 else None,
            (lambda _k, text: drop_seen_lines(text, seen)) if cfg.line_dedup == "first" else None))
    corpus.issues.warn(log)
    clustered = [c for c in size.values() if c > 1]
    return stage_metrics(cfg, len(files), {"docs_in": len(ids), "chars_in": corpus.chars}, written, corpus.issues,
                         time.perf_counter() - start, clusters=len(clustered), clustered_docs=sum(clustered),
                         candidate_docs=stats.get("candidate_texts", 0), comparisons=stats.get("comparisons", 0))


class DedupStage(CorpusStage):
    """The dedup stage over ``files``: one record for all of them, their kept documents in ``out_dir`` and the dropped
    ones in ``rejected_dir``; ``cfg.engine`` picks how (``run_dedup``)."""

    name = "dedup"
    # measured, or how this run went (tasks run and resumed): not part of the record
    timings = ("seconds", "docs_per_s", "task_peak_rss_mb", "tasks")
    nothing_ran = {"seconds": 0.0, "docs_per_s": None}

    def __init__(self, files: list[Path], out_dir: Path, rejected_dir: Path | None, cfg: DedupConfig,
                 force: bool = False, executor=None):
        super().__init__(files, out_dir, force)
        self.rejected_dir = Path(rejected_dir) if rejected_dir is not None else None
        self.cfg, self.executor = cfg, executor
        self.names = [output_name(f) for f in self.files]

    def settings(self) -> dict:
        return {**self.cfg.settings(), "rejected_dir": str(self.rejected_dir) if self.rejected_dir else None}

    def output_dirs(self) -> list[Path]:
        return [self.out_dir] + ([self.rejected_dir] if self.rejected_dir else [])

    def outputs(self) -> list[Path]:
        return [folder / name for folder in self.output_dirs() for name in self.names]

    def compute(self, ledger: Ledger, record: Record) -> dict:
        if self.cfg.engine == "sharded":
            work = ledger.work(fresh=self.force, inputs=record.identities, outputs=self.names, shards=self.cfg.shards)
            return run_sharded(self.files, self.out_dir, self.rejected_dir, self.names, self.cfg, work, self.executor)
        return _run_single(self.files, self.out_dir, self.rejected_dir, self.names, self.cfg)


def run_dedup(inputs: Path | str | Sequence[Path | str], out_dir: Path, metrics_path: Path | None,
              cfg: DedupConfig = DEFAULT_CONFIG, rejected_dir: Path | None = None, force: bool = False,
              executor=None) -> dict:
    """Drop exact and near duplicates across all ``inputs`` (files or folders of ``*.jsonl[.gz]``).

    Writes ``out_dir/<name>`` per input (kept documents: copied line for line, except that those in a
    near-duplicate cluster get ``minhash_cluster`` = the kept document's id), ``rejected_dir/<name>`` (dropped
    documents with ``reason``, ``duplicate_of`` and ``minhash_cluster``), the metrics (headline at
    ``metrics_path``, all of them in ``details_path(metrics_path)``), then the stage's record. Skips the
    work when the record matches (same inputs and settings) and every output exists, unless ``force``.
    Bad input follows ``workbench.bad_input``: a malformed line is skipped, counted as ``bad_json`` and named file:line
    in a warning; unreadable or empty files are named in the metrics; no readable input at all is a ValueError.
    ``cfg.engine`` picks how: ``single`` (here, in one process) or ``sharded`` (``pipeline/dedup/sharded.py``: tasks
    on ``executor``, default a local pool; the same outputs byte for byte, resumable per task).
    """
    check_engine(cfg.engine, executor is not None and not isinstance(executor, LocalExecutor))
    files = input_files([inputs] if isinstance(inputs, (str, Path)) else list(inputs))
    return DedupStage(files, out_dir, rejected_dir, cfg, force, executor).run(metrics_path)


def check_engine(engine: str, on_a_cluster: bool) -> None:
    """The single engine runs in this process: on a ray/dask executor, a ValueError naming the sharded one."""
    if engine == "single" and on_a_cluster:
        raise ValueError("dedup.engine single runs in this process; a ray/dask executor needs dedup.engine sharded")


def _decide(i: int, exact_of: list[int], roots: list[int], size: Counter, ids: list[str]) -> dict | None:
    """None to keep document i, else the fields its rejected record gets."""
    j = exact_of[i]
    if j >= 0:
        out = {"reason": "exact_duplicate", "duplicate_of": ids[j]}
        if size[roots[j]] > 1:
            out["minhash_cluster"] = ids[roots[j]]
        return out
    if roots[i] != i:
        return {"reason": "minhash_duplicate", "duplicate_of": ids[roots[i]], "minhash_cluster": ids[roots[i]]}
    return None


# -- CLI ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DedupFiles(RejectingStageFiles):
    out_dir: str = override(RejectingStageFiles, "out_dir", "dedup")
    rejected_dir: str = override(RejectingStageFiles, "rejected_dir", "rejected/dedup", "dropped documents with "
                                                                                       "reason and cluster")
    force: bool = override(RejectingStageFiles, "force", False, "redo even if the outputs are complete")


def run_command(args: argparse.Namespace, section: dict) -> str:
    need(args, "inputs", "out_dir", "rejected_dir")
    cfg = config_from_args(DedupConfig, args, "dedup")
    check_engine(cfg.engine, args.executor != "local" or bool(args.address))  # before a cluster starts
    with make_executor(args.executor, cfg.workers, args.address, args.task_timeout_s) as executor:
        m = run_dedup([Path(p) for p in paths(args.inputs)], Path(args.out_dir), optional_path(args.metrics), cfg,
                      rejected_dir=Path(args.rejected_dir), force=args.force, executor=executor)
    return f"dedup: {m['docs_in']} -> {m['docs_out']} documents in {args.out_dir}; drops {m['drops']}{summary_note(m)}"


main = StageCommand("python -m pipeline.dedup.stage", "dedup",
                    "Drop exact and near duplicates (pipeline/dedup/stage.py) across every documents file.",
                    (DedupFiles, DedupConfig, ExecutorSettings), run_command)


if __name__ == "__main__":
    raise SystemExit(main())
