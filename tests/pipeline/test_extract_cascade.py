"""The cascade extractor: the lexbor pre-pass, main text kept and boilerplate dropped, the fallback to full
trafilatura, the time limit."""

import logging
import time
from collections import Counter
from pathlib import Path

import pytest

import pipeline.web.extract as extract
from pipeline.web.extract import ExtractConfig, main_text
from pipeline.web.extract_cascade import fast_text, needs_fallback, prune_html
from pipeline.web.warc import Payload, iter_payloads
from tests.pipeline.warcs import PROSE, page

SHARED_WEB = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "web"

ARTICLE = ["The river rose for three days before the village council decided to open the old flood gates, "
           "a decision nobody living had seen made before.",
           "Engineers from the county walked the embankment every morning, marking the soft places with "
           "orange paint and writing the water level on a board outside the school.",
           "By the fourth day the water had fallen by a metre, and the farmers began to count what the "
           "fields had lost and what, against every expectation, they had kept."]

NEWS_PAGE = f"""<html><head><title>Flood</title><style>p {{color: red}}</style></head><body>
<header><a href="/">Daily Valley</a> <a href="/news">News</a> <a href="/sport">Sport</a></header>
<nav><ul><li><a href="/a">Politics</a></li><li><a href="/b">Weather</a></li><li><a href="/c">Archive</a></li></ul></nav>
<main><article>
  <header><h1>The week the river rose</h1><p class="byline">Kept header line: reported by Ana Ortiz</p></header>
  {"".join(f"<p>{p}</p>" for p in ARTICLE)}
  <aside><p>Kept aside: the gates were last opened in 1953, when the valley had a third of its people.</p></aside>
</article></main>
<aside><h3>Most read</h3><a href="/x">Ten recipes for leftover bread you must try</a></aside>
<div hidden><p>Hidden teaser: subscribe now and save forty percent on your first year.</p></div>
<div id="comments"><p>Reader comment: first! this is the best article I have read all week honestly.</p></div>
<footer>Copyright 2024 Daily Valley Media. All rights reserved. Privacy policy. Imprint.</footer>
<script>var tracking = "do not extract me";</script>
</body></html>"""


def test_prune_keeps_article_headers_and_asides_and_drops_boilerplate():
    pruned, page_chars = prune_html(NEWS_PAGE)
    assert all(p in pruned for p in ARTICLE)
    assert "Kept header line" in pruned and "Kept aside" in pruned
    for gone in ("Daily Valley</a>", "Politics", "Most read", "Hidden teaser", "Reader comment", "All rights reserved",
                 "do not extract me", "color: red"):
        assert gone not in pruned, gone
    assert page_chars > sum(map(len, ARTICLE))  # the page's text before pruning, scripts and styles aside


def test_cascade_keeps_main_text_and_drops_nav_footer_comments():
    text = main_text(NEWS_PAGE, "cascade")
    assert all(p in text for p in ARTICLE)
    assert "The week the river rose" in text
    for gone in ("Politics", "Most read", "Hidden teaser", "Reader comment", "All rights reserved", "do not extract"):
        assert gone not in text, gone


def test_cascade_on_the_shared_test_page():
    text = extract.extract_text(page("The Lighthouse Keeper", PROSE), "cascade")
    assert PROSE[0] in text and PROSE[2] in text
    assert "We use cookies" not in text and "All rights reserved" not in text


def test_a_short_result_goes_to_full_trafilatura(monkeypatch):
    short = "<html><body><nav><a href='/'>Home</a></nav><div><p>Closed on Sunday.</p></div></body></html>"
    assert needs_fallback(*fast_text(short))
    calls = []
    real = extract.main_text
    monkeypatch.setattr(extract, "main_text", lambda html, extractor="trafilatura": calls.append(extractor)
                        or real(html, extractor))
    assert real(short, "cascade") == real(short, "trafilatura")
    assert calls == ["trafilatura"]  # the cascade called full trafilatura


def test_needs_fallback_rules():
    assert needs_fallback("x" * 199, 300)  # short
    assert needs_fallback("x" * 500, 10_000)  # 5% of the page
    assert not needs_fallback("x" * 1_500, 10_000)


@pytest.mark.skipif(not SHARED_WEB.is_dir(), reason="../shared/data/web not present")
def test_routed_real_pages_get_exactly_trafilatura():
    logging.getLogger("trafilatura").setLevel(logging.CRITICAL)
    payloads = list(iter_payloads(SHARED_WEB / "trafilatura-pages-00.warc.gz", Counter()))[:60]
    routed = 0
    for p in payloads:
        html = extract.decode_html(p.body, p.charset)
        if html is None or not needs_fallback(*fast_text(html)):
            continue
        routed += 1
        assert main_text(html, "cascade") == main_text(html, "trafilatura"), p.url
    assert routed >= 3  # the sample does exercise the fallback


def _payload(body: bytes) -> Payload:
    return Payload("<urn:uuid:1>", "http://a.example/", "2024-05-01T12:00:00Z", "html", body, None)


def test_a_slow_cascade_hits_the_time_limit(monkeypatch):
    monkeypatch.setattr(extract, "fast_text", lambda html: time.sleep(2))
    extract._init_worker(ExtractConfig(extractor="cascade", timeout_s=0.05))
    start = time.perf_counter()
    assert extract._extract_one(_payload(page("Slow", PROSE))) == "extract_timeout"
    assert time.perf_counter() - start < 1.0
