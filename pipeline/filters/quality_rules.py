"""Heuristic quality rules: Gopher quality, Gopher repetition and C4 line filters, as pipeline steps.

- ``GopherQualityFilter`` (step ``gopher``): Rae et al. 2021, "Scaling Language Models: Methods, Analysis & Insights
  from Training Gopher", App. A.1.1 (word count, mean word length, symbol-to-word ratios, bullet and ellipsis lines,
  alphabetic words, stop words), as datatrove implements it (``datatrove/pipeline/filters/gopher_quality_filter.py``):
  same thresholds, same order of rules, same reason names; one difference by default, the words of the 80%
  alphabetic-word rule (``alpha_words``, below). ``gopher_quality_filter(text)`` is the CS336 assignment 4 subset
  (50-100,000 words, mean word length 3-10, <= 30% ellipsis lines, >= 80% alphabetic words).
- ``GopherRepetitionFilter`` (step ``gopher_rep``): Gopher Table A1 (duplicate lines/paragraphs and their characters,
  top 2-4-gram and duplicated 5-10-gram character fractions) as in datatrove's ``gopher_repetition_filter.py``.
- ``C4LineFilter`` (step ``c4``): Raffel et al. 2020 (T5), Sec. 2.2, after TFDS ``c4_utils.clean_page`` and
  datatrove's ``C4QualityFilter``: keep lines that end in terminal punctuation and have >= 3 words, drop lines
  mentioning javascript or cookie/terms policies, drop pages with "lorem ipsum" or "{" or < 5 sentences. It rewrites
  ``doc["text"]`` to the kept lines. The bad-words rule of C4 is left to the toxicity step.

Words are counted by ``pipeline.filters.words`` (a port of spaCy's English tokenizer, as datatrove counts them); stop
words match case-sensitively, as in datatrove. The alphabetic-word rule ("80% of words contain at least one alphabetic
character") counts its words one of two ways, ``alpha_words``:

- ``paper`` (default): whitespace-separated words, the plain reading of the paper and what Dolma's Gopher tagger
  does (``python/dolma/taggers/gopher.py``: ``text.split()``, ``any(c.isalpha() for c in word)``);
- ``datatrove``: datatrove's tokens, where every punctuation mark is a word without a letter, so the commas and
  periods of ordinary prose count against it before any number does.

Measured on the 208 pages of ../shared/data/web that the default langid step keeps as English (``python -m
bench.benchmarks.gopher_words``; docs/benchmarks/data-quality.md): the rule drops 4 with ``paper`` and 35 with
``datatrove`` (a Wikipedia article at 0.70, a Springer review at 0.68). Both definitions assume space-separated words;
in Chinese or Japanese a whitespace "word" is a whole clause.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import ClassVar

import regex

from pipeline.filters.words import count_sentences, is_symbol, words
from pipeline.runtime.steps import Step, as_text
from workbench.params import setting

STOP_WORDS = ("the", "be", "to", "of", "and", "that", "have", "with")  # Gopher App. A.1.1
ALPHA_WORDS = ("paper", "datatrove")  # what the alphabetic-word rule counts as words (module docstring)
_HAS_ALPHA = regex.compile(r"\p{L}")  # str.isalpha


def _text(doc: dict) -> str:
    text = doc.get("text")
    return as_text(text) if isinstance(text, str | bytes | bytearray) else ""


def _is_ratio(v) -> bool:
    return v is None or isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= 1


# -- Gopher quality ---------------------------------------------------------------------------------------------
def alpha_words_ratio(text: str, alpha_words: str = "paper") -> float | None:
    """Share of words with at least one letter (``None`` without words); ``alpha_words`` picks the words: ``paper``
    splits at whitespace, ``datatrove`` takes ``pipeline.filters.words`` tokens (punctuation marks are words)."""
    toks = text.split() if alpha_words == "paper" else words(text)
    if not toks:
        return None
    return sum(w.isalpha() or _HAS_ALPHA.search(w) is not None for w in toks) / len(toks)


@dataclass(frozen=True)
class GopherQualityFilter(Step):
    """Gopher's quality rules (Rae et al. 2021, App. A.1.1) with datatrove's defaults; ``None`` disables a rule.

    As datatrove, except that the alphabetic-word rule counts whitespace words unless ``alpha_words="datatrove"``
    (module docstring), and that a ratio with nothing to divide by (no words or no lines, possible only with
    ``min_doc_words`` disabled) is skipped where datatrove raises ZeroDivisionError."""

    name: ClassVar[str] = "gopher"
    min_doc_words: int | None = setting(50, "fewest words a document may have", at_least=0)
    max_doc_words: int | None = setting(100_000, "most words a document may have", at_least=0)
    min_avg_word_length: float | None = setting(3, "shortest mean word length", at_least=0)
    max_avg_word_length: float | None = setting(10, "longest mean word length", at_least=0)
    max_symbol_word_ratio: float | None = setting(0.1, "'#' and '...'/'…' per word", at_least=0, at_most=1)
    max_bullet_lines_ratio: float | None = setting(0.9, "share of lines starting with a bullet", at_least=0, at_most=1)
    max_ellipsis_lines_ratio: float | None = setting(0.3, "share of lines ending in an ellipsis", at_least=0,
                                                     at_most=1)
    min_alpha_words_ratio: float | None = setting(0.8, "share of words with a letter (datatrove: "
                                                       "max_non_alpha_words_ratio, a misnomer)", at_least=0, at_most=1)
    alpha_words: str = setting("paper", "paper: whitespace words; datatrove: its tokens, punctuation included",
                               choices=ALPHA_WORDS)
    min_stop_words: int | None = setting(2, "fewest stop words a document must have", at_least=0)
    stop_words: tuple[str, ...] = setting(STOP_WORDS, "the stop words counted")

    def __post_init__(self):
        super().__post_init__()
        if self.min_doc_words and self.max_doc_words and self.min_doc_words > self.max_doc_words:  # across two
            raise ValueError(f"filter.steps.gopher.min_doc_words must be <= max_doc_words ({self.max_doc_words}), "
                             f"got {self.min_doc_words}")
        if isinstance(self.stop_words, str) or not all(isinstance(w, str) for w in self.stop_words):  # a str is
            raise ValueError(f"filter.steps.gopher.stop_words must be a list of words, got {self.stop_words!r}")
        object.__setattr__(self, "stop_words", tuple(self.stop_words))  # a params file's list, as the tuple

    def reject(self, doc: dict) -> str | None:
        text = _text(doc)
        toks = words(text)
        return (self._length_reason(toks) or self._symbol_reason(text, len(toks)) or self._line_reason(text)
                or self._word_reason(text, toks))

    def _length_reason(self, toks: tuple[str, ...]) -> str | None:
        """Too few or too many words, or a mean word length out of range (symbols are not words here)."""
        lengths = [len(w) for w in toks if not is_symbol(w)]
        n = len(lengths)
        if self.min_doc_words and n < self.min_doc_words:
            return "gopher_short_doc"
        if self.max_doc_words and n > self.max_doc_words:
            return "gopher_long_doc"
        if not n:  # datatrove divides by zero here; a doc without words has no mean length
            return None
        mean = sum(lengths) / n
        if self.min_avg_word_length and mean < self.min_avg_word_length:
            return "gopher_below_avg_threshold"
        if self.max_avg_word_length and mean > self.max_avg_word_length:
            return "gopher_above_avg_threshold"
        return None

    def _symbol_reason(self, text: str, n_words: int) -> str | None:
        """Too many hashes or ellipses per word."""
        if not (n_words and self.max_symbol_word_ratio):
            return None
        if text.count("#") / n_words > self.max_symbol_word_ratio:
            return "gopher_too_many_hashes"
        if (text.count("...") + text.count("…")) / n_words > self.max_symbol_word_ratio:
            return "gopher_too_many_ellipsis"
        return None

    def _line_reason(self, text: str) -> str | None:
        """Too many lines starting with a bullet or ending with an ellipsis."""
        lines = text.splitlines()
        if not lines:
            return None
        if self.max_bullet_lines_ratio:
            bullets = sum(s.lstrip().startswith(("•", "-")) for s in lines)
            if bullets / len(lines) > self.max_bullet_lines_ratio:
                return "gopher_too_many_bullets"
        if self.max_ellipsis_lines_ratio:
            ellipsis = sum(s.rstrip().endswith(("...", "…")) for s in lines)
            if ellipsis / len(lines) > self.max_ellipsis_lines_ratio:
                return "gopher_too_many_end_ellipsis"
        return None

    def _word_reason(self, text: str, toks: tuple[str, ...]) -> str | None:
        """Too few words with a letter, or too few stop words."""
        if self.min_alpha_words_ratio:
            ratio = alpha_words_ratio(text, self.alpha_words)
            if ratio is not None and ratio < self.min_alpha_words_ratio:
                return "gopher_below_alpha_threshold"
        if self.min_stop_words and len(set(self.stop_words).intersection(toks)) < self.min_stop_words:
            return "gopher_enough_stop_words"
        return None


_ASSIGNMENT_RULES = GopherQualityFilter(max_symbol_word_ratio=None, max_bullet_lines_ratio=None, min_stop_words=None)


def gopher_quality_filter(text: str) -> bool:
    """CS336 assignment 4's Gopher subset; True keeps the text: 50 to 100,000 words, mean word length 3 to 10,
    at most 30% of lines ending in an ellipsis, at least 80% of words with an alphabetic character."""
    return _ASSIGNMENT_RULES.reject({"text": text}) is None


# -- Gopher repetition ------------------------------------------------------------------------------------------
_PARAGRAPH_SPLIT = regex.compile(r"\n{2,}")
_LINE_SPLIT = regex.compile(r"\n+")


def _duplicates(items: list[str]) -> tuple[int, int]:
    """(elements, characters) that repeat an earlier element."""
    seen, n, chars = set(), 0, 0
    for x in items:
        if x in seen:
            n, chars = n + 1, chars + len(x)
        else:
            seen.add(x)
    return n, chars


def top_ngram_chars(toks: tuple[str, ...], n: int) -> int:
    """Characters covered by the most frequent n-gram (space-joined length x count; ties: the first seen)."""
    # tokens hold no spaces: tuples stand for joined strings
    counts = Counter(zip(*(toks[k:] for k in range(n)), strict=False))
    if not counts:
        return 0
    gram, count = max(counts.items(), key=lambda kv: kv[1])
    return (sum(map(len, gram)) + n - 1) * count


def duplicated_ngram_chars(toks: tuple[str, ...], n: int) -> int:
    """Characters in n-grams that repeat an earlier one, scanning left to right and skipping past each repeat so
    overlapping repeats are counted once (datatrove's ``find_all_duplicate``; n-grams joined without spaces)."""
    seen, chars, i, end = set(), 0, 0, len(toks) - n + 1
    while i < end:
        gram = "".join(toks[i:i + n])
        if gram in seen:
            chars += len(gram)
            i += n
        else:
            seen.add(gram)
            i += 1
    return chars


@dataclass(frozen=True)
class GopherRepetitionFilter(Step):
    """Gopher Table A1 repetition rules with datatrove's defaults; fractions of characters are of ``len(text)``."""

    name: ClassVar[str] = "gopher_rep"
    dup_line_frac: float | None = setting(0.3, "most lines that repeat an earlier line", at_least=0, at_most=1)
    dup_para_frac: float | None = setting(0.3, "most paragraphs that repeat an earlier one", at_least=0, at_most=1)
    dup_line_char_frac: float | None = setting(0.2, "most characters in repeated lines", at_least=0, at_most=1)
    dup_para_char_frac: float | None = setting(0.2, "most characters in repeated paragraphs", at_least=0, at_most=1)
    top_n_grams: tuple[tuple[int, float], ...] = setting(((2, 0.2), (3, 0.18), (4, 0.16)),
                                                         "(n, most characters in the top n-gram) pairs")
    dup_n_grams: tuple[tuple[int, float], ...] = setting(
        ((5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10)),
        "(n, most characters in repeated n-grams) pairs")

    def __post_init__(self):
        super().__post_init__()
        for f in ("top_n_grams", "dup_n_grams"):  # pairs: a shape no single bound states; a params list -> tuple
            pairs = getattr(self, f)
            ok = isinstance(pairs, tuple | list) and all(
                isinstance(p, tuple | list) and len(p) == 2 and isinstance(p[0], int) and not isinstance(p[0], bool)
                and p[0] >= 1 and _is_ratio(p[1]) for p in pairs)
            if not ok:
                raise ValueError(f"filter.steps.gopher_rep.{f} must be (n >= 1, fraction in [0, 1]) pairs, got "
                                 f"{pairs!r}")
            object.__setattr__(self, f, tuple(tuple(p) for p in pairs))

    def reject(self, doc: dict) -> str | None:
        text = _text(doc)
        if not text:
            return "gopher_rep_empty"
        size = len(text)
        for kind, parts, part_frac, char_frac in (  # paragraphs, then lines
                ("para", _PARAGRAPH_SPLIT.split(text.strip()), self.dup_para_frac, self.dup_para_char_frac),
                ("line", _LINE_SPLIT.split(text), self.dup_line_frac, self.dup_line_char_frac)):
            dup, chars = _duplicates(parts)
            if part_frac and dup / len(parts) > part_frac:
                return f"gopher_rep_dup_{kind}_frac"
            if char_frac and chars / size > char_frac:
                return f"gopher_rep_dup_{kind}_char_frac"
        toks = words(text)
        for n, frac in self.top_n_grams:
            if top_ngram_chars(toks, n) / size > frac:
                return f"gopher_rep_top_{n}_gram"
        for n, frac in self.dup_n_grams:
            if duplicated_ngram_chars(toks, n) / size > frac:
                return f"gopher_rep_duplicated_{n}_n_grams"
        return None


# -- C4 line filters --------------------------------------------------------------------------------------------
_CITATION = regex.compile(r"\[\d*]|\[edit]|\[citation needed]")
_END_PUNCTUATION = (".", "?", "!", '"', "'")
POLICY_SUBSTRINGS = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies",
                     "use cookies")


@dataclass(frozen=True)
class C4LineFilter(Step):
    """C4's clean-up (Raffel et al. 2020; TFDS ``c4_utils``, datatrove ``C4QualityFilter`` defaults): drops lines,
    rewrites ``doc["text"]`` to the kept ones, and rejects the page on lorem ipsum, "{" or too few sentences.
    A threshold of -1 (or False) disables its rule, as in datatrove; datatrove's ``split_paragraph=False`` (rules on
    spaCy sentences instead of lines) is not offered."""

    name: ClassVar[str] = "c4"
    remove_citations: bool = setting(True, "remove Wikipedia-style citations ([1], [citation needed])")
    filter_no_terminal_punct: bool = setting(True, "drop lines without terminal punctuation")
    min_num_sentences: int = setting(5, "fewest sentences a page keeps (-1: off)", at_least=-1)
    min_words_per_line: int = setting(3, "drop lines of fewer words (-1: off)", at_least=-1)
    max_word_length: int = setting(1000, "drop lines with a longer word (-1: off)", at_least=-1)
    filter_lorem_ipsum: bool = setting(True, "reject pages with lorem ipsum")
    filter_javascript: bool = setting(True, "drop lines mentioning javascript")
    filter_curly_bracket: bool = setting(True, "reject pages with a curly bracket")
    filter_policy: bool = setting(True, "drop lines of cookie and terms-of-use boilerplate")

    def reject(self, doc: dict) -> str | None:
        sentences, kept = 0, []
        for line in _text(doc).splitlines():
            line = line.strip()
            n_words = len(split := line.split())  # counted before citations are removed, as in datatrove
            if self.max_word_length != -1 and any(len(w) > self.max_word_length for w in split):
                continue
            if self.remove_citations:
                line = _CITATION.sub("", line)
            if self.filter_no_terminal_punct and (not line.endswith(_END_PUNCTUATION) or line.endswith("...")):
                continue
            if n_words < self.min_words_per_line:
                continue
            lower = line.lower()
            if self.filter_lorem_ipsum and "lorem ipsum" in lower:
                return "c4_lorem_ipsum"
            if self.filter_javascript and "javascript" in lower:
                continue
            if self.filter_curly_bracket and "{" in line:  # only lines kept so far count, as in C4
                return "c4_curly_bracket"
            if self.filter_policy and any(p in lower for p in POLICY_SUBSTRINGS):
                continue
            if self.min_num_sentences != -1:
                sentences += count_sentences(line)
            kept.append(line)
        if sentences < self.min_num_sentences:
            return "c4_too_few_sentences"
        doc["text"] = "\n".join(kept).strip()
        return None
