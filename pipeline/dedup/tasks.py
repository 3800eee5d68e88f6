"""The tasks of the sharded dedup engine (``pipeline/dedup/sharded.py`` runs them in order, stage by stage).

datatrove's MinHash dedup shape, with our decisions: signatures (one task per input file) -> exact (one task per
fingerprint-range shard) -> buckets (one task per LSH band and key-range shard) -> shingles (one task per input
file: the shingle sets of the documents that share a bucket) -> pairs (one task per band shard: buckets verified
by true Jaccard with ``verify_bucket``, as the single-process stage does) -> clusters (one task: union-find over
the joins) -> lines (one task per line-key shard, for ``line_dedup: first``) -> filter (one task per input file:
the kept and rejected documents).

A task is a module-level function of one picklable tuple ``(name, layout, part)``, so the local pool, Ray and Dask
run it unchanged. It writes every file atomically, then its ``done.json`` (``workbench.ledger.mark_task_done``); a
task with a ``done.json`` is finished and is not run again, one without it (killed, failed) is run again from
scratch. A ``done.json`` holds no identity of the inputs: the work folder it sits in is the stage ledger's for
these inputs and settings (its name is their key), so a task of other inputs is never found.

Documents are numbered in input order (the file's offset + the position among its readable documents), the
single-process stage's numbering, so both engines pick the same original, cluster root, ``duplicate_of`` and
``minhash_cluster``.

Intermediate files under ``layout.work`` (``.npy``: int64/uint64 arrays; F a file, B a band, S a shard):
  sig/F/        fps.npy (n,) exact fingerprints (0: no words); keys.npy (n, bands) LSH keys (0: no shingles);
                ids.json (null: no id, the document number stands in); lines.npy (m, 2) (line key, position)
  exact/S/      dups.npy (m, 2) (duplicate, original): fingerprints with fp % shards == S
  buckets/B.S/  members.npy, sizes.npy: band B's buckets (>= 2 documents, ascending) among keys % shards == S
  shingles/F/   docs.npy (k,) file F's candidates (sorted), offsets.npy (k + 1,), values.npy: their sorted distinct
                shingle hashes, one after another
  pairs/B.S/    joins.npy (m, 2) (i, j): the verified joins in those buckets
  clusters/     F.json: {"reject": {position: [reason, duplicate_of, minhash_cluster]}, "clustered": {position: id}}
  lines/S/      drops.npy (m, 2) (document, line key): a line key an earlier surviving document had, by document
  filter/F/     only done.json (the file's counts): its outputs are the stage's ``out_dir`` / ``rejected_dir`` files
Memory per task: signatures ~120 bytes per document of its file; exact and buckets 16 bytes per document of their
shard; shingles and pairs the shingle sets of their candidates; clusters the joins and duplicates; lines the line
keys of its shard; filter its file's decisions and line drops.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from pipeline.dedup.minhash import candidate_buckets, jaccard, shingle_hash_set, verify_bucket
from pipeline.dedup.records import DedupConfig, line_keys, sketch_all, without_lines, write_decided
from workbench.bad_input import InputIssues
from workbench.documents import read_lines
from workbench.files import atomic_open, atomic_path, read_json
from workbench.ledger import finished_task, mark_task_done
from workbench.memory import peak_rss_mb, reset_peak_rss


@dataclass(frozen=True)
class Layout:
    """What every task needs: the inputs, their outputs, the settings and the work folder."""

    work: Path
    files: tuple[Path, ...]
    out_files: tuple[Path, ...]
    rejected_files: tuple[Path, ...] | None
    cfg: DedupConfig
    offsets: tuple[int, ...] = ()  # number of each file's first document, then the total (after signatures)

    def folder(self, kind: str, part) -> Path:
        name = ".".join(f"{p:03d}" for p in part) if isinstance(part, tuple) else f"{part:05d}"
        return self.work / kind / name

    def bucket_parts(self) -> list[tuple[int, int]]:
        return [(b, s) for b in range(self.cfg.num_bands) for s in range(self.cfg.shards)]


def _resumable(kind: str) -> Callable:
    """Run the task body unless its ``done.json`` exists; write ``done.json`` (its result) after its outputs. The
    result also holds the task's own peak RSS (``peak_rss_mb``: the worker's interpreter included, earlier tasks of
    the same worker not), for the scale benchmark; it never reaches an output or the stage's record."""

    def wrap(body: Callable[[Layout, object, Path], dict]) -> Callable[[tuple], dict]:
        def task(t: tuple) -> dict:
            _, layout, part = t
            folder = layout.folder(kind, part)
            finished = finished_task(folder / "done.json")
            if finished is not None:
                return finished
            folder.mkdir(parents=True, exist_ok=True)
            own = reset_peak_rss()
            out = body(layout, part, folder)
            return mark_task_done(folder / "done.json", {**out, "peak_rss_mb": peak_rss_mb() if own else None})

        # pickled by name (Ray, Dask); not functools.wraps: Ray would check calls against the body's signature
        task.__module__, task.__name__, task.__qualname__, task.__doc__ = (
            body.__module__, body.__name__, body.__qualname__, body.__doc__)
        task.body = body
        return task

    return wrap


def _save(path: Path, array: np.ndarray) -> None:
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.save(fh, array)


def _load(path: Path) -> np.ndarray:
    return np.load(path, allow_pickle=False)


def _cat(parts: list[np.ndarray], dtype, width: int | None = None) -> np.ndarray:
    if parts:
        return np.concatenate(parts).astype(dtype, copy=False)
    return np.empty((0,) if width is None else (0, width), dtype=dtype)


# -- signatures: one task per input file ------------------------------------------------------------------
@_resumable("sig")
def signatures(layout: Layout, f: int, folder: Path) -> dict:
    path, cfg = layout.files[f], layout.cfg
    issues = InputIssues()
    ids: list[str | None] = []
    lines, chars = [], 0

    def texts() -> Iterator[str]:
        nonlocal chars
        for k, (_, doc, _) in enumerate(read_lines(path, issues)):
            ids.append(str(doc["id"]) if "id" in doc else None)
            chars += len(doc["text"])
            if cfg.line_dedup == "first":
                lines.extend((key, k) for key in sorted(set(line_keys(doc["text"])) - {0}))
            yield doc["text"]

    fps, keys = sketch_all(texts(), cfg)  # no pool: this task may itself run in one
    _save(folder / "fps.npy", fps)
    _save(folder / "keys.npy", keys)
    _save(folder / "lines.npy", np.array(lines, dtype=np.uint64).reshape(-1, 2))
    with atomic_open(folder / "ids.json", "w") as fh:
        json.dump(ids, fh, ensure_ascii=False)
    return {"docs": len(ids), "chars_in": chars, **asdict(issues)}


def _numbers(layout: Layout, f: int) -> tuple[int, int]:
    return layout.offsets[f], layout.offsets[f + 1]


# -- exact: one task per fingerprint-range shard ------------------------------------------------------------
@_resumable("exact")
def exact(layout: Layout, s: int, folder: Path) -> dict:
    shards, numbers, values = layout.cfg.shards, [], []
    for f in range(len(layout.files)):
        fp = _load(layout.folder("sig", f) / "fps.npy")
        mine = np.flatnonzero((fp != 0) & (fp % np.uint64(shards) == s))
        numbers.append(mine + layout.offsets[f])
        values.append(fp[mine])
    g, v = _cat(numbers, np.int64), _cat(values, np.uint64)
    order = np.lexsort((g, v))  # by fingerprint, then input order: the first of a run is the original
    g, v = g[order], v[order]
    first = np.r_[True, v[1:] != v[:-1]] if len(v) else np.zeros(0, bool)
    original = g[first][np.cumsum(first) - 1]
    _save(folder / "dups.npy", np.stack([g[~first], original[~first]], axis=1).astype(np.int64))
    return {"duplicates": int((~first).sum())}


def _exact_duplicates(layout: Layout) -> np.ndarray:
    """(duplicate, original) of every exact duplicate (none when ``exact`` is off)."""
    if not layout.cfg.exact:
        return np.empty((0, 2), np.int64)
    return _cat([_load(layout.folder("exact", s) / "dups.npy") for s in range(layout.cfg.shards)], np.int64, 2)


# -- buckets: one task per (band, key-range shard) -------------------------------------------------------------
@_resumable("buckets")
def buckets(layout: Layout, part: tuple[int, int], folder: Path) -> dict:
    band, s = part
    dups = np.sort(_exact_duplicates(layout)[:, 0])
    cols, numbers = [], []
    for f in range(len(layout.files)):
        col = _load(layout.folder("sig", f) / "keys.npy")[:, band]
        g = np.arange(*_numbers(layout, f), dtype=np.int64)
        active = (col != 0) & (col % np.uint64(layout.cfg.shards) == s) & ~np.isin(g, dups)
        cols.append(col[active])
        numbers.append(g[active])
    col, g = _cat(cols, np.uint64), _cat(numbers, np.int64)
    groups = [g[b] for b in candidate_buckets(col[:, None])] if len(col) else []
    _save(folder / "members.npy", _cat(groups, np.int64))
    _save(folder / "sizes.npy", np.array([len(b) for b in groups], dtype=np.int64))
    return {"buckets": len(groups)}


def _bucket_members(layout: Layout, part: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    return _load(layout.folder("buckets", part) / "members.npy"), _load(layout.folder("buckets", part) / "sizes.npy")


# -- shingles: one task per input file ------------------------------------------------------------------
@_resumable("shingles")
def shingles(layout: Layout, f: int, folder: Path) -> dict:
    lo, hi = _numbers(layout, f)
    wanted = set()
    for part in layout.bucket_parts():
        members = _bucket_members(layout, part)[0]
        wanted.update(members[(members >= lo) & (members < hi)].tolist())
    docs, sets = [], []
    if wanted:
        for k, (_, doc, _) in enumerate(read_lines(layout.files[f], InputIssues())):
            if lo + k in wanted:
                docs.append(lo + k)
                sets.append(shingle_hash_set(doc["text"], layout.cfg.ngrams))
    _save(folder / "docs.npy", np.array(docs, dtype=np.int64))
    _save(folder / "offsets.npy", np.cumsum([0] + [len(s) for s in sets], dtype=np.int64))
    _save(folder / "values.npy", _cat(sets, np.uint64))
    return {"candidates": len(docs)}


def _shingle_sets(layout: Layout, needed: np.ndarray) -> dict[int, np.ndarray]:
    """The shingle sets of the documents ``needed`` (sorted), read from the files that hold them."""
    out: dict[int, np.ndarray] = {}
    for f in range(len(layout.files)):
        lo, hi = _numbers(layout, f)
        mine = needed[(needed >= lo) & (needed < hi)]
        if not len(mine):
            continue
        docs = _load(layout.folder("shingles", f) / "docs.npy")
        offsets = _load(layout.folder("shingles", f) / "offsets.npy")
        # memory-mapped: a pairs task reads the few sets it needs from each file, not the file's every set
        values = np.load(layout.folder("shingles", f) / "values.npy", mmap_mode="r", allow_pickle=False)
        at = np.searchsorted(docs, mine)
        for g, i in zip(mine.tolist(), at.tolist(), strict=True):
            out[g] = values[offsets[i]:offsets[i + 1]].copy()
    return out


# -- pairs: one task per (band, key-range shard) ---------------------------------------------------------------
@_resumable("pairs")
def pairs(layout: Layout, part: tuple[int, int], folder: Path) -> dict:
    members, sizes = _bucket_members(layout, part)
    sets = _shingle_sets(layout, np.unique(members))
    threshold = layout.cfg.jaccard_threshold
    verdict = functools.cache(lambda i, j: jaccard(sets[i], sets[j]) >= threshold)
    joins: list[tuple[int, int]] = []
    for bucket in np.split(members, np.cumsum(sizes)[:-1]) if len(sizes) else []:
        joins += verify_bucket(bucket.tolist(), verdict)
    _save(folder / "joins.npy", np.array(joins, dtype=np.int64).reshape(-1, 2))
    return {"comparisons": verdict.cache_info().currsize, "joins": len(joins)}


# -- clusters: one task ----------------------------------------------------------------------------------------
class _Roots(dict):
    """Union-find over the documents that appear in a join only; the root is the smallest (first) member."""

    def find(self, i: int) -> int:
        root = i
        while self.get(root, root) != root:
            root = self[root]
        while self.get(i, i) != root:  # path compression
            self[i], i = root, self[i]
        return root

    def union(self, i: int, j: int) -> None:
        ri, rj = self.find(i), self.find(j)
        if ri != rj:
            self[max(ri, rj)] = min(ri, rj)
            self.setdefault(min(ri, rj), min(ri, rj))


def _ids(layout: Layout, numbers: set[int]) -> dict[int, str]:
    """The id of each document in ``numbers`` (its number when it has none, as the single stage does)."""
    out = {}
    for f in range(len(layout.files)):
        lo, hi = _numbers(layout, f)
        mine = [g for g in numbers if lo <= g < hi]
        if mine:
            ids = read_json(layout.folder("sig", f) / "ids.json")
            out.update((g, ids[g - lo] if ids[g - lo] is not None else str(g)) for g in mine)
    return out


@_resumable("clusters")
def clusters(layout: Layout, _part: int, folder: Path) -> dict:
    uf = _Roots()
    for part in layout.bucket_parts():
        for i, j in _load(layout.folder("pairs", part) / "joins.npy").tolist():
            uf.union(i, j)
    roots = {g: uf.find(g) for g in list(uf)}
    size = Counter(roots.values())
    reject: dict[int, tuple] = {g: ("minhash_duplicate", r, r) for g, r in roots.items() if g != r}
    for d, o in _exact_duplicates(layout).tolist():
        reject[d] = ("exact_duplicate", o, roots.get(o))
    ids = _ids(layout, {g for _, o, r in reject.values() for g in (o, r) if g is not None} | set(size))
    for f in range(len(layout.files)):
        lo, hi = _numbers(layout, f)
        mine = {str(g - lo): [why, ids[o], None if r is None else ids[r]]
                for g, (why, o, r) in sorted(reject.items()) if lo <= g < hi}
        kept = {str(r - lo): ids[r] for r in sorted(size) if lo <= r < hi}
        with atomic_open(folder / f"{f:05d}.json", "w") as fh:
            json.dump({"reject": mine, "clustered": kept}, fh, ensure_ascii=False)
    return {"clusters": len(size), "clustered_docs": sum(size.values()), "rejected": len(reject)}


# -- lines: one task per line-key shard (line_dedup: first) ------------------------------------------------
@_resumable("lines")
def lines(layout: Layout, s: int, folder: Path) -> dict:
    keys, numbers = [], []
    for f in range(len(layout.files)):
        lo, _ = _numbers(layout, f)
        rejected = np.array(sorted(int(k) for k in read_json(layout.folder("clusters", 0) / f"{f:05d}.json")["reject"]),
                            dtype=np.int64)
        rows = _load(layout.folder("sig", f) / "lines.npy")
        k = rows[:, 1].astype(np.int64)
        mine = (rows[:, 0] % np.uint64(layout.cfg.shards) == s) & ~np.isin(k, rejected)
        keys.append(rows[mine, 0])
        numbers.append(k[mine] + lo)
    key, g = _cat(keys, np.uint64), _cat(numbers, np.int64)
    order = np.lexsort((g, key))  # by key, then document: the first document of a key keeps its lines
    key, g = key[order], g[order]
    later = np.r_[False, key[1:] == key[:-1]] if len(key) else np.zeros(0, bool)
    drops = np.stack([g[later].astype(np.uint64), key[later]], axis=1)
    _save(folder / "drops.npy", drops[np.argsort(drops[:, 0], kind="stable")])
    return {"drops": int(later.sum())}


def _line_drops(layout: Layout, f: int) -> dict[int, set[int]]:
    """Position in file f -> the line keys that document loses (keys an earlier surviving document had)."""
    if layout.cfg.line_dedup != "first":
        return {}
    lo, hi = _numbers(layout, f)
    out: dict[int, set[int]] = {}
    for s in range(layout.cfg.shards):
        rows = _load(layout.folder("lines", s) / "drops.npy")
        rows = rows[(rows[:, 0] >= lo) & (rows[:, 0] < hi)]
        for g, key in rows.tolist():
            out.setdefault(g - lo, set()).add(key)
    return out


# -- filter: one task per input file ----------------------------------------------------------------------
@_resumable("filter")
def filter_file(layout: Layout, f: int, folder: Path) -> dict:
    decided = read_json(layout.folder("clusters", 0) / f"{f:05d}.json")
    reject, clustered, drop_keys = decided["reject"], decided["clustered"], _line_drops(layout, f)

    def rejection(k: int) -> dict | None:
        if str(k) not in reject:
            return None
        why, original, cluster = reject[str(k)]
        return {"reason": why, "duplicate_of": original} | ({"minhash_cluster": cluster} if cluster is not None else {})

    def strip_lines(k: int, text: str) -> tuple[str, int]:
        return without_lines(text, drop_keys.get(k, ()))[:2]

    rejected = layout.rejected_files[f] if layout.rejected_files is not None else None
    return write_decided(layout.files[f], layout.out_files[f], rejected, rejection, lambda k: clustered.get(str(k)),
                         strip_lines if layout.cfg.line_dedup == "first" else None)
