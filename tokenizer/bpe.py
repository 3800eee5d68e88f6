"""Byte-level BPE training (Sennrich et al. 2016, as used by GPT-2: Radford et al. 2019).

Follows Stanford CS336 assignment 1 ("train_bpe"):

* The initial vocabulary is the 256 byte values (ids 0..255), then the special tokens, in order.
* The corpus is split on the special tokens first, so no merge crosses them, and every document
  is pre-tokenized with the GPT-2 regex; merges are counted inside pre-tokens only.
* The most frequent adjacent pair is merged; ties go to the lexicographically *greater* pair of
  byte strings, comparing ``(bytes_a, bytes_b)`` tuples.

Speed and memory: the file is cut into chunks at special-token boundaries and each worker process
reads and pre-tokenizes its own chunk, returning a count per unique pre-token, so the parent never
holds the corpus text. Merging then works on the unique pre-tokens only: an index from each pair to
the words containing it lets every merge touch just the affected words, and a heap with lazy
invalidation yields the best pair without recounting.
"""

from __future__ import annotations

import heapq
import multiprocessing as mp
import os
import re
from collections import Counter, defaultdict
from itertools import chain
from pathlib import Path

import regex
from tqdm import tqdm

from tokenizer import native

GPT2_PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
"""The GPT-2 pre-tokenization pattern (openai/gpt-2 ``encoder.py``), as given in CS336."""

CHUNK_BYTES = 16 << 20
"""Approximate bytes a worker reads at once; bounds each worker's memory on large corpora."""

PARALLEL_MIN_BYTES = 32 << 20
"""Smaller files are counted in-process: the compiled counter reads ~30 MB/s, so worker start-up would cost more
time (and memory) than it saves."""

_WS = r"\t\n\x0b\x0c\r "  # ASCII White_Space, which is what \s matches in ``regex`` below 0x80
GPT2_PAT_ASCII = rf"""'(?:[sdmt]|ll|ve|re)| ?[A-Za-z]+| ?[0-9]+| ?[^{_WS}A-Za-z0-9]+|[{_WS}]+(?![^{_WS}])|[{_WS}]+"""
"""``GPT2_PAT`` restricted to ASCII text, for the standard ``re`` module (about 1.7x faster)."""

_findall = regex.compile(GPT2_PAT).findall
_findall_ascii = re.compile(GPT2_PAT_ASCII).findall


def pretokenize_reference(text: str) -> list[str]:
    """Split text (holding no special token) into GPT-2 pre-tokens; ASCII text takes a fast path."""
    return _findall_ascii(text) if text.isascii() else _findall(text)


def pretokenize(text: str) -> list[str]:
    """GPT-2 pre-tokens of text, by the compiled scanner when it is built (``tokenizer.native``), else the regex."""
    if native.NATIVE is not None:
        try:
            return native.NATIVE.pretokenize(text)
        except UnicodeEncodeError:  # lone surrogates: the scanner reads UTF-8, the regex code points
            pass
    return pretokenize_reference(text)


def special_tokens_pattern(special_tokens: list[str]) -> regex.Pattern | None:
    """A regex matching any special token, longest first so that overlapping ones match longest."""
    if not special_tokens:
        return None
    return regex.compile("|".join(regex.escape(s) for s in sorted(special_tokens, key=len, reverse=True)))


def find_chunk_boundaries(path: str | os.PathLike, num_chunks: int, special_tokens: list[str]) -> list[int]:
    """Byte offsets ``[0, ..., file_size]`` cutting the file into about ``num_chunks`` pieces.

    Each inner boundary is moved forward to the first occurrence of a special token after the
    approximate offset (CS336 ``find_chunk_boundaries``), so a chunk starts with a special token
    and pre-tokenizing chunks independently gives the same pre-tokens as the whole file. That
    first occurrence is surely where a special token starts only if no special token can begin
    inside another one (as ``<|endoftext|>`` inside ``<|endoftext|><|endoftext|>``); otherwise,
    as without special tokens, the file stays in one chunk. Duplicate boundaries are removed.
    """
    size = os.path.getsize(path)
    if size == 0:
        return [0]
    nested = any(t.startswith(s[k:]) or s[k:].startswith(t) for s in special_tokens for t in special_tokens
                 for k in range(1, len(s)))
    needles = [] if nested else [s.encode("utf-8") for s in special_tokens]
    longest = max((len(n) for n in needles), default=0)
    boundaries = [0]
    with open(path, "rb") as fh:
        for i in range(1, num_chunks if needles else 1):
            pos = max(i * size // num_chunks, boundaries[-1])
            while pos < size:
                fh.seek(pos)
                block = fh.read(1 << 16)
                hits = [j for j in (block.find(n) for n in needles) if j >= 0]
                if hits:
                    pos += min(hits)
                    break
                if len(block) < 1 << 16:  # end of file reached without a special token
                    pos = size
                    break
                pos += len(block) - longest + 1  # a token may straddle two blocks
            if pos > boundaries[-1]:
                boundaries.append(pos)
    if boundaries[-1] != size:
        boundaries.append(size)
    return boundaries


def _count_chunk(args: tuple[str, int, int, list[str]]) -> Counter[bytes]:
    """Worker: read bytes ``[start, end)`` of the file, split on specials, count pre-tokens."""
    path, start, end, special_tokens = args
    with open(path, "rb") as fh:
        fh.seek(start)
        data = fh.read(end - start)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: invalid UTF-8 at byte {start + e.start}") from None
    split = special_tokens_pattern(special_tokens)
    docs = split.split(text) if split else [text]
    if native.NATIVE is not None:
        return Counter(native.NATIVE.count_pretokens(docs))
    counts = Counter(chain.from_iterable(map(pretokenize_reference, docs)))
    return Counter({word.encode("utf-8"): n for word, n in counts.items()})


def count_pretokens(
    input_path: str | os.PathLike, special_tokens: list[str], num_workers: int | None = None
) -> Counter[bytes]:
    """Count every unique pre-token (as UTF-8 bytes) of the file, pre-tokenizing in parallel."""
    size = os.path.getsize(input_path)
    num_workers = num_workers or (os.cpu_count() if size >= PARALLEL_MIN_BYTES or native.NATIVE is None else 1) or 1
    num_chunks = max(num_workers, -(-size // CHUNK_BYTES))
    bounds = find_chunk_boundaries(input_path, num_chunks, special_tokens)
    jobs = [(str(input_path), a, b, list(special_tokens)) for a, b in zip(bounds, bounds[1:], strict=False)]
    total: Counter[bytes] = Counter()
    bar = dict(desc="bpe: pre-tokenize", unit="chunk", total=len(jobs), disable=None)
    if num_workers == 1 or len(jobs) <= 1:
        for job in tqdm(jobs, **bar):
            total.update(_count_chunk(job))
    else:
        with mp.Pool(min(num_workers, len(jobs))) as pool:
            for counts in tqdm(pool.imap_unordered(_count_chunk, jobs), **bar):
                total.update(counts)
    return total


_INVERT = {i: 256 - i for i in range(256)}  # str.translate table: byte x -> chr(256 - x)
_END = chr(257)  # above every inverted byte


def descending_key(token: bytes) -> str:
    """A string that sorts in the *reverse* byte order of ``token``.

    ``heapq`` is a min-heap, but ties must go to the lexicographically greater pair, so heap
    entries carry ``descending_key(a) + descending_key(b)``. Byte x becomes ``chr(256 - x)``
    and the key ends with ``chr(257)``, so a proper prefix sorts after its extensions (it is
    smaller) and the end of ``a`` is never compared with a byte of ``b``.
    """
    return token.decode("latin-1").translate(_INVERT) + _END


def _merge_word(word: tuple[int, ...], a: int, b: int, new: int) -> tuple[tuple[int, ...], list, list]:
    """Replace every non-overlapping ``(a, b)`` in ``word``, left to right, by ``new``.

    Returns ``(merged, removed_pairs, added_pairs)``, the pair occurrences that changed: only
    those next to a merge, so a long word (a CJK run is one pre-token) costs what its matches
    cost, with the scans and copies done by ``tuple.index`` and slicing in C.
    """
    n = len(word)
    starts, i, index = [], 0, word.index
    try:
        while True:
            j = index(a, i, n - 1)
            if word[j + 1] == b:
                starts.append(j)
                i = j + 2
            else:
                i = j + 1
    except ValueError:
        pass
    if not starts:
        return word, [], []
    if len(starts) == 1:  # the common case, without the set bookkeeping
        j = starts[0]
        removed, added = [(a, b)], []
        if j > 0:
            removed.append((word[j - 1], a))
            added.append((word[j - 1], new))
        if j + 2 < n:
            removed.append((b, word[j + 2]))
            added.append((new, word[j + 2]))
        return word[:j] + (new,) + word[j + 2 :], removed, added
    old_at = {p for j in starts for p in (j - 1, j, j + 1) if 0 <= p < n - 1}
    parts, prev = [], 0
    for j in starts:
        parts += (word[prev:j], (new,))
        prev = j + 2
    parts.append(word[prev:])
    merged = tuple(chain.from_iterable(parts))
    m = len(merged)
    new_at = {p for k, j in enumerate(starts) for p in (j - k - 1, j - k) if 0 <= p < m - 1}
    removed = [(word[p], word[p + 1]) for p in old_at]
    added = [(merged[p], merged[p + 1]) for p in new_at]
    return merged, removed, added


def merge_counts(
    word_counts: dict[bytes, int], vocab: dict[int, bytes], num_merges: int
) -> list[tuple[bytes, bytes]]:
    """Learn up to ``num_merges`` merges from pre-token counts, adding new tokens to ``vocab`` (ids ``0..n-1``).

    The compiled loop (``tokenizer/csrc/bpe_train.c``) when it is built, else ``merge_counts_reference``; both give
    the same merges.
    """
    if native.NATIVE is None or list(vocab) != list(range(len(vocab))):
        return merge_counts_reference(word_counts, vocab, num_merges)
    pairs = native.NATIVE.train_merges(list(vocab.values()), list(word_counts), list(word_counts.values()), num_merges)
    merges = []
    for a, b in pairs:
        vocab[len(vocab)] = vocab[a] + vocab[b]
        merges.append((vocab[a], vocab[b]))
    return merges


def merge_counts_reference(
    word_counts: dict[bytes, int], vocab: dict[int, bytes], num_merges: int
) -> list[tuple[bytes, bytes]]:
    """Learn up to ``num_merges`` merges from pre-token counts, adding new tokens to ``vocab`` (the reference).

    Incremental: ``pair_counts`` changes only next to each merge, and ``where`` (pair -> words
    that may contain it; a superset, never scanned in full) gains the words of new pairs. Heap
    entries go stale when a count changes; a popped entry is used only if its count still matches.
    """
    words = [tuple(w) for w in word_counts]  # each word as a tuple of token ids (byte ids first)
    freqs = list(word_counts.values())
    pair_counts: dict[tuple[int, int], int] = defaultdict(int)
    where: dict[tuple[int, int], set[int]] = defaultdict(set)
    for idx, (word, freq) in enumerate(zip(words, freqs, strict=False)):
        for pair in zip(word, word[1:], strict=False):
            pair_counts[pair] += freq
            where[pair].add(idx)

    keys = {i: descending_key(token) for i, token in vocab.items()}
    pair_keys: dict[tuple[int, int], str] = {}

    def entry(pair: tuple[int, int]) -> tuple[int, str, tuple[int, int]]:
        key = pair_keys.get(pair)
        if key is None:
            key = pair_keys[pair] = keys[pair[0]] + keys[pair[1]]
        return (-pair_counts[pair], key, pair)

    heap = [entry(pair) for pair in pair_counts]
    heapq.heapify(heap)
    merges: list[tuple[bytes, bytes]] = []
    for _ in tqdm(range(num_merges), desc="bpe: merge", unit="merge", disable=None):
        while heap and pair_counts.get(heap[0][2], 0) != -heap[0][0]:
            heapq.heappop(heap)  # stale: the pair's count changed since this entry was pushed
        if not heap:
            break
        a, b = heapq.heappop(heap)[2]
        new = len(vocab)
        vocab[new] = vocab[a] + vocab[b]
        keys[new] = descending_key(vocab[new])
        merges.append((vocab[a], vocab[b]))
        changed: set[tuple[int, int]] = set()
        for idx in where.pop((a, b)):
            merged, removed, added = _merge_word(words[idx], a, b, new)
            if not removed:
                continue  # the word lost this pair to an earlier merge
            words[idx], freq = merged, freqs[idx]
            for pair in removed:
                pair_counts[pair] -= freq
            for pair in added:
                pair_counts[pair] += freq
                where[pair].add(idx)
            changed.update(removed, added)
        for pair in changed:
            if pair_counts[pair] > 0:
                heapq.heappush(heap, entry(pair))
            else:
                del pair_counts[pair]
                where.pop(pair, None)
                pair_keys.pop(pair, None)
    return merges


def train_bpe(
    input_path: str | os.PathLike,
    vocab_size: int,
    special_tokens: list[str],
    num_workers: int | None = None,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train a byte-level BPE tokenizer on a UTF-8 text file (CS336 assignment 1 ``train_bpe``).

    Returns ``(vocab, merges)``: ``vocab`` maps id -> token bytes (256 bytes, then the special
    tokens, then one token per merge, in merge order); ``merges`` lists the merged pairs in the
    order they were learned. Stops at ``vocab_size`` tokens or when no pair is left.
    ``num_workers`` defaults to all cores.
    """
    special_tokens = list(special_tokens)
    if len(set(special_tokens)) != len(special_tokens):
        raise ValueError(f"special_tokens has duplicates: {special_tokens!r}")
    if vocab_size < 256 + len(special_tokens):
        raise ValueError(
            f"vocab_size={vocab_size} is too small: it must be at least 256 bytes + "
            f"{len(special_tokens)} special tokens = {256 + len(special_tokens)}"
        )
    if not Path(input_path).is_file():
        raise FileNotFoundError(f"input_path={str(input_path)!r} is not a file")
    vocab = {i: bytes([i]) for i in range(256)}
    for token in special_tokens:
        vocab[len(vocab)] = token.encode("utf-8")
    word_counts = count_pretokens(input_path, special_tokens, num_workers)
    merges = merge_counts(word_counts, vocab, vocab_size - len(vocab))
    return vocab, merges
