"""The one trainer loop of SFT, DPO, GRPO and RFT, and what they share: loading, the optimizer, held-out evaluation,
metrics rows and plot, checkpoints, report rows and the CLI.

A trainer is a frozen dataclass config (alignment.config: ``model``, ``tokenizer``, ``out_dir``, ``device``,
``report`` ...) and a ``train_xxx(cfg, model=None, tokenizer=None) -> summary`` function that builds its data and
hands a ``Trainer`` (what one step does, how it is evaluated, its metrics columns) to ``run_loop``, which owns the
steps: the learning-rate schedule, the progress bar, the evaluation cadence, metrics.csv and its plot, the CPU threads
(re-checked each step under the CLI) and the checkpoint. The CLI is built from the config's fields, so every field
is a flag (``--grad-accum``, ``--normalize-by-std false`` ...), read through ``workbench.params`` (dataclass
defaults < the stage's params.yaml section < flags).
Checkpoints of our models are written with ``model.training.checkpoint.save_checkpoint`` in the format
``model.train`` writes (``model.training.checkpoint.load_model(out_dir)`` reads them); Hugging Face models are
saved with ``save_pretrained`` under ``out_dir/hf``.
"""

from __future__ import annotations

import math
import random
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from tqdm import tqdm

from alignment.config import LoopConfig
from alignment.core.policy import is_ours
from alignment.evaluate import append_report_row, evaluate, input_error, load_model_and_tokenizer, write_metrics_row
from alignment.tasks.arithmetic import HELD_OUT
from alignment.tasks.prompts import check_template
from model.training.checkpoint import remove_stale_temps, save_checkpoint
from model.training.optim import AdamW, clip_grad_norm, cosine_schedule
from model.training.threads import CpuThreads
from workbench.files import atomic_path, write_json, write_metrics
from workbench.params import SECTION_BASES, load_section, params_path, parse_config

ENGINES = ("ours", "trl")
METRIC_KEYS = ("task", "n", "accuracy", "format_rate", "mean_response_tokens", "pref_accuracy", "margin", "seconds")
HEADLINE_KEYS = ("accuracy", "format_rate", "pref_accuracy", "margin", "seconds")  # dvc's shared vocabulary

def check_choices(cfg, tasks: tuple[str, ...]) -> None:
    """The checks every loop config shares: engine, task, the arithmetic digits / held_out options, template."""
    name = type(cfg).__name__
    for key, allowed in (("engine", ENGINES), ("task", tasks), ("held_out", HELD_OUT)):
        if getattr(cfg, key) not in allowed:
            raise ValueError(f"{name}.{key} must be one of {', '.join(allowed)}, got {getattr(cfg, key)!r}")
    if not isinstance(cfg.digits, int) or not 1 <= cfg.digits <= 9:
        raise ValueError(f"{name}.digits must be an int in 1..9, got {cfg.digits!r}")
    check_template(cfg.template, f"{name}.template")


def check_numbers(cfg, positive: tuple[str, ...], at_least_zero: tuple[str, ...] = ()) -> None:
    """Real-valued settings: each of ``positive`` a finite number > 0, each of ``at_least_zero`` one >= 0."""
    for low, names in ((0, positive), (None, at_least_zero)):
        for key in names:
            value = getattr(cfg, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or \
                    (value <= 0 if low == 0 else value < 0):
                raise ValueError(f"{type(cfg).__name__}.{key} must be a finite number {'> 0' if low == 0 else '>= 0'}, "
                                 f"got {value!r}")


def check_ints(cfg, positive: tuple[str, ...], at_least_zero: tuple[str, ...] = ()) -> None:
    """Integer settings: each of ``positive`` >= 1, each of ``at_least_zero`` >= 0 (a bool is not an int here)."""
    for low, names in ((1, positive), (0, at_least_zero)):
        for key in names:
            value = getattr(cfg, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{type(cfg).__name__}.{key} must be {'a positive int' if low else 'an int >= 0'}, "
                                 f"got {value!r}")


def check_multiples(cfg, pairs: tuple[tuple[str, str], ...]) -> None:
    """Batch shapes: for each ``(whole, part)`` of ``pairs``, ``cfg.<whole>`` a multiple of ``cfg.<part>``."""
    for whole, part in pairs:
        if getattr(cfg, whole) % getattr(cfg, part):
            raise ValueError(f"{type(cfg).__name__}.{whole}={getattr(cfg, whole)} must be a multiple of "
                             f"{part}={getattr(cfg, part)}")


RUN_FILES = ("ckpt-*.pt", "latest", "*.safetensors", "pytorch_model.bin")  # what a finished or killed run leaves


def load_model_and_prepare(cfg, stage: str, model=None, tokenizer=None):
    """(model, tokenizer, ours, context length or None, out_dir): loads ``cfg.model`` unless a model is
    given, creates ``cfg.out_dir`` and writes ``config.json`` (the model's config and the loop's). A folder that
    already holds a run's checkpoints is refused (ValueError): a second run there would leave the first's
    checkpoints beside its own metrics and config."""
    if model is None:
        model, tokenizer = load_model_and_tokenizer(cfg.model, cfg.tokenizer, cfg.device)
    ours = is_ours(model)
    out_dir = Path(cfg.out_dir)
    held = [p.name for pattern in RUN_FILES for p in sorted(out_dir.glob(pattern))]
    if held:
        raise ValueError(f"{out_dir} already holds a run ({', '.join(held[:3])}): its metrics, config and `latest` "
                         f"would mix with this one's; choose another --out-dir or remove it")
    out_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(out_dir)  # a checkpoint a kill left half-written
    write_json(out_dir / "config.json", {"model": model.cfg.to_dict() if ours else {}, stage: asdict(cfg)},
               sort_keys=False)
    return model, tokenizer, ours, model.cfg.context_length if ours else None, out_dir


class ShuffledBatches:
    """Batches of ``batch_size`` indices into ``n`` examples, reshuffled (with ``rng``) each time they run out."""

    def __init__(self, n: int, batch_size: int, rng: random.Random):
        self.n, self.batch_size, self.rng = n, batch_size, rng
        self.order: list[int] = []

    def take(self) -> list[int]:
        picked = []
        while len(picked) < self.batch_size:
            if not self.order:
                self.order.extend(self.rng.sample(range(self.n), self.n))
            picked.append(self.order.pop())
        return picked


def make_optimizer(cfg, model, weight_decay: float | None = None) -> AdamW:
    """AdamW at ``cfg.lr`` with betas (0.9, 0.95) and ``cfg.weight_decay`` (or ``weight_decay``)."""
    decay = cfg.weight_decay if weight_decay is None else weight_decay
    return AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=decay)


def cosine_lr(cfg) -> Callable[[int], float]:
    """The learning rate of step 1..``cfg.steps``: linear warmup over ``cfg.warmup_steps``, then cosine to lr/10."""
    return lambda step: cosine_schedule(step - 1, cfg.lr, cfg.lr / 10, cfg.warmup_steps, cfg.steps)


def optimizer_step(cfg, model, optimizer) -> float:
    """Clip the gradients' global norm to ``cfg.grad_clip``, step, drop the gradients; the norm before clipping."""
    grad_norm = float(clip_grad_norm(model.parameters(), cfg.grad_clip))
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return grad_norm


def held_out_accuracy(cfg, model, tokenizer, items: list[dict]) -> dict:
    """Greedy held-out accuracy and format rate on ``items`` with the task's verifier (``alignment.evaluate``);
    None for both when there are no items."""
    if not items:
        return {"accuracy": None, "format_rate": None}
    _, summary = evaluate(model, tokenizer, cfg.task, items, cfg.template, cfg.max_new_tokens, cfg.eval_batch_size,
                          model_name=str(cfg.out_dir))
    return summary


VAL_COLUMNS = {"val_accuracy": "accuracy", "val_format_rate": "format_rate"}  # metrics.csv column -> summary key


@dataclass
class Trainer:
    """What a trainer gives ``run_loop``: ``step(step)`` does one step's work (the optimizer steps inside it) and
    returns the metrics row's training columns; ``held_out()`` the evaluation summary; ``columns`` the metrics.csv
    header; ``line(step, row, summary)`` the line printed at each evaluation."""

    stage: str
    columns: tuple[str, ...]
    step: Callable[[int], dict]
    held_out: Callable[[], dict]
    line: Callable[[int, dict, dict], str]
    lr: Callable[[int], float] | None = None  # the schedule, set before each step (None: constant, no lr column)
    panels: dict[str, tuple[str, ...]] = field(default_factory=dict)  # metrics.png: title -> columns
    val_columns: dict[str, str] = field(default_factory=lambda: dict(VAL_COLUMNS))
    postfix: Callable[[dict], dict] | None = None  # the progress bar's numbers from a row
    finished: Callable[[], bool] = lambda: False  # ends the run before cfg.steps (evaluated first): RFT's budget
    eval_at_start: bool = False  # a step-0 row with the starting model's held-out numbers
    step_column: str = "step"  # RFT counts rounds


_cpu_threads: CpuThreads | None = None  # the CLI's thread policy (cli_main), re-checked each step; None from Python


def run_loop(cfg, trainer: Trainer, model, tokenizer, optimizer, out_dir: Path) -> tuple[dict, int]:
    """The loop: up to ``cfg.steps`` steps, each with its learning rate, held-out evaluation every
    ``cfg.eval_interval`` steps (0: never in between), after the last and when the trainer has ``finished``, one
    metrics.csv row per step, the plot, then the checkpoint (``save_trained``). Returns (``save_trained``'s summary,
    the steps taken)."""
    metrics_path, started, summary, new = out_dir / "metrics.csv", time.perf_counter(), {}, True
    if trainer.eval_at_start:
        summary = trainer.held_out()
        write_metrics_row(metrics_path, trainer.columns, {trainer.step_column: 0, "seconds": 0.0,
                                                          **_val(trainer, summary)}, new=True)
        print(f"{trainer.step_column} 0: val_accuracy {summary.get('accuracy')}", file=sys.stderr, flush=True)
        new = False
    model.train()
    bar = tqdm(range(1, cfg.steps + 1), desc=trainer.stage, unit=trainer.step_column, file=sys.stderr,
               dynamic_ncols=True)
    step = 0
    for step in bar:
        if _cpu_threads is not None:
            _cpu_threads.update()
        row = {trainer.step_column: step}
        if trainer.lr is not None:
            row["lr"] = trainer.lr(step)
            for group in optimizer.param_groups:
                group["lr"] = row["lr"]
        row.update(trainer.step(step))
        if trainer.postfix is not None:
            bar.set_postfix(trainer.postfix(row), refresh=False)
        done = trainer.finished()
        if done or step == cfg.steps or (cfg.eval_interval and step % cfg.eval_interval == 0):
            summary = trainer.held_out()
            model.train()
            row.update(_val(trainer, summary))
            print(trainer.line(step, row, summary), file=sys.stderr, flush=True)
        row["seconds"] = round(time.perf_counter() - started, 3)
        write_metrics_row(metrics_path, trainer.columns, row, new=new)
        new = False
        if done:
            break
    bar.close()
    if trainer.panels:
        plot_metrics(metrics_path, out_dir / "metrics.png", trainer.panels)
    return save_trained(cfg, trainer.stage, model, tokenizer, optimizer, summary, started), step


def _val(trainer: Trainer, summary: dict) -> dict:
    return {column: summary.get(key) for column, key in trainer.val_columns.items()}


def plot_metrics(csv_path: Path, png_path: Path, panels: dict[str, tuple[str, ...]]) -> None:
    """One panel per entry (title -> metrics.csv columns against step); no file when there is nothing to draw."""
    import pandas as pd
    from matplotlib.figure import Figure

    frame = pd.read_csv(csv_path)
    panels = {title: [c for c in cols if c in frame and frame[c].notna().any()] for title, cols in panels.items()}
    panels = {title: cols for title, cols in panels.items() if cols}
    if not panels or "step" not in frame:
        return
    fig = Figure(figsize=(4.2 * len(panels), 3.4), layout="constrained")
    for ax, (title, cols) in zip(fig.subplots(1, len(panels), squeeze=False)[0], panels.items(), strict=False):
        for col in cols:
            points = frame[["step", col]].dropna()
            ax.plot(points["step"], points[col], label=col, marker="o" if len(points) < 12 else None, markersize=3)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.legend(fontsize=8)
    with atomic_path(png_path) as tmp:
        fig.savefig(tmp, dpi=100, format=png_path.suffix[1:] or "png")


def headline(stats: dict) -> dict:
    """The numbers ``dvc metrics show`` lists for a loop: held-out accuracy and format rate, DPO's preference
    accuracy and margin, and the stage's seconds (the full summary goes to ``metrics/details/``)."""
    return {key: stats[key] for key in HEADLINE_KEYS if key in stats}


def save_trained(cfg, stage: str, model, tokenizer, optimizer, summary: dict, started: float) -> dict:
    """Checkpoint the trained model, append the final eval row to ``cfg.report`` and, when ``cfg.metrics`` is
    set, write the summary to ``metrics/details/<name>`` and its ``headline`` to ``cfg.metrics``; returns
    ``summary`` plus ``checkpoint`` and ``seconds``."""
    model.eval()
    out_dir = Path(cfg.out_dir)
    if is_ours(model):
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": cfg.steps,
                 "model_config": model.cfg.to_dict(), f"{stage}_config": asdict(cfg),
                 "tokenizer": getattr(model, "tokenizer_identity", None), "seconds": time.perf_counter() - started}
        path = save_checkpoint(out_dir, cfg.steps, state, keep_last=1)
    else:
        path = out_dir / "hf"
        model.save_pretrained(path)
        if hasattr(tokenizer, "save_pretrained"):
            tokenizer.save_pretrained(path)
    summary = {**summary, "checkpoint": str(path), "seconds": round(time.perf_counter() - started, 3)}
    if getattr(cfg, "metrics", None):
        stats = {k: summary.get(k) for k in METRIC_KEYS if k in summary}
        write_metrics(cfg.metrics, stats, headline(stats))
    if cfg.report and summary.get("task"):
        append_report_row(cfg.report, {**summary, "stage": stage, "model": str(path), "outputs": "",
                                       "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds")})
    return summary


def parse_stage_config(config_cls, stage: str, argv: list[str] | None = None, doc: str = ""):
    """``config_cls`` from flags over the ``stage`` section of ``--params`` (params.yaml) over its defaults
    (``workbench.params.parse_config``: one flag per field; ``X | None`` fields accept ``none``)."""
    load_section(SECTION_BASES[stage], params_path(argv), known=LoopConfig)  # a key no trainer knows: an error
    cfg, _ = parse_config(config_cls, stage, argv, prog=f"python -m alignment.{stage}",
                          description=(doc or "").split("\n\n")[0])
    return cfg


def cli_main(config_cls, train_fn, stage: str, argv: list[str] | None = None, doc: str = "") -> int:
    """Parse flags (over params.yaml) into ``config_cls``, load the model, run ``train_fn``; bad input is one
    line and exit 2."""
    global _cpu_threads
    try:
        cfg = parse_stage_config(config_cls, stage, argv, doc)
        if cfg.device == "cpu":
            _cpu_threads = CpuThreads()  # threads for the cores other processes leave free, re-checked each step
        model, tokenizer = load_model_and_tokenizer(cfg.model, cfg.tokenizer, cfg.device)
    except Exception as exc:
        _cpu_threads = None
        return input_error(exc)
    try:
        summary = train_fn(cfg, model, tokenizer)
    except ValueError as exc:  # bad data or an engine that cannot take this model: one line, exit 2
        return input_error(exc)
    finally:
        _cpu_threads = None  # this run's policy; a trainer called from Python later keeps its caller's threads
    pref = (f", held-out preference accuracy {summary['pref_accuracy']}, margin {summary.get('margin')}"
            if "pref_accuracy" in summary else "")
    print(f"{stage}: {cfg.steps} steps, held-out accuracy {summary.get('accuracy')}, format rate "
          f"{summary.get('format_rate')}{pref}, checkpoint {summary['checkpoint']} ({summary['seconds']:.1f} s)")
    return 0
