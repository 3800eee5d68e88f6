"""Words as datatrove's English word tokenizer cuts them, without spaCy: ``words``, ``is_symbol``, ``count_sentences``.

datatrove counts words as its English word tokenizer cuts them: spaCy's rule-based tokenizer
(``spacy.blank("en")``), where punctuation is mostly its own token ("word." -> "word", "."), clitics split
("don't" -> "do", "n't"), and URLs, numbers ("877,000"), "@handles" and abbreviations ("U.S.", "Dr.") stay whole.
``words`` ports that tokenizer (``spacy/tokenizer.pyx``: prefixes, suffixes, infixes, URL match, special cases and
the special-case matcher, with spaCy's English rule lists) to ~150 lines of precompiled regexes, so the thresholds
mean what they mean in datatrove without spaCy installed, ~8x faster; it is cached per text, so the two Gopher
steps tokenize a document once. It gives spaCy's tokens on all the English test corpora (one miss in ~28,000
texts: a run of six apostrophes); known differences are in other scripts (spaCy's letter classes are code-point
ranges, ours Unicode properties) and in whitespace-free chunks over 1,000 characters (split at infixes only).
Punctuation-only tokens count where datatrove counts them (symbol ratios, the 80% alphabetic-word rule, n-grams)
and not where it drops them (word count, mean word length). C4's sentence counts follow spaCy's ``Sentencizer``
over the same tokens.
"""

from __future__ import annotations

from functools import lru_cache

import regex

# datatrove.utils.text.PUNCTUATION (ASCII and CJK punctuation, control characters) plus sentence terminals.
_PUNCTUATION = ("!/—”:％１〈&(、━\\【#%「」，】；+^]~“《„';’{|∶´[=-`*．（–？！：$～«〉,><》)?）。…@_.\"}►»"
                + "".join(map(chr, [*range(0, 9), *range(11, 32), *range(127, 160)])))
_SYMBOL_WORD = regex.compile(rf"[{regex.escape(_PUNCTUATION)}\p{{Sentence_Terminal}}]+")
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
