"""bench.benchmarks.gopher_words and bench.benchmarks.pii on hand-made documents: what they count and list (the real
pages are in tests/pipeline/test_quality_rules.py and docs/benchmarks/data-quality.md)."""

from bench.benchmarks.gopher_words import BAD_PAGES, measure, report
from bench.benchmarks.pii import phone_masks

PROSE = "The cat sat. The dog ran, and the bird flew! " * 6  # whitespace words all alphabetic; 10 of 13 tokens
NUMBERS = " ".join(f"{d:02d}" for d in range(1, 60))  # no word with a letter


def test_gopher_words_counts_each_definition():
    bad_url = next(iter(BAD_PAGES))
    docs = [{"id": "a", "url": "https://example.org/a", "warc": "trafilatura-pages-00.warc.gz", "text": PROSE},
            {"id": "b", "url": bad_url, "warc": "cc.warc.gz", "text": NUMBERS}]
    m = measure(docs)
    assert (m["docs"], m["english"], m["english_eval"], m["bad"]) == (2, 1, 1, 1)
    assert (m["paper"]["english"], m["paper"]["gopher_step"], m["paper"]["bad"]) == (0, 0, 1)
    assert (m["datatrove"]["english"], m["datatrove"]["english_eval"], m["datatrove"]["bad"]) == (1, 1, 1)
    assert m["datatrove"]["dropped"] == [("https://example.org/a", 1.0, 10 / 13)]
    text = report(m)
    assert "paper" in text and "1.000 / 0.769  https://example.org/a" in text


def test_phone_masks_lists_each_mask_in_its_context():
    docs = [{"url": "u", "text": "Call 030 1234567 now. Days 01 02 03 04 05 06. ISBN-10: 3942795116"}]
    assert phone_masks(docs, context=5) == [("u", "030 1234567", "Call [030 1234567] now.")]
