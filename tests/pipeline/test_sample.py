"""The generated sample crawl: deterministic bytes, a WARC FastWARC reads, and a manifest that tells the truth."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from collections import Counter

import pytest

pytest.importorskip("faker")
warc = pytest.importorskip("fastwarc.warc")

from pipeline.sample.crawl import BROKEN, LANGS, LOW_QUALITY, generate_sample, main  # noqa: E402

COOKIE = "We use cookies to improve your experience"


def _generate(tmp_path, pages, seed):
    w, m = tmp_path / "sample.warc.gz", tmp_path / "manifest.jsonl"
    summary = generate_sample(w, m, pages=pages, seed=seed)
    manifest = [json.loads(line) for line in m.read_text(encoding="utf-8").splitlines()]
    return w, m, manifest, summary


def _responses(path) -> dict[str, tuple]:
    """record id -> (WARC headers, HTTP headers, payload bytes) for every response record."""
    out = {}
    with open(path, "rb") as fh:
        for rec in warc.ArchiveIterator(fh, record_types=warc.WarcRecordType.response, parse_http=True):
            out[rec.headers["WARC-Record-ID"]] = (dict(rec.headers), rec.http_headers, rec.reader.read())
    return out


def _decode(body: bytes, m: dict) -> str:
    return body.decode(m["charset"])


def _article_text(page: str) -> str:
    """Plain text of the <article> element: tags stripped, entities unescaped."""
    inner = re.search(r"<article.*?</article>", page, re.S).group(0)
    return html.unescape(re.sub(r"<[^>]+>", " ", inner))


def _shingles(text: str, n: int = 5) -> set[tuple[str, ...]]:
    words = text.lower().split()
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return _generate(tmp_path_factory.mktemp("small"), 300, 0)


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    path, _, manifest, summary = _generate(tmp_path_factory.mktemp("big"), 3000, 0)
    return manifest, _responses(path), summary


def test_same_seed_gives_same_bytes_and_other_seed_differs(small, tmp_path):
    w0, m0, _, _ = small
    w1, m1, _, _ = _generate(tmp_path / "again", 300, 0)
    assert w1.read_bytes() == w0.read_bytes()
    assert m1.read_bytes() == m0.read_bytes()
    w2, m2, _, _ = _generate(tmp_path / "other", 300, 1)
    assert w2.read_bytes() != w0.read_bytes()
    assert m2.read_bytes() != m0.read_bytes()


def test_warc_parses_with_fastwarc_and_digests_verify(small):
    path, _, manifest, summary = small
    types, ids, requests, info_id = Counter(), set(), set(), None
    with open(path, "rb") as fh:
        for rec in warc.ArchiveIterator(fh, parse_http=False):
            h = rec.headers
            types[h["WARC-Type"]] += 1
            assert re.fullmatch(r"<urn:uuid:[0-9a-f-]{36}>", h["WARC-Record-ID"])
            assert re.fullmatch(r"202[45]-\d\d-\d\dT\d\d:\d\d:\d\dZ", h["WARC-Date"])
            assert rec.verify_block_digest(consume=False), h["WARC-Record-ID"]
            block = rec.reader.read()
            assert len(block) == int(h["Content-Length"]) == rec.content_length
            if h["WARC-Type"] == "warcinfo":
                info_id = h["WARC-Record-ID"]
            elif h["WARC-Type"] == "request":
                requests.add(h["WARC-Record-ID"])
                assert block.startswith(b"GET /") and h["WARC-Warcinfo-ID"] == info_id
            elif h["WARC-Type"] == "response":
                ids.add(h["WARC-Record-ID"])
                assert h["Content-Type"] == "application/http; msgtype=response"
                assert h["WARC-Concurrent-To"] in requests and h["WARC-Warcinfo-ID"] == info_id
                assert h["WARC-Payload-Digest"].startswith("sha1:") and h["WARC-IP-Address"]
    assert types["warcinfo"] == 1 and types["request"] == types["response"] == 300
    assert sum(types.values()) == summary["records"]
    assert ids == {m["record_id"] for m in manifest} and len(manifest) == 300

    with open(path, "rb") as fh:
        for rec in warc.ArchiveIterator(fh, record_types=warc.WarcRecordType.response, parse_http=True):
            assert rec.verify_payload_digest(consume=False)
            http, body = rec.http_headers, rec.reader.read()
            assert int(http["Content-Length"]) == len(body)
            m = next(x for x in manifest if x["record_id"] == rec.headers["WARC-Record-ID"])
            assert http.status_code == m["status"] and http["Content-Type"] == m["content_type"]
            assert rec.headers["WARC-Target-URI"] == m["url"]


def test_mix_proportions_on_3000_pages(big):
    manifest, _, summary = big
    n = len(manifest)
    share = lambda k: k / n  # noqa: E731
    langs = Counter(m["lang"] for m in manifest)
    assert 0.62 < share(langs["en"]) < 0.80
    assert all(langs[lang] >= 10 for lang in LANGS), langs
    low = Counter(m["low_quality_kind"] for m in manifest if m["low_quality_kind"])
    assert set(low) == set(LOW_QUALITY) and 0.11 < share(sum(low.values())) < 0.20
    assert 0.03 < share(summary["toxic"]) < 0.08
    assert 0.15 < share(summary["pii"]) < 0.26
    assert 0.03 < share(summary["duplicates"]) < 0.07
    assert 0.03 < share(summary["near_duplicates"]) < 0.07
    broken = Counter(m["broken"] for m in manifest if m["broken"])
    assert set(broken) == set(BROKEN) and 0.015 < share(sum(broken.values())) < 0.05
    pii_types = Counter(p["type"] for m in manifest for p in m["pii"])
    assert set(pii_types) == {"email", "phone", "ip"}
    charsets = {m["charset"] for m in manifest}
    assert {"utf-8", "windows-1251", "shift_jis", "euc-jp", "koi8-r", "iso-8859-1", "windows-1252"} <= charsets
    assert {"gb2312", "gbk"} & charsets
    assert any(m["declared_charset"] is None and m["meta_charset"] for m in manifest)  # <meta> only


def test_planted_pii_appears_verbatim(big):
    manifest, responses, _ = big
    for m in manifest:
        if m["pii"]:
            text = _decode(responses[m["record_id"]][2], m)
            for item in m["pii"]:
                assert item["value"] in text, (m["record_id"], item)


def test_pii_lookalikes_are_planted_verbatim_and_are_not_pii(big):
    """Versions, builds, dates, times, prices, ISBNs and order numbers on ~18% of pages, recorded per page."""
    manifest, responses, summary = big
    assert all(isinstance(m["pii_lookalikes"], list) for m in manifest)
    pages = [m for m in manifest if m["pii_lookalikes"]]
    assert 0.10 < len(pages) / len(manifest) < 0.30 and summary["pii_lookalikes"] == len(pages)
    values = [v for m in pages for v in m["pii_lookalikes"]]
    shapes = {"iso date": r"\d{4}-\d\d-\d\d", "us date": r"\d\d/\d\d/\d{4}", "eu date": r"\d\d\.\d\d\.\d{4}",
              "version": r"v\d+\.\d+\.\d+", "five-part version": r"\d(?:\.\d){4}", "build": r"\d+\.\d\.\d{3,5}\.\d+",
              "time": r"\d\d:\d\d(?::\d\d)?", "price": r"[$€][\d,.]+", "isbn-13": r"97[89]-?\d[\d-]{9,14}\d",
              "order": r"#?\d{5,9}|#?\d{11,14}|\d{3}-\d{7}-\d{7}"}
    missing = [k for k, rx in shapes.items() if not any(re.fullmatch(rx, v) for v in values)]
    assert not missing, missing
    assert not any("@" in v for v in values)
    for m in pages:
        assert m["lang"] == "en" and all(p["value"] not in m["pii_lookalikes"] for p in m["pii"])
        if m["broken"] != "truncated_html":
            text = html.unescape(_decode(responses[m["record_id"]][2], m))  # € is &#8364; in latin-1 pages
            assert all(v in text for v in m["pii_lookalikes"]), m["record_id"]


def test_exact_duplicates_have_identical_payloads_at_other_urls(big):
    manifest, responses, _ = big
    order = {m["record_id"]: i for i, m in enumerate(manifest)}
    by_id = {m["record_id"]: m for m in manifest}
    dups = [m for m in manifest if m["duplicate_of"]]
    assert dups
    for m in dups:
        orig = by_id[m["duplicate_of"]]
        assert order[orig["record_id"]] < order[m["record_id"]] and orig["url"] != m["url"]
        assert responses[m["record_id"]][2] == responses[orig["record_id"]][2]
        assert orig["duplicate_of"] is None


def test_near_duplicates_share_most_shingles_but_differ(big):
    manifest, responses, _ = big
    by_id = {m["record_id"]: m for m in manifest}
    scores = []
    for m in manifest:
        if m["near_duplicate_of"]:
            orig = by_id[m["near_duplicate_of"]]
            a = _shingles(_article_text(_decode(responses[m["record_id"]][2], m)))
            b = _shingles(_article_text(_decode(responses[orig["record_id"]][2], orig)))
            scores.append(len(a & b) / len(a | b))
    assert scores and all(0.6 < s < 1.0 for s in scores), min(scores)
    assert sum(scores) / len(scores) > 0.75


def test_declared_charsets_decode_payloads(big):
    manifest, responses, _ = big
    seen_bad = 0
    for m in manifest:
        body = responses[m["record_id"]][2]
        label = m["declared_charset"] or m["meta_charset"]
        if not body or not m["content_type"].startswith("text/html"):
            continue
        assert label, m
        if m["broken"] == "bad_charset":
            seen_bad += 1
            try:
                assert body.decode(label) != body.decode(m["charset"], "replace")
            except UnicodeDecodeError:
                pass
            continue
        text = body.decode(label)  # strict
        assert text == body.decode(m["charset"])
        if m["meta_charset"]:
            assert f"charset={m['meta_charset']}" in text or f'charset="{m["meta_charset"]}"' in text
    assert seen_bad


def test_truncated_and_non_html_records(big):
    manifest, responses, _ = big
    for m in manifest:
        body = responses[m["record_id"]][2]
        if m["broken"] == "truncated_html":
            assert not body.rstrip().endswith(b"</html>") and body[body.rindex(b"<"):].find(b">") == -1
        elif m["broken"] == "non_html":
            assert not m["content_type"].startswith("text/") and body
        elif m["broken"] == "empty_body":
            assert body == b""
        elif m["broken"] == "http_301":
            assert m["status"] == 301 and responses[m["record_id"]][1]["Location"].startswith("http")
        elif m["broken"] == "http_404":
            assert m["status"] == 404


def test_trafilatura_extracts_article_not_cookie_banner(small):
    trafilatura = pytest.importorskip("trafilatura")
    path, _, manifest, _ = small
    responses = _responses(path)
    pages = [m for m in manifest if m["lang"] == "en" and m["page_type"] == "article" and m["quality"] == "high"
             and not m["duplicate_of"] and not m["near_duplicate_of"]][:5]
    assert pages
    for m in pages:
        page = _decode(responses[m["record_id"]][2], m)
        assert COOKIE in page
        extracted = trafilatura.extract(page)
        first_p = html.unescape(re.search(r"<article.*?<p>(.*?)</p>", page, re.S).group(1))
        sentence = re.split(r"(?<=[.?!])\s", first_p)[0]
        assert sentence in extracted
        assert COOKIE not in extracted


def test_high_quality_english_passes_gopher_rules(big):
    """The Gopher quality rules (Rae et al. 2021, app. A) on the article text of high-quality English pages."""
    manifest, responses, _ = big
    stop = {"the", "be", "to", "of", "and", "that", "have", "with"}
    pages = [m for m in manifest if m["lang"] == "en" and m["page_type"] == "article" and m["quality"] == "high"]
    assert len(pages) > 1000
    for m in pages:
        text = _article_text(_decode(responses[m["record_id"]][2], m))
        words = text.split()
        lines = [x for x in text.splitlines() if x.strip()]
        assert len(words) >= 50
        assert 3 <= sum(map(len, words)) / len(words) <= 10
        assert sum(x.rstrip().endswith(("...", "…")) for x in lines) / len(lines) < 0.1
        assert sum(x.lstrip().startswith(("•", "-", "*")) for x in lines) / len(lines) < 0.3
        assert sum(any(c.isalpha() for c in w) for w in words) / len(words) >= 0.8
        assert len(stop & {w.lower().strip(".,?!\"") for w in words}) >= 2


def test_english_prose_is_diverse(big):
    manifest, responses, _ = big
    sentences, vocab = [], set()
    for m in manifest:
        if m["lang"] == "en" and m["page_type"] == "article" and m["quality"] == "high" and not (
                m["duplicate_of"] or m["near_duplicate_of"]):
            page = _decode(responses[m["record_id"]][2], m)
            for p in re.findall(r"<p>(.*?)</p>", re.search(r"<article.*?</article>", page, re.S).group(0)):
                for s in re.split(r"(?<=[.?!])\s+", html.unescape(p)):
                    sentences.append(s)
                    vocab.update(w.lower() for w in re.findall(r"[A-Za-z']+", s))
    assert len(sentences) > 20000
    assert len(set(sentences)) / len(sentences) > 0.9
    assert len(vocab) > 1500


def test_cli_writes_files_and_rejects_bad_usage(tmp_path, capsys):
    out, manifest = tmp_path / "s.warc.gz", tmp_path / "m.jsonl"
    assert main(["--out", str(out), "--manifest", str(manifest), "--pages", "20", "--seed", "3"]) == 0
    assert out.exists() and len(manifest.read_text().splitlines()) == 20
    assert "20 pages" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        main(["--pages", "0"])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    help_text = capsys.readouterr().out
    assert all(flag in help_text for flag in ("--out", "--manifest", "--pages", "--seed"))
    with pytest.raises(ValueError, match="pages"):
        generate_sample(out, manifest, pages=0)


def test_bytes_do_not_depend_on_python_hash_seed(tmp_path):
    """Sets and str hashes vary per process; a fresh process with another PYTHONHASHSEED must agree."""
    digests = []
    for hash_seed in ("1", "2"):
        out = tmp_path / hash_seed
        subprocess.run([sys.executable, "-m", "pipeline.sample.crawl", "--out", str(out / "s.warc.gz"), "--manifest",
                        str(out / "m.jsonl"), "--pages", "150", "--seed", "5"], check=True, capture_output=True,
                       env={**os.environ, "PYTHONHASHSEED": hash_seed})
        digests.append(((out / "s.warc.gz").read_bytes(), (out / "m.jsonl").read_bytes()))
    assert digests[0] == digests[1]
