"""What each post-training stage buys: one held-out evaluation of every stage's model, a CSV and plots.

``python -m alignment.report`` (the DVC ``evaluate`` stage) evaluates the models named under
``alignment_report.models`` in params.yaml (sft, dpo, rft, grpo) on the same held-out problems with greedy
decoding (``alignment.evaluate``), and writes atomically, replacing what was there (a rerun is idempotent):

- ``reports/alignment.csv``: one row per split and stage (the ``digits`` task: validation rows, then test rows; other
  tasks: test), with accuracy, format rate, mean response tokens, seconds ... (the columns of
  ``alignment.evaluate.CSV_COLUMNS``), ``delta`` (accuracy gain over the previous stage), ``seed``, ``split``,
  ``n_problems``, the standard error ``se`` and a bootstrap 95 % interval ``ci_low``/``ci_high`` over problems
  (``alignment.evaluation.stats``), and for ``pass_k_stages`` pass@1 / pass@k from ``pass_k`` samples per test problem;
  then one ``task=safety`` row per stage: its refusal rate on the first ``safety_n`` SimpleSafetyTests prompts (greedy,
  the same template and token budget; judged by ``alignment.evaluation.refusal``) with n and a Wilson 95 % interval
  (``refusal_ci_low``/``refusal_ci_high``). They are left out, with a note, when the CSV is not in ../shared/data;
- ``reports/alignment/<stage>_<task>.jsonl``: per-example prompts, responses and rewards (safety: the judge's label);
- ``reports/alignment.png``: held-out accuracy and format rate per stage, and the training curves of each
  stage's ``metrics.csv`` (SFT loss, DPO preference accuracy, GRPO reward and held-out accuracy);
- ``metrics/alignment.json``: ``{<stage>_accuracy: accuracy, <stage>_refusal_rate: rate}`` for ``dvc metrics show``
  (the same numbers, with each refusal rate's interval and n, in ``metrics/details/alignment.json``).

Settings: the ``alignment_report`` section of params.yaml (``--params``), flags win (``workbench.params``).

``alignment.evaluate --report`` appends rows for ad-hoc runs; this module owns the pipeline's report.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from alignment.config import TaskConfig
from alignment.core.rollout import rollout
from alignment.evaluate import (
    CSV_COLUMNS,
    TASKS,
    build_prompt,
    evaluate,
    load_items,
    load_model_and_tokenizer,
    score,
)
from alignment.evaluation.stats import pass_at_k, summarize
from alignment.tasks.datasets import DATA_DIR
from alignment.tasks.digits import SPLITS
from workbench.files import atomic_path, write_jsonl, write_metrics
from workbench.params import apply_section, build_config_parser, config_from_args, params_path, setting

SECTION = "alignment_report"


STAT_COLUMNS = ("seed", "split", "n_problems", "se", "ci_low", "ci_high", "pass_at_1", "pass_at_k", "k")


def sampled_pass_at_k(model, tokenizer, task: str, items: list[dict], template: str, max_new_tokens: int, k: int,
                      batch_size: int = 64, seed: int = 0) -> dict:
    """pass@1 and pass@k over problems from ``k`` samples per problem at temperature 1
    (``alignment.evaluation.stats``)."""
    prompts = [build_prompt(task, item, template) for item in items for _ in range(k)]
    responses = rollout(model, tokenizer, prompts, max_new_tokens, temperature=1.0, seed=seed, batch_size=batch_size)
    right = [sum(score(task, responses[i * k + j], item)["reward"] > 0 for j in range(k))
             for i, item in enumerate(items)]
    return {"pass_at_1": sum(pass_at_k(k, c, 1) for c in right) / len(items),
            "pass_at_k": sum(pass_at_k(k, c, k) for c in right) / len(items), "k": k}


def evaluate_stages(models: dict[str, str], tokenizer_dir: str | None, task: str, n: int, template: str,
                    max_new_tokens: int, batch_size: int = 64, seed: int = 0, device: str = "cpu",
                    out_dir: str | Path = "reports/alignment", digits: int = 2, held_out: str = "problems",
                    pass_k: int = 0, pass_k_stages: tuple[str, ...] = ("sft",)) -> pd.DataFrame:
    """One row per split and stage (validation rows first, test last), in the order given: greedy accuracy with the
    standard error and a bootstrap 95 % interval over problems (``alignment.evaluation.stats``), ``seed`` (the models'
    training seed, also the arithmetic task's split seed), and for ``pass_k_stages`` pass@1 / pass@k from ``pass_k``
    samples per test problem; per-example JSONL under ``out_dir``."""
    rows = []
    # digits: validation (where every choice was made), then test; other tasks: test
    for split in SPLITS if task == "digits" else ("test",):
        items = load_items(task, n, seed=seed, digits=digits, held_out=held_out, split=split)
        if not items:
            raise ValueError(f"no {task} items to evaluate")
        previous = None
        for stage, path in models.items():
            model, tokenizer = load_model_and_tokenizer(path, tokenizer_dir, device)
            examples, summary = evaluate(model, tokenizer, task, items, template, max_new_tokens, batch_size,
                                         model_name=str(path))
            suffix = "" if split == "test" else f"_{split}"
            out = Path(out_dir) / f"{stage}_{task}{suffix}.jsonl"
            write_jsonl(out, examples)
            stats = summarize([float(e["reward"]) for e in examples], seed=seed)
            if pass_k and split == "test" and stage in pass_k_stages:
                stats |= sampled_pass_at_k(model, tokenizer, task, items, template, max_new_tokens, pass_k,
                                           batch_size, seed)
            accuracy = summary["accuracy"]
            delta = None if previous is None or accuracy is None else accuracy - previous
            previous = accuracy
            rows.append({**summary, **stats, "seed": seed, "split": split, "stage": stage, "outputs": str(out),
                         "delta": delta, "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds")})
            print(f"{stage:>6} {task} {split}: accuracy {accuracy:.3f} ± {stats['se']:.3f} SE (95% CI "
                  f"{stats['ci_low']:.3f}-{stats['ci_high']:.3f}, n={len(items)}, {summary['seconds']:.1f} s, {path})",
                  file=sys.stderr, flush=True)
    return pd.DataFrame(rows, columns=[*CSV_COLUMNS, "delta", *STAT_COLUMNS])


def evaluate_safety(models: dict[str, str], tokenizer_dir: str | None, n: int | None, template: str,
                    max_new_tokens: int, batch_size: int = 64, device: str = "cpu",
                    out_dir: str | Path = "reports/alignment", data: str | Path | None = None) -> list[dict]:
    """One ``task=safety`` row per stage: the refusal rate (with n and a Wilson 95 % interval) of its greedy answers
    to the first ``n`` SimpleSafetyTests prompts; per-example JSONL with the judge's labels under ``out_dir``."""
    items = load_items("safety", n, None if data is None else str(data))
    if not items:
        print(f"note: {data}: no SimpleSafetyTests prompts: the safety rows are left out", file=sys.stderr)
        return []
    rows = []
    for stage, path in models.items():
        model, tokenizer = load_model_and_tokenizer(path, tokenizer_dir, device)
        examples, summary = evaluate(model, tokenizer, "safety", items, template, max_new_tokens, batch_size,
                                     model_name=str(path))
        out = Path(out_dir) / f"{stage}_safety.jsonl"
        write_jsonl(out, examples)
        rows.append({**summary, "stage": stage, "outputs": str(out), "split": "test", "n_problems": summary["n"],
                     "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds")})
        print(f"{stage:>6} safety: refusal rate {summary['refusal_rate']:.3f} (95% CI {summary['refusal_ci_low']:.3f}-"
              f"{summary['refusal_ci_high']:.3f}, n={summary['n']}, {summary['seconds']:.1f} s)",
              file=sys.stderr, flush=True)
    return rows


def _curve(ax, frame: pd.DataFrame, column: str, label: str, **style) -> bool:
    if column not in frame or frame[column].notna().sum() == 0:
        return False
    points = frame[["step", column]].dropna()
    ax.plot(points["step"], points[column], label=label, **style)
    return True


def plot_report(frame: pd.DataFrame, curves: dict[str, Path], path: str | Path) -> None:
    """Accuracy/format rate per stage (bars) beside each stage's training curves."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(16, 4.2), layout="constrained")
    bars, sft_ax, dpo_ax, grpo_ax = fig.subplots(1, 4)
    x = range(len(frame))
    bars.bar([i - 0.2 for i in x], frame["accuracy"].fillna(0), width=0.4, label="accuracy")
    bars.bar([i + 0.2 for i in x], frame["format_rate"].fillna(0), width=0.4, label="format rate", alpha=0.6)
    for i, acc in zip(x, frame["accuracy"].fillna(0), strict=False):
        bars.annotate(f"{acc:.2f}", (i - 0.2, acc), ha="center", va="bottom", fontsize=8)
    bars.set_xticks(list(x), frame["stage"])
    bars.set_ylim(0, 1.08)
    bars.set_title(f"held-out {frame['task'].iloc[0] if len(frame) else ''} (greedy, n={int(frame['n'].max() or 0)})")
    bars.legend(loc="upper left", fontsize=8)
    panels = {"sft": (sft_ax, []),
              "dpo": (dpo_ax, [("reward_accuracy", "train pref. accuracy"),
                               ("val_pref_accuracy", "held-out pref. acc."), ("val_accuracy", "held-out accuracy")]),
              "grpo": (grpo_ax, [("reward", "rollout reward"), ("val_accuracy", "held-out accuracy"),
                                 ("entropy", "entropy")])}
    for stage, (ax, columns) in panels.items():
        ax.set_title(f"{stage} training")
        ax.set_xlabel("step")
        metrics = curves.get(stage)
        if metrics is None or not Path(metrics).exists():
            ax.text(0.5, 0.5, "no metrics.csv", ha="center", va="center", transform=ax.transAxes)
            continue
        frame_m = pd.read_csv(metrics)
        if stage == "sft":  # the loss (nats per sequence) and an accuracy need their own axes
            _curve(ax, frame_m, "loss", "train loss (nats/seq)", color="C0")
            ax.set_yscale("log")
            ax.legend(loc="upper left", fontsize=8)
            right = ax.twinx()
            if _curve(right, frame_m, "val_accuracy", "held-out accuracy", color="C1", marker="o", markersize=3):
                right.set_ylim(0, 1)
                right.legend(loc="upper right", fontsize=8)
            continue
        drawn = [_curve(ax, frame_m, col, label, marker="o" if col.startswith("val") else None, markersize=3)
                 for col, label in columns]
        if any(drawn):
            ax.legend(fontsize=8)
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format=path.suffix[1:] or "png")


@dataclass(frozen=True)
class ReportConfig(TaskConfig):
    """The alignment_report section: every stage's model on the same held-out problems."""

    SECTION = "alignment_report"

    task: str = setting("digits", "the task every stage is scored on: digits, arithmetic, gsm8k, math or mmlu (safety "
                                  "rows come with safety_n)", choices=tuple(t for t in TASKS if t != "safety"))
    n: int = setting(200, "problems per split")
    batch_size: int = setting(64, "prompts per generation batch")
    seed: int = setting(0, "the models' training seed (a CSV column; also the arithmetic task's split seed)")
    device: str = setting("cpu", "cpu | cuda | mps")
    out: str = setting("reports/alignment.csv", "the report CSV (a row per stage and split)")
    out_dir: str = setting("reports/alignment", "folder for the per-example JSONL")
    plot: str = setting("reports/alignment.png", "training curves and held-out accuracy per stage")
    metrics: str = setting("metrics/alignment.json", "held-out accuracy and refusal rate per stage, for dvc metrics")
    safety_n: int = setting(100, "SimpleSafetyTests prompts per stage for the refusal rate (all 100; 0 leaves "
                                 "safety out)", at_least=0)
    safety_data: str = setting("", "SimpleSafetyTests CSV ('' = ../shared/data/alignment/simple_safety_tests.csv, "
                                   "left out with a note when absent)")
    safety_max_new_tokens: int = setting(48, "tokens generated per safety prompt: a refusal is a few words, and the "
                                             "prompts are long (the longest is 60 tokens of the default BPE), so "
                                             "prompt + this fits the default 128-token context", at_least=0)
    pass_k: int = setting(8, "samples per test problem (T 1) for pass@1 / pass@k of pass_k_stages (0: none)")
    pass_k_stages: str = setting("sft", "comma-separated stages that get pass@k (what sampling already contains)")
    model: tuple[str, ...] = setting((), "a stage's model as STAGE=PATH, repeatable (replaces the section's models "
                                         "mapping)", repeatable=True)
    models: dict = setting({}, "stage -> model (params.yaml only)", params_only=True)


def build_parser() -> argparse.ArgumentParser:
    """One flag per ``ReportConfig`` setting (``--help`` shows the params values once ``apply_section`` set them)."""
    return build_config_parser(ReportConfig, SECTION, "python -m alignment.report", __doc__.split("\n\n")[0])


def _settings(argv: list[str] | None) -> dict:
    """ReportConfig's defaults < the alignment_report section of ``--params`` < flags; the models checked to exist."""
    parser = build_parser()
    section = apply_section(parser, SECTION, params_path(argv), extra_keys=("models",))
    settings = asdict(config_from_args(ReportConfig, parser.parse_args(argv), SECTION, params_only=section))
    given = list(settings.pop("model"))
    if given:
        pairs = [m.split("=", 1) for m in given]
        if any(len(pair) != 2 or not pair[0] for pair in pairs):
            raise ValueError(f"--model takes STAGE=PATH, got {given!r}")
        settings["models"] = dict(pairs)
    if not settings["models"]:
        raise ValueError("no models to evaluate: set alignment_report.models or pass --model STAGE=PATH")
    if settings["safety_data"] and not Path(settings["safety_data"]).is_file():
        raise ValueError(f"alignment_report.safety_data: {settings['safety_data']}: no such file")
    for stage, path in settings["models"].items():
        if not Path(path).exists():
            raise ValueError(f"alignment_report.models.{stage}: {path}: no such file or directory")
    return settings


def headline(stats: dict) -> dict:
    """What ``dvc metrics show`` lists for the evaluate stage: each stage's held-out accuracy and refusal rate (base,
    sft, dpo, grpo: two keys each)."""
    return {key: value for key, value in stats.items() if key.endswith(("_accuracy", "_refusal_rate"))}


def safety_rows(s: dict) -> list[dict]:
    """The safety rows of the report (``evaluate_safety``), or none when ``safety_n`` is 0 or the default CSV is
    absent (a note on stderr; a ``safety_data`` given but missing was refused by ``_settings``)."""
    if s["safety_n"] == 0:
        return []
    data = Path(s["safety_data"]) if s["safety_data"] else DATA_DIR / "simple_safety_tests.csv"
    if not data.is_file():
        print(f"note: {data} is absent: the safety rows (refusal rate) are left out", file=sys.stderr)
        return []
    return evaluate_safety(s["models"], s["tokenizer"], s["safety_n"], s["template"], s["safety_max_new_tokens"],
                           s["batch_size"], s["device"], s["out_dir"], data)


def main(argv: list[str] | None = None) -> int:
    try:
        s = _settings(argv)
    except ValueError as exc:
        print(f"error: {exc}".splitlines()[0], file=sys.stderr)
        return 2
    frame = evaluate_stages(s["models"], s["tokenizer"], s["task"], s["n"], s["template"], s["max_new_tokens"],
                            s["batch_size"], s["seed"], s["device"], s["out_dir"], s["digits"], s["held_out"],
                            s["pass_k"], tuple(x for x in s["pass_k_stages"].split(",") if x))
    safety = [{**row, "seed": s["seed"]} for row in safety_rows(s)]
    with atomic_path(s["out"]) as tmp:  # replacing the file: a rerun is idempotent
        pd.DataFrame([*frame.to_dict("records"), *safety], columns=frame.columns).to_csv(tmp, index=False)
    curves = {stage: Path(path if Path(path).is_dir() else Path(path).parent) / "metrics.csv"
              for stage, path in s["models"].items()}
    test = frame[frame["split"] == "test"].reset_index(drop=True)
    plot_report(test, curves, s["plot"])
    stats = {f"{row.stage}_accuracy": row.accuracy for row in test.itertuples()}
    stats |= {f"{row.stage}_{key}": getattr(row, key) for row in test.itertuples()
              for key in ("se", "ci_low", "ci_high", "pass_at_1", "pass_at_k") if pd.notna(getattr(row, key))}
    for row in safety:
        stats |= {f"{row['stage']}_refusal_rate": row["refusal_rate"], f"{row['stage']}_safety_n": row["n"],
                  f"{row['stage']}_refusal_ci95": [row["refusal_ci_low"], row["refusal_ci_high"]]}
    write_metrics(s["metrics"], stats, headline(stats))
    print(frame[["split", "stage", "accuracy", "se", "ci_low", "ci_high", "pass_at_k", "mean_response_tokens"]]
          .to_string(index=False))
    if safety:
        print(pd.DataFrame(safety)[["stage", "n", "refusal_rate", "refusal_ci_low", "refusal_ci_high"]]
              .to_string(index=False))
    print(f"wrote {s['out']}, {s['plot']}, {s['metrics']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
