"""Dedup: CS336's exact-line and MinHash file dedup on hand cases, normalization against a naive reference,
MinHash against datasketch and against Jaccard, LSH against 1 - (1 - s^r)^b, the stage against the sample
crawl's manifest, and hostile input."""

import gzip
import itertools
import json
import logging
import math
import random
import unicodedata

import numpy as np
import pytest

from pipeline.dedup.minhash import (
    EMPTY,
    MERSENNE,
    _apply_perms,
    band_keys,
    candidate_pairs,
    jaccard,
    lsh_probability,
    minhash_signatures,
    normalize_text,
    permutations,
    shingle_hash_set,
    shingle_set,
    verified_clusters,
)
from pipeline.dedup.records import text_fingerprint
from pipeline.dedup.stage import (
    DedupConfig,
    DedupStage,
    exact_line_deduplication,
    minhash_deduplication,
    near_duplicate_clusters,
    run_dedup,
)
from pipeline.sample.text import EnglishProse
from workbench.files import read_jsonl, write_jsonl

MIT = """Permission is hereby granted, free of charge, to any person obtaining a copy of this software and
associated documentation files (the "Software"), to deal in the Software without restriction, including without
limitation the rights to use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies of the
Software, and to permit persons to whom the Software is furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all copies or substantial portions
of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT NOT LIMITED
TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF
CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER
DEALINGS IN THE SOFTWARE.
"""


def prose(seed: int, paragraphs: int = 4) -> str:
    p = EnglishProse(random.Random(seed), ["Ada Byron", "Alan Kay"], ["Lyon", "Porto"], ["Acme"])
    return "\n\n".join(" ".join(p.paragraph()) for _ in range(paragraphs))


def edit(text: str, n_words: int, seed: int) -> str:
    """Replace ``n_words`` words at random places with new ones."""
    words, r = text.split(" "), random.Random(seed)
    for k, i in enumerate(r.sample(range(len(words)), n_words)):
        words[i] = f"zzedit{k}"
    return " ".join(words)


# -- CS336: exact line dedup -----------------------------------------------------------------------------
def test_exact_line_dedup_keeps_only_lines_unique_in_the_corpus(tmp_path):
    inputs = {"a.txt": b"header\nalpha\nshared\nbeta\n", "b.txt": b"header\ngamma\nshared",
              "c.txt": b"header\nshared\n", "d.txt": b"only here\n\xff\xfe raw bytes\n"}
    for name, data in inputs.items():
        (tmp_path / name).write_bytes(data)
    out = tmp_path / "out"
    exact_line_deduplication([tmp_path / n for n in inputs], out)
    # "shared" without its newline (end of b.txt) is the same line as "shared\n"
    assert (out / "a.txt").read_bytes() == b"alpha\nbeta\n"
    assert (out / "b.txt").read_bytes() == b"gamma\n"
    assert (out / "c.txt").read_bytes() == b""  # every line repeated elsewhere: an empty file
    assert (out / "d.txt").read_bytes() == inputs["d.txt"]  # nothing repeated: byte-identical
    assert sorted(p.name for p in out.iterdir()) == sorted(inputs)


def test_exact_line_dedup_reads_and_writes_gzip(tmp_path):
    for name, data in {"x.txt.gz": b"one\ntwo\n", "y.txt.gz": b"two\nthree\n"}.items():
        with gzip.open(tmp_path / name, "wb") as fh:
            fh.write(data)
    exact_line_deduplication([tmp_path / "x.txt.gz", tmp_path / "y.txt.gz"], tmp_path / "out")
    assert gzip.decompress((tmp_path / "out" / "x.txt.gz").read_bytes()) == b"one\n"
    assert gzip.decompress((tmp_path / "out" / "y.txt.gz").read_bytes()) == b"three\n"


def test_exact_line_dedup_refuses_two_inputs_with_one_name(tmp_path):
    for d in ("p", "q"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "doc.txt").write_text("x\n")
    with pytest.raises(ValueError, match="doc.txt"):
        exact_line_deduplication([tmp_path / "p" / "doc.txt", tmp_path / "q" / "doc.txt"], tmp_path / "out")


# -- CS336: MinHash file dedup ---------------------------------------------------------------------------
def test_minhash_dedup_clusters_an_edited_copy_and_keeps_a_different_doc(tmp_path):
    base = prose(1)
    docs = {"a.txt": base, "b.txt": edit(base, 3, seed=0), "c.txt": prose(2)}
    for name, text in docs.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    kept = minhash_deduplication([tmp_path / n for n in ("c.txt", "b.txt", "a.txt")], num_hashes=100, num_bands=10,
                                 ngrams=5, jaccard_threshold=0.8, output_directory=out)
    assert [p.name for p in kept] == ["a.txt", "c.txt"]  # a.txt: first of its cluster by sorted path
    assert sorted(p.name for p in out.iterdir()) == ["a.txt", "c.txt"]
    assert (out / "a.txt").read_bytes() == (tmp_path / "a.txt").read_bytes()
    assert (out / "c.txt").read_bytes() == (tmp_path / "c.txt").read_bytes()


def test_minhash_dedup_mit_licenses_differing_in_whitespace_and_attribution(tmp_path):
    """CS336's fuzzy-duplicate fixture, rebuilt: one license, two attributions, reflowed whitespace."""
    rails = "Copyright (c) David Heinemeier Hansson\n\n" + MIT
    react = "Copyright (c) Meta Platforms, Inc. and affiliates.\n\n" + "  ".join(MIT.split())
    files = {"rails_mit_license.txt": rails, "react_mit_license.txt": react, "story.txt": prose(3)}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    out = tmp_path / "out"
    minhash_deduplication([tmp_path / n for n in files], num_hashes=500, num_bands=50, ngrams=5,
                          jaccard_threshold=0.8, output_directory=out)
    assert sorted(p.name for p in out.iterdir()) == ["rails_mit_license.txt", "story.txt"]


def test_minhash_dedup_exact_copies_and_bad_band_count(tmp_path):
    for name in ("doc1.txt", "doc2.txt"):
        (tmp_path / name).write_text(MIT)
    (tmp_path / "doc3.txt").write_text("")
    (tmp_path / "doc4.txt").write_text("")  # no words: never a duplicate
    inputs = sorted(tmp_path.glob("*.txt"))
    minhash_deduplication(inputs, 100, 10, 5, 0.8, tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["doc1.txt", "doc3.txt", "doc4.txt"]
    with pytest.raises(ValueError, match="multiple of num_bands"):
        minhash_deduplication(inputs, 100, 7, 5, 0.8, tmp_path / "out2")


# -- normalization and shingles --------------------------------------------------------------------------
def naive_normalize(text: str) -> str:
    """Character by character, from the definition: lowercase, NFD, drop marks/punctuation/symbols/format
    characters and non-space controls, collapse whitespace, Han and kana characters one word each."""
    out = []
    for ch in unicodedata.normalize("NFD", text.lower()):
        cat = unicodedata.category(ch)
        if cat[0] in "MPS" or cat == "Cf" or (cat == "Cc" and not ch.isspace()):
            continue
        name = unicodedata.name(ch, "")
        out.append(f" {ch} " if name.startswith(("CJK", "HIRAGANA", "KATAKANA")) else ch)
    return " ".join("".join(out).split())


@pytest.mark.parametrize("text,expected", [
    ("Café Déjà-Vu!", "cafe dejavu"),
    ("  Hello,\tWORLD...\n\nit's   fine  ", "hello world its fine"),
    ("Ångström—naïve “quotes” ½ €5 #tag", "angstromnaive quotes ½ 5 tag"),  # deleted, not spaced
    ("東京は、晴れ。", "東 京 は 晴 れ"),  # each Han/kana character is a word; NFD drops the dakuten of "ば"-like kana
    ("", ""), ("!!! ... ???", ""),
])
def test_normalize_text_hand_cases(text, expected):
    assert normalize_text(text) == expected
    assert naive_normalize(text) == expected


def test_normalize_text_matches_naive_reference_on_random_strings():
    r = random.Random(0)
    alphabet = "abcXYZ09 \t\n.,;:!?'\"-_()[]{}/\\@#$%^&*+=<>|~`\x00\x07\x1béèüñçÅØßİıσΣ\u0301\u200b\u00ad日本カタ한"
    for _ in range(500):
        s = "".join(r.choice(alphabet) for _ in range(r.randint(0, 40)))
        assert normalize_text(s) == naive_normalize(s), repr(s)


def test_shingles_of_short_and_empty_texts():
    assert shingle_set("The quick brown fox jumps over", 5) == {"the quick brown fox jumps",
                                                                 "quick brown fox jumps over"}
    assert shingle_set("Hello, World!", 5) == {"hello world"}  # fewer words than n: the whole text, one shingle
    assert shingle_set("Word", 5) == {"word"}
    assert shingle_set(" ... ", 5) == set()
    assert len(shingle_hash_set("Hello, World!", 5)) == 1
    assert len(shingle_hash_set("", 5)) == 0
    sig = minhash_signatures(["", "!!!", "one"], num_hashes=8)
    assert (sig[:2] == EMPTY).all() and (sig[2] < MERSENNE).all()


def test_hashed_shingle_sets_give_the_string_sets_jaccard():
    r = random.Random(1)
    vocab = [f"w{i}" for i in range(30)]
    for _ in range(50):
        a = " ".join(r.choice(vocab) for _ in range(r.randint(1, 60)))
        b = " ".join(r.choice(vocab) for _ in range(r.randint(1, 60)))
        for n in (1, 3, 5):
            assert len(shingle_hash_set(a, n)) == len(shingle_set(a, n))
            assert jaccard(shingle_hash_set(a, n), shingle_hash_set(b, n)) == pytest.approx(
                jaccard(shingle_set(a, n), shingle_set(b, n)))


# -- MinHash and LSH math --------------------------------------------------------------------------------
def test_permutations_are_exact_modular_arithmetic():
    a, b = permutations(16, seed=3)
    x = np.array([0, 1, 2, MERSENNE - 1, MERSENNE - 2, *np.random.default_rng(0).integers(0, MERSENNE, 200)],
                 dtype=np.uint64)
    expected = [[(int(ai) * int(xi) + int(bi)) % MERSENNE for xi in x] for ai, bi in zip(a, b)]
    assert _apply_perms(a, b, x).tolist() == expected


def pair(words_each: int, shared: int, tag: str) -> tuple[str, str]:
    """Two texts of distinct one-word shingles with Jaccard shared / (2 * words_each - shared)."""
    common = [f"{tag}c{i}" for i in range(shared)]
    own = words_each - shared
    return (" ".join(common + [f"{tag}a{i}" for i in range(own)]),
            " ".join(common + [f"{tag}b{i}" for i in range(own)]))


@pytest.mark.parametrize("words_each,shared", [(60, 20), (100, 100), (75, 50), (55, 50)])  # J = 0.2, 1, 0.5, 0.83
def test_signature_collision_rate_matches_jaccard_and_datasketch(words_each, shared):
    datasketch = pytest.importorskip("datasketch")
    a, b = pair(words_each, shared, "p")
    true_j = jaccard(shingle_set(a, 1), shingle_set(b, 1))
    assert true_j == pytest.approx(shared / (2 * words_each - shared))
    h = 1024
    ours = minhash_signatures([a, b], num_hashes=h, ngrams=1, seed=5)
    est = float(np.mean(ours[0] == ours[1]))
    sigma = math.sqrt(true_j * (1 - true_j) / h)
    assert abs(est - true_j) <= 4 * sigma + 1e-9
    ms = [datasketch.MinHash(num_perm=h, seed=5) for _ in range(2)]
    for m, text in zip(ms, (a, b)):
        m.update_batch([s.encode() for s in shingle_set(text, 1)])
    assert abs(ms[0].jaccard(ms[1]) - true_j) <= 4 * sigma + 1e-9
    assert abs(est - ms[0].jaccard(ms[1])) <= 6 * sigma + 1e-9


def test_collision_rate_is_unbiased_over_many_pairs():
    """Mean of per-pair estimates over 100 pairs at J = 0.5: within 4 sigma of the binomial."""
    texts = [t for k in range(100) for t in pair(30, 20, f"q{k}x")]  # J = 20 / 40
    sig = minhash_signatures(texts, num_hashes=64, ngrams=1, seed=11)
    rates = (sig[0::2] == sig[1::2]).mean(axis=1)
    assert abs(rates.mean() - 0.5) <= 4 * math.sqrt(0.25 / (64 * 100))


@pytest.mark.parametrize("words_each,shared,s", [(35, 20, 0.4), (40, 30, 0.6), (45, 40, 0.8)])
def test_lsh_candidate_probability_matches_formula(words_each, shared, s):
    rows, bands, n_pairs = 5, 10, 300
    texts = [t for k in range(n_pairs) for t in pair(words_each, shared, f"s{k}x")]
    sig = minhash_signatures(texts, num_hashes=rows * bands, ngrams=1, seed=2)
    found = candidate_pairs(band_keys(sig, bands))
    rate = sum((2 * k, 2 * k + 1) in found for k in range(n_pairs)) / n_pairs
    expected = lsh_probability(s, rows, bands)
    assert abs(rate - expected) <= 4 * math.sqrt(expected * (1 - expected) / n_pairs) + 0.01
    assert all(j == i + 1 and i % 2 == 0 for i, j in found)  # no candidates across unrelated texts


def test_band_keys_agree_exactly_on_equal_bands():
    sig = np.arange(24, dtype=np.uint32).reshape(2, 12)
    sig[1, 4:8] = sig[0, 4:8]  # only band 1 (rows 4..7) is shared
    keys = band_keys(sig, 3)
    assert (keys[0] == keys[1]).tolist() == [False, True, False]
    with pytest.raises(ValueError, match="multiple"):
        band_keys(sig, 5)


def test_verified_clusters_are_connected_components_rooted_at_the_first_text():
    sets = {0: {1, 2, 3, 4, 5}, 1: {1, 2, 3, 4, 6}, 2: {1, 2, 3, 6, 7}, 3: {20, 21}, 4: {1, 2, 3, 4, 5}}
    # 0~1 (J 0.67), 1~2 (0.67), 0~2 only 0.43; 4 == 0; 3 is different. Every pair is a candidate here.
    keys = np.zeros((5, 1), dtype=np.uint64)
    arrays = {i: np.array(sorted(s), dtype=np.uint64) for i, s in sets.items()}
    roots = verified_clusters(keys, arrays.__getitem__, threshold=0.6)
    assert roots == [0, 0, 0, 3, 0]


def test_signatures_do_not_depend_on_workers_or_chunking():
    texts = [prose(k, 1) for k in range(40)] + ["", "x"]
    one = minhash_signatures(texts, num_hashes=32, ngrams=3, seed=1)
    assert np.array_equal(one, minhash_signatures(texts, num_hashes=32, ngrams=3, seed=1, workers=2, chunk_size=7))
    assert not np.array_equal(one, minhash_signatures(texts, num_hashes=32, ngrams=3, seed=2))


def test_near_duplicate_clusters_of_documents():
    base = prose(7)
    docs = [{"text": base}, {"text": prose(8)}, {"text": edit(base, 2, 1)}, {"text": base.upper() + "!"},
            {"text": ""}, {"text": "  "}]
    assert near_duplicate_clusters(docs, DedupConfig()) == [0, 1, 0, 0, 4, 5]


# -- the stage -------------------------------------------------------------------------------------------
def stage_docs() -> tuple[list[dict], list[dict]]:
    a, b = prose(20), prose(21)
    first = [{"id": "a", "text": a}, {"id": "b", "text": b}, {"id": "a-near", "text": edit(a, 3, 2)}]
    second = [{"id": "a-copy", "text": a.replace(".", "!").upper()}, {"id": "c", "text": prose(22)},
              {"id": "b-near", "text": edit(b, 2, 3)}, {"id": "b-copy", "text": b}]
    return first, second


def test_run_dedup_drops_exact_then_near_duplicates_across_files(tmp_path, caplog):
    first, second = stage_docs()
    inp = tmp_path / "docs"
    write_jsonl(inp / "p1.jsonl.gz", first)
    write_jsonl(inp / "p2.jsonl.gz", second)
    with gzip.open(inp / "p2.jsonl.gz", "at", encoding="utf-8") as fh:
        fh.write('{"id": "broken", "text": \n')
    with caplog.at_level(logging.WARNING):
        m = run_dedup(inp, tmp_path / "out", tmp_path / "m.json", DedupConfig(), rejected_dir=tmp_path / "rej")
    assert any("p2.jsonl.gz:5" in r.getMessage() for r in caplog.records)
    kept1 = list(read_jsonl(tmp_path / "out" / "p1.jsonl.gz"))
    kept2 = list(read_jsonl(tmp_path / "out" / "p2.jsonl.gz"))
    assert [(d["id"], d.get("minhash_cluster")) for d in kept1] == [("a", "a"), ("b", "b")]
    assert [(d["id"], d.get("minhash_cluster")) for d in kept2] == [("c", None)]
    rej = {d["id"]: d for f in ("p1.jsonl.gz", "p2.jsonl.gz") for d in read_jsonl(tmp_path / "rej" / f)}
    assert {k: (d["reason"], d["duplicate_of"], d.get("minhash_cluster")) for k, d in rej.items()} == {
        "a-near": ("minhash_duplicate", "a", "a"), "a-copy": ("exact_duplicate", "a", "a"),
        "b-near": ("minhash_duplicate", "b", "b"), "b-copy": ("exact_duplicate", "b", "b")}
    assert rej["a-copy"]["text"] == second[0]["text"]
    assert m["docs_in"] == 7 and m["docs_out"] == 3 and m["clusters"] == 2
    assert m["drops"] == {"bad_json": 1, "exact_duplicate": 2, "minhash_duplicate": 2}
    assert json.loads((tmp_path / "details" / "m.json").read_text()) == m


def test_run_dedup_is_idempotent_and_reruns_on_force_or_new_settings(tmp_path):
    first, second = stage_docs()
    write_jsonl(tmp_path / "p1.jsonl.gz", first)
    args = ([tmp_path / "p1.jsonl.gz"], tmp_path / "out", tmp_path / "m.json")
    m1 = run_dedup(*args)
    out = tmp_path / "out" / "p1.jsonl.gz"
    stamp, data = out.stat().st_mtime_ns, out.read_bytes()
    skipped = run_dedup(*args)
    assert out.stat().st_mtime_ns == stamp and skipped["seconds"] == 0.0  # skipped: nothing ran
    timings = DedupStage.timings
    assert {k: v for k, v in skipped.items() if k not in timings} == {k: v for k, v in m1.items() if k not in timings}
    run_dedup(*args, force=True)
    assert out.stat().st_mtime_ns != stamp and out.read_bytes() == data  # redone, byte for byte
    stamp = out.stat().st_mtime_ns
    m3 = run_dedup(*args, cfg=DedupConfig(jaccard_threshold=0.99))  # settings changed: redone
    assert out.stat().st_mtime_ns != stamp and m3["drops"] == {}
    assert out.read_bytes() != b""


@pytest.mark.parametrize("field,value", [("num_bands", 15), ("ngrams", 0), ("jaccard_threshold", 1.5),
                                         ("workers", 0), ("exact", "yes")])
def test_config_names_the_bad_field(field, value):
    with pytest.raises(ValueError, match=f"dedup.{field}"):
        DedupConfig(**{field: value})


def test_stage_matches_the_sample_crawl_manifest(sample_crawl, tmp_path):
    """Pairs of surviving pages that share an original (manifest duplicate_of / near_duplicate_of) must share
    a cluster: pairwise recall >= 0.95, precision >= 0.99."""
    m = run_dedup(sample_crawl.documents, tmp_path / "out", tmp_path / "m.json", DedupConfig(),
                  rejected_dir=tmp_path / "rej")
    name = sample_crawl.documents.name
    cluster = {d["id"]: d.get("minhash_cluster", d["id"]) for d in read_jsonl(tmp_path / "out" / name)}
    for d in read_jsonl(tmp_path / "rej" / name):
        cluster[d["id"]] = d.get("minhash_cluster") or d["duplicate_of"]
    assert len(cluster) == len(sample_crawl.docs) == m["docs_in"]
    man = sample_crawl.manifest

    def original(i):
        return man[i]["duplicate_of"] or man[i]["near_duplicate_of"] or i

    tp = fp = fn = 0
    for x, y in itertools.combinations(sorted(cluster), 2):
        truth, pred = original(x) == original(y), cluster[x] == cluster[y]
        tp, fp, fn = tp + (truth and pred), fp + (pred and not truth), fn + (truth and not pred)
    assert tp + fn >= 60  # the crawl has exact and near duplicates that survived extraction
    assert tp / (tp + fn) >= 0.95
    assert tp / (tp + fp) >= 0.99
    exact = sum(bool(man[d["id"]]["duplicate_of"]) for d in sample_crawl.docs)
    assert m["drops"]["exact_duplicate"] == exact


# -- hostile input ---------------------------------------------------------------------------------------
def test_hostile_texts_never_crash(tmp_path):
    big = ("lorem ipsum dolor sit amet consectetur " * 270_000)[:10_000_000]  # 10 MB, one line
    texts = ["", "   \n\t ", "\x00\x01\xff\ufffe binary \x7f junk", "bad \udcff surrogate \ud800", "one",
             "\u200b\u00ad", big, big[:5_000_000] + " tail"]
    sig = minhash_signatures(texts, num_hashes=16, ngrams=5)
    assert sig.shape == (len(texts), 16)
    assert text_fingerprint("a \ud800") != 0 and text_fingerprint("\u200b") == 0
    docs = [{"id": str(i), "text": t} for i, t in enumerate(texts)]
    with open(tmp_path / "in.jsonl", "wb") as fh:  # plain JSONL; lone surrogates as \\udcxx escapes
        fh.write("".join(json.dumps(d) + "\n" for d in docs[:6]).encode())
        fh.write(b"\xff\xfe not json\n[1, 2]\n{\"id\": \"no-text\"}\n\n")
    m = run_dedup(tmp_path / "in.jsonl", tmp_path / "out", tmp_path / "m.json", rejected_dir=tmp_path / "rej")
    assert m["docs_in"] == 6 and m["drops"]["bad_json"] == 3
    assert len(list(read_jsonl(tmp_path / "out" / "in.jsonl"))) == 6 - m["drops"].get("exact_duplicate", 0)
    write_jsonl(tmp_path / "empty" / "none.jsonl.gz", [])
    m = run_dedup(tmp_path / "empty", tmp_path / "out2", tmp_path / "m2.json")
    assert m["docs_in"] == m["docs_out"] == 0 and (tmp_path / "out2" / "none.jsonl.gz").exists()
    assert near_duplicate_clusters([]) == [] and minhash_deduplication([], 8, 2, 5, 0.8, tmp_path / "o") == []
    roots = near_duplicate_clusters(docs[:6] + docs[:6], DedupConfig())
    assert roots == list(range(6)) + [6, 7, 2, 3, 4, 11]  # copies join their first, unless wordless


def test_a_bucket_of_unrelated_texts_costs_at_most_max_tries_per_text():
    keys = np.zeros((300, 1), dtype=np.uint64)  # every text shares the one band: one bucket of 300
    arrays = [np.array([i], dtype=np.uint64) for i in range(300)]  # all pairwise Jaccard 0
    stats = {}
    roots = verified_clusters(keys, arrays.__getitem__, 0.8, stats=stats, max_tries=10)
    assert roots == list(range(300))
    assert stats["comparisons"] <= 300 * 10


def test_line_dedup_first_drops_lines_seen_in_earlier_kept_documents(tmp_path):
    docs = [{"id": "a", "text": "Share this post!\nAlpha body one.\n\nCookies keep us going."},
            {"id": "b", "text": "SHARE THIS POST\nBeta body two.\nBeta body two.\n\ncookies keep us going"},
            {"id": "c", "text": "Share this post.\nCookies keep us going!"}]
    write_jsonl(tmp_path / "in.jsonl.gz", docs)
    m = run_dedup(tmp_path / "in.jsonl.gz", tmp_path / "out", tmp_path / "m.json",
                  DedupConfig(line_dedup="first"), rejected_dir=tmp_path / "rej")
    kept = {d["id"]: d["text"] for d in read_jsonl(tmp_path / "out" / "in.jsonl.gz")}
    # a line repeated inside one document stays: only lines of *earlier* documents count
    assert kept == {"a": docs[0]["text"], "b": "Beta body two.\nBeta body two.\n"}
    assert [(d["id"], d["reason"]) for d in read_jsonl(tmp_path / "rej" / "in.jsonl.gz")] == [
        ("c", "line_dedup_empty")]
    assert m["lines_removed"] == 2 + 2 and m["drops"] == {"line_dedup_empty": 1}
    with pytest.raises(ValueError, match="dedup.line_dedup"):
        DedupConfig(line_dedup="all")


def test_two_runs_write_the_same_bytes_including_the_marker(tmp_path):
    """The stage's outputs are a DVC output: the kept file and the completion marker must not change between
    runs of the same input (timings stay in the metrics, out of out_dir)."""
    src = tmp_path / "in.jsonl"
    write_jsonl(src, [{"id": f"d{i}", "text": f"document number {i % 7} " * 30} for i in range(40)])
    trees, out = [], tmp_path / "out"
    for force in (False, True):  # the second run redoes everything in the same place
        metrics = run_dedup(src, out / "kept", out / "m.json", rejected_dir=out / "rejected", force=force)
        assert metrics["seconds"] > 0
        trees.append({str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
                      if p.is_file() and p.name != "m.json" and p.parent.name != "details"})
    assert trees[0] == trees[1] and any("_done" in k for k in trees[0])
