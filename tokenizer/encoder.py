"""Byte-level BPE tokenizer: encode/decode with learned merges, GPT-2 file format, HF export.

Encoding follows GPT-2 (openai/gpt-2 ``encoder.py``) and CS336 assignment 1 ``Tokenizer``:
special tokens are cut out first (overlapping ones: the longest wins), the text between them is
split by the GPT-2 regex, and each pre-token's bytes are merged pair by pair, always the pair
with the lowest merge rank first. With GPT-2's ``vocab.json``/``merges.txt`` the ids equal
tiktoken's ``gpt2`` encoding.

Speed: the compiled core (``tokenizer.native``, C: a scanner equal to the GPT-2 regex and the merge loop) runs
``encode`` when it is built; the Python below is the readable reference it is tested against and the fallback
(``LMW_NO_NATIVE=1``). Both cache pre-token -> ids (cleared when the cache grows past ``CACHE_SIZE`` entries),
so only unseen pre-tokens run the merge loop. ``encode_batch`` spreads texts over a process pool.
"""

from __future__ import annotations

import heapq
import json
import multiprocessing as mp
import multiprocessing.pool
import os
from collections.abc import Iterable, Iterator
from functools import lru_cache

from tokenizer import native
from tokenizer.bpe import pretokenize, special_tokens_pattern
from workbench.files import read_json, write_text

CACHE_SIZE = 1 << 20
STREAM_CHARS = 1 << 14
SHORT_PRETOKEN = 16  # bytes; longer pre-tokens are merged with a heap


@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from the 256 byte values to printable unicode characters.

    Printable Latin-1 bytes map to themselves; the others (space, control bytes, ...) to
    ``chr(256 + n)``, so ``vocab.json``/``merges.txt`` hold no whitespace (openai/gpt-2).
    """
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    moved = {b: n for n, b in enumerate((b for b in range(256) if b not in keep), 256)}
    return {b: chr(moved.get(b, b)) for b in range(256)}


def token_to_unicode(token: bytes) -> str:
    """Token bytes as the GPT-2 file string (``b" the"`` -> ``"Ġthe"``)."""
    table = bytes_to_unicode()
    return "".join(table[b] for b in token)


@lru_cache(maxsize=1)
def _unicode_to_byte() -> dict[str, int]:
    return {c: b for b, c in bytes_to_unicode().items()}


def unicode_to_token(text: str) -> bytes:
    """Inverse of ``token_to_unicode``."""
    table = _unicode_to_byte()
    return bytes(table[c] for c in text)


_WORKER: Tokenizer | None = None


def _init_worker(tokenizer: Tokenizer) -> None:
    global _WORKER
    _WORKER = tokenizer


def _worker_encode(text: str) -> list[int]:
    return _WORKER.encode(text)


class Tokenizer:
    """Byte-level BPE tokenizer from ``vocab`` (id -> bytes) and ranked ``merges``.

    Special tokens missing from ``vocab`` are appended with new ids.
    """

    def __init__(
        self,
        vocab: dict[int, bytes],
        merges: list[tuple[bytes, bytes]],
        special_tokens: list[str] | None = None,
    ):
        self.vocab = dict(vocab)
        self.merges = list(merges)
        self._ids = {token: i for i, token in self.vocab.items()}
        self.special_token_ids: dict[str, int] = {}
        for special in special_tokens or []:
            token = special.encode("utf-8")
            if token not in self._ids:
                new = max(self.vocab, default=-1) + 1
                self.vocab[new], self._ids[token] = token, new
            self.special_token_ids[special] = self._ids[token]
        missing = [bytes([b]) for b in range(256) if bytes([b]) not in self._ids]
        if missing:
            raise ValueError(f"vocab lacks {len(missing)} single-byte tokens, e.g. {missing[0]!r}")
        self._byte_ids = [self._ids[bytes([b])] for b in range(256)]
        self._ranks: dict[tuple[int, int], int] = {}  # pair of ids -> merge rank
        self._merged: list[int] = []  # merge rank -> id of the merged token
        for rank, (a, b) in enumerate(self.merges):
            try:
                pair, new = (self._ids[a], self._ids[b]), self._ids[a + b]
            except KeyError as e:
                raise ValueError(f"merge #{rank} {(a, b)!r}: token {e.args[0]!r} not in vocab") from None
            self._ranks.setdefault(pair, rank)
            self._merged.append(new)
        self._special_re = special_tokens_pattern(list(self.special_token_ids))
        self._special_prefixes = {s[:k] for s in self.special_token_ids for k in range(1, len(s))}
        self._longest_prefix = max(map(len, self._special_prefixes), default=0)
        self._cache: dict[str, list[int]] = {}
        self._native = self._native_encoder()

    def _native_encoder(self):
        """The compiled encoder for these merges, or ``None`` (reference path) when it is not built."""
        if native.NATIVE is None:
            return None
        by_rank = sorted(self._ranks.items(), key=lambda kv: kv[1])  # only the first rank of a repeated pair
        return native.NATIVE.Encoder(self._byte_ids, [(a, b, self._merged[r]) for (a, b), r in by_rank])

    @property
    def backend(self) -> str:
        """``"native"`` (the compiled core) or ``"python"`` (the reference)."""
        return "python" if self._native is None else "native"

    def clear_cache(self) -> None:
        """Forget every cached pre-token (benchmarks time a cold tokenizer this way)."""
        self._cache.clear()
        if self._native is not None:
            self._native.clear_cache()

    # -- files --------------------------------------------------------------------------------

    @classmethod
    def from_files(
        cls, vocab_path: str | os.PathLike, merges_path: str | os.PathLike, special_tokens: list[str] | None = None
    ) -> Tokenizer:
        """Load GPT-2 format ``vocab.json`` (token string -> id) and ``merges.txt``."""
        vocab = {i: unicode_to_token(s) for s, i in read_json(vocab_path).items()}
        merges = []
        with open(merges_path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if line.startswith("#version") or not line.strip():
                    continue
                parts = line.split()
                if len(parts) != 2:
                    raise ValueError(f"{merges_path}:{lineno}: expected two tokens, got {line!r}")
                merges.append((unicode_to_token(parts[0]), unicode_to_token(parts[1])))
        return cls(vocab, merges, special_tokens)

    def save(self, vocab_path: str | os.PathLike, merges_path: str | os.PathLike) -> None:
        """Write ``vocab.json`` (in id order) and ``merges.txt`` in GPT-2's format, atomically."""
        vocab = {token_to_unicode(t): i for i, t in sorted(self.vocab.items())}
        write_text(vocab_path, json.dumps(vocab, ensure_ascii=False, indent=1) + "\n")
        merges = "".join(f"{token_to_unicode(a)} {token_to_unicode(b)}\n" for a, b in self.merges)
        write_text(merges_path, "#version: 0.2\n" + merges)

    def to_hf_json(self, path: str | os.PathLike) -> None:
        """Export a Hugging Face ``tokenizer.json`` (byte-level BPE) that encodes like ``encode``."""
        byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True}
        added = [
            {"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True}
            for s, i in sorted(self.special_token_ids.items(), key=lambda kv: kv[1])
        ]
        model = {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
            "vocab": {token_to_unicode(t): i for i, t in sorted(self.vocab.items())},
            "merges": [[token_to_unicode(a), token_to_unicode(b)] for a, b in self.merges],
        }
        spec = {
            "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": None, "pre_tokenizer": byte_level, "post_processor": byte_level,
            "decoder": byte_level, "model": model,
        }
        write_text(path, json.dumps(spec, ensure_ascii=False))

    # -- encoding -----------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def token_to_id(self, token: bytes | str) -> int:
        return self._ids[token.encode("utf-8") if isinstance(token, str) else token]

    def id_to_token(self, token_id: int) -> bytes:
        return self.vocab[token_id]

    def _bpe(self, pretoken: str) -> list[int]:
        """Merge one pre-token's bytes, lowest-rank pair first (GPT-2 ``Encoder.bpe``).

        Merging the leftmost occurrence of the lowest-rank pair, one at a time, is what GPT-2's
        left-to-right pass over all occurrences does, since a merge only creates higher ranks.
        A heap of (rank, position) over a linked list of symbols makes it O(n log n), so long
        pre-tokens (a 30 kB run of letters) stay fast; entries whose pair changed are skipped.
        """
        ids: list[int | None] = [self._byte_ids[b] for b in pretoken.encode("utf-8")]
        get, merged, n = self._ranks.get, self._merged, len(ids)
        if n <= SHORT_PRETOKEN:
            return self._remember(pretoken, self._bpe_short(ids))
        nxt, prv = list(range(1, n + 1)), list(range(-1, n - 1))
        heap = [(r, i) for i, pair in enumerate(zip(ids, ids[1:], strict=False)) if (r := get(pair)) is not None]
        heapq.heapify(heap)
        while heap:
            rank, i = heapq.heappop(heap)
            j = nxt[i]
            if ids[i] is None or j >= n or get((ids[i], ids[j])) != rank:
                continue
            ids[i], ids[j], k = merged[rank], None, nxt[j]
            nxt[i] = k
            if k < n:
                prv[k] = i
                if (r := get((ids[i], ids[k]))) is not None:
                    heapq.heappush(heap, (r, i))
            if prv[i] >= 0 and (r := get((ids[prv[i]], ids[i]))) is not None:
                heapq.heappush(heap, (r, prv[i]))
        return self._remember(pretoken, [t for t in ids if t is not None])

    def _bpe_short(self, ids: list[int]) -> list[int]:
        """The same merges by rescanning: faster than the heap below ``SHORT_PRETOKEN`` bytes."""
        get, merged = self._ranks.get, self._merged
        while len(ids) > 1:
            best = None
            for i in range(len(ids) - 1):
                r = get((ids[i], ids[i + 1]))
                if r is not None and (best is None or r < best):  # strict: the leftmost wins ties
                    best, at = r, i
            if best is None:
                break
            ids[at : at + 2] = (merged[best],)
        return ids

    def _remember(self, pretoken: str, ids: list[int]) -> list[int]:
        if len(self._cache) >= CACHE_SIZE:
            self._cache.clear()
        self._cache[pretoken] = ids
        return ids

    def _encode_plain(self, text: str) -> list[int]:
        """Encode text that holds no special token."""
        if self._native is not None:
            return self._native.encode(text)
        get, bpe, out = self._cache.get, self._bpe, []
        extend = out.extend
        for pretoken in pretokenize(text):
            ids = get(pretoken)
            extend(bpe(pretoken) if ids is None else ids)
        return out

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; special tokens are kept whole, never merged with their neighbours."""
        if self._special_re is None:
            return self._encode_plain(text)
        out, pos = [], 0
        for m in self._special_re.finditer(text):
            out += self._encode_plain(text[pos : m.start()])
            out.append(self.special_token_ids[m.group()])
            pos = m.end()
        out += self._encode_plain(text[pos:])
        return out

    def _split_final(self, buf: str) -> tuple[list[int], str]:
        """Encode the part of ``buf`` that no continuation can change; return (ids, the rest).

        The rest starts (a) where ``buf`` ends with a proper prefix of a special token, or else
        (b) at the second-to-last pre-token of the trailing text: a GPT-2 regex match looks at
        most one character past its end (``\\s+(?!\\S)``, ``'ll``), so pre-tokens followed by two
        more are settled. Special-token matches starting before (a) are settled too.
        """
        hold = next((p for p in range(max(0, len(buf) - self._longest_prefix), len(buf))
                     if buf[p:] in self._special_prefixes), len(buf))
        done = 0
        if self._special_re is not None:
            for m in self._special_re.finditer(buf):
                if m.start() >= hold:
                    break
                done = m.end()
        ids = self.encode(buf[:done])
        if done >= hold:
            return ids, buf[done:]
        if self._native is not None:
            settled_ids, chars = self._native.encode_settled(buf[done:hold], 2)
            return ids + settled_ids, buf[done + chars :]
        pretokens = pretokenize(buf[done:hold])
        settled = pretokens[:-2]
        for pretoken in settled:
            ids += self._cache.get(pretoken) or self._bpe(pretoken)
        return ids, buf[done + sum(map(len, settled)) :]

    def encode_iterable(self, iterable: Iterable[str]) -> Iterator[int]:
        """Lazily encode a stream of strings (e.g. a file's lines) exactly as ``encode`` of their
        concatenation. Chunks are gathered up to ``STREAM_CHARS`` characters, then all but an
        unsettled tail is encoded, so memory does not grow with the input."""
        buf, pending, size = "", [], 0
        for chunk in iterable:
            pending.append(chunk)
            size += len(chunk)
            if size >= STREAM_CHARS:
                ids, buf = self._split_final(buf + "".join(pending))
                pending, size = [], 0
                yield from ids
        yield from self.encode(buf + "".join(pending))

    def pool(self, num_workers: int | None = None) -> mp.pool.Pool:
        """A process pool whose workers each hold a copy of this tokenizer (sent once)."""
        return mp.Pool(num_workers or os.cpu_count() or 1, initializer=_init_worker, initargs=(self,))

    def encode_batch(
        self, texts: Iterable[str], num_workers: int | None = None, pool: mp.pool.Pool | None = None
    ) -> list[list[int]]:
        """Encode many texts in parallel, on ``pool`` (from ``self.pool()``) or on a new pool."""
        texts = list(texts)
        if pool is None and (num_workers == 1 or len(texts) < 2):
            return [self.encode(t) for t in texts]
        chunksize = max(1, len(texts) // (8 * (num_workers or os.cpu_count() or 1)))
        if pool is not None:
            return pool.map(_worker_encode, texts, chunksize=chunksize)
        with self.pool(num_workers) as new_pool:
            return new_pool.map(_worker_encode, texts, chunksize=chunksize)

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids``; byte sequences that are not valid UTF-8 become U+FFFD."""
        vocab = self.vocab
        return b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace")

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_cache": {}, "_native": None}  # workers start with an empty cache

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._native = self._native_encoder()
