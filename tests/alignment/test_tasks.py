"""The arithmetic task checked against an independent reading of its questions (numbers and wording -> the
operation, evaluated by Python), the R1-Zero reward (alignment.tasks.rewards) for SFT examples and preference pairs, and
the loaders against the shared files read naively with json/csv (skipped when ../shared/data is absent)."""

import csv
import gzip
import json
import random
import re
import warnings
from pathlib import Path

import pytest

from alignment.tasks.arithmetic import (
    NAMES,
    OBJECTS,
    arithmetic_capacity,
    arithmetic_splits,
    carry_slip,
    imperfect_teacher,
    make_arithmetic,
    preference_pair,
    sft_example,
    task_splits,
)
from alignment.tasks.datasets import (
    DATA_DIR,
    DataWarning,
    load_alpaca_eval,
    load_gsm8k,
    load_mmlu,
    load_preference_pairs,
    load_safety,
    split_dialogue_pair,
)
from alignment.tasks.prompts import PROMPTS, R1_ZERO_PROMPT, SHORT_PROMPT, format_prompt
from alignment.tasks.rewards import r1_zero_reward_fn

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "alignment"


def _needs(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} absent")
    return path


def test_default_data_dir_is_work_shared():
    assert DATA_DIR == SHARED
    assert DATA_DIR.parts[-3:] == ("shared", "data", "alignment")


def test_r1_zero_prompt_is_cs336s():
    expected = ("A conversation between User and Assistant. The User asks a question, and the Assistant solves "
                "it. The Assistant first thinks about the reasoning process in the mind and then provides the User "
                "with the answer. The reasoning process is enclosed within <think> </think> and answer is enclosed "
                "within <answer> </answer> tags, respectively, i.e., <think> reasoning process here </think> "
                "<answer> answer here </answer>.\nUser: {question}\nAssistant: <think>")
    assert R1_ZERO_PROMPT == expected
    assert format_prompt("What is {x}?") == expected.replace("{question}", "What is {x}?")
    assert format_prompt("Q?", "short") == SHORT_PROMPT.replace("{question}", "Q?") == "User: Q?\nAssistant: <think>"
    assert set(PROMPTS) == {"r1_zero", "short"}


# ----------------------------------------------------------------------------- arithmetic
def _reference_answer(question: str) -> int:
    """Read a question as a person would: its two numbers, and the operation its wording implies."""
    a, b = (int(x) for x in re.findall(r"\d+", question))
    if "in each" in question:
        return a * b
    if re.search(r"\b(left)\b", question):
        return a - b
    assert re.search(r"\b(more|now)\b", question), question
    return a + b


def test_answers_are_correct_by_reading_the_question():
    items = make_arithmetic(2000, seed=3, digits=(1, 3), ops=("+", "-", "*"))
    for item in items:
        assert int(item["answer"]) == _reference_answer(item["question"]), item
        a, op, b = item["expression"].split()
        assert int(item["answer"]) == eval(item["expression"])  # noqa: S307 - our own digits and + - *
        assert a in item["question"] and b in item["question"]
        assert int(item["answer"]) >= 0
    assert {it["expression"].split()[1] for it in items} == {"+", "-", "*"}


@pytest.mark.parametrize("digits", [(1, 1), (1, 2), (2, 3), (3, 3)])
def test_operand_digit_counts(digits):
    for item in make_arithmetic(min(300, arithmetic_capacity(digits)), seed=1, digits=digits):
        a, _, b = item["expression"].split()
        assert digits[0] <= len(a) <= digits[1] and digits[0] <= len(b) <= digits[1]
        assert int(a) >= 2 and int(b) >= 2  # never "1 apples"


def test_deterministic_per_seed_and_prefix_stable():
    a, b = make_arithmetic(200, seed=5), make_arithmetic(200, seed=5)
    assert a == b
    assert make_arithmetic(50, seed=5) == a[:50]
    assert make_arithmetic(200, seed=6) != a
    assert len({it["question"] for it in a}) == 200 and len({it["expression"] for it in a}) == 200


def test_splits_are_disjoint_and_test_split_does_not_move():
    train, test = arithmetic_splits(3000, 300, seed=0)
    assert len(train) == 3000 and len(test) == 300
    assert not {it["question"] for it in train} & {it["question"] for it in test}
    assert not {it["expression"] for it in train} & {it["expression"] for it in test}
    _, test2 = arithmetic_splits(500, 300, seed=0)
    assert test2 == test
    assert arithmetic_splits(3000, 300, seed=1)[1] != test


def test_capacity_is_exact_and_enforced():
    # 1-digit operands 2..9: 8*8 sums, 8*9/2 differences with a >= b
    assert arithmetic_capacity((1, 1), ("+", "-")) == 64 + 36
    everything = make_arithmetic(100, seed=0, digits=(1, 1))
    assert len({it["expression"] for it in everything}) == 100
    with pytest.raises(ValueError, match="n=101"):
        make_arithmetic(101, seed=0, digits=(1, 1))


@pytest.mark.parametrize("kwargs, field", [
    (dict(n=-1), "n"), (dict(n=1.5), "n"), (dict(n=3, digits=(0, 2)), "digits"), (dict(n=3, digits=(3, 2)), "digits"),
    (dict(n=3, digits=(1,)), "digits"), (dict(n=3, ops=("/",)), "ops"), (dict(n=3, ops=()), "ops"),
])
def test_bad_arguments_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        make_arithmetic(**kwargs)


def test_bad_split_sizes():
    with pytest.raises(ValueError, match="n_test"):
        arithmetic_splits(10, -1)
    with pytest.raises(ValueError, match="n_train"):
        arithmetic_splits(-1, 10)


@pytest.mark.parametrize("template", [R1_ZERO_PROMPT, "short"])
def test_sft_example_earns_full_reward(template):
    for item in make_arithmetic(100, seed=2):
        prompt, response = sft_example(item, template)
        assert prompt.endswith("Assistant: <think>") and item["question"] in prompt
        a, op, b = item["expression"].split()
        assert response == f" {a} {op} {b} = {item['answer']} </think> <answer> {item['answer']} </answer>"
        assert r1_zero_reward_fn(response, item["answer"]) == {"reward": 1.0, "format_reward": 1.0,
                                                                "answer_reward": 1.0}


def test_preference_pairs_are_right_vs_plausibly_wrong():
    rng = random.Random(0)
    kinds = set()
    for item in make_arithmetic(400, seed=4):
        pair = preference_pair(item, rng)
        assert set(pair) == {"prompt", "chosen", "rejected"}
        assert (pair["prompt"], pair["chosen"]) == sft_example(item)
        assert r1_zero_reward_fn(pair["chosen"], item["answer"])["reward"] == 1.0
        bad = r1_zero_reward_fn(pair["rejected"], item["answer"])
        assert bad["format_reward"] == 1.0 and bad["reward"] == 0.0
        wrong = int(re.search(r"<answer> (-?\d+) </answer>", pair["rejected"]).group(1))
        right = int(item["answer"])
        a, op, b = (int(x) if x.isdigit() else x for x in item["expression"].split())
        if abs(wrong - right) == 1:
            kinds.add("off_by_one")
        elif abs(wrong - right) == 10:
            kinds.add("carry")
        elif wrong == (a - b if op == "+" else a + b):
            kinds.add("wrong_op")
        elif sorted(str(wrong)) == sorted(str(right)):
            kinds.add("digit_swap")
        else:
            raise AssertionError(f"implausible wrong answer {wrong} for {item}")
    assert kinds == {"off_by_one", "carry", "wrong_op", "digit_swap"}
    # deterministic given the rng
    items = make_arithmetic(20, seed=4)
    assert ([preference_pair(it, random.Random(9)) for it in items]
            == [preference_pair(it, random.Random(9)) for it in items])


def test_sft_and_preference_on_gsm8k_like_items():
    item = {"question": "Q?", "answer": "72", "solution": "48/2 = <<48/2=24>>24.\n48+24 = <<48+24=72>>72\n#### 72"}
    prompt, response = sft_example(item, "short")
    assert response == " 48/2 = 24. 48+24 = 72 </think> <answer> 72 </answer>"
    pair = preference_pair(item, random.Random(0))
    assert r1_zero_reward_fn(pair["rejected"], "72")["reward"] == 0.0
    odd = preference_pair({"question": "Q?", "answer": "1/2"}, random.Random(0))
    assert r1_zero_reward_fn(odd["rejected"], "1/2")["reward"] == 0.0


# ----------------------------------------------------------------------------- loaders on the shared files
def test_load_gsm8k_matches_naive_reading():
    for name, n in (("gsm8k_train.jsonl", 7473), ("gsm8k_test.jsonl", 1319)):
        path = _needs(SHARED / name)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            items = load_gsm8k(path)
        raw = [json.loads(line) for line in path.open()]
        assert len(items) == len(raw) == n
        for it, r in zip(items, raw):
            assert it["question"] == r["question"] and it["solution"] == r["answer"]
            assert float(it["answer"]) == float(r["answer"].split("####")[-1].strip().replace(",", ""))


def test_load_mmlu_matches_naive_reading():
    root = _needs(SHARED / "mmlu")
    for split, n in (("dev", 285), ("val", 1531), ("test", 14042)):
        items = load_mmlu(root, split)
        rows = [(f.name, r) for f in sorted((root / split).glob("*.csv")) for r in csv.reader(f.open(newline=""))]
        assert len(items) == len(rows) == n
        assert len({it["subject"] for it in items}) == 57
        for it, (fname, row) in zip(items, rows):
            assert fname == f"{it['subject']}_{split}.csv"
            assert [it["question"], *it["choices"], it["answer"]] == row
    assert load_mmlu(root, "dev")[0]["subject"] == "abstract_algebra"


def test_load_hh_rlhf_pairs():
    path = _needs(SHARED / "hh_rlhf_harmless_base_test.jsonl.gz")
    with pytest.warns(DataWarning, match=r"skipped 5 bad record\(s\).*jsonl\.gz:1255 "):
        pairs = load_preference_pairs(path)
    raw = [json.loads(line) for line in gzip.open(path, "rt", encoding="utf-8")]
    assert len(raw) == 2312 and len(pairs) == 2307
    kept = [r for i, r in enumerate(raw, 1) if i not in (1255, 1689, 1951, 1953, 2037)]
    for pair, r in zip(pairs, kept):
        assert pair["prompt"] + pair["chosen"] == r["chosen"]
        assert pair["prompt"] + pair["rejected"] == r["rejected"]
        assert pair["prompt"].startswith("\n\nHuman:") and pair["prompt"].endswith("\n\nAssistant:")
        assert "\n\nAssistant:" not in pair["chosen"] and pair["chosen"] != pair["rejected"]


def test_load_safety_and_alpaca_eval():
    safety = load_safety(_needs(SHARED / "simple_safety_tests.csv"))
    rows = list(csv.DictReader((SHARED / "simple_safety_tests.csv").open(newline="")))
    assert len(safety) == len(rows) == 100
    assert [s["prompt"] for s in safety] == [r["prompts_final"] for r in rows]
    assert safety[0]["id"] == "sst_001" and safety[0]["harm_area"]
    alpaca = load_alpaca_eval(_needs(SHARED / "alpaca_eval.jsonl"))
    raw = [json.loads(line) for line in (SHARED / "alpaca_eval.jsonl").open()]
    assert len(alpaca) == len(raw) == 805
    assert [a["instruction"] for a in alpaca] == [r["instruction"] for r in raw]


# ----------------------------------------------------------------------------- loaders on bad files
def test_bad_records_are_skipped_and_named(tmp_path):
    p = tmp_path / "g.jsonl"
    p.write_bytes(b'{"question": "q1", "answer": "x\\n#### 5"}\n'
                  b"not json\n"
                  b"\n"
                  b'[1, 2]\n'
                  b'{"question": "q2"}\n'
                  b'{"question": "q3", "answer": "no marker"}\n'
                  b'{"question": "q\xff\xfe4", "answer": "#### 1,000"}\n')
    with pytest.warns(DataWarning) as record:
        items = load_gsm8k(p)
    assert [it["answer"] for it in items] == ["5", "1000"]
    msg = str(record[0].message)
    assert "skipped 4" in msg and all(f"{p}:{i}" in msg for i in (2, 4, 5, 6))


def test_preference_jsonl_formats(tmp_path):
    p = tmp_path / "prefs.jsonl.gz"
    recs = [{"prompt": "P", "chosen": " good", "rejected": " bad"},
            {"chosen": "\n\nHuman: hi\n\nAssistant: hello", "rejected": "\n\nHuman: hi\n\nAssistant: go away"},
            {"chosen": "\n\nHuman: hi\n\nAssistant: same", "rejected": "\n\nHuman: hi\n\nAssistant: same"},
            {"chosen": "no turns", "rejected": "at all"},
            {"prompt": 3, "chosen": "a", "rejected": "b"},
            {"chosen": "only chosen"}]
    with gzip.open(p, "wt", encoding="utf-8") as f:
        f.write("\n".join(json.dumps(r) for r in recs) + "\n")
    with pytest.warns(DataWarning, match="skipped 4"):
        pairs = load_preference_pairs(p)
    assert pairs == [{"prompt": "P", "chosen": " good", "rejected": " bad"},
                     {"prompt": "\n\nHuman: hi\n\nAssistant:", "chosen": " hello", "rejected": " go away"}]


def test_split_dialogue_pair_edge_cases():
    assert split_dialogue_pair("", "") is None
    assert split_dialogue_pair("\n\nAssistant:", "\n\nAssistant:") is None
    two = "\n\nHuman: a\n\nAssistant: b\n\nHuman: c\n\nAssistant: d"
    assert split_dialogue_pair(two, two[:-1] + "e") == {"prompt": two[:-2], "chosen": " d", "rejected": " e"}
    assert split_dialogue_pair(two, "\n\nHuman: a\n\nAssistant: x") is None  # rejected ends a turn earlier


def test_mmlu_and_csv_loaders_on_bad_rows(tmp_path):
    d = tmp_path / "mmlu" / "dev"
    d.mkdir(parents=True)
    (d / "toy_subject_dev.csv").write_text('q1,a,b,c,d,B\n"q, 2",a,b,c,d,e\nq3,a,b,c,E\n,a,b,c,d,A\n"q\n5",w,x,y,z,C\n')
    with pytest.warns(DataWarning, match="skipped 3"):
        items = load_mmlu(tmp_path / "mmlu", "dev")
    assert items == [{"subject": "toy_subject", "question": "q1", "choices": ["a", "b", "c", "d"], "answer": "B"},
                     {"subject": "toy_subject", "question": "q\n5", "choices": ["w", "x", "y", "z"], "answer": "C"}]
    with pytest.raises(FileNotFoundError):
        load_mmlu(tmp_path / "mmlu", "test")
    s = tmp_path / "s.csv"
    s.write_text("id,harm_area,counter,category,prompts_final\nx1,h,1,c,Hello?\nx2,h,2,c,\n")
    with pytest.warns(DataWarning, match=f"{s}:3"):
        assert load_safety(s) == [{"id": "x1", "harm_area": "h", "category": "c", "prompt": "Hello?"}]
    a = tmp_path / "a.json"
    a.write_text(json.dumps([{"instruction": "Do X", "output": "ok"}, {"output": "no instruction"}, 7]))
    with pytest.warns(DataWarning, match="skipped 2"):
        assert load_alpaca_eval(a) == [{"instruction": "Do X", "output": "ok", "generator": "", "dataset": ""}]


def test_wording_split_shares_facts_but_not_wording():
    train, test = task_splits(2000, 100, seed=3, digits=1, held_out="wording")
    assert len(train) == 2000 and len(test) == 100
    assert not {t["question"] for t in train} & {t["question"] for t in test}
    for item in test:
        a, op, b = item["expression"].split()
        assert int(item["answer"]) == (int(a) + int(b) if op == "+" else int(a) - int(b)) and 2 <= int(a) <= 9
        names = [n for n in NAMES if f"{n} " in item["question"]]
        objects = [o for o in OBJECTS if f" {o}" in item["question"]]
        assert names and all(NAMES.index(n) >= 15 for n in names), item
        assert objects and all(OBJECTS.index(o) >= 9 for o in objects), item
    for item in train:
        assert not any(f"{n} " in item["question"] for n in NAMES[15:]), item
    # every held-out fact was trained on in other words (1-digit: only 100 facts)
    assert {t["expression"] for t in test} <= {t["expression"] for t in train}
    assert task_splits(2000, 100, seed=3, digits=1, held_out="wording") == (train, test)
    with pytest.raises(ValueError, match="held_out"):
        task_splits(1, 1, held_out="names")


def test_carry_slip_drops_every_carry_digit():
    def item(expr):
        return {"question": "q", "answer": str(eval(expr)), "expression": expr}  # noqa: S307 (test data)

    assert carry_slip(item("8 + 5"))["answer"] == "3"
    assert carry_slip(item("47 + 38"))["answer"] == "75"  # 7+8 -> 5 (carry lost), 4+3 -> 7
    assert carry_slip(item("95 + 7"))["answer"] == "92"
    assert carry_slip(item("5 + 5"))["answer"] == "0"
    for expr in ("2 + 3", "23 + 41", "9 - 7", "12 - 9"):  # no carry, or not an addition
        assert carry_slip(item(expr)) is None
    assert carry_slip({"question": "q", "answer": "4"}) is None


def test_imperfect_teacher_slips_only_carry_problems_at_the_rate():
    train, _ = task_splits(4000, 0, seed=0, digits=1, held_out="wording")
    assert imperfect_teacher(train, 0.0) == train
    carries = [i for i, item in enumerate(train) if carry_slip(item) is not None]
    assert 0.25 < len(carries) / len(train) < 0.45  # 1-digit + and -: about a third of problems carry
    for rate in (0.5, 1.0):
        taught = imperfect_teacher(train, rate, seed=3)
        changed = [i for i, (a, b) in enumerate(zip(train, taught)) if a != b]
        assert set(changed) <= set(carries)
        assert abs(len(changed) / len(carries) - rate) < 0.05
        for i in changed:  # the demonstration is wrong, and its reasoning agrees with its answer
            prompt, response = sft_example(taught[i], SHORT_PROMPT)
            assert r1_zero_reward_fn(response, train[i]["answer"])["reward"] == 0.0
            a, b = map(int, train[i]["expression"].split(" + "))
            assert f"= {taught[i]['answer']} </think> <answer> {(a + b) % 10} </answer>" in response
    assert imperfect_teacher(train, 0.5, seed=3) == imperfect_teacher(train, 0.5, seed=3)
    with pytest.raises(ValueError, match="slip_rate"):
        imperfect_teacher(train, 1.5)
