"""The one trainer loop of SFT, DPO, GRPO and RFT, and what they share: loading, the optimizer, held-out evaluation,
metrics rows and plot, checkpoints, report rows and the CLI.

A trainer is a frozen dataclass config (alignment.config: ``model``, ``tokenizer``, ``out_dir``, ``device``,
``report`` ...) and a ``train_xxx(cfg, model=None, tokenizer=None) -> summary`` function that builds its data and
hands a ``Trainer`` (what one step does, how it is evaluated, its metrics columns) to ``run_loop``, which owns the
steps: the learning-rate schedule, the progress bar, the evaluation cadence, metrics.csv and its plot, the CPU threads
(re-checked each step under the CLI) and the checkpoint. The CLI is built from the config's fields, so every field
is a flag (``--grad-accum``, ``--normalize-by-std false`` ...), read through ``workbench.params`` (dataclass
defaults < the stage's params.yaml section < flags).
Checkpoints are written every ``ckpt_interval`` steps and at the end with ``model.training.checkpoint.save_checkpoint``
in the format ``model.train`` writes (``model.training.checkpoint.load_model(out_dir)`` reads them), plus what a
resumed run needs to go on exactly: the optimizer, the RNG states, the trainer's data position and own state, the
metrics rows and the last evaluation. Running the same command again in the same ``out_dir`` continues from the
newest good checkpoint (``--deterministic --threads N``: to the uninterrupted run's weights, bit for bit); a folder
holding another run is refused in one line, ``--restart`` starts over. Hugging Face models are also exported with
``save_pretrained`` under ``out_dir/hf`` at the end.
"""

from __future__ import annotations

import csv
import json
import random
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import torch
from tqdm import tqdm

from alignment.config import LoopConfig
from alignment.core.policy import is_ours
from alignment.core.rollout import check_fits
from alignment.evaluate import (
    append_report_row,
    build_prompt,
    evaluate,
    input_error,
    load_model_and_tokenizer,
    write_metrics_row,
)
from model.training import checkpoint
from model.training.optim import AdamW, clip_grad_norm, cosine_schedule, optimizer_step
from model.training.threads import CpuThreads
from workbench.files import atomic_path, error_line, write_json, write_metrics
from workbench.params import SECTION_BASES, load_section, params_path, parse_config

METRIC_KEYS = ("task", "n", "accuracy", "format_rate", "mean_response_tokens", "pref_accuracy", "margin", "seconds")
HEADLINE_KEYS = ("accuracy", "format_rate", "pref_accuracy", "margin", "seconds")  # dvc's shared vocabulary


def check_multiples(cfg, pairs: tuple[tuple[str, str], ...]) -> None:
    """Batch shapes: for each ``(whole, part)`` of ``pairs``, ``cfg.<whole>`` a multiple of ``cfg.<part>``."""
    for whole, part in pairs:
        if getattr(cfg, whole) % getattr(cfg, part):
            raise ValueError(f"{cfg.settings_prefix()}{whole}={getattr(cfg, whole)} must be a multiple of "
                             f"{part}={getattr(cfg, part)}")


RUN_FILES = ("ckpt-*.pt", "latest", "*.safetensors", "pytorch_model.bin", "trl/checkpoint-*")  # a run's state
# settings a continued run may change: where it runs and reports, not what it computes
MAY_CHANGE = frozenset({"device", "threads", "deterministic", "out_dir", "report", "metrics", "eval_batch_size",
                        "eval_interval", "ckpt_interval", "keep_last", "restart"})


def load_model_and_prepare(cfg, stage: str, model=None, tokenizer=None):
    """(model, tokenizer, ours, context length or None, out_dir): loads ``cfg.model`` unless a model is
    given and opens ``cfg.out_dir`` (``open_run_folder``)."""
    if model is None:
        model, tokenizer = load_model_and_tokenizer(cfg.model, cfg.tokenizer, cfg.device)
    ours = is_ours(model)
    out_dir = open_run_folder(cfg, stage, model)
    return model, tokenizer, ours, model.cfg.context_length if ours else None, out_dir


def open_run_folder(cfg, stage: str, model) -> Path:
    """Create ``cfg.out_dir`` for this run and write its ``config.json``, or find there a run of the same settings
    that ``run_loop`` continues. A folder holding another run (other settings or another trainer) is refused in one
    line (ValueError): its checkpoints would mix with this run's metrics and config. ``cfg.restart`` removes a
    run's training state first."""
    out_dir = Path(cfg.out_dir)
    if getattr(cfg, "restart", False):
        checkpoint.clear_run(out_dir)
        for export in ("hf", "trl"):
            shutil.rmtree(out_dir / export, ignore_errors=True)
    held = [p.name for pattern in RUN_FILES for p in sorted(out_dir.glob(pattern))]
    if held:
        recorded = read_run_config(out_dir).get(stage)
        if recorded is None:
            raise ValueError(f"{out_dir} already holds a run that is not {stage}'s ({', '.join(held[:3])}): choose "
                             "another --out-dir, or pass --restart to replace it")
        check_same_run(cfg, recorded, out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    checkpoint.remove_stale_temps(out_dir)  # a checkpoint a kill left half-written
    write_json(out_dir / "config.json", {"model": model.cfg.to_dict() if is_ours(model) else {}, stage: asdict(cfg)},
               sort_keys=False)
    return out_dir


def read_run_config(out_dir: Path) -> dict:
    """A run folder's config.json ({} when there is none or it is unreadable: the checkpoints decide then)."""
    try:
        data = json.loads((out_dir / "config.json").read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def check_same_run(cfg, recorded: dict, out_dir: Path) -> None:
    """A ValueError naming the settings of ``cfg`` (up to three) that differ from the run recorded in ``out_dir``
    (outside ``MAY_CHANGE``): continuing it would mix two runs."""
    now = json.loads(json.dumps(asdict(cfg)))  # as config.json holds it: tuples are lists
    differ = [f"{key} {recorded[key]!r} (given {value!r})" for key, value in now.items()
              if key not in MAY_CHANGE and recorded.get(key, value) != value]
    if differ:
        raise ValueError(f"{out_dir} holds another run: {', '.join(differ[:3])}{' ...' if len(differ) > 3 else ''}: "
                         "give its settings to continue it, --restart to start it over, or another --out-dir")


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

    def state(self) -> dict:
        """Where the data order stands: what a checkpoint keeps so a resumed run draws the same batches."""
        return {"order": list(self.order), "rng": self.rng.getstate()}

    def restore(self, state: dict) -> None:
        self.order = list(state["order"])
        self.rng.setstate(state["rng"])


def make_optimizer(cfg, model, weight_decay: float | None = None) -> AdamW:
    """AdamW at ``cfg.lr`` with betas (0.9, 0.95) and ``cfg.weight_decay`` (or ``weight_decay``)."""
    decay = cfg.weight_decay if weight_decay is None else weight_decay
    return AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=decay)


def cosine_lr(cfg) -> Callable[[int], float]:
    """The learning rate of step 1..``cfg.steps``: linear warmup over ``cfg.warmup_steps``, then cosine to lr/10."""
    return lambda step: cosine_schedule(step - 1, cfg.lr, cfg.lr / 10, cfg.warmup_steps, cfg.steps)


def clip_and_step(cfg, model, optimizer) -> float:
    """Clip the gradients' global norm to ``cfg.grad_clip``, then the optimizer step pretraining takes too; the norm
    before clipping."""
    grad_norm = float(clip_grad_norm(model.parameters(), cfg.grad_clip))
    optimizer_step(optimizer)
    return grad_norm


def check_context(cfg, model, tokenizer, items: list[dict]) -> None:
    """Before training: every prompt the run will generate from (``items``) leaves room for ``cfg.max_new_tokens``
    in the model's context (``alignment.core.rollout.check_fits``), else one line, exit 2."""
    check_fits(model, tokenizer, [build_prompt(cfg.task, item, cfg.template) for item in items], cfg.max_new_tokens)


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
    header; ``line(step, row, summary)`` the line printed at each evaluation; ``state()`` / ``restore(state)`` the
    trainer's own state a checkpoint keeps beside the model, optimizer and RNGs (its data position, RFT's spent
    tokens)."""

    stage: str
    columns: tuple[str, ...]
    step: Callable[[int], dict]
    held_out: Callable[[], dict]
    line: Callable[[int, dict, dict], str]
    state: Callable[[], dict]
    restore: Callable[[dict], None]
    lr: Callable[[int], float] | None = None  # the schedule, set before each step (None: constant, no lr column)
    panels: dict[str, tuple[str, ...]] = field(default_factory=dict)  # metrics.png: title -> columns
    val_columns: dict[str, str] = field(default_factory=lambda: dict(VAL_COLUMNS))
    postfix: Callable[[dict], dict] | None = None  # the progress bar's numbers from a row
    finished: Callable[[], bool] = lambda: False  # ends the run before cfg.steps (evaluated first): RFT's budget
    eval_at_start: bool = False  # a step-0 row with the starting model's held-out numbers
    step_column: str = "step"  # RFT counts rounds


@dataclass
class _Progress:
    """What the loop carries from step to step, and what a checkpoint keeps of it."""

    step: int = 0
    rows: list[dict] = field(default_factory=list)  # metrics.csv so far
    summary: dict = field(default_factory=dict)  # the last held-out evaluation
    started: float = field(default_factory=time.perf_counter)  # perf_counter at the run's start (earlier: resumed)
    finished: bool = False  # the checkpoint it came from is the run's final one

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.started


def run_loop(cfg, trainer: Trainer, model, tokenizer, optimizer, out_dir: Path,
             threads: CpuThreads | None = None) -> tuple[dict, int]:
    """The loop: up to ``cfg.steps`` steps, each with its learning rate, held-out evaluation every
    ``cfg.eval_interval`` steps (0: never in between), after the last and when the trainer has ``finished``, one
    metrics.csv row per step, a checkpoint every ``cfg.ckpt_interval`` steps, the plot, then the final checkpoint
    (``save_trained``). A run folder holding a checkpoint of this run (``open_run_folder`` checked its settings)
    continues from it. ``threads``: the CLI's CPU thread policy (``set_threads``), re-checked each step; None keeps
    the caller's threads. Returns (``save_trained``'s summary, the steps taken)."""
    metrics_path = out_dir / "metrics.csv"
    progress = _resume(cfg, trainer, model, optimizer, out_dir)
    if progress is None:
        progress = _Progress()
        if trainer.eval_at_start:
            progress.summary = trainer.held_out()
            progress.rows.append({trainer.step_column: 0, "seconds": 0.0, **_val(trainer, progress.summary)})
            print(f"{trainer.step_column} 0: val_accuracy {progress.summary.get('accuracy')}", file=sys.stderr,
                  flush=True)
    elif progress.finished:
        return _finish(cfg, trainer, model, tokenizer, optimizer, out_dir, progress, already=True)
    write_metrics_rows(metrics_path, trainer.columns, progress.rows)  # a resumed run: the rows up to its checkpoint
    model.train()
    bar = tqdm(range(progress.step + 1, cfg.steps + 1), desc=trainer.stage, unit=trainer.step_column,
               file=sys.stderr, dynamic_ncols=True, initial=progress.step, total=cfg.steps)
    for step in bar:
        if threads is not None:
            threads.update()
        row = {trainer.step_column: step}
        if trainer.lr is not None:
            row["lr"] = trainer.lr(step)
            for group in optimizer.param_groups:
                group["lr"] = row["lr"]
        row.update(trainer.step(step))
        if trainer.postfix is not None:
            bar.set_postfix(trainer.postfix(row), refresh=False)
        done = trainer.finished() or step == cfg.steps
        if done or (cfg.eval_interval and step % cfg.eval_interval == 0):
            progress.summary = trainer.held_out()
            model.train()
            row.update(_val(trainer, progress.summary))
            print(trainer.line(step, row, progress.summary), file=sys.stderr, flush=True)
        row["seconds"] = round(progress.seconds, 3)
        write_metrics_row(metrics_path, trainer.columns, row, new=False)
        progress.rows.append(row)
        progress.step = step
        if done:
            break
        if step % cfg.ckpt_interval == 0:
            save_state(cfg, trainer, model, optimizer, out_dir, progress)
    bar.close()
    return _finish(cfg, trainer, model, tokenizer, optimizer, out_dir, progress)


def _resume(cfg, trainer: Trainer, model, optimizer, out_dir: Path) -> _Progress | None:
    """The progress of the run's newest good checkpoint, with the model, optimizer, RNGs and the trainer's state
    put back as they were when it was written; None when the folder holds none (a fresh start). A bad newest
    checkpoint is named in one line and the one before it used; none loading is a CheckpointError."""
    found = checkpoint.load_latest(out_dir, map_location=str(next(model.parameters()).device))
    if found is None:
        return None
    path, state = found
    if "trainer" not in state:
        raise ValueError(f"{path}: a checkpoint without the loop's state (written before runs could resume): "
                         "pass --restart to start the run over")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    trainer.restore(state["trainer"])
    checkpoint.set_rng_state(state["rng"])
    print(f"{trainer.stage}: continuing {out_dir} from {path.name} ({trainer.step_column} {state['step']} of "
          f"{cfg.steps})", file=sys.stderr, flush=True)
    return _Progress(state["step"], [dict(row) for row in state["metrics_rows"]], dict(state["summary"]),
                     time.perf_counter() - state["seconds"], bool(state.get("finished")))


def save_state(cfg, trainer: Trainer, model, optimizer, out_dir: Path, progress: _Progress,
               finished: bool = False) -> Path:
    """Checkpoint everything a resumed run needs to go on as if never stopped (``model.train``'s format plus the
    loop's state); atomic, keeping the newest ``cfg.keep_last``. A Hugging Face model's weights go in the same
    file (its ``save_pretrained`` export is written at the end)."""
    ours = is_ours(model)
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": progress.step,
             "model_config": model.cfg.to_dict() if ours else None, f"{trainer.stage}_config": asdict(cfg),
             "tokenizer": getattr(model, "tokenizer_identity", None), "seconds": progress.seconds,
             "rng": checkpoint.rng_state(), "trainer": trainer.state(), "metrics_rows": progress.rows,
             "summary": progress.summary, "finished": finished}
    if not ours:
        del state["model_config"]
    return checkpoint.save_checkpoint(out_dir, progress.step, state, keep_last=cfg.keep_last)


def write_metrics_rows(path: Path, columns: tuple[str, ...], rows: list[dict]) -> None:
    """metrics.csv with the header and ``rows``, atomically (a resumed run drops the rows after its checkpoint)."""
    with atomic_path(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


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


def _finish(cfg, trainer: Trainer, model, tokenizer, optimizer, out_dir: Path, progress: _Progress,
            already: bool = False) -> tuple[dict, int]:
    """The end of a run: the plot, the final checkpoint (not again for a run that had ``already`` finished), then
    ``publish``. Returns (the summary, the steps taken)."""
    model.eval()
    if already:
        path = checkpoint.load_latest(out_dir)[0]
        print(f"{trainer.stage}: {out_dir} holds this run finished ({path.name}): nothing to train",
              file=sys.stderr, flush=True)
    else:
        if trainer.panels:
            plot_metrics(out_dir / "metrics.csv", out_dir / "metrics.png", trainer.panels)
        path = save_state(cfg, trainer, model, optimizer, out_dir, progress, finished=True)
        if not is_ours(model):
            model.save_pretrained(out_dir / "hf")
            if hasattr(tokenizer, "save_pretrained"):
                tokenizer.save_pretrained(out_dir / "hf")
    if not is_ours(model):  # what evaluate and the report load
        path = out_dir / "hf"
    summary = {**progress.summary, "checkpoint": str(path), "steps": progress.step,
               "seconds": round(progress.seconds, 3)}
    publish(cfg, trainer.stage, summary, path, report=not already)
    return summary, progress.step


def publish(cfg, stage: str, summary: dict, path: Path, report: bool = True) -> None:
    """When ``cfg.metrics`` is set, write the summary to ``metrics/details/<name>`` and its ``headline`` to
    ``cfg.metrics``; append the final eval row to ``cfg.report`` (once per run: not for a run found finished)."""
    if getattr(cfg, "metrics", None):
        stats = {k: summary.get(k) for k in METRIC_KEYS if k in summary}
        write_metrics(cfg.metrics, stats, headline(stats))
    if report and cfg.report and summary.get("task"):
        append_report_row(cfg.report, {**summary, "stage": stage, "model": str(path), "outputs": "",
                                       "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds")})


def parse_stage_config(config_cls, stage: str, argv: list[str] | None = None, doc: str = ""):
    """``config_cls`` from flags over the ``stage`` section of ``--params`` (params.yaml) over its defaults
    (``workbench.params.parse_config``: one flag per field; ``X | None`` fields accept ``none``)."""
    load_section(SECTION_BASES[stage], params_path(argv), known=LoopConfig)  # a key no trainer knows: an error
    cfg, _ = parse_config(config_cls, stage, argv, prog=f"python -m alignment.{stage}",
                          description=(doc or "").split("\n\n")[0])
    return cfg


def cli_main(config_cls, train_fn, stage: str, argv: list[str] | None = None, doc: str = "") -> int:
    """Parse flags (over params.yaml) into ``config_cls``, load the model, run ``train_fn``; bad input, a run folder
    that cannot be continued and a full or read-only disk are one line and exit 2."""
    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    try:
        cfg = parse_stage_config(config_cls, stage, argv, doc)
        policy = set_threads(cfg)
        model, tokenizer = load_model_and_tokenizer(cfg.model, cfg.tokenizer, cfg.device)
        summary = train_fn(cfg, model, tokenizer, threads=policy)
    except Exception as exc:  # bad input, data or run folder, a full disk; anything else is a bug
        if (line := error_line(exc, checkpoint.CheckpointError)) is None:
            raise
        return input_error(ValueError(line))
    finally:  # this run's policy ends with it
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)
    pref = (f", held-out preference accuracy {summary['pref_accuracy']}, margin {summary.get('margin')}"
            if "pref_accuracy" in summary else "")
    print(f"{stage}: {summary['steps']} {'rounds' if stage == 'rft' else 'steps'}, held-out accuracy "
          f"{summary.get('accuracy')}, format rate {summary.get('format_rate')}{pref}, checkpoint "
          f"{summary['checkpoint']} ({summary['seconds']:.1f} s)")
    return 0


def set_threads(cfg) -> CpuThreads | None:
    """``cfg.threads`` CPU threads (and deterministic algorithms with ``cfg.deterministic``), or the policy that
    follows the cores other processes leave free (None where the count must stay: a fixed or deterministic run)."""
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    if cfg.deterministic:
        torch.use_deterministic_algorithms(True)
    return CpuThreads() if cfg.device == "cpu" and not cfg.threads and not cfg.deterministic else None
