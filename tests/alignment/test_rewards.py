"""Rewards checked against hand-written cases (CS336's r1_zero semantics, MATH-style normalization), Python's own
number formatting (``f"{n:,}"``, ``Fraction``) as the reference for numbers, the GSM8K train file's ``####`` lines
parsed naively, and a seeded fuzz of malformed model output that must never raise or hang."""

import json
import random
import threading
import time
from fractions import Fraction
from pathlib import Path

import pytest

from alignment.tasks.rewards import (
    _time_limit,
    _Timeout,
    answers_equal,
    extract_answer,
    extract_boxed,
    format_reward,
    gsm8k_reward,
    last_number,
    normalize_answer,
    normalize_number,
    parse_gsm8k_answer,
    parse_mmlu_letter,
    r1_zero_reward_fn,
)

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "alignment"


def test_shared_path_points_at_work_shared():
    assert SHARED.parts[-3:] == ("shared", "data", "alignment")
    assert SHARED.parent.parent.parent == Path(__file__).resolve().parents[3]


# ----------------------------------------------------------------------------- format and extraction
@pytest.mark.parametrize("response, expected", [
    ("2 + 2 = 4 </think> <answer> 4 </answer>", 1.0),
    ("</think> <answer></answer>", 1.0),
    ("2 + 2 = 4 </think><answer> 4 </answer>", 0.0),  # no space: CS336 is strict
    ("2 + 2 = 4 </think> <answer> 4", 0.0),
    ("</answer> 2 + 2 = 4 </think> <answer> 4", 0.0),  # closing tag only before the opening
    ("<answer> 4 </answer>", 0.0),
    ("", 0.0),
])
def test_format_reward(response, expected):
    assert format_reward(response) == expected


@pytest.mark.parametrize("response, expected", [
    ("x </think> <answer> 71 </answer>", "71"),
    ("<answer>1</answer> then <answer> 2 </answer> trailing", "2"),
    ("<answer> 3 </answer> <answer> 4", "3"),  # the last complete pair
    ("<answer> 5", None),
    ("no tags", None),
])
def test_extract_answer(response, expected):
    assert extract_answer(response) == expected


@pytest.mark.parametrize("text, expected", [
    ("so \\boxed{42}.", "42"),
    ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
    ("\\boxed{a} then \\boxed{\\{1, {2}\\}}", "\\{1, {2}\\}"),  # nested braces, the last box wins
    ("\\boxed{\\boxed{7}}", "7"),
    ("\\fbox{8}", "8"),
    ("\\boxed 9$", "9"),
    ("\\boxed{unclosed", None),
    ("nothing", None),
])
def test_extract_boxed(text, expected):
    assert extract_boxed(text) == expected


# ----------------------------------------------------------------------------- normalization
EQUAL = [
    ("72", "72"), ("1.50", "1.5"), ("1.5", "3/2"), ("1/2", "0.5"), ("\\frac{1}{2}", "0.5"), ("\\dfrac{1}{2}", "1/2"),
    ("\\tfrac12", "0.5"), ("\\frac12", "\\frac{1}{2}"), ("1,000", "1000"), ("1,234,567.50", "1234567.5"),
    ("-3", "-3.0"), ("+7", "7"), ("-.5", "-0.5"), ("007", "7"), ("\\$18", "18"), ("$18.00", "18"), ("50\\%", "50"),
    ("50%", "50"), ("18 dollars", "18"), ("5 cm", "5"), ("\\text{5 apples}", "5"), ("5\\text{ cm}", "5"),
    ("\\boxed{18}", "18"), ("\\boxed{\\dfrac{3}{4}}", "0.75"), ("90^\\circ", "90"), ("90^{\\circ}", "90"),
    ("\\left( 3 \\right)", "3"), ("\\left(1, 2\\right)", "(1,2)"), ("1\\!000", "1000"), ("1\\,000", "1000"),
    ("x = 5", "5"), ("k=-2", "-2"), ("18.", "18"), ("2\\frac{1}{2}", "2.5"), ("1 1/2", "3/2"), ("1e3", "1000"),
    ("2^{10}", "1024"), ("\\text{Yes}", "yes"), ("0.3333333", "1/3"), ("−4", "-4"),
    # sympy
    ("2\\sqrt{2}", "\\sqrt{8}"), ("\\frac{\\sqrt{3}}{2}", "\\sqrt3/2"), ("2(x+1)", "2x+2"), ("x/2", "0.5x"),
    ("2^{1/2}", "\\sqrt{2}"), ("\\pi", "3.14159265358979323846"), ("(x+1)^2", "x^2+2x+1"),
    ("3\\pi/2", "\\frac{3\\pi}{2}"),
]
NOT_EQUAL = [
    ("71", "72"), ("1000001", "1000000"), ("0.33", "1/3"), ("1/2", "2"), ("-3", "3"), ("x+1", "x+2"),
    ("\\sqrt{2}", "1.4142"), ("", "0"), ("\\boxed{}", "0"), ("12 apples", "13"), ("(1,2)", "(2,1)"),
    ("9**9**9**9", "1"), ("The answer is 5", "5"),
]


@pytest.mark.parametrize("pred, truth", EQUAL)
def test_answers_equal_hand_cases(pred, truth):
    assert answers_equal(pred, truth), (pred, truth, normalize_answer(pred), normalize_answer(truth))
    assert answers_equal(truth, pred)
    assert answers_equal(pred, truth, fast=False)


@pytest.mark.parametrize("pred, truth", NOT_EQUAL)
def test_answers_not_equal_hand_cases(pred, truth):
    assert not answers_equal(pred, truth)
    assert not answers_equal(pred, truth, fast=False)


def test_answers_equal_missing_values():
    assert not answers_equal(None, "1") and not answers_equal("1", None) and not answers_equal("  ", " ")


@pytest.mark.parametrize("text, expected", [
    ("\\boxed{\\dfrac{1}{2}}", "1/2"), ("\\$1,000.00", "1000"), ("90^\\circ", "90"), ("x = \\left( 3 \\right)", "3"),
    ("12 dollars", "12"), ("+007.50", "7.5"), ("-0.0", "0"), ("\\text{\\textbf{5}}", "5"), ("x + 1", "x+1"),
])
def test_normalize_answer_canonical_strings(text, expected):
    assert normalize_answer(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("42", 42.0), ("-3.25", -3.25), ("1,000", 1000.0), ("\\frac{3}{4}", 0.75), ("3/8", 0.375), ("\\$5", 5.0),
    ("25%", 25.0), ("\\boxed{-2}", -2.0), ("7 dollars", 7.0), ("x", None), ("", None), ("1/0", None),
    ("9**9**9**9", None), ("1" * 500, None),
])
def test_normalize_number(text, expected):
    assert normalize_number(text) == expected


def test_numbers_match_python_formatting_reference():
    """Integers with thousands separators (Python's ``f"{n:,}"``), decimals with trailing zeros (``f"{x:.4f}"``) and
    ``\\frac{p}{q}`` against ``Fraction`` - generated, compared with what Python says they are."""
    rng = random.Random(0)
    for _ in range(300):
        n = rng.randint(-10**9, 10**9)
        assert answers_equal(f"{n:,}", str(n)) and not answers_equal(f"{n:,}", str(n + 1))
        assert normalize_number(f"\\${n:,}") == float(n)
        p, q = rng.randint(-999, 999), rng.randint(1, 999)
        assert answers_equal(f"\\frac{{{p}}}{{{q}}}", f"{p}/{q}")
        frac = Fraction(p, q)
        if frac.denominator in (1, 2, 4, 5, 8, 10, 16, 20, 25, 40, 50):  # exact decimals
            assert answers_equal(f"{float(frac):.6f}", f"\\dfrac{{{p}}}{{{q}}}")
        assert not answers_equal(f"\\frac{{{p}}}{{{q}}}", str(Fraction(p, q) + Fraction(1, 7)))


def test_hostile_expressions_are_refused_quickly():
    start = time.perf_counter()
    for bad in ("9**9**9**9", "9^9^9^9", "x^{9^{9}}", "10^{10^{10}}", "2^{99999}", "(10^{100})^{100}", "99999^99999",
                "\\sqrt{9^9^9}", "1" * 5000 + "^9", "(" * 300 + "1" + ")" * 300, "1e9999999", "2.5E-99999999",
                "__import__('os').system('true')", "E**9999999", "N(x)", "((10^60)^64)^64", "((x+1)^64)^64"):
        assert answers_equal(bad, "1") is False
        assert answers_equal("x", bad) is False
    assert time.perf_counter() - start < 8.0  # each sympy check stops after at most 1 s


def test_very_long_digit_strings_compare_as_strings():
    big = "7" * 5000
    assert answers_equal(big, big)
    assert isinstance(answers_equal(big + ".000", big), bool)  # must not raise; beyond the size limit no promise
    assert not answers_equal(big, "7" * 4999 + "8")


# ----------------------------------------------------------------------------- r1_zero reward
@pytest.mark.parametrize("response, truth, expected", [
    ("23 + 48 = 71 </think> <answer> 71 </answer>", "71", (1.0, 1.0, 1.0)),
    ("23 + 48 = 70 </think> <answer> 70 </answer>", "71", (0.0, 1.0, 0.0)),
    ("23 + 48 = 71 </think><answer> 71 </answer>", "71", (0.0, 0.0, 0.0)),  # format wrong: all zero
    ("71", "71", (0.0, 0.0, 0.0)),
    ("</think> <answer> \\boxed{\\frac{1}{2}} </answer>", "0.5", (1.0, 1.0, 1.0)),
    ("</think> <answer> $1,000 </answer>", 1000, (1.0, 1.0, 1.0)),
    ("</think> <answer> 2.5 </answer>", 2.5, (1.0, 1.0, 1.0)),
    ("</think> <answer> 3 </answer>", ["1", "3"], (1.0, 1.0, 1.0)),
    ("</think> <answer> </answer>", "0", (0.0, 1.0, 0.0)),
    ("</think> <answer> \\boxed{unclosed </answer>", "0", (0.0, 1.0, 0.0)),
])
def test_r1_zero_reward_fn(response, truth, expected):
    out = r1_zero_reward_fn(response, truth)
    assert set(out) == {"reward", "format_reward", "answer_reward"}
    assert (out["reward"], out["format_reward"], out["answer_reward"]) == expected


# ----------------------------------------------------------------------------- GSM8K
@pytest.mark.parametrize("text, expected", [
    ("Natalia sold 48/2 = <<48/2=24>>24 clips.\n#### 72", "72"), ("#### 1,200", "1200"), ("#### -5", "-5"),
    ("#### $18", "18"), ("#### 0.50", "0.5"), ("a\n#### 3\n#### 4", "4"), ("no marker 12", None), ("#### none", None),
])
def test_parse_gsm8k_answer(text, expected):
    assert parse_gsm8k_answer(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("she has 1,200.50 dollars.", "1200.5"), ("5-3 = 2 and then 7", "7"), ("it is -4", "-4"), ("1, 2, 3", "3"),
    ("no digits", None),
])
def test_last_number(text, expected):
    assert last_number(text) == expected


@pytest.mark.parametrize("response, truth, reward", [
    ("So 48 + 24 = 72 clips.", "72", 1.0), ("#### 72\nwait, 73", "72", 1.0), ("The answer is $1,200.", "1200", 1.0),
    ("</think> <answer> 72 clips </answer> 5", "72", 1.0), ("\\boxed{72}", "#### 72", 1.0), ("73", "72", 0.0),
    ("no number", "72", 0.0),
])
def test_gsm8k_reward(response, truth, reward):
    out = gsm8k_reward(response, truth)
    assert out["reward"] == out["answer_reward"] == reward


def test_every_gsm8k_train_answer_parses_like_the_naive_reference():
    path = SHARED / "gsm8k_train.jsonl"
    if not path.exists():
        pytest.skip(f"{path} absent")
    n = 0
    for line in path.open():
        solution = json.loads(line)["answer"]
        reference = solution.split("####")[-1].strip().replace(",", "")
        parsed = parse_gsm8k_answer(solution)
        assert parsed is not None and float(parsed) == float(reference), (solution, parsed)
        n += 1
    assert n == 7473


# ----------------------------------------------------------------------------- MMLU
@pytest.mark.parametrize("response, expected", [
    ("B", "B"), ("B.", "B"), ("(C)", "C"), ("C) Paris", "C"), ("D: none of these", "D"),
    ("The correct answer is B", "B"), ("The correct answer is B because ...", "B"), ("answer: d", "D"),
    ("Answer: (a)", "A"), ("**Answer:** C", "C"), ("I am sure the answer is (D).", "D"),
    ("Reasoning... so option C is right, (C).", "C"), ("The answer is: b.", "B"),
    ("The answer is a bit tricky", None), ("A good question with no answer", None), ("answer is B or C", None),
    ("The answer is A. No wait, the answer is C.", None), ("(A) or (B)", None), ("", None), ("Because", None),
])
def test_parse_mmlu_letter(response, expected):
    assert parse_mmlu_letter(response) == expected


# ----------------------------------------------------------------------------- robustness
def _fuzz_strings(rng: random.Random, n: int):
    pieces = ["\\boxed{", "}", "{", "\\frac", "\\sqrt", "^", "**", "9", "</think> <answer>", "</answer>", "<answer>",
              "####", "$", "%", ",", ".", "-", "(", ")", "\\left(", "\\right)", "\\text{", "x", "=", "Answer: ",
              "\ud800", "\udfff", "\x00", "\u202e", "é", "😀", "\n", " ", "1e999", "nan", "inf", "\\\\"]
    for _ in range(n):
        kind = rng.random()
        if kind < 0.4:
            yield "".join(rng.choice(pieces) for _ in range(rng.randint(0, 40)))
        elif kind < 0.7:
            yield "".join(chr(rng.randint(0, 0x10FFFF)) for _ in range(rng.randint(0, 60)))
        else:
            yield bytes(rng.randint(0, 255) for _ in range(rng.randint(0, 60))).decode("utf-8", "surrogateescape")


def _call_everything(s, truth="1"):
    assert format_reward(s) in (0.0, 1.0)
    assert extract_answer(s) is None or isinstance(extract_answer(s), str)
    assert extract_boxed(s) is None or isinstance(extract_boxed(s), str)
    assert isinstance(normalize_answer(s), str)
    v = normalize_number(s)
    assert v is None or isinstance(v, float)
    assert isinstance(answers_equal(s, truth), bool) and isinstance(answers_equal(truth, s), bool)
    r = r1_zero_reward_fn(s, truth)
    assert set(r) == {"reward", "format_reward", "answer_reward"} and r["reward"] in (0.0, 1.0)
    assert gsm8k_reward(s, truth)["reward"] in (0.0, 1.0)
    assert parse_gsm8k_answer(s) is None or isinstance(parse_gsm8k_answer(s), str)
    assert last_number(s) is None or isinstance(last_number(s), str)
    assert parse_mmlu_letter(s) in (None, "A", "B", "C", "D")


def test_fuzz_random_strings_never_raise():
    rng = random.Random(1234)
    start = time.perf_counter()
    for s in _fuzz_strings(rng, 1500):
        _call_everything(s)
        _call_everything(f"</think> <answer> {s} </answer>", s)
    assert time.perf_counter() - start < 10.0


@pytest.mark.parametrize("make", [
    lambda: "1" * 1_000_000,
    lambda: "x " * 500_000,
    lambda: "\\boxed{" * 100_000,
    lambda: "{" * 300_000 + "}" * 10,
    lambda: "</think> <answer> " + "9" * 1_000_000 + " </answer>",
    lambda: "\\boxed{" * 5000 + "1" + "}" * 5000,
    lambda: "The answer is " * 70_000 + "B",
    lambda: "1,000" * 200_000 + " dollars",
    lambda: "a" * 1_000_000 + "!",
])
def test_huge_and_malformed_inputs(make):
    s = make()
    start = time.perf_counter()
    _call_everything(s, truth="9")
    assert time.perf_counter() - start < 5.0


@pytest.mark.parametrize("value", [None, b"\xff\xfe</think> <answer> 1 </answer>", 12, 1.5, ["1"], object()])
def test_non_string_inputs(value):
    _call_everything(value)


def test_time_limit_interrupts_a_runaway_computation():
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("SIGALRM limits only work in the main thread")
    start = time.perf_counter()
    with pytest.raises(_Timeout):
        with _time_limit(0.05):
            while time.perf_counter() - start < 3.0:
                pass
    assert time.perf_counter() - start < 1.0
