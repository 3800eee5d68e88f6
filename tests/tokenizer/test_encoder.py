"""Tests for ``tokenizer.encoder.Tokenizer`` against tiktoken ``gpt2`` and HF ``tokenizers``."""

from __future__ import annotations

import itertools
import json
import random
import string
import tracemalloc
from pathlib import Path

import pytest

from bench.benchmarks.tokenizer import tiktoken_gpt2 as build_tiktoken_gpt2
from tokenizer import encoder
from tokenizer.bpe import train_bpe
from tokenizer.encoder import STREAM_CHARS, Tokenizer

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
TOK_DIR = SHARED / "tokenizer"
EOT = "<|endoftext|>"
EOT2 = EOT + EOT

TRICKY = [
    "", " ", "  a", "a  ", "  ", "a\n\n\nb", "\r\n", "a\r\n\r\nb", "\t\tx\t", " " * 50 + "x", "x" + " " * 50,
    "I'll've", "we'd they're she's it'S 'll 've", "'", "''s", "don't stop", "HELLO'LL",
    "😀👍🏽 family: 👨‍👩‍👧‍👦", "中文字符测试，日本語テキスト", "e\u0301 combining à ñ", "١٢٣ ½ ² Ⅻ",
    "1234567890 3.14159 -42", "\u00a0nbsp\u2009thin\u3000ideographic", "\x00\x01\x1f\x7f\x85 control",
    "a\x0b\x0c b\x1c\x1d\x1e\x1f c",
    "<|endoftext|> is ordinary here", "Ġ ĉ Ċ", "x" * 1000, "=" * 300, "a\u2028b\u2029c",
]
LONG = ["9" * 5000, "".join(random.Random(7).choices(string.ascii_letters, k=20_000))]  # long pre-tokens


@pytest.fixture(scope="module")
def gpt2_files():
    files = (TOK_DIR / "gpt2_vocab.json", TOK_DIR / "gpt2_merges.txt")
    if not all(f.is_file() for f in files):
        pytest.skip(f"GPT-2 files not present under {TOK_DIR}")
    return files


@pytest.fixture(scope="module")
def gpt2(gpt2_files):
    return Tokenizer.from_files(*gpt2_files, special_tokens=[EOT])


@pytest.fixture(scope="module")
def gpt2_plain(gpt2_files):
    return Tokenizer.from_files(*gpt2_files)


@pytest.fixture(scope="module")
def tiktoken_gpt2(gpt2_files):
    pytest.importorskip("tiktoken")
    return build_tiktoken_gpt2(gpt2_files[0])


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A small tokenizer trained here, with overlapping special tokens."""
    rng = random.Random(0)
    words = ["the", "cat", "sat", "on", "mat", "we'll", "Zoë", "東京", "🙂", "42", "!!", "\n\n", "  "]
    text = EOT.join(" ".join(rng.choice(words) for _ in range(30)) for _ in range(100))
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text(text, encoding="utf-8")
    vocab, merges = train_bpe(path, 400, [EOT], num_workers=1)
    return Tokenizer(vocab, merges, special_tokens=[EOT, EOT2])


@pytest.mark.parametrize("name", ["corpus.en", "address.txt", "german.txt", "tinystories_sample.txt"])
def test_encode_matches_tiktoken_on_files(gpt2, tiktoken_gpt2, name):
    path = TOK_DIR / name
    if not path.is_file():
        pytest.skip(f"{path} not present")
    text = path.read_text(encoding="utf-8")
    ids = gpt2.encode(text)
    assert ids == tiktoken_gpt2.encode(text, allowed_special="all")
    assert gpt2.decode(ids) == text


@pytest.mark.parametrize("text", TRICKY + LONG)
def test_encode_matches_tiktoken_on_tricky_strings(gpt2_plain, tiktoken_gpt2, text):
    ids = gpt2_plain.encode(text)
    assert ids == tiktoken_gpt2.encode_ordinary(text)
    assert gpt2_plain.decode(ids) == text


def test_encode_matches_tiktoken_on_a_1mb_line(gpt2, tiktoken_gpt2):
    rng = random.Random(1)
    words = ["alpha", "beta", "γάμμα", "δέλτα", "123", "4.5", "!?", "it's", "naïve", "🙂"]
    line = " ".join(rng.choice(words) for _ in range(170_000))
    assert len(line.encode()) > 1_000_000 and "\n" not in line
    assert gpt2.encode(line) == tiktoken_gpt2.encode_ordinary(line)


def test_special_tokens_match_tiktoken(gpt2, tiktoken_gpt2):
    text = f"{EOT}Hello{EOT} world {EOT}{EOT}\n\n{EOT}<|endoftext|"
    ids = gpt2.encode(text)
    assert ids == tiktoken_gpt2.encode(text, allowed_special="all")
    assert ids.count(50256) == 5 and gpt2.special_token_ids == {EOT: 50256}
    assert gpt2.decode(ids) == text


def test_overlapping_special_tokens_longest_wins(trained):
    eot, eot2 = trained.special_token_ids[EOT], trained.special_token_ids[EOT2]
    text = f"a{EOT}{EOT}{EOT}b{EOT2}"
    ids = trained.encode(text)
    plain = Tokenizer(trained.vocab, trained.merges)  # knows no special tokens
    a, b = plain.encode("a"), plain.encode("b")
    assert ids == a + [eot2, eot] + b + [eot2]
    assert trained.decode(ids) == text


def test_decode_invalid_utf8_gives_replacement_char(gpt2):
    assert gpt2.decode([gpt2.token_to_id(b"\xff")]) == "\ufffd"
    ids = gpt2.encode("é")  # two bytes; decode the first alone
    first = gpt2.id_to_token(ids[0])[:1]
    assert gpt2.decode([gpt2.token_to_id(first)]) == "\ufffd"
    assert gpt2.decode([gpt2.token_to_id("a"), gpt2.token_to_id(b"\xc3"), gpt2.token_to_id("b")]) == "a\ufffdb"


def _iterable_cases():
    text = "".join(TRICKY) + f"a{EOT}b{EOT}{EOT}c<|end  we'll've\n\n\n {EOT}"
    return [text, "a\n\n\nb", "we'll", f"x{EOT2}{EOT}y"]


@pytest.mark.parametrize("which", ["gpt2", "trained"])
@pytest.mark.parametrize("stream_chars", [1, 7])
def test_encode_iterable_is_independent_of_chunking(request, monkeypatch, which, stream_chars):
    monkeypatch.setattr(encoder, "STREAM_CHARS", stream_chars)  # settle after (almost) every chunk
    tok = request.getfixturevalue(which)
    assert list(tok.encode_iterable(["a\n", "\n", "\nb"])) == tok.encode("a\n\n\nb")
    assert list(tok.encode_iterable(["we'l", "l"])) == tok.encode("we'll")
    assert list(tok.encode_iterable(["x<|endof", "text|><|endoftext|", ">y"])) == tok.encode(f"x{EOT2}y")
    rng = random.Random(0)
    for text in _iterable_cases():
        expected = tok.encode(text)
        assert list(tok.encode_iterable(text)) == expected  # one character at a time
        for _ in range(30):
            cuts = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, rng.randint(1, 12))))
            chunks = [text[i:j] for i, j in zip([0, *cuts], [*cuts, len(text)])]
            assert list(tok.encode_iterable(chunks)) == expected, chunks


def test_encode_iterable_over_file_matches_encode(gpt2):
    path = TOK_DIR / "corpus.en"
    if not path.is_file():
        pytest.skip(f"{path} not present")
    with open(path, encoding="utf-8") as fh:
        assert list(gpt2.encode_iterable(fh)) == gpt2.encode(path.read_text(encoding="utf-8"))


def test_encode_iterable_is_lazy_and_bounded(gpt2):
    pulled = 0

    def chunks(n):
        nonlocal pulled
        for i in range(n):
            pulled += 1
            assert pulled < 10**5, "encode_iterable reads the whole input before yielding"
            yield f"Story {i % 97}: the cat sat on the mat, and we'll see.\n\n"

    first = list(itertools.islice(gpt2.encode_iterable(chunks(10**9)), 50))
    assert pulled < 2 * STREAM_CHARS // 50  # chunks are ~50 chars: it read about one batch ahead
    pulled = 0
    assert first == gpt2.encode("".join(chunks(10)))[:50]
    gpt2.encode("".join(chunks(200)))  # warm the cache so it does not count below

    def peak_bytes(n_chunks):
        tracemalloc.start()
        try:
            n_ids = sum(1 for _ in gpt2.encode_iterable(chunks(n_chunks)))
            return n_ids, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    (few, small), (many, large) = peak_bytes(5_000), peak_bytes(40_000)  # ~0.3 MB and ~2.2 MB of text
    assert many > 8 * few * 0.9 and large < 1.2 * small and large < 1_000_000, (small, large)


def test_save_and_from_files_round_trip(tmp_path, trained):
    trained.save(tmp_path / "vocab.json", tmp_path / "merges.txt")
    loaded = Tokenizer.from_files(tmp_path / "vocab.json", tmp_path / "merges.txt", special_tokens=[EOT, EOT2])
    assert loaded.vocab == trained.vocab and loaded.merges == trained.merges
    assert loaded.special_token_ids == trained.special_token_ids
    text = "".join(TRICKY) + f"{EOT2}the cat{EOT}"
    assert loaded.encode(text) == trained.encode(text)


def test_save_reproduces_gpt2_files(tmp_path, gpt2_plain, gpt2_files):
    gpt2_plain.save(tmp_path / "vocab.json", tmp_path / "merges.txt")
    original = json.loads(gpt2_files[0].read_text(encoding="utf-8"))
    assert json.loads((tmp_path / "vocab.json").read_text(encoding="utf-8")) == original
    def merge_lines(path):
        return [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln and not ln.startswith("#")]

    assert merge_lines(tmp_path / "merges.txt") == merge_lines(gpt2_files[1])
    assert gpt2_plain.vocab_size == 50257


@pytest.mark.parametrize("which", ["gpt2", "trained"])
def test_hf_tokenizer_json_export_matches(tmp_path, request, which):
    tokenizers = pytest.importorskip("tokenizers")
    tok = request.getfixturevalue(which)
    tok.to_hf_json(tmp_path / "tokenizer.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    for text in [*TRICKY, *LONG, *_iterable_cases(), f"{EOT}{EOT}{EOT} the cat\n\n  sat{EOT2}"]:
        assert hf.encode(text).ids == tok.encode(text), text
        assert hf.decode(tok.encode(text), skip_special_tokens=False) == tok.decode(tok.encode(text))


def test_encode_batch_matches_encode(trained):
    texts = [t + EOT for t in TRICKY]
    assert trained.encode_batch(texts, num_workers=2) == [trained.encode(t) for t in texts]


def test_from_files_without_version_header(tmp_path, trained):
    trained.save(tmp_path / "vocab.json", tmp_path / "merges.txt")
    merges = (tmp_path / "merges.txt").read_text(encoding="utf-8").split("\n", 1)[1]
    (tmp_path / "merges.txt").write_text(merges, encoding="utf-8")
    assert Tokenizer.from_files(tmp_path / "vocab.json", tmp_path / "merges.txt").merges == trained.merges


def test_merges_decide_even_when_a_token_is_unreachable(tmp_path):
    # "abc" is in the vocab (ab + c), but merging b+c first (rank 0) means BPE never forms it;
    # GPT-2's merge loop (and HF with ignore_merges=false) give [a, bc], not a vocab lookup.
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"bc", 257: b"ab", 258: b"abc"}
    tok = Tokenizer(vocab, [(b"b", b"c"), (b"a", b"b"), (b"ab", b"c")])
    assert tok.encode("abc") == [ord("a"), 256] and tok.encode("abd") == [257, ord("d")]
    tokenizers = pytest.importorskip("tokenizers")
    tok.to_hf_json(tmp_path / "tokenizer.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert hf.encode("abc abd").ids == tok.encode("abc abd")
