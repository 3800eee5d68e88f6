"""The distilled extractor: blocks and features checked against hand-written expectations and the char-by-char
reference, the NumPy trees against a naive walk of each tree written here, the labels against trafilatura's text,
distillation reproducible to the byte and blind to the evaluation set's test half, and the extract stage with it."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest

from pipeline.web.blocks import (
    FEATURE_NAMES,
    LANDMARK_BIT,
    Page,
    containers,
    features,
    page_blocks,
    text_stats,
    text_stats_reference,
    window_mean,
)
from pipeline.web.distill import eval_half, label_blocks, url_hash
from pipeline.web.distill import main as distill_main
from pipeline.web.distilled import CONTEXT_NAMES, MODEL_PATH, context_features, distilled_text, load_model
from pipeline.web.trees import fit
from tests.pipeline.warcs import PROSE, page, response

WEB = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "web"


def test_a_page_is_cut_into_blocks_in_document_order_with_their_context():
    html = page("A Title", PROSE[:2]).decode()
    blocks = page_blocks(html)
    assert blocks.texts[0] == "Home News About us"  # the nav's links: one block
    assert blocks.texts[-3:-1] == PROSE[:2] and blocks.texts[-4] == "A Title"
    nav = blocks.landmarks[0]
    assert nav & LANDMARK_BIT["nav"] and nav & LANDMARK_BIT["a"]
    assert blocks.link_chars[0] == len("HomeNewsAbout us")  # every word of it inside a link
    assert blocks.landmarks[-2] & LANDMARK_BIT["article"] and blocks.link_chars[-2] == 0
    assert blocks.texts[-1].startswith("Copyright") and blocks.landmarks[-1] & LANDMARK_BIT["footer"]
    assert features(blocks)[0].shape == (len(blocks.texts), len(FEATURE_NAMES))


def test_inline_elements_join_as_written_and_blocks_know_their_containers():
    html = ("<body><div class='story'><p>By <a href='/a'>Aaron Humes</a>: The <b>x</b> <i>y</i>\n<span>z</span>"
            "s<em>elbst</em></p><p>second</p></div><ul><li>menu</li></ul></body>")
    blocks = page_blocks(html)
    assert blocks.texts == ["By Aaron Humes: The x y zselbst", "second", "menu"]
    # the two paragraphs' container is the div, the item's the list; above both, the body
    assert blocks.parents[0] == blocks.parents[1] != blocks.parents[2]
    assert blocks.grandparents == [0, 0, 0]
    assert containers(blocks).tolist() == [[0, 0], [0, 0], [1, 0]]


def test_container_features_and_context_equal_a_naive_sum_over_each_container():
    rng = np.random.default_rng(1)
    n = 40
    blocks = Page(texts=["word " * int(k) + "end" for k in rng.integers(1, 30, n)],
                  link_chars=[int(k) for k in rng.integers(0, 5, n)], tags=[0] * n, landmarks=[0] * n,
                  keywords=[0] * n, depths=[1] * n, links=[0] * n, parents=rng.integers(3, 9, n).tolist(),
                  grandparents=rng.integers(1, 3, n).tolist())
    x, groups = features(blocks)
    assert groups.tolist() == containers(blocks).tolist()
    p = rng.random(n)
    context = context_features(x, p, groups)
    chars = [len(t) for t in blocks.texts]
    for i in range(n):
        for level, ids in enumerate((blocks.parents, blocks.grandparents)):
            same = [j for j in range(n) if ids[j] == ids[i]]
            total = sum(chars[j] for j in same)
            prefix = ("parent", "grandparent")[level]
            expect = {f"{prefix}_log_chars": math.log1p(total), f"{prefix}_share": total / sum(chars),
                      f"{prefix}_link_density": sum(blocks.link_chars[j] for j in same) / total,
                      f"{prefix}_log_blocks": math.log1p(len(same))}
            for name, value in expect.items():
                assert x[i, FEATURE_NAMES.index(name)] == pytest.approx(value, rel=1e-5)
            mean_p = sum(p[j] * chars[j] for j in same) / total
            assert context[i, len(FEATURE_NAMES) + CONTEXT_NAMES.index(f"p_{prefix}")] == pytest.approx(mean_p,
                                                                                                        rel=1e-5)


def test_page_text_stats_equal_the_char_by_char_reference():
    rng = random.Random(0)
    alphabet = list("abcXYZ É ü 12 .!?|•» Ж ж 日本 the und der 😀 。 ") + ["\U0001d400"]  # and beyond the BMP
    texts = [" ".join("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 15))).split()) or "x"
             for _ in range(400)]
    np.testing.assert_allclose(text_stats(texts), [text_stats_reference(t) for t in texts], rtol=0, atol=1e-12)


def test_window_mean_is_the_mean_of_five_neighbours():
    values = np.random.default_rng(2).random(9)
    padded = [0.5, 0.5, *values, 0.5, 0.5]
    np.testing.assert_allclose(window_mean(values, outside=0.5), [sum(padded[i:i + 5]) / 5 for i in range(9)])


def naive_margin(forest, row: np.ndarray) -> float:
    """Each tree walked node by node, as a decision tree is drawn."""
    total = forest.base
    for t in range(forest.feature.shape[0]):
        node = 0
        while node < forest.feature.shape[1]:
            node = 2 * node + (2 if row[forest.feature[t, node]] > forest.threshold[t, node] else 1)
        total += forest.value[t, node - forest.feature.shape[1]]
    return total


def test_trees_learn_a_rule_and_predict_as_a_naive_walk():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(6000, 6)).astype(np.float32)
    y = ((x[:, 0] > 0.3) & (x[:, 4] < 0.5)).astype(float)
    forest = fit(x[:5000], y[:5000], trees=30, depth=3)
    assert ((forest.predict(x[5000:]) > 0.5) == y[5000:]).mean() > 0.97
    margins = forest.margin(x[:50])
    np.testing.assert_allclose(margins, [naive_margin(forest, row) for row in x[:50]], rtol=1e-12)
    again = type(forest).from_json(json.loads(json.dumps(forest.to_json())))
    np.testing.assert_allclose(again.margin(x[:50]), margins, rtol=1e-6)


def test_blocks_are_labelled_by_the_teacher_text():
    texts = ["Home News", PROSE[0], PROSE[1], "Copyright 2024"]
    teacher = f"{PROSE[0]}\n{PROSE[1][:-1]}"  # the teacher may cut a block's last word
    assert label_blocks(texts, teacher).tolist() == [0.0, 1.0, 1.0, 0.0]


def test_the_shipped_model_keeps_the_article_and_drops_the_boilerplate():
    text, unsure = distilled_text(page("A Title", PROSE).decode())
    assert all(p in text for p in PROSE) and "cookies" not in text and "Copyright" not in text
    assert not unsure


def test_the_shipped_model_never_saw_a_test_half_page():
    model = load_model(MODEL_PATH)
    seen = set(model.provenance["page_url_hashes"])
    if not (WEB / "trafilatura-evaldata.json").is_file():
        pytest.skip("../shared/data/web is absent")
    urls = json.loads((WEB / "trafilatura-evaldata.json").read_text(encoding="utf-8"))
    test_half = {url for url in urls if eval_half(url) == "test"}
    assert seen and not seen & {url_hash(u) for u in test_half}
    assert len(seen & {url_hash(u) for u in urls}) > 300  # the validation half was learnt from


def _crawl(path: Path, seed: int) -> Path:
    rng = random.Random(seed)
    records = [response(f"http://s{i}.example/{seed}", page(f"Story {i}", rng.sample(PROSE, 2)), i)
               for i in range(8)]
    path.write_bytes(b"".join(records))
    return path


def test_distilling_twice_gives_the_same_bytes(tmp_path):
    warcs = [_crawl(tmp_path / f"c{i}.warc.gz", i) for i in range(2)]
    outs = []
    for run, work in enumerate(("a", "b", "a")):  # the third reuses the first's labelled pages (a resumed run)
        out = tmp_path / f"model{run}.json"
        argv = [str(w) for w in warcs] + ["--params", "none", "--weights", str(out), "--work-dir",
                                          str(tmp_path / work), "--trees", "5"]
        assert distill_main(argv) == 0
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] == outs[2] and len(list((tmp_path / "a").glob("*.npz"))) == 2
    model = json.loads(outs[0])
    assert model["provenance"]["pages"] == 16 and len(model["blocks"]["value"]) == 5
