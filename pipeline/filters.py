"""Heuristic quality rules: Gopher quality, Gopher repetition and C4 line filters, as pipeline steps.

- ``GopherQualityFilter`` (step ``gopher``): Rae et al. 2021, "Scaling Language Models: Methods, Analysis & Insights
  from Training Gopher", App. A.1.1 (word count, mean word length, symbol-to-word ratios, bullet and ellipsis lines,
  alphabetic words, stop words), as datatrove implements it (``datatrove/pipeline/filters/gopher_quality_filter.py``):
  same thresholds, same order of rules, same reason names. ``gopher_quality_filter(text)`` is the CS336
  assignment 4 subset (50-100,000 words, mean word length 3-10, <= 30% ellipsis lines, >= 80% alphabetic words).
- ``GopherRepetitionFilter`` (step ``gopher_rep``): Gopher Table A1 (duplicate lines/paragraphs and their characters,
  top 2-4-gram and duplicated 5-10-gram character fractions) as in datatrove's ``gopher_repetition_filter.py``.
- ``C4LineFilter`` (step ``c4``): Raffel et al. 2020 (T5), Sec. 2.2, after TFDS ``c4_utils.clean_page`` and
  datatrove's ``C4QualityFilter``: keep lines that end in terminal punctuation and have >= 3 words, drop lines
  mentioning javascript or cookie/terms policies, drop pages with "lorem ipsum" or "{" or < 5 sentences. It rewrites
  ``doc["text"]`` to the kept lines. The bad-words rule of C4 is left to the toxicity step.

Words. datatrove counts words as its English word tokenizer cuts them: spaCy's rule-based tokenizer
(``spacy.blank("en")``), where punctuation is mostly its own token ("word." -> "word", "."), clitics split
("don't" -> "do", "n't"), and URLs, numbers ("877,000"), "@handles" and abbreviations ("U.S.", "Dr.") stay whole.
``words`` ports that tokenizer (``spacy/tokenizer.pyx``: prefixes, suffixes, infixes, URL match, special cases and
the special-case matcher, with spaCy's English rule lists) to ~150 lines of precompiled regexes, so the thresholds
mean what they mean in datatrove without spaCy installed, ~8x faster; it is cached per text, so the two Gopher
steps tokenize a document once. It gives spaCy's tokens on all the English test corpora (one miss in ~28,000
texts: a run of six apostrophes); known differences are in other scripts (spaCy's letter classes are code-point
ranges, ours Unicode properties) and in whitespace-free chunks over 1,000 characters (split at infixes only).
Punctuation-only tokens count where datatrove counts them (symbol ratios, the 80% alphabetic-word rule, n-grams)
and not where it drops them (word count, mean word length); stop words match case-sensitively, as in datatrove.
C4's sentence counts follow spaCy's ``Sentencizer`` over the same tokens.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import regex

from pipeline.steps import Step

STOP_WORDS = ("the", "be", "to", "of", "and", "that", "have", "with")  # Gopher App. A.1.1
# datatrove.utils.text.PUNCTUATION (ASCII and CJK punctuation, control characters) plus sentence terminals.
_PUNCTUATION = ("!/—”:％１〈&(、━\\【#%「」，】；+^]~“《„';’{|∶´[=-`*．（–？！：$～«〉,><》)?）。…@_.\"}►»"
                + "".join(map(chr, [*range(0, 9), *range(11, 32), *range(127, 160)])))
_SYMBOL_WORD = regex.compile(rf"[{regex.escape(_PUNCTUATION)}\p{{Sentence_Terminal}}]+")
_HAS_ALPHA = regex.compile(r"\p{L}")  # str.isalpha
_SENTENCE_END = regex.compile(r"\p{Sentence_Terminal}")  # spaCy Sentencizer.default_punct_chars, one char each
_ALL_PUNCT = regex.compile(r"\p{P}+")  # spaCy's Token.is_punct

# -- words: a port of spaCy's English tokenizer (spacy/tokenizer.pyx ``explain``), which datatrove's words come from ---
_PUNCT = "…,:;!?¿؟¡()[]{}<>_#*&。？！，、；：～·।،۔؛٪"  # spacy/lang/char_classes.py: _punct, _quotes, _currency, _units
_QUOTES = "'\"”“`‘´’‚,„»«「」『』（）〔〕【】《》〈〉〈〉⟦⟧"
_CURRENCY = "$ £ € ¥ ฿ US$ C$ A$ ₽ ﷼ ₴ ₠ ₡ ₢ ₣ ₤ ₥ ₦ ₧ ₨ ₩ ₪ ₫ ₭ ₮ ₯ ₰ ₱ ₲ ₳ ₵ ₶ ₷ ₸ ₹ ₺ ₻ ₼ ₾ ₿".split()
_UNITS = ("km km² km³ m m² m³ dm dm² dm³ cm cm² cm³ mm mm² mm³ ha µm nm yd in ft kg g mg µg t lb oz m/s km/h kmh mph "
          "hPa Pa mbar mb MB kb KB gb GB tb TB T G M K % км км² км³ м м² м³ дм дм² дм³ см см² см³ мм мм² мм³ нм кг г "
          "мг м/с км/ч кПа Па мбар Кб КБ кб Мб МБ мб Гб ГБ гб Тб ТБ").split()
_E = regex.escape
_PQ = _E(_PUNCT + _QUOTES)
_AL, _AU = r"\p{Ll}\p{Lo}", r"\p{Lu}\p{Lo}"  # spaCy's ALPHA_LOWER / ALPHA_UPPER: cased letters plus uncased scripts
_PREFIX = regex.compile(rf"[§%=—–{_PQ}{_E(''.join(c for c in _CURRENCY if len(c) == 1))}]|\+(?![0-9])|\.\.+"
                        r"|US\$|C\$|A\$|\p{So}")
_SUFFIX = regex.compile(
    rf"(?:[{_PQ}—–]|……|\.\.+|\p{{So}}|['’][sS]|(?<=[0-9])\+|(?<=°[FfCcKk])\."
    rf"|(?<=[0-9])(?:{'|'.join(_E(u) for u in _CURRENCY + _UNITS)})"
    rf"|(?<=[0-9{_AL}%²\-+|(?:){_PQ}])\.|(?<=[{_AU}][{_AU}])\.)$")
_UNIT_END = regex.compile(rf"(?<=[0-9])(?:{'|'.join(_E(u) for u in _UNITS)})$")  # the only affix of an alnum chunk
_INFIX = regex.compile(
    rf"\.\.+|…|\p{{So}}|(?<=[0-9])[+\-*^](?=[0-9-])|(?<=[{_AL}{_E(_QUOTES)}])\.(?=[{_AU}{_E(_QUOTES)}])"
    r"|(?<=\p{L}),(?=\p{L})|(?<=[\p{L}0-9])(?:-|–|—|--|---|——|~)(?=\p{L})|(?<=[\p{L}0-9])[:<>=/](?=\p{L})")
_URL = regex.compile(  # spacy/lang/tokenizer_exceptions.py URL_PATTERN
    r"(?:[\w+\-.]{2,}://)?(?:\S+(?::\S*)?@)?(?:(?!(?:10|127)(?:\.\d{1,3}){3})(?!(?:169\.254|192\.168)(?:\.\d{1,3}){2})"
    r"(?!172\.(?:1[6-9]|2\d|3[0-1])(?:\.\d{1,3}){2})(?:[1-9]\d?|1\d\d|2[01]\d|22[0-3])(?:\.(?:1?\d{1,2}|2[0-4]\d|"
    r"25[0-5])){2}(?:\.(?:[1-9]\d?|1\d\d|2[0-4]\d|25[0-4]))|(?:(?:[A-Za-z0-9\u00a1-\uffff][A-Za-z0-9\u00a1-\uffff_-]"
    rf"{{0,62}})?[A-Za-z0-9\u00a1-\uffff]\.)+(?:[{_AL}]{{2,63}}))(?::\d{{2,5}})?(?:[/?#]\S*)?")
# Special cases (spacy/lang/en/tokenizer_exceptions.py, spacy/lang/tokenizer_exceptions.py): kept whole or split.
_KEEP = (  # abbreviations with their period, emoticons, clipped words
    "Adm. Ak. Ala. Apr. Ariz. Ark. Aug. Bros. Calif. Co. Colo. Conn. Corp. D.C. Dec. Del. Dr. E.G. E.g. Feb. Fla. "
    "Ga. Gen. Gov. I.E. I.e. Ia. Id. Ill. Inc. Ind. Jan. Jr. Jul. Jun. Kan. Kans. Ky. La. Ltd. Mar. Mass. Md. Messrs. "
    "Mich. Minn. Miss. Mo. Mont. Mr. Mrs. Ms. Mt. N.C. N.D. N.H. N.J. N.M. N.Y. Neb. Nebr. Nev. Nov. Oct. Okla. Ore. "
    "Pa. Ph.D. Prof. Rep. Rev. S.C. Sen. Sep. Sept. St. Tenn. Va. Wash. Wis. a.m. co. e.g. i.e. p.m. v.s. vs. ä. ö. ü. "
    + " ".join(f"{c}." for c in "abcdefghijklmnopqrstuvwxyz") + " C++ and/or w/o — ‘s ‘S "
    "(*_*) (-8 (-: (-; (-_-) (._.) (: (; (= (>_<) (^_^) (o: (¬_¬) (ಠ_ಠ) (╯°□°）╯︵┻━┻ )-: ): -_- -__- ._. 0.0 0.o 0_0 "
    "0_o 8) 8-) 8-D 8D :'( :') :'-( :'-) :( :(( :((( :() :) :)) :))) :* :-( :-(( :-((( :-) :-)) :-))) :-* :-/ :-0 :-3 "
    ":-> :-D :-O :-P :-X :-] :-o :-p :-x :-| :-} :/ :0 :1 :3 :> :D :O :P :X :] :o :o) :p :x :| :} ;) ;-) ;-D ;D ;_; "
    "<.< </3 <3 <33 <333 =( =) =/ =3 =D =[ =] =| >.< >.> >:( >:o ><(((*> @_@ O.O O.o O_O O_o V.V V_V XD XDD [-: [: "
    "[= ]= ^_^ ^__^ ^___^ o.0 o.O o.o o_0 o_O o_o v.v v_v xD xDD ¯\\(ツ)/¯ ಠ_ಠ ಠ︵ಠ ' '' 'S 's 'd 'll 're 'em "
    "'bout 'nuff 'cause 'cos 'coz 'cuz 'Cause 'Cos 'Coz 'Cuz ma'am o'clock ol' doin' goin' havin' lovin' nothin' "
    "nuthin' somethin' Ma'am O'clock Ol' Doin' Goin' Havin' Lovin' Nothin' Nuthin' Somethin'").split()
_CONTRACTIONS = (  # stem:endings; "+" separates pieces: "dont" -> do|nt, "don't" -> do|n't, "couldn't've" -> ...
    "ai:nt are:nt ca:nt,nt+ve can:not could:nt,nt+ve,ve dare:nt did:nt,nt+ve do:nt,nt+ve does:nt,nt+ve gon:na got:ta "
    "had:nt,nt+ve has:nt have:nt he:d,d+ve,ll+ve,s how:d,d+ve,ll,ll+ve,re,s,ve i:d,d+ve,ll+ve,m,m+a,ve is:nt "
    "it:d,d+ve,ll,ll+ve may:nt,nt+ve might:nt,nt+ve,ve must:nt,nt+ve,ve need:nt,nt+ve not:ve ought:nt,nt+ve "
    "sha:nt,nt+ve she:d+ve,ll+ve,s should:nt,nt+ve,ve that:d,d+ve,ll,ll+ve,s there:d,d+ve,ll,ll+ve,re,s,ve "
    "these:d,d+ve,ll,ll+ve,re,ve they:d,d+ve,ll,ll+ve,re,ve this:d,d+ve,ll,ll+ve,s those:d,d+ve,ll,ll+ve,re,ve "
    "was:nt we:d,d+ve,ll+ve,ve were:nt what:d,d+ve,ll,ll+ve,re,s,ve when:d,d+ve,ll,ll+ve,re,s,ve "
    "where:d,d+ve,ll,ll+ve,re,s,ve who:d,d+ve,ll,ll+ve,s,ve why:d,d+ve,ll,ll+ve,re,s,ve wo:nt,nt+ve would:nt,nt+ve,ve "
    "you:d,d+ve,ll,ll+ve,re,ve")
_APOSTROPHE_ONLY = "he:ll it:s we:ll,re she:d,ll who:re i:ll let:s"  # "he'll" splits, "hell" does not
_CLITIC = {"nt": "n't", "d": "'d", "ll": "'ll", "re": "'re", "s": "'s", "ve": "'ve", "m": "'m"}

def _special_cases() -> dict[str, tuple[str, ...]]:
    special = {k: (k,) for k in _KEEP} | {f"°{c}.": ("°", c, ".") for c in "CFKcfk"} | {
        f"{h}{ap}": (str(h), ap) for h in range(1, 13) for ap in ("am", "pm", "a.m.", "p.m.")} | {
        "yall": ("y", "all"), "y'all": ("y'", "all"), "c'mon": ("c'm", "on"), "C'mon": ("C'm", "on"),
        "how'd'y": ("how", "'d", "'y"), "How'd'y": ("How", "'d", "'y")}
    for spec, apostrophe in ((_CONTRACTIONS, False), (_CONTRACTIONS, True), (_APOSTROPHE_ONLY, True)):
        for entry in spec.split():
            stem, ends = entry.split(":")
            for end in ends.split(","):
                pieces = (stem, *(_CLITIC.get(p, p) if apostrophe else p for p in end.split("+")))
                if apostrophe and pieces[1:] == tuple(end.split("+")):
                    continue  # gonna, cannot: no apostrophe form
                special["".join(pieces)] = pieces
                special["".join(pieces).capitalize()] = (stem.capitalize(), *pieces[1:])
    for k, v in list(special.items()):  # and with the typographic apostrophe
        if "'" in k:
            special.setdefault(k.replace("'", "’"), tuple(p.replace("'", "’") for p in v))
    return special


_SPECIAL = _special_cases()


def _infixes(s: str) -> list[str]:
    out, start = [], 0
    for m in _INFIX.finditer(s):
        if m.start() == 0:
            continue
        if m.start() != start:
            out.append(s[start:m.start()])
        out.append(m[0])
        start = m.end()
    if s[start:]:
        out.append(s[start:])
    return out


def _chunk(s: str, specials: bool = True) -> list[str]:
    """spaCy's tokenization of one whitespace-free chunk: peel prefixes and suffixes (stopping at a special case),
    then keep the rest whole if it is a special case or a URL, else split it at infixes."""
    if len(s) > 1000:  # peeling is quadratic in the worst case; spaCy would only split off a few more affixes
        return _infixes(s)
    out, suffixes = [], []
    while s:
        if specials and s in _SPECIAL:
            out.extend(_SPECIAL[s])
            s = ""
            break
        pre = _PREFIX.match(s)
        if pre is not None:
            out.append(pre[0])
            s = s[pre.end():]
            if specials and s in _SPECIAL:
                continue
        suf = _SUFFIX.search(s)
        if suf is not None:
            suffixes.append(suf[0])
            s = s[:suf.start()]
        elif pre is None:
            break
    if s:
        if specials and s in _SPECIAL:
            out.extend(_SPECIAL[s])
        elif "." in s and _URL.fullmatch(s):
            out.append(s)
        else:
            out.extend(_infixes(s))
    out.extend(reversed(suffixes))
    return out


# spaCy's special-case matcher then re-joins specials that affix splitting cut apart: "(Dr." -> "(", "Dr.".
_MERGE = {tuple(t): _SPECIAL[k] for k in _SPECIAL if len(t := _chunk(k, specials=False)) > 1}
_MERGE_MAX = max(map(len, _MERGE))
_MERGE_FIRST = {k[0] for k in _MERGE}


def _merge_specials(toks: list[str]) -> list[str]:
    if not _MERGE_FIRST.intersection(toks[:-1]):
        return toks
    spans = [(n, i) for n in range(min(_MERGE_MAX, len(toks)), 1, -1) for i in range(len(toks) - n + 1)
             if tuple(toks[i:i + n]) in _MERGE]
    if not spans:
        return toks
    taken, chosen = set(), {}
    for n, i in spans:  # spacy.util.filter_spans: longest first, then leftmost
        if not taken.intersection(range(i, i + n)):
            taken.update(range(i, i + n))
            chosen[i] = n
    out, i = [], 0
    while i < len(toks):
        if i in chosen:
            out.extend(_MERGE[tuple(toks[i:i + chosen[i]])])
            i += chosen[i]
        else:
            out.append(toks[i])
            i += 1
    return out


@lru_cache(maxsize=8)
def words(text: str) -> tuple[str, ...]:
    """Word tokens of ``text`` as datatrove's English ``split_into_words`` (spaCy) gives them; cached per text."""
    out = []
    for chunk in text.split():
        if chunk.isalnum() and chunk not in _SPECIAL and (chunk.isalpha() or _UNIT_END.search(chunk) is None):
            out.append(chunk)  # fast path: no prefix, suffix or infix can apply
            continue
        toks = _chunk(chunk)
        out.extend(_merge_specials(toks) if len(toks) > 1 else toks)
    return tuple(out)


def is_symbol(word: str) -> bool:
    """True for a token made only of punctuation (datatrove's ``PUNCTUATION_SET``)."""
    return not word.isalnum() and _SYMBOL_WORD.fullmatch(word) is not None


def count_sentences(text: str) -> int:
    """Sentences spaCy's ``Sentencizer`` finds: a new one starts at the first non-punctuation token after a
    sentence terminal ('.', '!', '?', '。', ...). 0 for a text without tokens."""
    toks = words(text)
    n, seen = (1 if toks else 0), False
    for tok in toks:
        terminal = len(tok) == 1 and _SENTENCE_END.match(tok) is not None
        if seen and not terminal and _ALL_PUNCT.fullmatch(tok) is None:
            n, seen = n + 1, False
        elif terminal:
            seen = True
    return n


def _text(doc: dict) -> str:
    text = doc.get("text")
    if isinstance(text, bytes | bytearray):
        return bytes(text).decode("utf-8", errors="replace")
    return text if isinstance(text, str) else ""


def _check(ok: bool, field: str, value, want: str) -> None:
    if not ok:
        raise ValueError(f"{field} must be {want}, got {value!r}")


def _is_ratio(v) -> bool:
    return v is None or isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= 1


def _is_int(v, low: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= low


# -- Gopher quality ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GopherQualityFilter(Step):
    """Gopher's quality rules (Rae et al. 2021, App. A.1.1) with datatrove's defaults; ``None`` disables a rule.

    As datatrove, except that a ratio with nothing to divide by (no words or no lines, possible only with
    ``min_doc_words`` disabled) is skipped where datatrove raises ZeroDivisionError."""

    name: ClassVar[str] = "gopher"
    min_doc_words: int | None = 50
    max_doc_words: int | None = 100_000
    min_avg_word_length: float | None = 3
    max_avg_word_length: float | None = 10
    max_symbol_word_ratio: float | None = 0.1  # '#' and '...'/'…' per word
    max_bullet_lines_ratio: float | None = 0.9
    max_ellipsis_lines_ratio: float | None = 0.3
    min_alpha_words_ratio: float | None = 0.8  # datatrove: max_non_alpha_words_ratio (a misnomer)
    min_stop_words: int | None = 2
    stop_words: tuple[str, ...] = STOP_WORDS

    def __post_init__(self):
        for f in ("min_doc_words", "max_doc_words", "min_stop_words"):
            _check(getattr(self, f) is None or _is_int(getattr(self, f), 0), f, getattr(self, f), "an int >= 0 or None")
        for f in ("max_symbol_word_ratio", "max_bullet_lines_ratio", "max_ellipsis_lines_ratio",
                  "min_alpha_words_ratio"):
            _check(_is_ratio(getattr(self, f)), f, getattr(self, f), "in [0, 1] or None")
        for f in ("min_avg_word_length", "max_avg_word_length"):
            v = getattr(self, f)
            _check(v is None or isinstance(v, int | float) and not isinstance(v, bool) and v >= 0, f, v,
                   "a number >= 0 or None")
        _check(not (self.min_doc_words and self.max_doc_words and self.min_doc_words > self.max_doc_words),
               "min_doc_words", self.min_doc_words, f"<= max_doc_words ({self.max_doc_words})")
        _check(not isinstance(self.stop_words, str) and all(isinstance(w, str) for w in self.stop_words),
               "stop_words", self.stop_words, "a tuple of strings")
        object.__setattr__(self, "stop_words", tuple(self.stop_words))

    def reject(self, doc: dict) -> str | None:
        text = _text(doc)
        toks = words(text)
        n_words = len(toks)
        lengths = [len(w) for w in toks if not is_symbol(w)]
        n = len(lengths)
        if self.min_doc_words and n < self.min_doc_words:
            return "gopher_short_doc"
        if self.max_doc_words and n > self.max_doc_words:
            return "gopher_long_doc"
        if n:  # datatrove divides by zero here; a doc without words has no mean length
            mean = sum(lengths) / n
            if self.min_avg_word_length and mean < self.min_avg_word_length:
                return "gopher_below_avg_threshold"
            if self.max_avg_word_length and mean > self.max_avg_word_length:
                return "gopher_above_avg_threshold"
        if n_words and self.max_symbol_word_ratio:
            if text.count("#") / n_words > self.max_symbol_word_ratio:
                return "gopher_too_many_hashes"
            if (text.count("...") + text.count("…")) / n_words > self.max_symbol_word_ratio:
                return "gopher_too_many_ellipsis"
        lines = text.splitlines()
        if lines and self.max_bullet_lines_ratio:
            bullets = sum(s.lstrip().startswith(("•", "-")) for s in lines)
            if bullets / len(lines) > self.max_bullet_lines_ratio:
                return "gopher_too_many_bullets"
        if lines and self.max_ellipsis_lines_ratio:
            ellipsis = sum(s.rstrip().endswith(("...", "…")) for s in lines)
            if ellipsis / len(lines) > self.max_ellipsis_lines_ratio:
                return "gopher_too_many_end_ellipsis"
        if n_words and self.min_alpha_words_ratio:
            alpha = sum(w.isalpha() or _HAS_ALPHA.search(w) is not None for w in toks)
            if alpha / n_words < self.min_alpha_words_ratio:
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
    counts = Counter(zip(*(toks[k:] for k in range(n))))  # tokens hold no spaces: tuples stand for joined strings
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
    dup_line_frac: float | None = 0.3
    dup_para_frac: float | None = 0.3
    dup_line_char_frac: float | None = 0.2
    dup_para_char_frac: float | None = 0.2
    top_n_grams: tuple[tuple[int, float], ...] = ((2, 0.2), (3, 0.18), (4, 0.16))
    dup_n_grams: tuple[tuple[int, float], ...] = ((5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10))

    def __post_init__(self):
        for f in ("dup_line_frac", "dup_para_frac", "dup_line_char_frac", "dup_para_char_frac"):
            _check(_is_ratio(getattr(self, f)), f, getattr(self, f), "in [0, 1] or None")
        for f in ("top_n_grams", "dup_n_grams"):
            pairs = getattr(self, f)
            ok = isinstance(pairs, tuple | list) and all(
                isinstance(p, tuple | list) and len(p) == 2 and _is_int(p[0], 1) and _is_ratio(p[1]) for p in pairs)
            _check(ok, f, pairs, "(n >= 1, fraction in [0, 1]) pairs")
            object.__setattr__(self, f, tuple(tuple(p) for p in pairs))

    def reject(self, doc: dict) -> str | None:
        text = _text(doc)
        if not text:
            return "gopher_rep_empty"
        size = len(text)
        paragraphs = _PARAGRAPH_SPLIT.split(text.strip())
        dup, chars = _duplicates(paragraphs)
        if self.dup_para_frac and dup / len(paragraphs) > self.dup_para_frac:
            return "gopher_rep_dup_para_frac"
        if self.dup_para_char_frac and chars / size > self.dup_para_char_frac:
            return "gopher_rep_dup_para_char_frac"
        lines = _LINE_SPLIT.split(text)
        dup, chars = _duplicates(lines)
        if self.dup_line_frac and dup / len(lines) > self.dup_line_frac:
            return "gopher_rep_dup_line_frac"
        if self.dup_line_char_frac and chars / size > self.dup_line_char_frac:
            return "gopher_rep_dup_line_char_frac"
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
    remove_citations: bool = True
    filter_no_terminal_punct: bool = True
    min_num_sentences: int = 5
    min_words_per_line: int = 3
    max_word_length: int = 1000
    filter_lorem_ipsum: bool = True
    filter_javascript: bool = True
    filter_curly_bracket: bool = True
    filter_policy: bool = True

    def __post_init__(self):
        for f in ("min_num_sentences", "min_words_per_line", "max_word_length"):
            _check(_is_int(getattr(self, f), -1), f, getattr(self, f), "an int >= -1 (-1 disables the rule)")
        for f in ("remove_citations", "filter_no_terminal_punct", "filter_lorem_ipsum", "filter_javascript",
                  "filter_curly_bracket", "filter_policy"):
            _check(isinstance(getattr(self, f), bool), f, getattr(self, f), "a bool")

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
