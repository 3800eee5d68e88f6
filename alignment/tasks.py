"""Tasks and prompts for alignment: the generated ``arithmetic`` task and loaders for the real data sets.

``arithmetic`` is the embedded default of the alignment stages: seeded multi-digit addition/subtraction
(optionally multiplication) word problems with a held-out test split that shares no problem with train, SFT
examples in the R1-Zero answer format and preference pairs (correct vs a plausible wrong answer) made from them.
``R1_ZERO_PROMPT`` is CS336 assignment 5's ``r1_zero.prompt`` (after DeepSeek-R1-Zero, Guo et al., 2025).

Loaders read the files under ``../shared/data/alignment`` (or any path given): GSM8K (Cobbe et al., 2021), MMLU
(Hendrycks et al., 2021; headerless CSVs ``question,A,B,C,D,answer``), preference pairs as JSONL with
``prompt/chosen/rejected`` or Anthropic hh-rlhf's ``chosen/rejected`` dialogues (Bai et al., 2022), which are split
into the shared prompt and the final assistant turns as in the DPO reference code, SimpleSafetyTests (Vidgen et al.,
2023) and AlpacaEval (Li et al., 2023). Bad records are skipped, counted, and named ``file:line`` in one warning.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import random
import re
import warnings
from pathlib import Path

from alignment.rewards import extract_boxed, parse_gsm8k_answer

DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "alignment"

R1_ZERO_PROMPT = (
    "A conversation between User and Assistant. The User asks a question, and the Assistant solves it. The Assistant "
    "first thinks about the reasoning process in the mind and then provides the User with the answer. The reasoning "
    "process is enclosed within <think> </think> and answer is enclosed within <answer> </answer> tags, respectively, "
    "i.e., <think> reasoning process here </think> <answer> answer here </answer>.\n"
    "User: {question}\n"
    "Assistant: <think>"
)
SHORT_PROMPT = "User: {question}\nAssistant: <think>"  # same answer format, for tiny models with short contexts
PROMPTS = {"r1_zero": R1_ZERO_PROMPT, "short": SHORT_PROMPT}


def format_prompt(question: str, template: str = R1_ZERO_PROMPT) -> str:
    """``template`` (a string with ``{question}``, or a key of ``PROMPTS``) filled with the question."""
    return PROMPTS.get(template, template).replace("{question}", question)


# --------------------------------------------------------------------------- the arithmetic task
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
    if not isinstance(n_train, int) or n_train < 0:
        raise ValueError(f"n_train must be an int >= 0, got {n_train!r}")
    if not isinstance(n_test, int) or n_test < 0:
        raise ValueError(f"n_test must be an int >= 0, got {n_test!r}")
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

    add(value + 1)
    add(value - 1)
    add(value + 10)
    add(value - 10)
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


# --------------------------------------------------------------------------- loaders
class DataWarning(UserWarning):
    """Bad records were skipped while loading a data file."""


class _Skips:
    """Counts skipped records and reports them (``file:line (why)``) in one warning."""

    def __init__(self, what: str):
        self.what, self.items = what, []

    def add(self, path: Path, line: int, why: str) -> None:
        self.items.append(f"{path}:{line} ({why})")

    def warn(self) -> None:
        if self.items:
            more = f" and {len(self.items) - 10} more" if len(self.items) > 10 else ""
            warnings.warn(f"{self.what}: skipped {len(self.items)} bad record(s): {'; '.join(self.items[:10])}{more}",
                          DataWarning, stacklevel=3)


def _open_text(path: Path):
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="replace", newline="")
    return open(path, encoding="utf-8", errors="replace", newline="")


def _jsonl(path: Path, skips: _Skips):
    """(line number, dict) for each JSON object line; a whole-file JSON list also works (AlpacaEval's format)."""
    with _open_text(path) as f:
        text = f.read()
    if text.lstrip().startswith("["):
        try:
            records = json.loads(text)
        except ValueError as e:
            skips.add(path, 1, f"invalid JSON: {e}")
            return
        for i, rec in enumerate(records if isinstance(records, list) else [], 1):
            if isinstance(rec, dict):
                yield i, rec
            else:
                skips.add(path, i, "not an object")
        return
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            skips.add(path, i, "invalid JSON")
            continue
        if isinstance(rec, dict):
            yield i, rec
        else:
            skips.add(path, i, "not an object")


def _str_fields(rec: dict, keys: tuple[str, ...]) -> str | None:
    """None when every key holds a non-empty string, else why not."""
    for k in keys:
        if not isinstance(rec.get(k), str) or not rec[k].strip():
            return f"missing {k!r}"
    return None


def load_gsm8k(path: str | Path = DATA_DIR / "gsm8k_train.jsonl") -> list[dict]:
    """GSM8K JSONL -> ``[{"question", "answer" (the final number as a string), "solution" (the full text)}]``."""
    path, skips = Path(path), _Skips("load_gsm8k")
    out = []
    for i, rec in _jsonl(path, skips):
        why = _str_fields(rec, ("question", "answer"))
        answer = None if why else parse_gsm8k_answer(rec["answer"])
        if why or answer is None:
            skips.add(path, i, why or "no '#### N' line")
            continue
        out.append({"question": rec["question"], "answer": answer, "solution": rec["answer"]})
    skips.warn()
    return out


def load_math(path: str | Path = DATA_DIR / "math_test.jsonl") -> list[dict]:
    """MATH-style JSONL (Hendrycks et al., 2021; CS336 A5's ``MATH/validation.jsonl``): ``problem`` (or
    ``question``) and ``answer`` or a ``solution`` whose last ``\\boxed{}`` is the answer -> ``[{"question",
    "answer", "solution"}]``."""
    path, skips = Path(path), _Skips("load_math")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no MATH JSONL there (pass --data FILE with problem/solution records)")
    out = []
    for i, rec in _jsonl(path, skips):
        question = rec.get("problem", rec.get("question"))
        solution = rec.get("solution") if isinstance(rec.get("solution"), str) else ""
        answer = rec.get("answer")
        given = isinstance(answer, (str, int, float)) and str(answer).strip()
        answer = str(answer) if given else extract_boxed(solution)
        if not isinstance(question, str) or not question.strip() or not answer:
            skips.add(path, i, "missing problem" if not isinstance(question, str) or not question.strip()
                      else "no answer or \\boxed{} in the solution")
            continue
        out.append({"question": question, "answer": answer, "solution": solution})
    skips.warn()
    return out


def load_mmlu(path: str | Path = DATA_DIR / "mmlu", split: str = "test") -> list[dict]:
    """MMLU headerless CSVs ``<path>/<split>/<subject>_<split>.csv`` (or ``<path>/<subject>_<split>.csv``) ->
    ``[{"subject", "question", "choices" (4 strings), "answer" ('A'..'D')}]``, subjects in file-name order."""
    root, skips = Path(path), _Skips("load_mmlu")
    folder = root / split if (root / split).is_dir() else root
    files = sorted(folder.glob(f"*_{split}.csv"))
    if not files:
        raise FileNotFoundError(f"no *_{split}.csv files under {folder}")
    out = []
    for file in files:
        subject = file.name[: -len(f"_{split}.csv")]
        with _open_text(file) as f:
            for i, row in enumerate(csv.reader(f), 1):
                answer = row[5].strip().upper() if len(row) == 6 else ""
                if len(row) != 6 or answer not in ("A", "B", "C", "D") or not row[0].strip():
                    skips.add(file, i, f"{len(row)} fields" if len(row) != 6 else "bad question or answer")
                    continue
                out.append({"subject": subject, "question": row[0], "choices": row[1:5], "answer": answer})
    skips.warn()
    return out


_TURN = "\n\nAssistant:"


def split_dialogue_pair(chosen: str, rejected: str) -> dict | None:
    """hh-rlhf: ``{"prompt", "chosen", "rejected"}`` with the prompt everything up to and including the final
    ``"\\n\\nAssistant:"`` of ``chosen`` and the responses what follows it; None when ``rejected`` does not share
    that prompt or the two responses are equal. ``prompt + chosen`` gives back the original dialogue."""
    i = chosen.rfind(_TURN)
    if i < 0:
        return None
    prompt = chosen[: i + len(_TURN)]
    if not rejected.startswith(prompt) or _TURN in rejected[len(prompt):]:
        return None
    c, r = chosen[len(prompt):], rejected[len(prompt):]
    return None if c == r else {"prompt": prompt, "chosen": c, "rejected": r}


def load_preference_pairs(path: str | Path = DATA_DIR / "hh_rlhf_harmless_base_test.jsonl.gz") -> list[dict]:
    """Preference JSONL (``.gz`` too) -> ``[{"prompt", "chosen", "rejected"}]``. Records with a ``prompt`` are taken
    as they are; hh-rlhf records (only ``chosen``/``rejected`` dialogues) are split by ``split_dialogue_pair``."""
    path, skips = Path(path), _Skips("load_preference_pairs")
    out = []
    for i, rec in _jsonl(path, skips):
        why = _str_fields(rec, ("chosen", "rejected"))
        if why:
            skips.add(path, i, why)
            continue
        if "prompt" in rec:
            if not isinstance(rec["prompt"], str):
                skips.add(path, i, "prompt is not a string")
                continue
            pair = {"prompt": rec["prompt"], "chosen": rec["chosen"], "rejected": rec["rejected"]}
        else:
            pair = split_dialogue_pair(rec["chosen"], rec["rejected"])
            if pair is None:
                skips.add(path, i, "chosen and rejected do not share a prompt or do not differ")
                continue
        out.append(pair)
    skips.warn()
    return out


def load_safety(path: str | Path = DATA_DIR / "simple_safety_tests.csv") -> list[dict]:
    """SimpleSafetyTests CSV -> ``[{"id", "harm_area", "category", "prompt"}]`` (prompt from ``prompts_final``)."""
    path, skips = Path(path), _Skips("load_safety")
    out = []
    with _open_text(path) as f:
        for i, row in enumerate(csv.DictReader(f), 2):  # line 1 is the header
            prompt = row.get("prompts_final") or row.get("prompt")
            if not isinstance(prompt, str) or not prompt.strip():
                skips.add(path, i, "missing 'prompts_final'")
                continue
            out.append({"id": row.get("id") or f"{i - 1}", "harm_area": row.get("harm_area") or "",
                        "category": row.get("category") or "", "prompt": prompt})
    skips.warn()
    return out


def load_alpaca_eval(path: str | Path = DATA_DIR / "alpaca_eval.jsonl") -> list[dict]:
    """AlpacaEval JSONL (or its JSON list) -> ``[{"instruction", "output", "generator", "dataset"}]`` (the
    reference output and its generator; '' where absent)."""
    path, skips = Path(path), _Skips("load_alpaca_eval")
    out = []
    for i, rec in _jsonl(path, skips):
        why = _str_fields(rec, ("instruction",))
        if why:
            skips.add(path, i, why)
            continue
        out.append({"instruction": rec["instruction"], "output": str(rec.get("output") or ""),
                    "generator": str(rec.get("generator") or ""), "dataset": str(rec.get("dataset") or "")})
    skips.warn()
    return out
