"""The generated ``arithmetic`` task: seeded multi-digit addition/subtraction (optionally multiplication) word problems.

The project's earlier generated task (the default now is ``digits``, ``alignment.tasks.digits``): a held-out test split
that shares no problem with train (or, with ``held_out="wording"``, only unseen wording of the same facts), SFT
examples in the R1-Zero answer format and preference pairs (correct vs a plausible wrong answer) made from them.
"""

from __future__ import annotations

import random
import re

from alignment.tasks.prompts import R1_ZERO_PROMPT, format_prompt

NAMES = ("Ann", "Ben", "Carla", "Dev", "Emma", "Farid", "Grace", "Hugo", "Ines", "Jack", "Kemal", "Lena", "Mia",
         "Noah", "Olga", "Pablo", "Rosa", "Sam", "Tara", "Yuki")
OBJECTS = ("apples", "marbles", "stickers", "books", "coins", "pencils", "cards", "shells", "stamps", "cookies",
           "balloons", "buttons")
TEMPLATES = {
    "+": ("{name} has {a} {obj} and buys {b} more. How many {obj} does {name} have now?",
          "{name} has {a} {obj}. A friend gives {name} {b} more. How many {obj} does {name} have now?",
          "There are {a} {obj} in a box. {name} puts in {b} more. How many {obj} are in the box now?"),
    "-": ("{name} has {a} {obj} and gives away {b}. How many {obj} does {name} have left?",
          "{name} has {a} {obj} and loses {b} of them. How many {obj} does {name} have left?",
          "There are {a} {obj} in a box. {name} takes out {b}. How many {obj} are left in the box?"),
    "*": ("{name} has {a} bags with {b} {obj} in each. How many {obj} does {name} have?",
          "There are {a} boxes with {b} {obj} in each. How many {obj} are there in all?"),
}
_APPLY = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def _check_args(digits: tuple[int, int], ops: tuple[str, ...]) -> None:
    if (not isinstance(digits, (tuple, list)) or len(digits) != 2 or not all(isinstance(d, int) for d in digits)
            or not 1 <= digits[0] <= digits[1] <= 9):
        raise ValueError(f"digits must be (lo, hi) with 1 <= lo <= hi <= 9, got {digits!r}")
    if not ops or any(op not in TEMPLATES for op in ops):
        raise ValueError(f"ops must be a non-empty subset of {tuple(TEMPLATES)}, got {ops!r}")


def _operand_count(digits: tuple[int, int]) -> int:
    """How many operands the digit range allows (1-digit operands start at 2: no '1 apples')."""
    return sum(10**d - max(2, 10 ** (d - 1)) for d in range(digits[0], digits[1] + 1))


def arithmetic_capacity(digits: tuple[int, int] = (1, 2), ops: tuple[str, ...] = ("+", "-")) -> int:
    """Number of distinct problems (a, op, b) the generator can produce."""
    _check_args(digits, ops)
    n = _operand_count(digits)
    return sum(n * (n + 1) // 2 if op == "-" else n * n for op in set(ops))


def _operand(rng: random.Random, digits: tuple[int, int]) -> int:
    d = rng.randint(digits[0], digits[1])
    return rng.randint(max(2, 10 ** (d - 1)), 10**d - 1)


def _arithmetic_stream(seed: int, digits: tuple[int, int], ops: tuple[str, ...], names: tuple = NAMES,
                       objects: tuple = OBJECTS, distinct: str = "problem"):
    """Word problems in a fixed order for a seed: every (a, op, b) at most once (``distinct="problem"``), or every
    question at most once (``"question"``: a problem may recur about other people and things)."""
    rng = random.Random(seed)
    seen = set()
    ops = tuple(ops)
    while True:
        op = ops[rng.randrange(len(ops))]
        a, b = _operand(rng, digits), _operand(rng, digits)
        if op == "-" and a < b:
            a, b = b, a
        template = TEMPLATES[op][rng.randrange(len(TEMPLATES[op]))]
        question = template.format(name=names[rng.randrange(len(names))], a=a, b=b,
                                   obj=objects[rng.randrange(len(objects))])
        key = (a, op, b) if distinct == "problem" else question
        if key in seen:
            continue
        seen.add(key)
        yield {"question": question, "answer": str(_APPLY[op](a, b)), "expression": f"{a} {op} {b}"}


def make_arithmetic(n: int, seed: int = 0, digits: tuple[int, int] = (1, 2),
                    ops: tuple[str, ...] = ("+", "-")) -> list[dict]:
    """``n`` distinct seeded word problems ``{"question", "answer", "expression"}`` (answer a decimal string,
    expression e.g. ``"23 + 48"``). Operands have ``digits[0]..digits[1]`` digits; subtraction never goes negative.
    The first k items for a seed are the same whatever ``n`` is."""
    _check_args(digits, ops)
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be an int >= 0, got {n!r}")
    cap = arithmetic_capacity(digits, ops)
    if n > cap:
        raise ValueError(f"n={n} exceeds the {cap} distinct problems digits={digits} ops={ops} allow")
    stream = _arithmetic_stream(seed, digits, ops)
    return [next(stream) for _ in range(n)]


def arithmetic_splits(n_train: int, n_test: int, seed: int = 0, digits: tuple[int, int] = (1, 2),
                      ops: tuple[str, ...] = ("+", "-")) -> tuple[list[dict], list[dict]]:
    """(train, test): disjoint by problem (a, op, b), hence by question. The test split is the first ``n_test``
    problems of the seed's stream, so it does not change with ``n_train``."""
    for name, n in (("n_train", n_train), ("n_test", n_test)):
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"{name} must be an int >= 0, got {n!r}")
    items = make_arithmetic(n_train + n_test, seed, digits, ops)
    return items[n_test:], items[:n_test]


HELD_OUT = ("problems", "wording")


def wording_splits(n_train: int, n_test: int, seed: int = 0, digits: tuple[int, int] = (1, 1),
                   ops: tuple[str, ...] = ("+", "-")) -> tuple[list[dict], list[dict]]:
    """(train, test) held out by wording, not by problem: test questions name people and objects never seen in
    training (same templates; the arithmetic facts are shared). For digit ranges too small to hold out problems
    (1-digit: 100 facts) this measures whether a model answers the same sums asked about other things."""
    _check_args(digits, ops)
    for name, n in (("n_train", n_train), ("n_test", n_test)):
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"{name} must be an int >= 0, got {n!r}")
    cut_n, cut_o = len(NAMES) * 3 // 4, len(OBJECTS) * 3 // 4
    test_cap = arithmetic_capacity(digits, ops) * (len(NAMES) - cut_n) * (len(OBJECTS) - cut_o)
    if n_test > test_cap // 2:
        raise ValueError(f"n_test={n_test} is too many held-out questions for digits={digits} ops={ops}")
    train_stream = _arithmetic_stream(seed, digits, ops, NAMES[:cut_n], OBJECTS[:cut_o], distinct="question")
    test_stream = _arithmetic_stream(seed + 1, digits, ops, NAMES[cut_n:], OBJECTS[cut_o:], distinct="question")
    return [next(train_stream) for _ in range(n_train)], [next(test_stream) for _ in range(n_test)]


def task_splits(n_train: int, n_test: int, seed: int = 0, digits: int = 2, held_out: str = "problems"):
    """The arithmetic task as the loops configure it: operands of 1..``digits`` digits, + and -, held out by
    problem (``arithmetic_splits``) or by wording (``wording_splits``)."""
    if held_out not in HELD_OUT:
        raise ValueError(f"held_out must be one of {', '.join(HELD_OUT)}, got {held_out!r}")
    split = arithmetic_splits if held_out == "problems" else wording_splits
    return split(n_train, n_test, seed, (1, digits))


def _reasoning(item: dict) -> str:
    if item.get("expression"):
        return f"{item['expression']} = {item['answer']}"
    if item.get("solution"):  # GSM8K: drop the <<48/2=24>> calculator annotations and the #### line
        text = re.sub(r"<<[^>]*>>", "", item["solution"]).split("####")[0]
        return " ".join(text.split())
    return ""


def _response(reasoning: str, answer: str) -> str:
    head = f" {reasoning}" if reasoning else ""
    return f"{head} </think> <answer> {answer} </answer>"


def sft_example(item: dict, template: str = R1_ZERO_PROMPT) -> tuple[str, str]:
    """(prompt, response) for SFT: the prompt ends with ``<think>``; the response is ``" 23 + 48 = 71 </think>
    <answer> 71 </answer>"`` (a leading space after ``<think>``; GSM8K items reason with their solution text)."""
    return format_prompt(item["question"], template), _response(_reasoning(item), str(item["answer"]))


def carry_slip(item: dict) -> dict | None:
    """The item as a teacher who forgets the carry would solve it (``8 + 5 = 3``), or None when the problem has
    no carry (every column of an addition sums below 10) or is not an integer addition."""
    m = re.fullmatch(r"(\d+) \+ (\d+)", item.get("expression", ""))
    if not m:
        return None
    width = max(len(m.group(1)), len(m.group(2)))
    columns = zip(m.group(1).rjust(width, "0"), m.group(2).rjust(width, "0"), strict=True)
    column_sums = [int(x) + int(y) for x, y in columns]
    if all(total < 10 for total in column_sums):
        return None
    return {**item, "answer": str(int("".join(str(total % 10) for total in column_sums)))}


def imperfect_teacher(items: list[dict], slip_rate: float, seed: int = 0) -> list[dict]:
    """Demonstrations from a teacher who forgets the carry in a fraction ``slip_rate`` of the problems that have
    one (seeded, per example; the reasoning and the answer agree, both wrong). SFT imitates such a teacher, mistakes
    included; a verifier-driven RL stage can correct it, because the model still samples the right answer."""
    if not 0.0 <= slip_rate <= 1.0:
        raise ValueError(f"slip_rate must be in [0, 1], got {slip_rate!r}")
    rng = random.Random(seed)
    out = []
    for item in items:
        slipped = carry_slip(item)
        out.append(slipped if slipped is not None and rng.random() < slip_rate else item)
    return out


def _wrong_answers(item: dict) -> list[tuple[str, str]]:
    """Plausible mistakes as (reasoning, answer): off by one, a carry slip (+-10), two digits swapped, wrong op."""
    answer = str(item["answer"])
    expr = item.get("expression", "")
    try:
        value = int(answer)
    except ValueError:
        return []
    out = []

    def add(v: int, reasoning: str | None = None) -> None:
        if v != value and v >= 0:
            out.append((reasoning if reasoning is not None else (f"{expr} = {v}" if expr else ""), str(v)))

    for delta in (1, -1, 10, -10):
        add(value + delta)
    digits = str(abs(value))
    for i in range(len(digits) - 1):
        if digits[i] != digits[i + 1] and not (i == 0 and digits[1] == "0"):
            add(int(digits[:i] + digits[i + 1] + digits[i] + digits[i + 2:]) * (1 if value >= 0 else -1))
    m = re.fullmatch(r"(\d+) ([-+*]) (\d+)", expr)
    if m:
        a, op, b = int(m.group(1)), m.group(2), int(m.group(3))
        wrong = "-" if op == "+" else "+"
        add(_APPLY[wrong](a, b), f"{a} {wrong} {b} = {_APPLY[wrong](a, b)}")
    return out


def preference_pair(item: dict, rng: random.Random, template: str = R1_ZERO_PROMPT) -> dict:
    """``{"prompt", "chosen", "rejected"}``: the SFT response vs the same format with a plausible wrong answer
    (off by one, carry slip, digit swap or wrong operation), picked with ``rng``."""
    prompt, chosen = sft_example(item, template)
    wrong = _wrong_answers(item)
    if not wrong:  # a non-integer answer: append a digit
        wrong = [(_reasoning(item), f"{item['answer']}1")]
    reasoning, answer = wrong[rng.randrange(len(wrong))]
    return {"prompt": prompt, "chosen": chosen, "rejected": _response(reasoning, answer)}
