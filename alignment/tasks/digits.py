"""The ``digits`` task: column addition/subtraction held out by problem, with a digit-by-digit scratchpad.

Every digit is its own token: operands are written digit by digit with spaces (``4 7 + 3 8``), so the GPT-2
pre-tokenizer gives `` 4``, `` 7``... and no number is one opaque token (in a byte-level BPE `` 23`` is one token
and `` 71`` is `` 7`` + ``1``). The solution works the columns least significant first, with the carry (borrow) in
and out written out, so an unseen problem is a new composition of seen one-digit steps::

    question  4 7 + 3 8
    response  7 + 8 + 0 = 5 carry 1 4 + 3 + 1 = 8 carry 0 </think> <answer> 8 5 </answer>
    question  4 7 - 3 8
    response  7 - 8 - 0 = 9 borrow 1 4 - 3 - 1 = 0 borrow 0 </think> <answer> 9 </answer>

Splits are by *problem*: the key of ``a + b`` is the unordered pair (a commuted sum is the same problem), of
``a - b`` (a >= b) the ordered one. Keys are ranked by a hash of (``split_seed``, key); the first ``RESERVED`` are
held out (test, then validation), the rest are train. The split does not depend on a run's seed, so every seed is
scored on the same problems.

The teacher (``teacher_solution``) is wrong systematically, not by a coin flip per copy: a fixed half of the
carry/borrow *families* (operator and the column's two digits, e.g. ``+ {7, 8}``) are hard for it, and on a
problem whose column falls in a hard family it forgets the carry with probability ``teacher_slip``, decided by a
hash of the problem, so every copy of a problem is demonstrated the same way. The verifier scores the true answer.
"""

from __future__ import annotations

import hashlib
import random
import re

from alignment.tasks.rewards import extract_answer, format_reward

QUESTION = "{a} {op} {b}"
HARD_FAMILY_SHARE = 0.5  # of the carry/borrow families, the share the teacher finds hard
WORD = {"+": "carry", "-": "borrow"}


def spaced(n: int) -> str:
    """``47`` -> ``"4 7"``: one token per digit."""
    return " ".join(str(n))


def _unit(*parts) -> float:
    """A stable uniform number in [0, 1) from ``parts`` (Python's ``hash`` is salted per process)."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def problem_key(a: int, op: str, b: int) -> tuple:
    """What makes two problems the same: for ``+`` the unordered operands, for ``-`` the ordered ones."""
    return ("+", min(a, b), max(a, b)) if op == "+" else ("-", a, b)


def _check(digits: int) -> None:
    if not isinstance(digits, int) or not 1 <= digits <= 4:
        raise ValueError(f"digits must be an int in 1..4 for the digits task, got {digits!r}")


def all_keys(digits: int = 2) -> list[tuple]:
    """Every problem key with two ``digits``-digit operands (``-``: a >= b, never negative)."""
    _check(digits)
    lo, hi = 10 ** (digits - 1), 10**digits
    return [(op, a, b) for op in ("+", "-") for a in range(lo, hi) for b in range(lo, hi)
            if (b >= a if op == "+" else a >= b)]


def make_item(a: int, op: str, b: int) -> dict:
    """``{"question", "answer", "expression", "a", "op", "b"}`` for one problem."""
    value = a + b if op == "+" else a - b
    return {"question": QUESTION.format(a=spaced(a), op=op, b=spaced(b)), "answer": str(value),
            "expression": f"{a} {op} {b}", "a": a, "op": op, "b": b}


def _oriented(key: tuple) -> list[tuple[int, str, int]]:
    """The problems of a key as (a, op, b): both orders of a sum (one when a == b), the one difference."""
    op, x, y = key
    if op == "-" or x == y:
        return [(x, op, y)]
    return [(x, op, y), (y, op, x)]


SPLITS = ("validation", "test")
RESERVED = 1000  # keys set aside for validation (second half) and test (first half), whatever n_val / n_test are


def digit_splits(n_train: int, n_val: int, n_test: int, digits: int = 2,
                 split_seed: int = 0) -> tuple[list[dict], list[dict], list[dict]]:
    """(train, validation, test), disjoint by problem key. The first ``RESERVED`` keys (hash order) are never
    trained on: test takes from the first half, validation from the second, one orientation of each key (picked by
    hash), so neither depends on the other's size or on ``n_train``. Train holds the problems of the other keys (a
    sum in both orders), hash-shuffled, the first ``n_train``. The same arguments always give the same lists."""
    for name, n in (("n_train", n_train), ("n_val", n_val), ("n_test", n_test)):
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"{name} must be an int >= 0, got {n!r}")
    if not isinstance(digits, int) or not 2 <= digits <= 4:
        raise ValueError(f"digits must be an int in 2..4 for the digits task, got {digits!r}")
    keys = sorted(all_keys(digits), key=lambda k: _unit("split", split_seed, *k))
    half = RESERVED // 2
    if max(n_val, n_test) > half:
        raise ValueError(f"n_val={n_val} and n_test={n_test} must each be <= {half} (the reserved held-out keys)")

    def one(key: tuple) -> dict:
        options = _oriented(key)
        return make_item(*options[int(_unit("orient", split_seed, *key) * len(options))])

    test = [one(k) for k in keys[:n_test]]
    val = [one(k) for k in keys[half:half + n_val]]
    pool = [p for k in keys[RESERVED:] for p in _oriented(k)]
    random.Random(f"train:{split_seed}").shuffle(pool)
    if n_train > len(pool):
        raise ValueError(f"n_train={n_train} exceeds the {len(pool)} training problems of {digits}-digit operands")
    return [make_item(*p) for p in pool[:n_train]], val, test


# --------------------------------------------------------------------------- scratchpad and teacher
def columns(a: int, op: str, b: int) -> list[tuple[int, int, int, int, int]]:
    """The true column steps, least significant first: (x, y, carry_in, digit, carry_out)."""
    return teacher_columns(a, op, b, 0.0)


def family(op: str, x: int, y: int) -> tuple:
    """The teacher's unit of difficulty: the operator and the column's digits (unordered for ``+``)."""
    return (op, min(x, y), max(x, y)) if op == "+" else (op, x, y)


def is_hard(fam: tuple, teacher_seed: int = 0) -> bool:
    return _unit("hard", teacher_seed, *fam) < HARD_FAMILY_SHARE


def teacher_columns(a: int, op: str, b: int, slip: float,
                    teacher_seed: int = 0) -> list[tuple[int, int, int, int, int]]:
    """The teacher's column steps: the true ones, except that in a column whose family is hard and whose
    carry (borrow) out is 1, it writes 0 with probability ``slip`` (decided per problem and column by hash).
    Later columns continue from what was written, so the reasoning and the answer agree."""
    out, carry = [], 0
    width = max(len(str(a)), len(str(b)))
    xs, ys = str(a).rjust(width, "0")[::-1], str(b).rjust(width, "0")[::-1]
    for i, (x, y) in enumerate(zip(map(int, xs), map(int, ys), strict=True)):
        total = x + y + carry if op == "+" else x - y - carry
        digit, carry_out = (total % 10, total // 10) if op == "+" else (total % 10, int(total < 0))
        if (slip and carry_out and is_hard(family(op, x, y), teacher_seed)
                and _unit("slip", teacher_seed, *problem_key(a, op, b), i) < slip):
            carry_out = 0
        out.append((x, y, carry, digit, carry_out))
        carry = carry_out
    return out


def answer_of(steps: list[tuple[int, int, int, int, int]], op: str) -> int:
    """The number the column steps spell: the digits most significant first, plus the final carry of a sum."""
    value = int("".join(str(s[3]) for s in reversed(steps)))
    return value + (10 ** len(steps) if op == "+" and steps[-1][4] else 0)


def render(steps: list[tuple[int, int, int, int, int]], op: str) -> str:
    """The scratchpad and the answer: ``" 7 + 8 + 0 = 5 carry 1 ... </think> <answer> 8 5 </answer>"``."""
    work = " ".join(f"{x} {op} {y} {op} {c} = {d} {WORD[op]} {k}" for x, y, c, d, k in steps)
    return f" {work} </think> <answer> {spaced(answer_of(steps, op))} </answer>"


def solution(item: dict) -> str:
    """The correct response for an item."""
    return render(columns(item["a"], item["op"], item["b"]), item["op"])


def teacher_solution(item: dict, slip: float, teacher_seed: int = 0) -> str:
    """The imperfect teacher's response (``slip`` 0: the correct one)."""
    if not 0.0 <= slip <= 1.0:
        raise ValueError(f"teacher_slip must be in [0, 1], got {slip!r}")
    return render(teacher_columns(item["a"], item["op"], item["b"], slip, teacher_seed), item["op"])


def teacher_is_wrong(item: dict, slip: float, teacher_seed: int = 0) -> bool:
    steps = teacher_columns(item["a"], item["op"], item["b"], slip, teacher_seed)
    return str(answer_of(steps, item["op"])) != item["answer"]


def wrong_solution(item: dict) -> str:
    """A plausible wrong response for a preference pair: every carry (borrow) forgotten when the problem has one,
    else the last answer digit off by one (the work kept)."""
    op = item["op"]
    steps = columns(item["a"], op, item["b"])
    if any(s[4] for s in steps):
        return render([(x, y, 0, (x + y if op == "+" else x - y) % 10, 0) for x, y, *_ in steps], op)
    digits = spaced(int(item["answer"])).split(" ")
    digits[-1] = str((int(digits[-1]) + 1) % 10)
    work = solution(item).split(" </think>")[0]
    return f"{work} </think> <answer> {' '.join(digits)} </answer>"


# --------------------------------------------------------------------------- verifier
_SPACES = re.compile(r"\s+")


def digits_reward(response: str, answer: str) -> dict:
    """R1-Zero format (``</think> <answer> ... </answer>``) and the true answer, digits read with spaces removed
    (``"8 5"`` == ``"85"``); ``{"reward", "format_reward", "answer_reward"}``, all 0 without the format."""
    if not format_reward(response):
        return {"reward": 0.0, "format_reward": 0.0, "answer_reward": 0.0}
    pred = extract_answer(response)
    ok = pred is not None and _SPACES.sub("", pred) == str(answer)
    return {"reward": float(ok), "format_reward": 1.0, "answer_reward": float(ok)}
