"""alignment.tasks.digits: splits disjoint by problem (checked by an independent key written here), the scratchpad and
the verifier on hand-written solutions, and a teacher whose mistakes are systematic (per problem and family, not per
copy)."""

from __future__ import annotations

import pytest

from alignment.evaluate import load_items
from alignment.tasks.digits import (
    columns,
    digit_splits,
    digits_reward,
    family,
    is_hard,
    make_item,
    solution,
    teacher_is_wrong,
    teacher_solution,
    wrong_solution,
)


def _problem(item: dict) -> tuple:
    """Independent of alignment.tasks.digits: parse the question text; a sum and its commuted pair are one problem."""
    left, op, right = item["question"].replace(" ", "").partition("+") if "+" in item["question"] else \
        item["question"].replace(" ", "").partition("-")
    a, b = int(left), int(right)
    return (op, frozenset((a, b)) if op == "+" else (a, b))


def test_splits_share_no_problem_and_no_commuted_sum():
    train, val, test = digit_splits(6000, 300, 300)
    assert (len(train), len(val), len(test)) == (6000, 300, 300)
    train_p, val_p, test_p = ({_problem(i) for i in part} for part in (train, val, test))
    assert not train_p & test_p and not train_p & val_p and not val_p & test_p
    assert len(test_p) == 300 and len(val_p) == 300  # every held-out item is its own problem
    commuted = {("+", frozenset((i["b"], i["a"]))) for i in train if i["op"] == "+"}
    assert not commuted & test_p
    for item in test + val:  # the items are what their question says
        a, op, b = int(item["question"][:3].replace(" ", "")), item["question"][4], \
            int(item["question"][6:].replace(" ", ""))
        assert str(a + b if op == "+" else a - b) == item["answer"]


def test_held_out_splits_do_not_move_with_sizes_and_defaults_match_the_loops():
    _, val, test = digit_splits(100, 50, 50)
    _, val2, test2 = digit_splits(7000, 200, 400)
    assert test2[:50] == test and val2[:50] == val
    assert {_problem(i) for i in test2}.isdisjoint(_problem(i) for i in digit_splits(7000, 0, 0)[0])
    assert load_items("digits", 20, split="test") == digit_splits(0, 0, 20)[2]
    assert load_items("digits", 20, split="validation") == digit_splits(0, 20, 0)[1]
    with pytest.raises(ValueError, match="n_val"):
        digit_splits(10, 600, 10)


HAND = {  # worked by hand, least significant column first
    (47, "+", 38): " 7 + 8 + 0 = 5 carry 1 4 + 3 + 1 = 8 carry 0 </think> <answer> 8 5 </answer>",
    (95, "+", 17): " 5 + 7 + 0 = 2 carry 1 9 + 1 + 1 = 1 carry 1 </think> <answer> 1 1 2 </answer>",
    (47, "-", 38): " 7 - 8 - 0 = 9 borrow 1 4 - 3 - 1 = 0 borrow 0 </think> <answer> 9 </answer>",
    (50, "-", 50): " 0 - 0 - 0 = 0 borrow 0 5 - 5 - 0 = 0 borrow 0 </think> <answer> 0 </answer>",
    (61, "-", 13): " 1 - 3 - 0 = 8 borrow 1 6 - 1 - 1 = 4 borrow 0 </think> <answer> 4 8 </answer>",
}


@pytest.mark.parametrize("problem", list(HAND))
def test_scratchpad_matches_hand_worked_solutions(problem):
    item = make_item(*problem)
    assert item["question"] == f"{' '.join(str(problem[0]))} {problem[1]} {' '.join(str(problem[2]))}"
    assert solution(item) == HAND[problem]
    assert digits_reward(solution(item), item["answer"])["reward"] == 1.0


def test_verifier_reads_digits_and_needs_the_format():
    assert digits_reward(" x </think> <answer> 8 5 </answer>", "85")["reward"] == 1.0
    assert digits_reward(" x </think> <answer>85</answer>", "85")["reward"] == 1.0
    assert digits_reward(" x </think> <answer> 7 5 </answer>", "85") == {"reward": 0.0, "format_reward": 1.0,
                                                                         "answer_reward": 0.0}
    assert digits_reward(" 8 5 </answer>", "85")["format_reward"] == 0.0
    assert digits_reward(" x </think> <answer> 8 5 1 </answer>", "85")["reward"] == 0.0
    for problem in HAND:  # the preference pair's rejected answer is always wrong
        item = make_item(*problem)
        assert digits_reward(wrong_solution(item), item["answer"])["reward"] == 0.0


def _carry_families(item: dict) -> list[tuple]:
    return [family(item["op"], x, y) for x, y, _, _, out in columns(item["a"], item["op"], item["b"]) if out]


def test_teacher_mistakes_are_systematic():
    train, _, _ = digit_splits(6000, 0, 0)
    # the same problem is always demonstrated the same way, and a perfect teacher is never wrong
    assert [teacher_solution(i, 0.5) for i in train[:200]] == [teacher_solution(i, 0.5) for i in train[:200]]
    assert not any(teacher_is_wrong(i, 0.0) for i in train)
    wrong = [teacher_is_wrong(i, 0.5) for i in train]
    easy = [w for i, w in zip(train, wrong, strict=True) if not any(is_hard(f) for f in _carry_families(i))]
    hard_one = [w for i, w in zip(train, wrong, strict=True)
                if sum(is_hard(f) for f in _carry_families(i)) == 1]
    assert easy and not any(easy)  # problems without a hard carry family are never wrong
    share = sum(hard_one) / len(hard_one)  # one hard carry column: wrong with probability teacher_slip
    assert abs(share - 0.5) < 4 * (0.25 / len(hard_one)) ** 0.5
    with_slip_1 = [teacher_is_wrong(i, 1.0) for i in train if sum(is_hard(f) for f in _carry_families(i)) == 1]
    assert all(with_slip_1)
    # the teacher's reasoning and answer agree: its wrong answer is what its own columns spell
    slipped = next(i for i, w in zip(train, wrong, strict=True) if w)
    text = teacher_solution(slipped, 0.5)
    assert " carry 0" in text or " borrow 0" in text
    assert digits_reward(text, slipped["answer"])["reward"] == 0.0
