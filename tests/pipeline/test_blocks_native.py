"""The distilled extractor's compiled core (``pipeline.web.native``) against the NumPy references it replaces: the
block features and containers, both forests' margins and the context features, equal to the last bit on generated
pages, on hand-made blocks that stress the text statistics (case mappings, code points beyond the BMP, stopwords in
capitals) and, where ../shared is present, on the real pages of the evaluation set and the crawl."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from pipeline.web import native
from pipeline.web.blocks import Page, containers, features, features_reference, page_blocks
from pipeline.web.distilled import context_features, context_features_reference, load_model
from pipeline.web.extract import decode_html
from pipeline.web.trees import fit
from pipeline.web.warc import iter_payloads

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT.parent / "shared" / "data" / "web"
needs_native = pytest.mark.skipif(native.NATIVE is None, reason="compiled core not built or LMW_NO_NATIVE set")


def assert_same_numbers(page: Page, model) -> None:
    x, groups = features(page)
    np.testing.assert_array_equal(groups, containers(page))
    np.testing.assert_array_equal(x, features_reference(page, groups))
    for forest in (model.blocks, model.context):
        rows = x if forest is model.blocks else context_features_reference(x, model.blocks.predict(x), groups)
        np.testing.assert_array_equal(forest.margin(rows), forest.margin_reference(rows))
    p = model.blocks.predict(x)
    np.testing.assert_array_equal(context_features(x, p, groups), context_features_reference(x, p, groups))


def random_page(rng: random.Random, n: int) -> Page:
    words = ["the", "THE", "The", "für", "FÜR", "İstanbul", "İ", "I", "ΣΟΦΙΑ", "straße", "STRASSE", "naïve", "日本語",
             "😀", "\U0001d400bc", "x", "a.", "end!", "|", "•", "»", "12:30", "（注）", "«Ça»", "o", "się", "że"]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 40))) for _ in range(n)]
    ints = {name: [rng.randint(0, hi) for _ in range(n)] for name, hi in
            (("link_chars", 30), ("tags", 9), ("landmarks", 4095), ("keywords", 32767), ("depths", 40),
             ("links", 6), ("parents", 12), ("grandparents", 5))}
    return Page(texts=texts, **ints)


@needs_native
def test_features_margins_and_context_equal_the_references_on_stressed_blocks():
    rng = random.Random(0)
    model = load_model()
    for n in (1, 2, 3, 7, 8, 9, 130, 300):  # NumPy's pairwise sum changes shape at 8 and 128 values
        assert_same_numbers(random_page(rng, n), model)


@needs_native
def test_a_forest_of_any_shape_gives_the_reference_margins():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(500, 5)).astype(np.float32)
    y = (x[:, 1] > 0).astype(float)
    for trees, depth in ((1, 1), (9, 2), (130, 3)):
        forest = fit(x, y, trees=trees, depth=depth)
        np.testing.assert_array_equal(forest.margin(x), forest.margin_reference(x))


@needs_native
def test_bad_shapes_are_errors_not_reads_beyond_the_arrays():
    model = load_model()
    x = np.zeros((3, 5), dtype=np.float32)  # fewer columns than the forest reads
    with pytest.raises(ValueError, match="beyond"):
        model.blocks.margin(x)
    with pytest.raises(ValueError, match="container"):
        native.NATIVE.context_features(np.zeros((2, 5), np.float32), 2, 5, np.zeros(2), np.full((2, 2), 7), 0)


def html_pages(paths: list[Path], limit: int) -> list[Page]:
    pages = []
    for path in paths:
        for payload in iter_payloads(path, Counter()):
            html = decode_html(payload.body, payload.charset) if payload.kind == "html" else None
            page = page_blocks(html) if html else None
            if page and page.texts:
                pages.append(page)
            if len(pages) >= limit:
                return pages
    return pages


@needs_native
def test_the_same_numbers_on_generated_pages(tmp_path):
    from pipeline.sample.crawl import generate_sample

    generate_sample(tmp_path / "s.warc.gz", tmp_path / "m.jsonl", pages=150, seed=3)
    model = load_model()
    for page in html_pages([tmp_path / "s.warc.gz"], 150):
        assert_same_numbers(page, model)


@needs_native
def test_the_same_numbers_on_real_pages():
    warcs = sorted(WEB.glob("*.warc.gz"))
    if not warcs:
        pytest.skip("../shared/data/web is absent")
    model = load_model()
    pages = html_pages(warcs, 10_000)
    assert len(pages) > 900
    for page in pages[::3]:
        assert_same_numbers(page, model)
