"""The compiled BPE core (``tokenizer.native``) against independent references: the ``regex`` module's split by
``GPT2_PAT``, tiktoken's ``gpt2`` ids, and the pure-Python reference it replaces (which must stay selectable)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import regex

from bench.benchmarks.tokenizer import tiktoken_gpt2 as build_tiktoken_gpt2
from tokenizer import bpe, native
from tokenizer.bpe import GPT2_PAT, pretokenize_reference
from tokenizer.encoder import Tokenizer

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"
TOK_DIR = SHARED / "tokenizer"
EOT = "<|endoftext|>"
SURROGATES = range(0xD800, 0xE000)

needs_native = pytest.mark.skipif(native.NATIVE is None, reason="compiled core not built or LMW_NO_NATIVE set")


def _mixed_alphabet() -> list[str]:
    """Every class the pattern distinguishes, with the characters its alternatives single out."""
    picks = "aZé\u0301ß中文日本語한국어ไทยא\u05b0ع١٢٣½²Ⅻ0123456789😀👍🏽\u200d!?.,;:'\"-_/()[]{}<>@#$%^&*+=|~`"
    spaces = " \t\n\r\x0b\x0c\x85\u00a0\u1680\u2000\u2028\u2029\u202f\u205f\u3000"
    contractions = ["'s", "'ll", "'ve", "'re", "'d", "'m", "'t", "'S"]
    return [*picks, *spaces, " ", " ", "\n", *contractions, "\x00", "\x1f", "\ufeff"]


@needs_native
def test_scanner_matches_regex_on_every_code_point():
    """All of Unicode in order and shuffled: a code point in the wrong class moves a pre-token boundary."""
    every = [chr(c) for c in range(0x110000) if c not in SURROGATES]
    rng = random.Random(0)
    shuffled = every[:]
    rng.shuffle(shuffled)
    for chars in (every, shuffled, [c + s for c, s in zip(shuffled, rng.choices(" \n'a1!", k=len(shuffled)))]):
        text = "".join(chars)
        assert native.NATIVE.pretokenize(text) == regex.findall(GPT2_PAT, text)


@needs_native
def test_scanner_matches_regex_on_random_unicode():
    rng = random.Random(1)
    alphabet = _mixed_alphabet()
    for _ in range(20_000):
        n = rng.randint(0, 30)
        if rng.random() < 0.3:  # any code point but a surrogate
            text = "".join(chr(rng.choice((rng.randrange(0xD800), rng.randrange(0xE000, 0x110000)))) for _ in range(n))
        else:
            text = "".join(rng.choices(alphabet, k=n))
        assert native.NATIVE.pretokenize(text) == regex.findall(GPT2_PAT, text), repr(text)


@pytest.fixture(scope="module")
def gpt2_pair():
    """GPT-2's tokenizer on the compiled core and on the reference, and tiktoken's ``gpt2``."""
    files = (TOK_DIR / "gpt2_vocab.json", TOK_DIR / "gpt2_merges.txt")
    if not all(f.is_file() for f in files):
        pytest.skip(f"GPT-2 files not present under {TOK_DIR}")
    pytest.importorskip("tiktoken")
    compiled = Tokenizer.from_files(*files, special_tokens=[EOT])
    saved, native.NATIVE = native.NATIVE, None
    try:
        reference = Tokenizer.from_files(*files, special_tokens=[EOT])
    finally:
        native.NATIVE = saved
    assert reference.backend == "python"
    return compiled, reference, build_tiktoken_gpt2(files[0])


def _random_texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    alphabet = _mixed_alphabet() + [" the", " cat", "ing", "  ", "\n\n"] * 4
    texts = []
    for _ in range(count):
        kind = rng.random()
        if kind < 0.4:
            texts.append("".join(rng.choices(alphabet, k=rng.randint(0, 80))))
        elif kind < 0.7:  # random bytes, decoded as a reader with errors="replace" would
            texts.append(rng.randbytes(rng.randint(0, 120)).decode("utf-8", errors="replace"))
        else:
            texts.append("".join(chr(rng.choice((rng.randrange(0xD800), rng.randrange(0xE000, 0x110000))))
                                 for _ in range(rng.randint(0, 40))))
    return texts


def test_random_unicode_and_bytes_match_tiktoken(gpt2_pair):
    compiled, reference, tiktoken = gpt2_pair
    for text in _random_texts(seed=2, count=3000):
        expected = tiktoken.encode_ordinary(text)
        assert compiled.encode(text) == expected, repr(text)
        assert reference.encode(text) == expected, repr(text)
        assert compiled.decode(expected) == text


def test_lone_surrogates_raise_like_the_reference(gpt2_pair):
    """Text decoded with surrogateescape cannot be UTF-8 encoded: both paths refuse it the same way."""
    compiled, reference, _ = gpt2_pair
    text = b"ok \xff\xfe bytes".decode("utf-8", errors="surrogateescape")
    for tok in (compiled, reference):
        with pytest.raises(UnicodeEncodeError):
            tok.encode(text)
    assert native.NATIVE is None or native.NATIVE.pretokenize("a") == ["a"]


def test_pretokenize_falls_back_on_surrogates():
    from tokenizer.bpe import pretokenize

    text = "ab\udcff c\ud800"
    assert pretokenize(text) == regex.findall(GPT2_PAT, text) == pretokenize_reference(text)


def test_tinystories_matches_tiktoken(gpt2_pair):
    path = SHARED / "tinystories" / "tinystories_sample_2M.txt"
    if not path.is_file():
        pytest.skip(f"{path} not present")
    compiled, _, tiktoken = gpt2_pair
    text = path.read_text(encoding="utf-8")
    expected = tiktoken.encode(text, allowed_special="all")
    compiled.clear_cache()
    assert compiled.encode(text) == expected  # cold
    assert compiled.encode(text) == expected  # every pre-token cached


def test_generated_crawl_matches_tiktoken_and_reference(gpt2_pair, sample_crawl):
    compiled, reference, tiktoken = gpt2_pair
    text = EOT.join(doc["text"] for doc in sample_crawl.docs)
    expected = tiktoken.encode(text, allowed_special="all")
    assert compiled.encode(text) == expected
    assert reference.encode(text) == expected


@pytest.mark.slow
def test_real_pages_match_tiktoken(gpt2_pair, tmp_path_factory):
    """The text of every real page in ../shared/data/web, extracted by our extract stage (~1 min)."""
    from bench.tools.real_pages import real_documents

    warcs = sorted((SHARED / "web").glob("*.warc.gz"))
    if not warcs:
        pytest.skip("no real pages under ../shared/data/web")
    docs = real_documents(warcs, tmp_path_factory.mktemp("real_pages"), workers=2)
    text = EOT.join(doc["text"] for doc in docs)
    compiled, reference, tiktoken = gpt2_pair
    expected = tiktoken.encode(text, allowed_special="all")
    assert len(expected) > 500_000
    assert compiled.encode(text) == expected
    assert reference.encode(text) == expected


@needs_native
def test_long_pretokens_take_the_heap_path(gpt2_pair):
    """Pre-tokens beyond the rescan limit (64 bytes) merge through the heap; tiktoken is the reference."""
    compiled, reference, tiktoken = gpt2_pair
    rng = random.Random(3)
    for n in (63, 64, 65, 66, 200, 5000):
        for alphabet in ("ab", "abcdefghij", "ａｂｃ中文", "0123456789", "!?.", "\u0301e"):
            text = "".join(rng.choices(alphabet, k=n))
            assert compiled.encode(text) == tiktoken.encode_ordinary(text) == reference.encode(text), (n, alphabet)


def test_pickled_tokenizer_rebuilds_its_backend(gpt2_pair):
    import pickle

    compiled, reference, _ = gpt2_pair
    copy = pickle.loads(pickle.dumps(compiled))
    assert copy.backend == compiled.backend
    assert copy.encode("we'll see 中文 🙂") == reference.encode("we'll see 中文 🙂")


# -- training -----------------------------------------------------------------------------------------------


def _both_merges(word_counts: dict[bytes, int], num_merges: int, specials: tuple[bytes, ...] = (b"<|endoftext|>",)):
    """Merges and vocab of the compiled loop and of the reference, from the same counts."""
    def vocab():
        return {i: bytes([i]) for i in range(256)} | {256 + k: s for k, s in enumerate(specials)}

    compiled_vocab, reference_vocab = vocab(), vocab()
    compiled = bpe.merge_counts(word_counts, compiled_vocab, num_merges)
    reference = bpe.merge_counts_reference(word_counts, reference_vocab, num_merges)
    return compiled, reference, compiled_vocab, reference_vocab


@needs_native
def test_training_merges_match_the_reference_on_random_counts():
    """Tiny alphabets make ties, repeats (aaaa: overlapping pairs) and tokens with equal bytes but other ids."""
    rng = random.Random(4)
    for _ in range(300):
        alphabet = rng.choice([b"ab", b"abc", b"a", b"xy z", "中文".encode()])
        counts = {bytes(rng.choices(alphabet, k=rng.randint(1, rng.choice((3, 12, 80))))): rng.randint(1, 5)
                  for _ in range(rng.randint(1, 40))}
        compiled, reference, cv, rv = _both_merges(counts, rng.randint(1, 60))
        assert compiled == reference and cv == rv, counts


def _corpus_merges(path: Path, vocab_size: int = 10_000):
    counts = bpe.count_pretokens(path, [EOT], num_workers=1)
    return _both_merges(counts, vocab_size - 257)


@needs_native
def test_training_merges_match_the_reference_on_tinystories():
    path = SHARED / "tinystories" / "tinystories_sample_2M.txt"
    if not path.is_file():
        pytest.skip(f"{path} not present")
    compiled, reference, _, _ = _corpus_merges(path)
    assert len(compiled) == 10_000 - 257 and compiled == reference


@needs_native
def test_training_merges_match_the_reference_on_the_generated_crawl(sample_crawl, tmp_path):
    path = tmp_path / "crawl.txt"
    path.write_text("".join(doc["text"] + EOT for doc in sample_crawl.docs), encoding="utf-8")
    compiled, reference, _, _ = _corpus_merges(path, 4000)
    assert len(compiled) == 4000 - 257 and compiled == reference


@needs_native
@pytest.mark.slow
def test_training_merges_match_the_reference_on_real_pages(tmp_path_factory):
    """Real multilingual text with long CJK pre-tokens; the reference takes a minute or more on 2 cores."""
    from bench.tools.real_pages import real_documents

    warcs = sorted((SHARED / "web").glob("*.warc.gz"))
    if not warcs:
        pytest.skip("no real pages under ../shared/data/web")
    docs = real_documents(warcs, tmp_path_factory.mktemp("real_pages_train"), workers=2)
    path = tmp_path_factory.mktemp("real_corpus") / "real.txt"
    path.write_text("".join(doc["text"] + EOT for doc in docs), encoding="utf-8")
    compiled, reference, _, _ = _corpus_merges(path)
    assert len(compiled) == 10_000 - 257 and compiled == reference


@needs_native
def test_pretoken_counts_match_the_regex(tmp_path):
    """The compiled counter against a Counter over ``regex.findall`` of every document."""
    from collections import Counter

    texts = _random_texts(seed=5, count=400) + ["the cat sat  on\\n\\nthe mat 😀 中文"] * 3
    texts = [t.replace(EOT, "") for t in texts]
    path = tmp_path / "corpus.txt"
    path.write_text(EOT.join(texts), encoding="utf-8")
    expected = Counter(p.encode("utf-8") for t in texts for p in regex.findall(GPT2_PAT, t))
    assert bpe.count_pretokens(path, [EOT], num_workers=1) == expected
