"""bench.benchmarks.dedup_datatrove's comparison: each way two dedup runs can differ lands in its class, counted by
hand here, and the agreement shares follow from those counts."""

from __future__ import annotations

import pytest

pytest.importorskip("datatrove")

from bench.benchmarks.dedup_datatrove import Components, compare  # noqa: E402


def words(tag: str, n: int = 40) -> list[str]:
    return [f"{tag}{k}" for k in range(n)]


def clusters(*groups: tuple[str, ...]) -> Components:
    comp = Components()
    for group in groups:
        for x in group[1:]:
            comp.union(x, group[0])
    return comp


def test_every_difference_is_classed_and_the_shares_follow():
    base = words("a")
    texts = {
        "a1": " ".join(base), "a2": " ".join(base),  # one cluster on both sides, each keeps another copy
        "b1": " ".join(words("b")), "b2": " ".join(words("b")[:20] + words("x", 20)),  # Jaccard 16/60: too low
        "c1": " ".join(words("c")), "c2": " ".join(words("c")),  # only we join them: datatrove's LSH missed
        "d1": "tiny note", "d2": "tiny note",  # only we join them: under 5 words, datatrove has no signature
        "e1": " ".join(words("e")),  # a plain unique document
    }
    ours = ({"a2", "c2", "d2"}, clusters(("a1", "a2"), ("c1", "c2"), ("d1", "d2")))
    theirs = ({"a1", "b2"}, clusters(("a1", "a2"), ("b1", "b2")))
    got = compare(texts, ours, theirs)
    # a1, a2: other copy kept; b1 (kept on both sides, duplicated only for datatrove) and b2: below the threshold;
    # c1 (kept) and c2: datatrove's LSH; d1 and d2: too short for datatrove
    assert got["disagreements"] == {"other_copy_kept": 2, "below_jaccard_threshold": 2, "datatrove_lsh_miss": 2,
                                    "too_short_for_datatrove": 2}
    assert got["decision_agreement"] == pytest.approx(1 - 6 / 9)
    same_removal = sum(1 for x in texts if (x in ours[0]) == (x in theirs[0]))  # e1, b1, c1, d1
    assert same_removal == 4 and got["raw_decision_agreement"] == pytest.approx(4 / 9)
    assert got["datatrove_jaccard"] == [1.0, 1.0]


def test_components_join_transitively():
    comp = clusters(("x", "y"), ("y", "z"))
    assert comp.find("x") == comp.find("z") and sorted(map(sorted, comp.groups().values())) == [["x", "y", "z"]]
