"""Evaluation: greedy rollouts on a task, scored per example, one summary row per run.

Mirrors CS336 assignment 5's zero-shot baselines (``evaluate_vllm``: generate with ``stop=["</answer>"]``,
score each output with ``r1_zero_reward_fn``, write per-example outputs and the aggregate) and its
supplementary SFT assignment's GSM8K / MMLU / SimpleSafetyTests evaluations:

- ``digits``: the default generated task (``alignment.tasks.digits``: column addition/subtraction held out by problem,
  a digit-by-digit scratchpad); its verifier reads the answer digits with spaces removed. ``--split`` picks the
  validation or test split.
- ``arithmetic``: the project's earlier generated task (word problems) (the held-out test split), R1-Zero reward.
- ``math``: MATH-style JSONL given with ``--data`` (``problem`` + ``solution`` with ``\\boxed{}``), R1-Zero reward
  (MATH is not in ../shared/data; CS336 A5 uses its ``validation.jsonl``).
- ``gsm8k``: ``gsm8k_reward`` (``#### N``, ``<answer>``, ``\\boxed{}`` or the last number).
- ``mmlu``: the letter ``parse_mmlu_letter`` reads (inside ``<answer>`` tags when there are some).
- ``safety``: SimpleSafetyTests (Vidgen et al. 2023: 100 clearly harmful prompts, five harm areas); each response
  is judged by ``alignment.evaluation.refusal`` (a readable rule set: "I can't help with that", "I'm sorry, but", crisis
  lines ...; its docstring gives the sources and the limits) and the row carries the judge's label (``judge``,
  ``refusal``). The summary has ``refusal_rate`` with n and a Wilson 95 % interval (``refusal_ci_low``/``_high``);
  accuracy and format rate are left empty. The rate counts how often the model says no, not how often it is
  safe: a garbled or off-topic answer is "no refusal" like real compliance.

``evaluate`` takes the generation as an argument (``generate_fn(prompts) -> responses``) so scoring can
be tested on canned outputs; by default it is ``alignment.core.rollout.rollout`` at temperature 0.

CLI: ``python -m alignment.evaluate --task arithmetic --model RUN_DIR --tokenizer TOK_DIR`` writes
``<out-dir>/<stage>_<task>.jsonl`` (atomically) and appends a row to ``reports/alignment.csv``.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from alignment.config import TaskConfig
from alignment.core.policy import TokenizerAdapter, clean_text
from alignment.core.rollout import check_fits, rollout
from alignment.evaluation.refusal import is_refusal, judge, refusal_summary
from alignment.tasks.arithmetic import task_splits
from alignment.tasks.data import tasks_for
from alignment.tasks.datasets import DATA_DIR, load_gsm8k, load_math, load_mmlu, load_safety
from alignment.tasks.digits import SPLITS, digit_splits, digits_reward
from alignment.tasks.prompts import check_template, format_prompt
from alignment.tasks.rewards import extract_answer, gsm8k_reward, parse_mmlu_letter, r1_zero_reward_fn
from model.training.checkpoint import check_tokenizer, load_model
from tokenizer.encoder import Tokenizer
from workbench.files import atomic_path, remove_stale_temps_of, tokenizer_identity, write_error, write_jsonl
from workbench.params import REQUIRED, add_config_flags, config_from_args, setting

TASKS = tasks_for("evaluate")
CSV_COLUMNS = ("timestamp", "stage", "task", "model", "n", "accuracy", "format_rate", "refusal_rate",
               "refusal_ci_low", "refusal_ci_high", "mean_response_tokens", "seconds", "outputs")
MMLU_QUESTION = "{question}\nA. {a}\nB. {b}\nC. {c}\nD. {d}\nAnswer with the letter of the correct choice."


def build_prompt(task: str, item: dict, template: str) -> str:
    """The prompt for one item: ``template`` filled with the question (MMLU: question + lettered choices;
    safety: the prompt)."""
    if task == "mmlu":
        a, b, c, d = (list(item["choices"]) + [""] * 4)[:4]
        question = MMLU_QUESTION.format(question=item["question"], a=a, b=b, c=c, d=d)
    elif task == "safety":
        question = item.get("prompt", item.get("question", ""))
    else:
        question = item["question"]
    return format_prompt(clean_text(question), template)


def score(task: str, response: str, item: dict) -> dict:
    """``{"reward", "format_reward", "answer_reward"}`` (+ ``pred`` for MMLU); safety: ``{"judge", "refusal"}``
    (the refusal judge's label, and 1.0 when it is a refusal)."""
    if task == "digits":
        return digits_reward(response, item["answer"])
    if task in ("arithmetic", "math"):
        return r1_zero_reward_fn(response, item["answer"])
    if task == "gsm8k":
        return gsm8k_reward(response, item["answer"])
    if task == "mmlu":
        tagged = extract_answer(response)
        pred = parse_mmlu_letter(tagged) if tagged else None
        pred = pred or parse_mmlu_letter(response)
        ok = float(pred is not None and pred == str(item["answer"]).strip().upper())
        return {"reward": ok, "format_reward": float(pred is not None), "answer_reward": ok, "pred": pred}
    if task == "safety":
        label = judge(response)
        return {"judge": label, "refusal": float(is_refusal(label))}
    raise ValueError(f"task must be one of {', '.join(TASKS)}, got {task!r}")


def evaluate(model, tokenizer, task: str, items: Sequence[dict], template: str = "r1_zero",
             max_new_tokens: int = 256, batch_size: int = 32,
             generate_fn: Callable[[list[str]], list[str]] | None = None,
             model_name: str | None = None) -> tuple[list[dict], dict]:
    """Greedy outputs for ``items`` scored for ``task`` -> (rows, summary).

    rows: one dict per item (``i``, ``prompt``, ``response``, ``answer`` and the reward fields);
    summary: ``{task, model, n, accuracy, format_rate, mean_response_tokens, seconds}`` (accuracy and
    format_rate None for safety, which adds ``refusal_rate``, ``refusal_ci_low``, ``refusal_ci_high``,
    ``refusals`` and ``empty``: ``alignment.evaluation.refusal.refusal_summary``). ``generate_fn`` replaces generation
    (a plain callable passed as ``model`` is used the same way); tokens are counted with ``tokenizer`` (words when it
    is None)."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {', '.join(TASKS)}, got {task!r}")
    if generate_fn is None and callable(model) and not hasattr(model, "parameters"):
        generate_fn = model
    if generate_fn is None:
        check_fits(model, tokenizer, [build_prompt(task, item, template) for item in items], max_new_tokens)

        def generate_fn(prompts: list[str]) -> list[str]:
            return rollout(model, tokenizer, prompts, max_new_tokens, temperature=0.0, batch_size=batch_size)

    items = list(items)
    prompts = [build_prompt(task, item, template) for item in items]
    start = time.perf_counter()
    responses = list(generate_fn(prompts)) if prompts else []
    seconds = time.perf_counter() - start
    if len(responses) != len(prompts):
        raise ValueError(f"generation returned {len(responses)} responses for {len(prompts)} prompts")
    rows = []
    for i, (item, prompt, response) in enumerate(zip(items, prompts, responses, strict=False)):
        response = clean_text(response)
        tokens = len(response.split()) if tokenizer is None else len(TokenizerAdapter(tokenizer).encode(response))
        rows.append({"i": i, "prompt": prompt, "response": response, "answer": item.get("answer"),
                     **score(task, response, item), "response_tokens": tokens})
    n = len(rows)
    scored = task != "safety" and n > 0
    summary = {
        "task": task,
        "model": model_name if model_name is not None else type(model).__name__,
        "n": n,
        "accuracy": sum(r["reward"] for r in rows) / n if scored else None,
        "format_rate": sum(r["format_reward"] for r in rows) / n if scored else None,
        "mean_response_tokens": sum(r["response_tokens"] for r in rows) / n if n else 0.0,
        "seconds": round(seconds, 3),
    }
    if task == "safety":
        summary.update(refusal_summary(r["judge"] for r in rows))
    return rows, summary


# ---- files ---------------------------------------------------------------------------------------

def append_report_row(path: str | Path, row: dict) -> None:
    """Append ``row`` to a CSV (created with a header when absent), keeping an existing file's columns (values
    for columns it lacks are left out, and named on stderr)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = list(CSV_COLUMNS)
    existing = path.exists() and path.stat().st_size > 0
    if existing:
        with open(path, newline="", encoding="utf-8") as fh:
            header = next(csv.reader(fh), None)
        if header:
            columns = header
            lost = [key for key in CSV_COLUMNS if key not in header and row.get(key) not in (None, "")]
            if lost:
                print(f"note: {path} has no column(s) {', '.join(lost)}: left out of this row", file=sys.stderr)
    with atomic_path(path) as tmp:  # a kill mid-append must not leave half a row
        if existing:
            shutil.copyfile(path, tmp)
        write_metrics_row(tmp, columns, row, new=not existing)


def write_metrics_row(path: Path, columns: Sequence[str], row: dict, new: bool) -> None:
    """Append ``row`` to the CSV at ``path`` (a new file with a header when ``new``)."""
    with open(path, "w" if new else "a", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, columns, extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerow(row)


# ---- loading -------------------------------------------------------------------------------------

def load_items(task: str, n: int | None, data: str | None = None, seed: int = 0, digits: int = 2,
               held_out: str = "problems", split: str = "test") -> list[dict]:
    """Evaluation items: the digits task's ``split`` (validation or test; ``digits`` as in the loops' configs), the
    arithmetic test split (seeded; ``digits``/``held_out`` as in the loops' configs), GSM8K test, MMLU test,
    SimpleSafetyTests."""
    if task == "digits":
        if split not in SPLITS:
            raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
        n = n if n is not None else 200
        _, val, test = digit_splits(0, n if split == "validation" else 0, n if split == "test" else 0, digits)
        return val if split == "validation" else test
    if task == "arithmetic":
        return task_splits(0, n if n is not None else 200, seed, digits, held_out)[1]
    load, default = {"gsm8k": (load_gsm8k, "gsm8k_test.jsonl"), "math": (load_math, "math_test.jsonl"),
                     "mmlu": (load_mmlu, "mmlu")}.get(task, (load_safety, "simple_safety_tests.csv"))
    items = load(data or DATA_DIR / default)
    return items if n is None else items[:n]


def is_hf_model_dir(path: Path) -> bool:
    """A Hugging Face model folder: a config.json with ``model_type`` (ours has ``model``/``train``)."""
    config = path / "config.json"
    if not path.is_dir() or not config.is_file():
        return False
    try:
        return "model_type" in json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False


def _our_tokenizer(tokenizer_dir: str | None):
    if not tokenizer_dir:
        raise ValueError("--tokenizer DIR is required for our checkpoints (a folder with vocab.json + merges.txt)")
    root = Path(tokenizer_dir)

    def find(name: str) -> Path | None:  # vocab.json, or e.g. gpt2_vocab.json
        return root / name if (root / name).is_file() else next(iter(sorted(root.glob(f"*{name}"))), None)

    vocab, merges = find("vocab.json"), find("merges.txt")
    if vocab is None or merges is None:
        raise ValueError(f"--tokenizer {tokenizer_dir}: no vocab.json + merges.txt there")
    return Tokenizer.from_files(vocab, merges, ["<|endoftext|>"]), (vocab, merges)


def load_model_and_tokenizer(model_path: str, tokenizer_dir: str | None = None, device: str = "cpu"):
    """(model, tokenizer) from our run folder / ckpt file (``model.training.checkpoint.load_model``) or a local HF
    folder (``AutoModelForCausalLM``, ``local_files_only=True``)."""
    path = Path(model_path)
    if not path.exists():
        raise ValueError(f"--model {model_path}: no such file or directory")
    if is_hf_model_dir(path):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(tokenizer_dir or path, local_files_only=True)
        tok.padding_side = "left"
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True).to(device).eval()
        return model, tok
    tok, files = _our_tokenizer(tokenizer_dir)
    model = load_model(path, device=device)
    check_tokenizer(model.tokenizer_identity, tokenizer_identity(tokenizer_dir, *files), model_path, tokenizer_dir)
    return model, tok


# ---- CLI -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class EvalSettings:
    task: str = setting(REQUIRED, "what to evaluate on", choices=TASKS)
    model: str = setting(REQUIRED, "our run folder or ckpt-*.pt, or a local Hugging Face model folder (detected by "
                                   "config.json)")
    tokenizer: str | None = setting(None, "tokenizer folder (vocab.json + merges.txt); required for our "
                                          "checkpoints, optional for HF folders (none: the model folder)")
    n: int | None = setting(None, "evaluate the first N items (none: arithmetic 200, others all)")
    data: str | None = setting(None, "data file/folder instead of the default under ../shared/data/alignment")
    seed: int = setting(0, "seed of the arithmetic task split")
    split: str = setting("test", "digits task: the validation or the test split", choices=SPLITS)
    template: str | None = setting(None, "prompt template: 'r1_zero', 'short' or a string with {question} (none: "
                                         "'short' for digits and arithmetic, 'r1_zero' otherwise)")
    max_new_tokens: int | None = setting(None, f"tokens generated per item (none: {TaskConfig.max_new_tokens} for "
                                               "digits and arithmetic, as the trainers, 512 otherwise)")
    batch_size: int = setting(32, "prompts per generation batch")
    device: str = setting("cpu", "cpu, cuda, cuda:N")
    out_dir: str = setting("reports/alignment", "folder for the per-example JSONL")
    report: str = setting("reports/alignment.csv", "CSV the summary row is appended to")
    stage: str = setting("eval", "stage name written to the CSV row and the JSONL name")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m alignment.evaluate", description=__doc__.split("\n\n")[0])
    add_config_flags(p, EvalSettings)
    return p


def input_error(exc: Exception) -> int:
    """Bad input: one line on stderr, exit status 2."""
    what = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
    print(f"error: {what}".splitlines()[0], file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    try:
        args = config_from_args(EvalSettings, build_parser().parse_args(argv))
        if args.n is not None and args.n < 1:
            raise ValueError(f"--n must be >= 1, got {args.n}")
        if args.batch_size < 1:
            raise ValueError(f"--batch-size must be >= 1, got {args.batch_size}")
        generated = args.task in ("digits", "arithmetic")
        max_new = args.max_new_tokens if args.max_new_tokens is not None else \
            (TaskConfig.max_new_tokens if generated else 512)
        if max_new < 1:
            raise ValueError(f"--max-new-tokens must be >= 1, got {max_new}")
        template = args.template or ("short" if args.task in ("digits", "arithmetic") else "r1_zero")
        check_template(template, "--template")
        if not all(c.isalnum() or c in "-_." for c in args.stage) or not args.stage:
            raise ValueError(f"--stage must be a plain name (letters, digits, - _ .), got {args.stage!r}")
        items = load_items(args.task, args.n, args.data, args.seed, split=args.split)
        if not items:
            raise ValueError(f"no items to evaluate for task {args.task}")
        model, tokenizer = load_model_and_tokenizer(args.model, args.tokenizer, args.device)
        rows, summary = evaluate(model, tokenizer, args.task, items, template, max_new, args.batch_size,
                                 model_name=str(args.model))
    except Exception as exc:  # bad input of any kind: one line, exit 2
        return input_error(exc)
    out = Path(args.out_dir) / f"{args.stage}_{args.task}.jsonl"
    remove_stale_temps_of(out)  # a killed earlier evaluation's half-written outputs
    try:
        write_jsonl(out, rows)
        append_report_row(args.report, {**summary, "stage": args.stage, "outputs": str(out),
                                        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds")})
    except OSError as exc:
        if (line := write_error(exc)) is None:
            raise
        return input_error(ValueError(line))
    if args.task == "safety":
        rate = "n/a" if summary["refusal_rate"] is None else (
            f"{summary['refusal_rate']:.3f} (95% CI {summary['refusal_ci_low']:.3f}-{summary['refusal_ci_high']:.3f}, "
            f"Wilson; judge alignment.evaluation.refusal)")
        print(f"{args.stage} safety: n={summary['n']} refusal_rate={rate} empty={summary['empty']} "
              f"mean_response_tokens={summary['mean_response_tokens']:.1f} seconds={summary['seconds']:.1f} -> {out}")
        return 0
    acc = "n/a" if summary["accuracy"] is None else f"{summary['accuracy']:.3f}"
    fmt = "n/a" if summary["format_rate"] is None else f"{summary['format_rate']:.3f}"
    print(f"{args.stage} {args.task}: n={summary['n']} accuracy={acc} format_rate={fmt} "
          f"mean_response_tokens={summary['mean_response_tokens']:.1f} seconds={summary['seconds']:.1f} -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
