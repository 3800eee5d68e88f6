"""bench.experiments.extract_explore's simulations and profile bookkeeping, against per-page numbers worked out by
hand."""

from types import SimpleNamespace

import pytest

from bench.experiments.extract_explore import (
    PageRun,
    cascade_rule,
    cheapest_rule,
    profile_shares,
    resiliparse_first,
    size_rows,
)


def _runs():
    # page 1: the fast text is short (50 characters of 1,000) and misses a snippet; page 2: the fast text is right
    short = PageRun(2, 1, seconds={"full": 1.0, "prepass": 0.1, "prepass+fast": 0.4, "resiliparse": 0.05},
                    kept={"full": 2, "prepass+fast": 1, "resiliparse": 2}, dropped={"full": 1, "prepass+fast": 1,
                                                                                    "resiliparse": 1},
                    length={"prepass+fast": 50, "resiliparse": 900}, page_chars=1000)
    good = PageRun(2, 1, seconds={"full": 1.0, "prepass": 0.1, "prepass+fast": 0.4, "resiliparse": 0.05},
                   kept={"full": 2, "prepass+fast": 2, "resiliparse": 1}, dropped={"full": 1, "prepass+fast": 1,
                                                                                   "resiliparse": 0},
                   length={"prepass+fast": 500, "resiliparse": 400}, page_chars=1000)
    return [short, good]


def test_cascade_rule_routes_costs_and_scores_by_hand():
    runs = _runs()
    # min 100 characters: page 1 goes to full trafilatura; cost 0.5 + 1.0 + 0.5 against 2.0 of full on both
    one = cascade_rule(runs, 100, 0.0, "page")
    assert one["routed"] == 1 and one["speedup"] == pytest.approx(1.0) and one["kept"] == 1.0
    # a share of 0.6 of the page's 1,000 characters routes both: cost 3.0
    both = cascade_rule(runs, 0, 0.6, "page")
    assert both["routed"] == 2 and both["speedup"] == pytest.approx(2 / 3)
    # no rule: nothing routed, cost 1.0, page 1 loses a snippet
    none = cascade_rule(runs, 0, 0.0, "page")
    assert none["routed"] == 0 and none["speedup"] == pytest.approx(2.0) and none["kept"] == 0.75
    # Resiliparse's text as the denominator costs its parse on every page: 0.1 more
    assert cascade_rule(runs, 100, 0.0, "resiliparse")["speedup"] == pytest.approx(2.0 / 2.1)
    assert cascade_rule(runs, 0, 0.6, "resiliparse")["routed"] == 1  # 500 >= 0.6 * 400


def test_cheapest_rule_reaching_the_bar_routes_only_the_short_page():
    best = cheapest_rule(_runs(), "page")
    assert (best["routed"], best["kept"]) == (1, 1.0) and best["speedup"] == pytest.approx(1.0)
    assert (best["min_chars"], best["share"]) == (0, 0.1)  # the first of the grid that routes page 1 alone


def test_resiliparse_first_pays_resiliparse_everywhere_and_full_where_it_is_not_used():
    runs = _runs()
    rule = resiliparse_first(runs, lambda r: r.page_chars == 1000 and r.length["resiliparse"] == 900)
    assert rule["pages"] == 1 and rule["speedup"] == pytest.approx(2.0 / 1.1)
    assert (rule["kept"], rule["dropped"]) == (1.0, 1.0)  # page 1 from Resiliparse, page 2 from trafilatura


def test_profile_shares_sum_cumulative_time_per_named_function():
    stats = SimpleNamespace(total_tt=10.0, stats={
        ("/x/site-packages/trafilatura/external.py", 148, "try_justext"): (3, 3, 0.2, 1.5, {}),
        ("/x/site-packages/trafilatura/external.py", 35, "try_readability"): (5, 5, 0.1, 2.0, {}),
        ("/x/site-packages/other/external.py", 35, "try_readability"): (5, 5, 0.1, 9.0, {}),  # another package
        ("/x/lib/python3.11/copy.py", 61, "copy"): (40, 40, 0.3, 0.5, {}),
    })
    total, parts, justext_calls = profile_shares(stats)
    assert total == 10.0 and justext_calls == 3
    assert parts["justext"] == 1.5 and parts["readability comparison"] == 2.0
    assert parts["tree copies (copy.copy)"] == 0.5
    assert parts["main extractor"] == 0.0


def test_size_rows_count_each_half():
    pages = [(b"", None, {"url": u}) for u in ("https://www.example.com/a", "https://www.example.com/b",
                                                "https://www.example.com/c")]
    rows = {r.metric: r.value for r in size_rows(pages, 5)}
    assert rows == {"pages": 3, "validation_pages": 2, "test_pages": 1}
