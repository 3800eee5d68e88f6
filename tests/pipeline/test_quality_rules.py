"""Gopher quality, Gopher repetition and C4 line filters: one hand-written doc per rule (datatrove's
tests/pipeline/filters style), agreement with datatrove's filters and spaCy's tokens (the reference), the generated
crawl's ground truth, the alphabetic-word rule's two definitions (hand-counted, and on real pages), and bad input."""

import csv
import json
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from pipeline.filters.quality_rules import (
    C4LineFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
    alpha_words_ratio,
    gopher_quality_filter,
)
from pipeline.filters.words import count_sentences, words
from pipeline.runtime.steps import run_steps

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"

PROSE = ("The keeper of the lighthouse climbed the spiral stairs every evening and counted each step on the way up. "
         "From the lamp room he could see the harbour, the fishing boats and the long grey line of the sea. "
         "He wrote the weather in a small notebook, and he trimmed the wick with great care before the sun went "
         "down. In winter the storms came from the north, and the whole tower shook with the wind.")
FILLER = " ".join(f"w{i:03d}x" for i in range(120))  # 120 distinct words, no repeats


def reject(step, text):
    return step.reject({"id": "t", "url": "u", "text": text})


# -- Gopher quality: one doc per rule ---------------------------------------------------------------------------
GOPHER_CASES = [
    ("Hello world, this is short.", "gopher_short_doc"),
    ("word " * 100_001, "gopher_long_doc"),
    ("to be an it is of " * 12, "gopher_below_avg_threshold"),
    ("internationalization characteristically " * 30, "gopher_above_avg_threshold"),
    ("the #market and #trade " * 20, "gopher_too_many_hashes"),
    ("the market and trade... " * 20, "gopher_too_many_ellipsis"),
    ("- the market and the trade of goods\n" * 12, "gopher_too_many_bullets"),
    ("The market and the trade of goods went on through the long afternoon and…\n" * 6,
     "gopher_too_many_end_ellipsis"),
    ("the 2024 and 31337 4242 9000 1234 5678 " * 10, "gopher_below_alpha_threshold"),
    ("Market traders sold apples and pears and cheese and bread in town every morning. " * 6,
     "gopher_enough_stop_words"),
]


@pytest.mark.parametrize("text,reason", GOPHER_CASES)
def test_gopher_quality_rule_reasons(text, reason):
    assert reject(GopherQualityFilter(), text) == reason


def test_gopher_quality_keeps_prose_and_counts_like_datatrove():
    assert reject(GopherQualityFilter(), PROSE) is None
    # punctuation tokens are not words for the word count: 49 words plus "." is still short
    assert reject(GopherQualityFilter(), " ".join(["apple"] * 47 + ["the", "and."])) == "gopher_short_doc"
    # stop words are case-sensitive, as in datatrove: "The" and "And" do not count
    upper = ("The market And " * 20).strip() + "."
    assert reject(GopherQualityFilter(), upper) == "gopher_enough_stop_words"
    assert reject(GopherQualityFilter(min_stop_words=None), upper) is None


def test_gopher_quality_filter_assignment_rules():
    assert gopher_quality_filter(PROSE)
    assert not gopher_quality_filter("Too short to keep.")
    assert not gopher_quality_filter("to be an it is of " * 12)  # mean word length < 3
    assert not gopher_quality_filter("internationalization " * 60)  # mean word length > 10
    assert not gopher_quality_filter("A line that trails off into the distance and never ends…\n" * 9)
    assert not gopher_quality_filter("42 17 99 " * 30 + PROSE)  # < 80% of words have a letter
    # the assignment's four rules only: no stop-word, bullet or symbol rules
    no_stop_words = "Market traders sold apples and pears and cheese and bread in town every morning. " * 6
    assert gopher_quality_filter(no_stop_words)
    assert gopher_quality_filter("- the market and the trade of goods\n" * 12)


# -- the alphabetic-word rule: whitespace words (the paper) or datatrove's tokens ---------------------------------
# Counted by hand: 10 whitespace words, each with a letter (10/10); datatrove's tokens add ".", "," and "!", which
# have none (10/13 = 0.77 < 0.8).
ALPHA_PROSE = "The cat sat. The dog ran, and the bird flew! "


def test_alpha_words_ratio_hand_counted():
    assert alpha_words_ratio(ALPHA_PROSE, "paper") == 1.0
    assert alpha_words_ratio(ALPHA_PROSE, "datatrove") == pytest.approx(10 / 13)
    # "It costs $5 per 3.5km": paper words It, costs, $5, per, 3.5km (4 with a letter of 5); datatrove's tokens
    # It, costs, $, 5, per, 3.5, km (4 of 7)
    assert alpha_words_ratio("It costs $5 per 3.5km", "paper") == pytest.approx(4 / 5)
    assert alpha_words_ratio("It costs $5 per 3.5km", "datatrove") == pytest.approx(4 / 7)
    # a calendar row: "Oktober", "2020", seven day names, 31 days: 8 words with a letter of 40 in both
    row = "Oktober 2020 Mo Di Mi Do Fr Sa So " + " ".join(f"{d:02d}" for d in range(1, 32))
    assert alpha_words_ratio(row, "paper") == alpha_words_ratio(row, "datatrove") == pytest.approx(8 / 40)
    assert alpha_words_ratio("Größe: 42 ½", "paper") == pytest.approx(1 / 3)  # letters of any script count
    assert alpha_words_ratio(" \n ", "paper") is None and alpha_words_ratio("", "datatrove") is None


def test_alpha_words_switch_decides_the_rule():
    prose = ALPHA_PROSE * 6  # 60 words (mean length 3.2), stop words "the" and "and": only the alpha rule can fire
    assert reject(GopherQualityFilter(), prose) is None  # the default is the paper's words
    assert reject(GopherQualityFilter(alpha_words="paper"), prose) is None
    assert reject(GopherQualityFilter(alpha_words="datatrove"), prose) == "gopher_below_alpha_threshold"
    assert reject(GopherQualityFilter(alpha_words="datatrove", min_alpha_words_ratio=0.75), prose) is None
    numbers = "the 2024 and 31337 4242 9000 1234 5678 " * 10  # 2 of 8 words have a letter, either way
    for alpha_words in ("paper", "datatrove"):
        assert reject(GopherQualityFilter(alpha_words=alpha_words), numbers) == "gopher_below_alpha_threshold"
    with pytest.raises(ValueError, match="alpha_words"):
        GopherQualityFilter(alpha_words="spacy")


ONLY_ALPHA_RULE = dict(min_doc_words=None, max_doc_words=None, min_avg_word_length=None, max_avg_word_length=None,
                       max_symbol_word_ratio=None, max_bullet_lines_ratio=None, max_ellipsis_lines_ratio=None,
                       min_stop_words=None)


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "web").is_dir(), reason="../shared/data/web not present")
def test_alpha_rule_keeps_real_english_articles(tmp_path):
    """On the English pages of trafilatura's evaluation set (curated ordinary articles), the rule alone may drop at
    most 3% with the default (the issue's bound for what the filters may cost real English articles); datatrove's
    tokens, which count punctuation marks as words without a letter, break that bound."""
    pytest.importorskip("trafilatura")
    from bench.tools.real_pages import is_english, real_documents

    warcs = sorted((SHARED / "web").glob("trafilatura-pages-*.warc.gz"))
    english = [d for d in real_documents(warcs, tmp_path) if is_english(d)]
    assert len(english) >= 100
    rates = {}
    for alpha_words in ("paper", "datatrove"):
        rule = GopherQualityFilter(alpha_words=alpha_words, **ONLY_ALPHA_RULE)
        rates[alpha_words] = sum(rule.reject(dict(d)) is not None for d in english) / len(english)
    print(f"{len(english)} English pages; dropped by the alpha rule: {rates}")
    assert rates["paper"] <= 0.03
    assert rates["datatrove"] > 0.03


# -- Gopher repetition: one doc per rule ------------------------------------------------------------------------
LONG = "abcdefghijklmnopqrstuvwxyzabcd"
REPEATED = "quietly window lantern harbour evening morning shelter painter blanket kitchen"


REP_CASES = [
    ("", "gopher_rep_empty"),
    ("Alpha beta gamma.\n\nAlpha beta gamma.\n\nDelta epsilon zeta.", "gopher_rep_dup_para_frac"),
    (f"{PROSE}\n\n{PROSE}\n\nOne.\n\nTwo.\n\nThree.\n\nFour.", "gopher_rep_dup_para_char_frac"),
    ("one line\none line\nanother line", "gopher_rep_dup_line_frac"),
    (f"{PROSE}\n{PROSE}\nOne.\nTwo.\nThree.\nFour.", "gopher_rep_dup_line_char_frac"),
    ("a b a b a b c d e f", "gopher_rep_top_2_gram"),
    (" ".join(f"a b {LONG} w{i}" for i in range(8)), "gopher_rep_top_3_gram"),
    (" ".join(f"a b c {LONG} w{i}" for i in range(8)), "gopher_rep_top_4_gram"),
    (f"{REPEATED} {FILLER[:250]} {REPEATED} {FILLER[250:500]} {REPEATED}", "gopher_rep_duplicated_5_n_grams"),
]


@pytest.mark.parametrize("text,reason", REP_CASES)
def test_gopher_repetition_rule_reasons(text, reason):
    assert reject(GopherRepetitionFilter(), text) == reason


def test_gopher_repetition_keeps_prose_and_disabled_rules():
    assert reject(GopherRepetitionFilter(), PROSE) is None
    assert reject(GopherRepetitionFilter(), "   ") is None  # datatrove only rejects the empty string
    text = "Alpha beta gamma.\n\nAlpha beta gamma.\n\nDelta epsilon zeta."
    assert reject(GopherRepetitionFilter(dup_para_frac=None), text) == "gopher_rep_dup_para_char_frac"
    no_rules = GopherRepetitionFilter(None, None, None, None, top_n_grams=(), dup_n_grams=())
    assert reject(no_rules, text) is None


# -- C4: line filters rewrite the text, page rules reject -------------------------------------------------------
def test_c4_keeps_only_clean_lines():
    text = "\n".join([
        "Menu", "Home | About | Contact",  # no terminal punctuation
        "The harbour was quiet in the early morning.",
        "Paris is the capital of France.[1] It has many museums.[citation needed]",  # citations removed
        "Please enable JavaScript to view the comments.",  # javascript
        "This site uses cookies to improve your experience.",  # policy
        "Read our Terms of Use before posting.",  # policy
        "Hi there.",  # < 3 words
        "And then the story continues...",  # ellipsis is not terminal punctuation
        "function draw() {",  # a brace on a line that is dropped anyway does not reject the page
        f"The keeper wrote {'x' * 1001} in his notebook.",  # a word over 1000 characters
        "  He trimmed the wick. Then he waited for the night!  ",
        '"We will light the lamp," he said.',
    ])
    doc = {"id": "t", "url": "u", "text": text}
    assert C4LineFilter().reject(doc) is None
    assert doc["text"] == ("The harbour was quiet in the early morning.\n"
                           "Paris is the capital of France. It has many museums.\n"
                           "He trimmed the wick. Then he waited for the night!\n"
                           '"We will light the lamp," he said.')


C4_CASES = [
    ("Lorem ipsum dolor sit amet, consectetur adipiscing elit.\n" + PROSE, "c4_lorem_ipsum"),
    (PROSE + "\nThe function returns {x} to the caller.", "c4_curly_bracket"),
    ("Only one sentence is here.\nMenu\nHome", "c4_too_few_sentences"),
    ("", "c4_too_few_sentences"),
]


@pytest.mark.parametrize("text,reason", C4_CASES)
def test_c4_page_rule_reasons(text, reason):
    doc = {"id": "t", "url": "u", "text": text}
    assert C4LineFilter().reject(doc) == reason
    assert doc["text"] == text  # a rejected page is left as it was


def test_c4_sentence_counting_follows_spacy_sentencizer():
    assert count_sentences("He left. She stayed! Did they? Yes.") == 4
    assert count_sentences("Mr. Smith met Dr. Jones at 3.30 p.m. in the U.S. office.") == 1  # abbreviations
    assert count_sentences('He said "stop." Then he left.') == 2  # closing quote stays with its sentence
    assert count_sentences("") == 0
    assert reject(C4LineFilter(min_num_sentences=1), "Only one sentence is here.") is None


# -- words: spaCy's English tokenizer, hand-written cases -------------------------------------------------------
@pytest.mark.parametrize("text,expected", [
    ("Hello, world.", ["Hello", ",", "world", "."]),
    ("don't can't it's I'm we'll", ["do", "n't", "ca", "n't", "it", "'s", "I", "'m", "we", "'ll"]),
    ("dont cannot gonna", ["do", "nt", "can", "not", "gon", "na"]),
    ("U.S. Dr. Smith (Mr. Jones) e.g. etc.", ["U.S.", "Dr.", "Smith", "(", "Mr.", "Jones", ")", "e.g.", "etc", "."]),
    ("$877,000 90% 3.5km tax-free COVID-19 2024-01-03",
     ["$", "877,000", "90", "%", "3.5", "km", "tax", "-", "free", "COVID-19", "2024", "-", "01", "-", "03"]),
    ("see http://example.com/a?b=1. @user #tag", ["see", "http://example.com/a?b=1", ".", "@user", "#", "tag"]),
    ("wait... really?! :) ★★", ["wait", "...", "really", "?", "!", ":)", "★", "★"]),
    ("Next?No a/b 1/2 end.Next", ["Next?No", "a", "/", "b", "1/2", "end", ".", "Next"]),
])
def test_words_hand_written(text, expected):
    assert list(words(text)) == expected


# -- robustness -------------------------------------------------------------------------------------------------
BAD_TEXTS = ["", "   \n\t ", "\x00\x01\x02 \ufffd\ufffd", "bad \udcff surrogate \ud800 text.", "x" * 10_000_000,
             ("lorem " * 2_000_000)[:10_000_000], "(" * 5000 + "a" + ")" * 5000, "a-" * 50_000, ".\n" * 10_000,
             "{" * 1000, "…" * 3000, "http://" + "a." * 5000 + "com", "@" * 3000 + ".x"]


@pytest.mark.parametrize("text", BAD_TEXTS, ids=range(len(BAD_TEXTS)))
def test_bad_input_never_crashes(text):
    t0 = time.perf_counter()
    for step in (GopherQualityFilter(), GopherRepetitionFilter(), C4LineFilter()):
        reason = step.reject({"id": "t", "url": "u", "text": text})
        assert reason is None or reason.startswith(step.name + "_")
    gopher_quality_filter(text)
    assert time.perf_counter() - t0 < 15


def test_bad_documents_and_configs():
    for doc in ({}, {"text": None}, {"text": b"\xff\xfe bytes"}, {"text": 42}):
        for step in (GopherQualityFilter(), GopherRepetitionFilter(), C4LineFilter()):
            step.reject(dict(doc))
    # rules disabled so that datatrove would divide by zero: no crash here
    assert reject(GopherQualityFilter(min_doc_words=None, min_stop_words=None), "") is None
    with pytest.raises(ValueError, match="min_doc_words"):
        GopherQualityFilter(min_doc_words=-1)
    with pytest.raises(ValueError, match="max_bullet_lines_ratio"):
        GopherQualityFilter(max_bullet_lines_ratio=1.5)
    with pytest.raises(ValueError, match="top_n_grams"):
        GopherRepetitionFilter(top_n_grams=((0, 0.2),))
    with pytest.raises(ValueError, match="min_num_sentences"):
        C4LineFilter(min_num_sentences=-2)


# -- the generated crawl's ground truth -------------------------------------------------------------------------
def test_ground_truth_on_sample_crawl(sample_crawl):
    """English low-quality pages are dropped by Gopher quality + repetition (the default), English articles kept."""
    steps = [GopherQualityFilter(), GopherRepetitionFilter()]
    dropped, c4_dropped, seen = defaultdict(int), defaultdict(int), Counter()
    for doc in sample_crawl.docs:
        m = sample_crawl.manifest[doc["id"]]
        if m["lang"] != "en" or m["broken"]:
            continue
        kind = m["low_quality_kind"] or f"high_{m['page_type']}"
        seen[kind] += 1
        kept = next(run_steps([dict(doc)], steps, {}), None)
        dropped[kind] += kept is None
        c4_dropped[kind] += kept is None or C4LineFilter().reject(kept) is not None
    rates = {k: round(dropped[k] / n, 2) for k, n in seen.items()}
    c4_rates = {k: round(c4_dropped[k] / n, 2) for k, n in seen.items()}
    print("dropped by gopher+gopher_rep", rates, "\nwith c4", c4_rates, "\ndocs", dict(seen))
    low = [k for k in seen if not k.startswith("high_")]
    assert sum(dropped[k] for k in low) / sum(seen[k] for k in low) >= 0.85
    for kind in ("spam", "keyword_list", "short", "teaser_list", "repeated_lines"):
        assert rates.get(kind, 1) >= 0.9, kind
    # boilerplate-only pages: a nav menu plus a "related articles" list often has 50+ words and stop words, and
    # Gopher has no rule against lines that are not sentences; C4's line rules catch them
    assert c4_rates.get("boilerplate_only", 1) >= 0.9
    assert seen["high_article"] >= 100 and rates["high_article"] <= 0.05 and c4_rates["high_article"] <= 0.05
    # forum threads carry user names, dates and times, which count against them in the 80% alphabetic-word rule
    assert rates.get("high_forum", 0) <= 0.4


# -- agreement with datatrove (the reference) -------------------------------------------------------------------
def _reference_docs(sample_crawl, full: bool) -> list[str]:
    """Hand-written docs, the two CS336 fixtures and every 12th generated page; with ``full``, every page and real
    English text from ../shared/data (Dolma CC, TinyStories, tweets)."""
    texts = [d["text"] for d in sample_crawl.docs[::1 if full else 12]]
    texts += [PROSE] + [t for t, _ in GOPHER_CASES + REP_CASES + C4_CASES]
    quality = SHARED / "quality"
    texts += [path.read_text(encoding="utf-8") for path in sorted(quality.glob("*.txt"))]
    if not full:
        return [t for t in texts if len(t) < 200_000]  # not the 100,001-word doc: spaCy takes seconds
    for path in sorted(quality.glob("dolma_*.jsonl")):
        texts += [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines()]
    stories = SHARED / "tinystories" / "tinystories_sample_2M.txt"
    if stories.exists():
        texts += [s.strip() for s in stories.read_text(encoding="utf-8")[:100_000].split("<|endoftext|>")]
    tweets = SHARED / "toxicity" / "davidson_labeled_data.csv"
    if tweets.exists():
        with tweets.open(encoding="utf-8") as f:
            texts += [row["tweet"] for _, row in zip(range(500), csv.DictReader(f))]
    return [t for t in texts if len(t) < 200_000]


@pytest.mark.parametrize("full", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["sample", "full"])
def test_agrees_with_datatrove(request, full):
    """Same tokens as datatrove's English word tokenizer (spaCy) and the same decisions, reasons and C4 text as
    datatrove's GopherQualityFilter (with ``alpha_words="datatrove"``), GopherRepetitionFilter and C4QualityFilter."""
    pytest.importorskip("spacy")
    filters = pytest.importorskip("datatrove.pipeline.filters")
    from datatrove.data import Document
    from datatrove.utils.text import split_into_words

    pairs = [(GopherQualityFilter(alpha_words="datatrove"), filters.GopherQualityFilter(), ""),
             (GopherRepetitionFilter(), filters.GopherRepetitionFilter(), "gopher_rep_"),
             (C4LineFilter(), filters.C4QualityFilter(), "c4_")]
    texts = _reference_docs(request.getfixturevalue("sample_crawl"), full)  # built only if datatrove is there
    token_diffs, disagreements, decisions = [], [], Counter()
    for text in texts:
        if list(words(text)) != split_into_words(text):
            token_diffs.append(text[:80])
        for ours, ref, prefix in pairs:
            doc, ref_doc = {"id": "t", "text": text}, Document(text=text, id="t")
            mine, theirs = ours.reject(doc), ref.filter(ref_doc)
            theirs = None if theirs is True else prefix + theirs[1]
            decisions[(ours.name, mine)] += 1
            if mine != theirs or mine is None and doc["text"] != ref_doc.text:
                disagreements.append((ours.name, mine, theirs, text[:80]))
    print(f"{len(texts)} docs;", dict(decisions))
    # spaCy's letter classes are code-point ranges, ours Unicode properties: a few CJK/Bengali tokens differ
    assert len(token_diffs) <= 0.02 * len(texts), token_diffs[:5]
    assert not disagreements, disagreements[:5]
