"""The training data of a loop's config: task splits, SFT demonstrations and DPO preference pairs.

Shared by our loops (``alignment.sft``, ``alignment.dpo``, ``alignment.grpo``) and the TRL engine
(``alignment.trl_engine``), so both read exactly the same items for the same config and seed.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

from alignment.tasks.arithmetic import imperfect_teacher, preference_pair, sft_example, task_splits
from alignment.tasks.datasets import DATA_DIR, load_gsm8k, load_preference_pairs
from alignment.tasks.digits import digit_splits, solution, teacher_solution, wrong_solution
from alignment.tasks.prompts import format_prompt

# The one task registry: every task and what it serves. evaluate: greedy accuracy with its verifier
# (alignment.evaluate); train: load_task's items (SFT, GRPO, RFT); pairs: load_pairs' generated pairs (DPO).
TASK_USES = {"digits": ("evaluate", "train", "pairs"), "arithmetic": ("evaluate", "train", "pairs"),
             "gsm8k": ("evaluate", "train"), "math": ("evaluate",), "mmlu": ("evaluate",), "safety": ("evaluate",)}


def tasks_for(use: str) -> tuple[str, ...]:
    """The tasks that serve ``use`` (evaluate, train or pairs), in the registry's order."""
    return tuple(task for task, uses in TASK_USES.items() if use in uses)


TASKS = tasks_for("train")
HELD_OUT_FRACTION = 0.1  # of a pairs file: its last 10% are held out


def load_task(cfg) -> tuple[list[dict], list[dict]]:
    """(train, held-out) items of a loop's config: digits' train and *validation* splits (``n_test`` problems: the
    loops choose on validation; only ``alignment.report`` scores the test split), the arithmetic splits, or GSM8K
    train / test files."""
    if cfg.task == "digits":
        train, val, _ = digit_splits(cfg.n_train, cfg.n_test, 0, cfg.digits)
        return train, val
    if cfg.task == "arithmetic":
        return task_splits(cfg.n_train, cfg.n_test, cfg.seed, cfg.digits, cfg.held_out)
    train = load_gsm8k(DATA_DIR / "gsm8k_train.jsonl")[: cfg.n_train]
    test = load_gsm8k(DATA_DIR / "gsm8k_test.jsonl")[: cfg.n_test]
    return train, test


def demonstrations(cfg, train: list[dict]) -> list[tuple[str, str]]:
    """(prompt, response) SFT pairs of the train items, as the config's (possibly imperfect) teacher writes them."""
    if cfg.task == "digits":
        return [(format_prompt(item["question"], cfg.template), teacher_solution(item, cfg.teacher_slip))
                for item in train]
    if cfg.teacher_slip:
        train = imperfect_teacher(train, cfg.teacher_slip, cfg.seed)
    return [sft_example(item, cfg.template) for item in train]


def load_pairs(cfg) -> tuple[list[dict], list[dict], list[dict]]:
    """(train pairs, held-out pairs, held-out task items) of a DPO config.

    Arithmetic: pairs from ``preference_pair`` over the train / test split items (the wrong answer seeded by
    ``cfg.seed``). A pairs file: the first 90% train (at most ``n_train``), the last 10% held out (at most
    ``n_test``); bad lines are skipped with one warning. Task items are the arithmetic test split (or [])."""
    items: list[dict] = []
    if cfg.task != "none":  # digits or arithmetic
        train_items, items = load_task(cfg)
    if cfg.pairs:
        path = Path(cfg.pairs)
        if not path.is_file():
            raise ValueError(f"DPOConfig.pairs: {cfg.pairs} is not a file")
        pairs = load_preference_pairs(path)
        held = math.ceil(len(pairs) * HELD_OUT_FRACTION) if len(pairs) > 1 else 0
        train, test = pairs[: len(pairs) - held][: cfg.n_train], pairs[len(pairs) - held:][: cfg.n_test]
    elif cfg.task == "digits":  # the true solution over the teacher's systematic mistake (every carry forgotten)
        train, test = [[{"prompt": format_prompt(item["question"], cfg.template), "chosen": solution(item),
                         "rejected": wrong_solution(item)} for item in part] for part in (train_items, items)]
    else:
        rng = random.Random(cfg.seed)  # drawn from for the train pairs, then the test pairs
        train, test = [[preference_pair(item, rng, cfg.template) for item in part] for part in (train_items, items)]
    if not train:
        raise ValueError(f"no training pairs in {cfg.pairs or 'the arithmetic task'}")
    return train, test, items
