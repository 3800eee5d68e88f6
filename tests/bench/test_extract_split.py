"""bench.benchmarks.extract's fixed validation/test halves of trafilatura's evaluation pages, and its quality score."""

import json
from pathlib import Path

import pytest

from bench.benchmarks.extract import HALVES, eval_half, quality

SHARED_WEB = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "web"


def test_halves_are_fixed():
    # worked out by hand from the first byte of each URL's SHA-256 (even: validation, odd: test); a change to the
    # split (and so to every figure tuned on the validation half) fails here
    assert eval_half("https://www.example.com/a") == "validation"  # 0x7e
    assert eval_half("https://www.example.com/b") == "validation"  # 0x8c
    assert eval_half("https://www.example.com/c") == "test"  # 0xf5
    assert eval_half("https://www.example.com/") == "test"  # 0x49


@pytest.mark.skipif(not (SHARED_WEB / "trafilatura-evaldata.json").is_file(), reason="../shared/data/web absent")
def test_halves_of_the_eval_set_are_disjoint_balanced_and_stable():
    urls = list(json.loads((SHARED_WEB / "trafilatura-evaldata.json").read_text(encoding="utf-8")))
    halves = {h: {u for u in urls if eval_half(u) == h} for h in HALVES}
    assert not halves["validation"] & halves["test"]
    assert halves["validation"] | halves["test"] == set(urls)
    assert all(0.4 * len(urls) < len(h) < 0.6 * len(urls) for h in halves.values())
    assert {u: eval_half(u) for u in urls} == {u: eval_half(u) for u in reversed(urls)}  # no order dependence


def test_quality_counts_snippets_per_half():
    pages = [(b"", None, {"url": "https://www.example.com/a", "with": ["alpha", "beta"], "without": ["menu"]}),
             (b"", None, {"url": "https://www.example.com/c", "with": ["gamma"], "without": ["login", "ad"]})]
    q = quality(["alpha and menu", "gamma"], pages)
    assert q["kept_validation"] == 0.5 and q["dropped_validation"] == 0.0
    assert q["kept_test"] == 1.0 and q["dropped_test"] == 1.0
    assert q["kept_all"] == 2 / 3 and q["dropped_all"] == 2 / 3
