"""MinHash signatures and LSH banding, vectorized with numpy, plus Jaccard-verified clustering.

Broder, "On the resemblance and containment of documents" (1997) for MinHash; Leskovec, Rajaraman &
Ullman, *Mining of Massive Datasets* ch. 3 for banding; the CS336 (Stanford, 2025) assignment 4 recipe
for normalization and verification; FineWeb (Penedo et al., 2024) and datatrove's ``minhash.py`` for the
defaults (word 5-grams, 14 bands x 8 rows).

- **Normalization**: lowercase, NFD then drop combining marks (accents), drop punctuation, symbols and
  format characters, collapse whitespace. Han/kana characters count as one word each.
- **Shingles**: word n-grams. A text with fewer than n words has one shingle, its whole normalized text;
  an empty normalized text has none (it never matches anything).
- **Hashing**: each distinct word gets an 8-byte blake2b digest (cached per process); the 64-bit hash of an
  n-gram is a polynomial of its words' digests mod 2^64, computed for all n-grams of a text at once. So each
  shingle is hashed exactly once, with no Python loop over shingles.
- **Signatures**: hash function i is the permutation x -> (a_i x + b_i) mod p of Z_p (Carter-Wegman), with
  a_i, b_i uniform and x = shingle hash mod p; signature i of a text is the min over its shingles. Texts are
  batched so one array op covers ~8k shingles x all hash functions. We use the Mersenne prime p = 2^31 - 1,
  not datasketch's 2^61 - 1: then a x + b < 2^62 never overflows uint64 and numpy's ``%`` reduces it in one
  pass (3 passes per element), while an exact 2^61 - 1 needs the product split into 32-bit halves and folded
  back (~21 passes, measured 3-5x slower); datasketch/datatrove instead let a x wrap mod 2^64 before ``% p``.
  Values are 31-bit (signatures are uint32): two different minima agree by chance with probability 2^-31.
- **LSH**: b bands of r rows; a pair is a candidate when all r rows of some band agree, which happens with
  probability 1 - (1 - s^r)^b for Jaccard s (``lsh_probability``).
- **Verification**: candidates are compared by the true Jaccard of their shingle sets (as 64-bit hashes:
  a collision needs ~2^32 shingles), clusters are the connected components (union-find); the root of a
  cluster is its first document. Each bucket is verified on its own (``verify_bucket``: a pure function of
  the bucket), so the bands can be verified in any order or apart (``pipeline/dedup/sharded.py``). FineWeb
  does not verify, it clusters every LSH candidate; we verify.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import multiprocessing as mp
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np
import regex

MERSENNE = (1 << 31) - 1  # p: a prime, so (a x + b) mod p permutes Z_p; a x + b < 2^62 fits in uint64
EMPTY = np.uint32(np.iinfo(np.uint32).max)  # signature of a text without shingles (above any hash value)
_P = np.uint64(MERSENNE)
_POLY = np.uint64(0x9E3779B97F4A7C15)  # odd multiplier of the n-gram polynomial (2^64 / golden ratio)
_BATCH_SHINGLES = 8192  # shingles per array op: 112 hashes x 8192 x 8 bytes = 7.3 MB per temporary
_PUNCT_ASCII = bytes(c for c in range(128) if not chr(c).isalnum() and not chr(c).isspace())  # deleted
# Marks, punctuation, symbols, format characters and non-space controls (the ASCII table's Unicode twin).
_STRIP = regex.compile(r"(?V1)[\p{Mn}\p{Me}\p{P}\p{S}\p{Cf}[\p{Cc}--\s]]+")
_CJK = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}]")  # scripts written without spaces: one word each
_WORD_CACHE_MAX = 1 << 20


# -- normalization and shingles -------------------------------------------------------------------------
def text_words(text: str) -> list[str]:
    """The words of the normalized text: lowercased, accents (NFD combining marks), punctuation, symbols and
    format characters removed, split on whitespace; each Han/kana character is a word of its own."""
    if text.isascii():  # fast path: bytes.translate deletes in C
        return text.encode("ascii").lower().translate(None, _PUNCT_ASCII).decode("ascii").split()
    text = _STRIP.sub("", unicodedata.normalize("NFD", text.lower()))
    return _CJK.sub(r" \g<0> ", text).split()


def normalize_text(text: str) -> str:
    """Lowercase, strip accents (NFD, drop combining marks), strip punctuation/symbols, collapse whitespace."""
    return " ".join(text_words(text))


def shingle_set(text: str, ngrams: int) -> set[str]:
    """Word n-grams of the normalized text as strings (the reference the hashed shingles stand for)."""
    words = text_words(text)
    if len(words) < ngrams:
        return {" ".join(words)} if words else set()
    return {" ".join(words[i:i + ngrams]) for i in range(len(words) - ngrams + 1)}


def digest(s: str) -> int:
    """64-bit blake2b of a string (lone surrogates from bad UTF-8 included)."""
    return int.from_bytes(hashlib.blake2b(s.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


class _WordCache(dict):
    """word -> 64-bit blake2b digest, computed on first use."""

    def __missing__(self, word: str) -> int:
        h = self[word] = digest(word)
        return h


_WORD_CACHE = _WordCache()


def _word_hashes(words: list[str]) -> np.ndarray:
    if len(_WORD_CACHE) > _WORD_CACHE_MAX:
        _WORD_CACHE.clear()
    return np.fromiter(map(_WORD_CACHE.__getitem__, words), dtype=np.uint64, count=len(words))


def shingle_hashes(text: str, ngrams: int) -> np.ndarray:
    """64-bit hashes of the text's word n-grams, one per position (not deduplicated), uint64 (n_shingles,)."""
    return word_shingle_hashes(text_words(text), ngrams)


def word_shingle_hashes(words: list[str], ngrams: int) -> np.ndarray:
    """``shingle_hashes`` of a text already split into normalized words."""
    if len(words) < ngrams:  # one shingle: the whole normalized text (none when empty)
        return np.array([digest(" ".join(words))] if words else [], dtype=np.uint64)
    w = _word_hashes(words)
    m = len(words) - ngrams + 1
    h = w[:m].copy()
    for k in range(1, ngrams):  # h = sum_k w[i+k] * POLY^(n-1-k) mod 2^64 (Horner; uint64 wraps)
        h *= _POLY
        h += w[k:k + m]
    return h


def shingle_hash_set(text: str, ngrams: int) -> np.ndarray:
    """The distinct shingle hashes of a text, sorted: the set that verification compares."""
    return np.unique(shingle_hashes(text, ngrams))


def jaccard(a, b) -> float:
    """|A & B| / |A | B| of two sets, or of two sorted unique uint64 arrays; 0.0 when both are empty."""
    if isinstance(a, np.ndarray):
        inter = np.intersect1d(a, b, assume_unique=True).size
        union = a.size + b.size - inter
    else:
        inter = len(a & b)
        union = len(a) + len(b) - inter
    return inter / union if union else 0.0


# -- MinHash signatures --------------------------------------------------------------------------------
def permutations(num_hashes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Coefficients a in [1, p), b in [0, p) of the num_hashes hash functions, drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    a = rng.integers(1, MERSENNE, size=num_hashes, dtype=np.uint64)
    b = rng.integers(0, MERSENNE, size=num_hashes, dtype=np.uint64)
    return a, b


def _apply_perms(a: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    """(a_i * x_j + b_i) mod p for x < p: uint64 (num_hashes, len(x)), exact. With a, b, x < 2^31 the
    value a x + b < 2^62 fits in uint64, so three array passes do it (multiply, add, numpy's ``%``)."""
    h = a[:, None] * x[None, :]  # (H, S)
    h += b[:, None]
    h %= _P
    return h


def signatures_of_shingles(shingles: Sequence[np.ndarray], num_hashes: int, seed: int) -> np.ndarray:
    """MinHash signatures from each text's shingle hashes (``shingle_hashes``): uint32 (len, num_hashes)."""
    a, b = permutations(num_hashes, seed)
    sig = np.full((len(shingles), num_hashes), EMPTY, dtype=np.uint32)
    pieces: list[np.ndarray] = []  # shingle hashes (mod p) waiting for the next batch
    owners: list[int] = []  # the text each piece belongs to
    size = 0

    def flush():
        if not pieces:
            return
        starts = np.cumsum([0] + [len(p) for p in pieces[:-1]])
        h = _apply_perms(a, b, np.concatenate(pieces))  # (H, S)
        mins = np.minimum.reduceat(h, starts, axis=1).T.astype(np.uint32)  # (n_pieces, H), values < 2^31
        np.minimum.at(sig, np.array(owners), mins)  # a long text may span several batches
        pieces.clear()
        owners.clear()

    for i, hashes in enumerate(shingles):
        x = hashes % _P
        for start in range(0, len(x), _BATCH_SHINGLES):
            piece = x[start:start + _BATCH_SHINGLES]
            pieces.append(piece)
            owners.append(i)
            size += len(piece)
            if size >= _BATCH_SHINGLES:
                flush()
                size = 0
    flush()
    return sig


def _signatures_task(args: tuple) -> np.ndarray:
    """Serial signatures of a chunk (``texts, num_hashes, ngrams, seed``): uint32 (len(texts), num_hashes); EMPTY
    rows for texts without shingles."""
    texts, num_hashes, ngrams, seed = args
    return signatures_of_shingles([shingle_hashes(t, ngrams) for t in texts], num_hashes, seed)


def chunked(items: Iterable, size: int) -> Iterator[list]:
    """Lists of ``size`` items in order (the last one shorter), taken from ``items`` as they are needed."""
    it = iter(items)
    return iter(lambda: list(itertools.islice(it, size)), [])


def minhash_signatures(texts: Iterable[str], num_hashes: int = 112, ngrams: int = 5, seed: int = 0,
                       workers: int = 1, chunk_size: int = 256) -> np.ndarray:
    """MinHash signatures of ``texts``: uint32 (n_texts, num_hashes), values in [0, 2^31 - 1).

    A text without shingles (empty after normalization) gets a row of ``EMPTY`` (2^32 - 1). With
    ``workers > 1`` chunks of ``chunk_size`` texts go to a process pool; the result is the same.
    """
    if num_hashes < 1 or ngrams < 1:
        raise ValueError(f"num_hashes and ngrams must be >= 1, got {num_hashes} and {ngrams}")
    tasks = ((chunk, num_hashes, ngrams, seed) for chunk in chunked(texts, chunk_size))
    if workers > 1:
        with mp.get_context("fork").Pool(workers) as pool:
            parts = list(pool.imap(_signatures_task, tasks))
    else:
        parts = [_signatures_task(t) for t in tasks]
    return np.concatenate(parts) if parts else np.empty((0, num_hashes), dtype=np.uint32)


# -- LSH -----------------------------------------------------------------------------------------------
def lsh_probability(s: float, rows: int, bands: int) -> float:
    """Probability that a pair with Jaccard ``s`` shares at least one band: 1 - (1 - s^r)^b."""
    return 1.0 - (1.0 - s ** rows) ** bands


def band_keys(signatures: np.ndarray, num_bands: int) -> np.ndarray:
    """One 64-bit key per (text, band): uint64 (n, num_bands). Equal bands give equal keys; a key collision
    of unequal bands (~2^-64) only adds a candidate that verification rejects."""
    n, h = signatures.shape
    if num_bands < 1 or h % num_bands:
        raise ValueError(f"num_hashes ({h}) must be a multiple of num_bands ({num_bands})")
    bands = signatures.reshape(n, num_bands, h // num_bands)  # (n, B, R)
    key = np.zeros((n, num_bands), dtype=np.uint64)
    for r in range(bands.shape[2]):
        key *= _POLY
        key ^= bands[:, :, r].astype(np.uint64)
    key ^= key >> np.uint64(31)  # finalize (splitmix64-style) so keys spread over the whole range
    key *= np.uint64(0xBF58476D1CE4E5B9)
    return key ^ (key >> np.uint64(29))


def candidate_buckets(keys: np.ndarray, active: np.ndarray | None = None) -> Iterator[np.ndarray]:
    """For each band, the groups (>= 2 texts, ascending indices) that share that band's key.

    ``active`` (bool, per text) leaves texts out, e.g. exact duplicates or texts without shingles.
    """
    idx = np.arange(len(keys)) if active is None else np.flatnonzero(active)
    for band in range(keys.shape[1]):
        col = keys[idx, band]
        order = np.argsort(col, kind="stable")  # stable: indices stay ascending inside a bucket
        sorted_keys, members = col[order], idx[order]
        starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])  # first of each run
        ends = np.r_[starts[1:], len(col)]
        for lo, hi in zip(starts[ends - starts > 1].tolist(), ends[ends - starts > 1].tolist(), strict=False):
            yield members[lo:hi]


def candidate_pairs(keys: np.ndarray) -> set[tuple[int, int]]:
    """Every pair (i < j) that shares some band (for tests and small inputs: buckets can be quadratic)."""
    return {(int(g[i]), int(g[j])) for g in candidate_buckets(keys) for i in range(len(g))
            for j in range(i + 1, len(g))}


class UnionFind:
    """Disjoint sets over 0..n-1 whose root is always the smallest member (the first document)."""

    def __init__(self, n: int):
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        parent = self.parent
        root = i
        while parent[root] != root:
            root = parent[root]
        while parent[i] != root:  # path compression
            parent[i], i = root, parent[i]
        return root

    def union(self, i: int, j: int) -> None:
        ri, rj = self.find(i), self.find(j)
        self.parent[max(ri, rj)] = min(ri, rj)


def verify_bucket(bucket: Sequence[int], verdict: Callable[[int, int], bool],
                  max_tries: int = 64) -> list[tuple[int, int]]:
    """The joins (i, j) that verification makes inside one LSH bucket (texts in ascending order).

    Each text is compared with the clusters already present in the bucket, in order of their first member, member
    by member until one matches (a bucket of k near-copies costs ~k comparisons, not k^2/2), at most ``max_tries``
    comparisons per text (a bucket of k unrelated texts sharing a template costs k * max_tries, not k^2/2). The
    answer depends only on the bucket and ``verdict(i, j)`` (is Jaccard >= threshold), never on other buckets:
    so buckets can be verified in any order, on any machine, and their joins give the same clusters.
    """
    groups: list[list[int]] = []  # the bucket's clusters so far, in order of their first member
    joins: list[tuple[int, int]] = []
    for j in bucket:
        tries, matched = 0, []
        for g, members in enumerate(groups):
            if tries >= max_tries:
                break
            for i in members:
                if tries >= max_tries:
                    break
                tries += 1
                if verdict(i, j):
                    joins.append((i, j))
                    matched.append(g)
                    break
        if matched:  # the clusters j matched merge into the first of them, j last
            groups[matched[0]] = [i for g in matched for i in groups[g]] + [j]
            groups = [m for g, m in enumerate(groups) if g not in matched[1:]]
        else:
            groups.append([j])
    return joins


def verified_clusters(keys: np.ndarray, shingles: Callable[[int], np.ndarray], threshold: float,
                      active: np.ndarray | None = None, stats: dict | None = None,
                      max_tries: int = 64) -> list[int]:
    """Cluster root (first member's index) of every text: LSH candidates joined when Jaccard >= threshold.

    Each bucket is verified on its own (``verify_bucket``) and the clusters are the connected components of all
    joins, so the answer does not depend on the order of the bands (the sharded stage verifies them apart).
    ``shingles(i)`` gives text i's sorted distinct shingle hashes (called once per candidate text); a pair's
    verdict is computed once and remembered across bands. ``stats`` (if given) receives ``candidate_texts``
    (texts compared) and ``comparisons`` (Jaccard computations).
    """
    uf = UnionFind(len(keys))
    get = functools.cache(shingles)
    verdict = functools.cache(lambda i, j: jaccard(get(i), get(j)) >= threshold)
    for bucket in candidate_buckets(keys, active):
        for i, j in verify_bucket(bucket.tolist(), verdict, max_tries):
            uf.union(i, j)
    if stats is not None:
        stats.update(candidate_texts=get.cache_info().currsize, comparisons=verdict.cache_info().currsize)
    return [uf.find(i) for i in range(len(keys))]
