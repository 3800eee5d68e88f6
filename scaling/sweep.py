"""Budgeted IsoFLOP sweeps: train every (compute budget C × model shape) for D = C / FLOPs-per-token tokens.

The design of Hoffmann et al. 2022 (Chinchilla) approach 2: at each fixed C, vary N and give each model the tokens
that C buys, so that scaling/fit.py can find the loss-optimal N per budget. FLOPs per token are either C = 6·N·D
with N = ModelConfig.param_count() (Kaplan et al. 2020 §2.1, Chinchilla §3; "6N") or the PaLM count
ModelConfig.flops_per_token(context_length) = 6·N_matmul + 12·L·d·T (Chowdhery et al. 2022 app. B; "exact").
Each run gets max_tokens = D (model/train.py rounds up to whole steps, so a run overshoots C by < one step),
warmup min(warmup_steps, 10% of its steps), and one evaluation and checkpoint at its end.

Design knobs (SweepConfig): ``lr_rule: inverse_width`` gives each width lr = train.lr x lr_base_width / d_model;
``min_run_steps`` / ``max_run_steps`` leave out runs too short to be past the warm-up transient or too long to be
worth their seconds (named in the plan as skipped); ``workers`` trains that many runs at once in spawned
processes (rows are written in plan order; the losses equal a sequential sweep's); ``seeds`` trains every run again
under each extra seed (run ids ``..._s1``), and scaling.fit averages the runs of one N, D, C.

Budget accounting as in the CS336 assignment-3 training API: every run recorded in the results CSV has been
charged; before anything runs, the FLOPs already spent plus those planned (steps · tokens/step · FLOPs/token) must
fit in ``total_flops``, and spent/left is printed after each run. The CSV's ``flops`` column is the nominal budget C
(the label the IsoFLOP fit groups runs by, as in Chinchilla and the CS336 ``compute_budget``), ``flops_actual``
what the run cost, ``tokens`` the tokens it actually trained on.

Resumable and idempotent: results CSV rows are keyed by ``run_id`` (``C1e12_d64_L2_H2``); a run with a row is
not run again, a run folder with checkpoints but no row is resumed (or recovered from its summary.json when it
had finished), and each new row is written by rewriting the CSV to a temporary file and renaming it into place.
Changing ``train`` settings does not change run ids: point ``results``/``out_dir`` elsewhere for a new sweep.

CLI: ``python -m scaling.sweep [--dry-run]``; the design (budgets, shapes, ...) comes from the ``sweep:`` section of
--params (params.yaml; an unknown key is an error), then flags. Its runs inherit the ``train:`` section (the
held-out run's settings: schedule, context, batch, evaluation, ...) less the fields the sweep sets per run (the
preset, and the model's shape: SET_BY_SWEEP), with the sweep's own ``train`` mapping (checked against TrainConfig; its
``model:`` merged key by key) over it; ``lr_rule: inverse_width`` anchors the learning
rate at the train run's (lr x its width / d_model), so no rate is typed twice (``sweep_section``). Exit 2 with one
``error:`` line on bad input. Then: ``python -m scaling.fit <results>``.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import io
import itertools
import math
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from model.train import TrainingDiverged, model_config, train
from model.training.checkpoint import branch_from, read_latest
from model.training.data import read_meta
from model.training.optim import wsd_decay_start
from model.training.train_config import TrainConfig
from workbench.files import error_line, exit_on_error, read_json, remove_stale_temps_of, write_bytes, write_json
from workbench.params import (
    REQUIRED,
    Checked,
    add_config_flags,
    add_params_flag,
    check_fields,
    field_names,
    flatten,
    load_section,
    nest,
    params_path,
    setting,
)

FLOPS_MODES = ("6N", "exact")
LR_RULES = ("constant", "inverse_width")
# TrainConfig settings the sweep sets per run (the model's as model.FIELD); `train:` may set any other
SET_BY_SWEEP = ("data", "out_dir", "metrics", "preset", "model.d_model", "model.n_layers", "model.n_heads",
                "model.d_ff", "max_steps", "max_tokens", "time_budget_s", "eval_interval", "ckpt_interval")
TRAIN_SETTINGS = tuple(field_names(TrainConfig))  # lr, ..., model.d_model, ...
# flops is the nominal budget C, the IsoFLOP label scaling.fit groups runs by (scaling.data.budget_labels, 1%);
# flops_actual = steps · tokens/step · FLOPs/token is the compute that trained the model (a few % over C when a run
# has few steps); flops_charged what the run added to the ledger (less, for a cooldown branch: the trunk is shared);
# unique_tokens: the train split the batches are drawn from, epochs = tokens / unique_tokens (the data-constrained law)
COLUMNS = ("run_id", "params", "params_non_embedding", "tokens", "unique_tokens", "epochs", "flops", "flops_actual",
           "train_loss", "val_loss", "loss", "d_model", "n_layers", "n_heads", "context_length", "batch_size", "lr",
           "steps", "seconds", "flops_charged")


def _shape_flag(text: str) -> list[int]:
    try:
        shape = [int(v) for v in text.split(",")]
    except ValueError:
        shape = []
    if len(shape) != 3:
        raise argparse.ArgumentTypeError(f"expected D_MODEL,N_LAYERS,N_HEADS such as 64,4,2, got {text!r}")
    return shape


@dataclass(frozen=True)
class SweepConfig(Checked):
    SECTION = "sweep"

    # the design has no default: a sweep is the project's choice (params.yaml's sweep section)
    budgets: tuple[float, ...] = setting(REQUIRED, "compute budgets C in FLOPs")
    shapes: tuple[tuple[int, int, int], ...] = setting(REQUIRED, "model shapes d_model,n_layers,n_heads, e.g. 32,4,1 "
                                                                 "64,4,2", parse=_shape_flag, metavar="D,L,H")
    data: str = setting("shards", "token shards: train.bin, val.bin, meta.json")
    out_dir: str = setting("sweep/runs", "folder of run folders <out-dir>/<run_id>")
    results: str = setting("sweep/results.csv", "results CSV, one row per finished run")
    flops_per_token: str = setting("6N", "6N (N = all parameters, Chinchilla) or exact (PaLM 6 N_matmul + 12 L d T)",
                                   choices=FLOPS_MODES)
    # a hard cap on everything the results CSV records plus what is planned
    total_flops: float = setting(3e12, "hard cap on spent + planned FLOPs", above=0)
    # only for the printed time estimate: micro trains ~4k tokens/s (6.8e10 FLOP/s) on 2 CPU cores, but the tiny
    # models of a sweep reach far less (d_model 32 on vocab 8192: ~1e10 FLOP/s on one busy core; 6N counts the
    # free embedding lookup)
    est_flops_per_s: float = setting(3e10, "only for the printed time estimate", above=0)
    # runs trained at once, each in its own process: tiny models are per-step overhead bound, so on a CPU two
    # one-thread runs finish sooner than one two-thread run (set train.threads so workers x threads <= cores)
    workers: int = setting(1, "runs trained at once, one process each", at_least=1)
    # the window of optimizer steps a run may have: shorter runs are still in the warm-up transient, where the loss
    # sits near the unigram entropy whatever N is and no power law in N and D describes it; longer ones are far
    # left of the optimum (tiny models on many epochs) and cost the most wall time per FLOP. 0: no cap
    min_run_steps: int = setting(1, "leave out runs of fewer optimizer steps: still in the warm-up transient",
                                 at_least=1)
    max_run_steps: int = setting(0, "leave out runs of more steps (0: no cap)", at_least=0)
    # peak (and final) learning rate per shape: train.lr for every run, or train.lr * lr_base_width / d_model
    # ("inverse_width", as muP scales hidden-layer Adam rates: narrow models take larger steps); sweep_section sets
    # lr_base_width to the train run's width, so its rate is the rule's at that width
    lr_rule: str = setting("constant", "each shape's learning rate: train.lr, or train.lr * lr_base_width / d_model",
                           choices=LR_RULES)
    lr_base_width: int = setting(128, "the width whose rate is train.lr under inverse_width (the train run's, from "
                                      "params)", at_least=1)
    # extra seeds: every run again with train.seed = each of these (run ids get "_s<seed>"); scaling.fit averages
    # the runs of one N, D, C, so each point's loss is a mean over 1 + len(seeds) seeds (one seed's final loss is a
    # draw: bench.experiments.scaling_seeds measures how far it moves). Costs that many sweeps
    seeds: tuple[int, ...] = setting((), "extra seeds: every run again with each (run ids _s<seed>; scaling.fit "
                                         "averages them)", at_least=0)
    # WSD cooldown branches (Hägele et al. 2024): the runs of one shape share one constant-LR trunk, and each run is
    # the trunk's checkpoint at its decay start plus a cooldown over the last train.decay_fraction of its steps
    # (train.schedule must be wsd), equal to a straight run of that schedule; the FLOPs ledger charges the trunk once
    branches: bool = setting(False, "WSD cooldown branches: one constant-LR trunk per shape, each budget a cooldown "
                                    "off it")
    # sweep_section: the train section's, less what a run sets
    train: dict = setting({}, "TrainConfig fields of every run (params.yaml only)", params_only=True)

    def __post_init__(self) -> None:  # YAML reads 1e12 as a string: converted first; the rest no declaration states
        for name in ("data", "out_dir", "results"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ValueError(f"sweep.{name} must be a non-empty path, got {getattr(self, name)!r}")
        budgets = _numbers(self.budgets, "budgets")
        if not budgets or not all(math.isfinite(c) and c > 0 for c in budgets):
            raise ValueError(f"sweep.budgets must be a non-empty list of positive FLOPs, got {self.budgets!r}")
        if len({budget_label(c) for c in budgets}) < len(budgets):
            raise ValueError(f"sweep.budgets has duplicates (to 3 significant digits): {self.budgets!r}")
        object.__setattr__(self, "budgets", budgets)
        if not isinstance(self.shapes, (list, tuple)):
            raise ValueError(f"sweep.shapes must be a list of [d_model, n_layers, n_heads], got {self.shapes!r}")
        object.__setattr__(self, "shapes", tuple(_shape(s, i) for i, s in enumerate(self.shapes)))
        if not self.shapes or len(set(self.shapes)) < len(self.shapes):
            raise ValueError(f"sweep.shapes must be a non-empty list of distinct [d_model, n_layers, n_heads], "
                             f"got {[list(s) for s in self.shapes]}")
        for name in ("total_flops", "est_flops_per_s"):
            object.__setattr__(self, name, _numbers([getattr(self, name)], name)[0])
        super().__post_init__()
        _check_train(self.train)
        seed = TrainConfig(**self.train).seed
        if not isinstance(self.seeds, (list, tuple)) or len({seed, *self.seeds}) < 1 + len(self.seeds):
            raise ValueError(f"sweep.seeds must be distinct integers >= 0 other than train.seed={seed}, "
                             f"got {self.seeds!r}")
        object.__setattr__(self, "seeds", tuple(self.seeds))
        if self.branches and TrainConfig(**self.train).schedule != "wsd":
            raise ValueError("sweep.branches needs train.schedule: wsd (cooldown branches off a constant-LR "
                             f"trunk), got {TrainConfig(**self.train).schedule!r}")

    @classmethod
    def from_dict(cls, data: dict) -> SweepConfig:
        check_fields(cls, data, "sweep")
        missing = [name for name in ("budgets", "shapes") if name not in data]
        if missing:
            raise ValueError(f"sweep: no {' or '.join(missing)}: a sweep's design is the project's choice "
                             f"(params.yaml's sweep section, or {' and '.join('--' + m for m in missing)})")
        return cls(**{**data, "train": data.get("train") or {}})  # __post_init__ checks it (_check_train)


def sweep_section(params: str | Path) -> dict:
    """The ``sweep`` section of ``params`` with its runs' ``train`` settings: the ``train`` section (the held-out
    run's) less the fields the sweep sets per run, the sweep's own ``train`` over it; ``lr_base_width`` is the train
    run's width unless the section sets it, so ``inverse_width`` gives that width the train run's own rate."""
    section = load_section("sweep", params, known=SweepConfig)
    held_out = load_section("train", params, known=TrainConfig)
    inherited = {k: v for k, v in flatten(held_out, TRAIN_SETTINGS).items() if k not in SET_BY_SWEEP}
    overrides = section.get("train") or {}
    if not isinstance(overrides, dict):
        raise ValueError(f"sweep.train must be a mapping of TrainConfig fields, got {overrides!r}")
    out = section | {"train": nest(inherited | flatten(overrides, TRAIN_SETTINGS))}  # model: merged key by key
    if held_out and "lr_base_width" not in section:
        out["lr_base_width"] = model_config(TrainConfig(**held_out), 2).d_model
    return out


def _check_train(train) -> None:
    """``train`` must be TrainConfig overrides that leave the per-run fields (SET_BY_SWEEP) to the sweep."""
    if not isinstance(train, dict):
        raise ValueError(f"sweep.train must be a mapping of TrainConfig fields, got {train!r}")
    given = set(flatten(train, TRAIN_SETTINGS))
    unknown, fixed = sorted(given - set(TRAIN_SETTINGS)), sorted(given & set(SET_BY_SWEEP))
    if unknown or fixed:
        raise ValueError(f"sweep.train: {'unknown TrainConfig field(s) ' + str(unknown) if unknown else ''}"
                         f"{'; ' if unknown and fixed else ''}{'set by the sweep: ' + str(fixed) if fixed else ''}")
    try:
        TrainConfig(**train)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"sweep.train: {exc}") from None


def _numbers(values, name: str) -> tuple[float, ...]:
    """Floats from numbers or numeric strings (YAML 1.1 reads ``1e12`` as a string); ValueError naming the field."""
    try:
        if isinstance(values, (str, bytes)) or any(isinstance(v, bool) for v in values):
            raise TypeError
        return tuple(float(v) for v in values)
    except (TypeError, ValueError):
        raise ValueError(f"sweep.{name}: expected number(s), got {values!r}") from None


def _shape(shape, i: int) -> tuple[int, int, int]:
    where = f"sweep.shapes[{i}]={shape!r}"
    if not isinstance(shape, (list, tuple)) or len(shape) != 3 or \
            not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in shape):
        raise ValueError(f"{where}: expected [d_model, n_layers, n_heads], positive integers")
    d_model, n_layers, n_heads = shape
    if d_model % n_heads:
        raise ValueError(f"{where}: d_model={d_model} is not divisible by n_heads={n_heads}")
    if (d_model // n_heads) % 2:
        raise ValueError(f"{where}: d_model/n_heads={d_model // n_heads} must be even (RoPE rotates pairs)")
    return d_model, n_layers, n_heads


def budget_label(flops: float) -> str:
    """1e12 -> '1e12', 2.5e11 -> '2.5e11' (3 significant digits, always scientific)."""
    mantissa, exponent = f"{flops:.2e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


# ---------------------------------------------------------------- plan
def shape_lr(cfg: SweepConfig, d_model: int) -> dict:
    """The learning rates of a run of width ``d_model`` under ``cfg.lr_rule`` (TrainConfig overrides)."""
    if cfg.lr_rule == "constant":
        return {}
    scale, base = cfg.lr_base_width / d_model, TrainConfig(**cfg.train)
    return {"lr": base.lr * scale, "min_lr": base.min_lr * scale}


@dataclass(frozen=True)
class Run:
    run_id: str
    budget: float
    train: TrainConfig
    params: int
    params_non_embedding: int
    flops_per_token: float
    steps: int
    tokens: int
    flops: float  # the compute that trained this model: steps · tokens/step · flops_per_token
    charged: float = 0.0  # what it adds to the ledger: flops, less the trunk steps earlier branches already paid for
    trunk: str | None = None  # cooldown branches: the shared trunk's folder, and the step this run leaves it at
    branch_step: int | None = None


def plan_runs(cfg: SweepConfig) -> tuple[list[Run], list[str]]:
    """Every seed × budget × shape as a Run, and one message per run skipped because its D is under one step or its
    steps fall outside the window; with ``branches``, the runs of one seed and shape as cooldown branches of one
    trunk (``branch_runs``)."""
    vocab_size = int(read_meta(cfg.data)["vocab_size"])
    runs, skipped = [], []
    first_seed = TrainConfig(**cfg.train).seed
    for seed, budget, (d_model, n_layers, n_heads) in itertools.product((first_seed, *cfg.seeds), cfg.budgets,
                                                                        cfg.shapes):
        run_id = f"C{budget_label(budget)}_d{d_model}_L{n_layers}_H{n_heads}" + \
            ("" if seed == first_seed else f"_s{seed}")
        model = (cfg.train.get("model") or {}) | {"d_model": d_model, "n_layers": n_layers, "n_heads": n_heads}
        base = TrainConfig(**cfg.train | shape_lr(cfg, d_model) | {"seed": seed, "model": model, "data": cfg.data,
                                                                   "out_dir": str(Path(cfg.out_dir) / run_id)})
        mcfg = model_config(base, vocab_size)  # the same ModelConfig model/train.py will build
        per_token = 6.0 * mcfg.param_count() if cfg.flops_per_token == "6N" else \
            float(mcfg.flops_per_token(base.model.context_length))
        tokens = budget / per_token
        if tokens < base.tokens_per_step:
            skipped.append(f"{run_id}: D = C/{cfg.flops_per_token} = {tokens:,.0f} tokens is under one step "
                           f"({base.tokens_per_step:,} tokens): skipped")
            continue
        tcfg = dataclasses.replace(base, max_tokens=int(tokens))
        steps = tcfg.total_steps
        if not cfg.min_run_steps <= steps <= (cfg.max_run_steps or steps):
            skipped.append(f"{run_id}: {steps} steps is outside [min_run_steps, max_run_steps] = "
                           f"[{cfg.min_run_steps}, {cfg.max_run_steps or 'no cap'}]: skipped")
            continue
        tcfg = dataclasses.replace(tcfg, warmup_steps=min(base.warmup_steps, steps // 10), eval_interval=steps,
                                   ckpt_interval=steps)
        flops = steps * tcfg.tokens_per_step * per_token
        runs.append(Run(run_id, budget, tcfg, mcfg.param_count(), mcfg.param_count(False), per_token, steps,
                        steps * tcfg.tokens_per_step, flops, flops))
    return (branch_runs(runs, cfg) if cfg.branches else runs), skipped


def trunk_id(run: Run) -> str:
    """The folder name of the trunk a run branches from: one per shape and seed."""
    m = run.train.model
    return f"trunk_d{m.d_model}_L{m.n_layers}_H{m.n_heads}_seed{run.train.seed}"


def branch_runs(runs: list[Run], cfg: SweepConfig) -> list[Run]:
    """The runs of one seed and shape as branches of one constant-LR trunk: one warmup for them all (the
    shortest run's 10% cap), each leaving the trunk at its WSD decay start; each run is charged the trunk steps
    since the previous branch plus its own cooldown, so the ledger counts the shared trunk once."""
    out = []
    for trunk in dict.fromkeys(trunk_id(r) for r in runs):
        group = sorted((r for r in runs if trunk_id(r) == trunk), key=lambda r: r.steps)
        warmup = min(TrainConfig(**cfg.train).warmup_steps, group[0].steps // 10)
        paid = 0
        for run in group:
            t = dataclasses.replace(run.train, warmup_steps=warmup)
            start = wsd_decay_start(run.steps, warmup, t.decay_fraction)
            charged_steps = max(0, start - paid) + run.steps - start
            paid = max(paid, start)
            out.append(dataclasses.replace(
                run, train=t, trunk=str(Path(cfg.out_dir) / trunk), branch_step=start,
                charged=charged_steps * t.tokens_per_step * run.flops_per_token))
    order = {r.run_id: i for i, r in enumerate(runs)}
    return sorted(out, key=lambda r: order[r.run_id])


def format_plan(runs: list[Run], done: dict[str, dict], cfg: SweepConfig) -> str:
    lines = [f"{'run_id':<24}{'params':>11}{'non-emb':>10}{'FLOPs/tok':>11}{'steps':>7}{'tokens':>11}{'D/N':>7}"
             f"{'FLOPs':>10}{'est s':>7}  status"]
    for r in runs:
        status = "done" if r.run_id in done else "resume" if any(Path(r.train.out_dir).glob("ckpt-*.pt")) else "new"
        lines.append(f"{r.run_id:<24}{r.params:>11,}{r.params_non_embedding:>10,}{r.flops_per_token:>11.3g}"
                     f"{r.steps:>7}{r.tokens:>11,}{r.tokens / r.params:>7.2f}{r.flops:>10.3g}"
                     f"{r.flops / cfg.est_flops_per_s:>7.0f}  {status}")
    return "\n".join(lines)


# ---------------------------------------------------------------- results CSV
def read_results(path: str | Path) -> dict[str, dict]:
    """Rows of the results CSV by run_id ({} when it does not exist yet)."""
    path = Path(path)
    if not path.is_file():
        return {}
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        if not {"run_id", "flops_actual"} <= set(reader.fieldnames or ()):
            raise ValueError(f"{path}: not a sweep results CSV (needs columns run_id and flops_actual)")
        rows = {}
        for i, row in enumerate(reader, 1):
            try:
                float(row["flops_actual"])
            except (TypeError, ValueError):
                raise ValueError(f"{path}: row {i} ({row['run_id']}): flops_actual {row['flops_actual']!r} is not "
                                 "a number") from None
            rows[row["run_id"]] = row
    return rows


def write_results(path: str | Path, rows: list[dict]) -> None:
    """The whole CSV, written to a temporary file and renamed into place (a crash leaves the old one)."""
    columns = list(COLUMNS) + [k for k in dict.fromkeys(k for r in rows for k in r) if k not in COLUMNS]
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    write_bytes(path, buffer.getvalue().encode("utf-8"))


def charged(row: dict) -> float:
    """What a results row added to the FLOPs ledger (rows written before branches existed: flops_actual)."""
    value = row.get("flops_charged")
    return float(value) if value not in (None, "") else float(row["flops_actual"])


def result_row(run: Run, summary: dict) -> dict:
    t, m = run.train, run.train.model
    # a finished run's reused summary.json may predate the key: the shards' meta says the same
    unique = summary.get("unique_tokens") or int(read_meta(t.data)["train_tokens"])
    return {"run_id": run.run_id, "params": summary["params"], "params_non_embedding": summary["params_non_embedding"],
            "tokens": summary["tokens"], "unique_tokens": unique, "epochs": round(summary["tokens"] / unique, 4),
            "flops": run.budget, "flops_actual": summary["tokens"] * run.flops_per_token,
            "train_loss": summary["train_loss"], "val_loss": summary["val_loss"], "loss": summary["val_loss"],
            "d_model": m.d_model, "n_layers": m.n_layers, "n_heads": m.n_heads, "context_length": m.context_length,
            "batch_size": t.batch_size, "lr": t.lr, "steps": summary["steps"], "seconds": summary["seconds"],
            "flops_charged": run.charged} | (
        {"trunk": Path(run.trunk).name, "branch_step": run.branch_step} if run.trunk else {})


def run_one(run: Run) -> dict:
    """Train (or resume) one run; a finished run whose row was lost is recovered from its summary.json. A
    cooldown branch first brings its trunk to the branch step (constant LR after the same warmup, so the
    trunk's steps are those of a straight run of the branch's schedule) and starts from that checkpoint; its
    ``seconds`` are then the wall time it added, the trunk steps it advanced plus its cooldown (as flops_charged)."""
    out_dir = Path(run.train.out_dir)
    summary_path = out_dir / "summary.json"
    if summary_path.is_file():
        summary = read_json(summary_path)
        if summary.get("steps") == run.steps and summary.get("params") == run.params:
            return _with_trunk_seconds(summary, out_dir)
    resume = any(out_dir.glob("ckpt-*.pt"))
    if run.trunk and not resume:
        trunk = Path(run.trunk)
        before = _seconds(trunk)
        if read_latest(trunk).get("step", 0) < run.branch_step:
            train(dataclasses.replace(run.train, schedule="constant", max_tokens=None, max_steps=run.branch_step,
                                      out_dir=str(trunk), metrics=None, eval_interval=run.branch_step,
                                      ckpt_interval=run.branch_step, keep_last=TRUNK_CHECKPOINTS),
                  resume=any(trunk.glob("ckpt-*.pt")))
        branch_from(trunk, run.branch_step, out_dir)
        write_json(out_dir / TRUNK_SECONDS, {"seconds": max(0.0, _seconds(trunk) - before)})
        resume = True
    return _with_trunk_seconds(train(run.train, resume=resume), out_dir)


TRUNK_SECONDS = "trunk_seconds.json"  # in a branch's folder: the trunk time this branch paid for


def _seconds(run_dir: Path) -> float:
    path = run_dir / "summary.json"
    return float(read_json(path).get("seconds", 0.0)) if path.is_file() else 0.0


def _with_trunk_seconds(summary: dict, out_dir: Path) -> dict:
    path = out_dir / TRUNK_SECONDS
    return summary | {"seconds": summary["seconds"] + read_json(path)["seconds"]} if path.is_file() else summary


TRUNK_CHECKPOINTS = 64  # a trunk keeps the checkpoint of every branch step, so any branch can be (re)started


def run_task(runs: list[Run]):
    """(run, summary or the exception it raised) for runs in order (the branches of one trunk, shortest first),
    stopping at the first failure."""
    for run in runs:
        try:
            yield run, run_one(run)
        except Exception as exc:  # handed to run_all, which knows the recoverable kinds
            yield run, exc
            return


def _run_quietly(runs: list[Run]) -> list[tuple[Run, dict | Exception]]:
    """run_task in a worker process, its output silenced (the parent prints a line per finished run)."""
    with open(os.devnull, "w") as devnull, contextlib.redirect_stderr(devnull), contextlib.redirect_stdout(devnull):
        return list(run_task(runs))


def tasks(todo: list[Run]) -> list[list[Run]]:
    """One task per run, or per trunk with cooldown branches (its branches shortest first), longest task first."""
    groups: dict[str, list[Run]] = {}
    for run in todo:
        groups.setdefault(run.trunk or run.run_id, []).append(run)
    return sorted((sorted(group, key=lambda r: r.steps) for group in groups.values()),
                  key=lambda task: -sum(r.charged / r.flops * r.steps for r in task))  # charged steps


def _results(todo: list[Run], workers: int):
    """(run, summary or the exception it raised) as tasks finish: in turn with one worker, else from a spawn pool."""
    if workers == 1:
        for task in tasks(todo):
            yield from run_task(task)
        return
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_run_quietly, task) for task in tasks(todo)]
        try:
            for future in as_completed(futures):
                yield from future.result()
        finally:
            for future in futures:
                future.cancel()


# ---------------------------------------------------------------- CLI
@dataclass(frozen=True)
class SweepRun:
    dry_run: bool = setting(False, "print the plan and the budget check, run nothing")


def build_parser() -> argparse.ArgumentParser:
    """One flag per SweepConfig field but ``train`` (the runs' settings: the ``train`` section, less what the sweep
    sets per run, under the section's own ``train:`` mapping)."""
    parser = argparse.ArgumentParser(prog="python -m scaling.sweep", description=__doc__.split("\n\n")[0],
                                     epilog="Defaults: built-in sweep < `sweep:` section of --params < flags.")
    add_params_flag(parser, "sweep")
    add_config_flags(parser, SweepConfig, bool_switches=True)
    add_config_flags(parser, SweepRun, bool_switches=True)
    return parser


FLAGS = tuple(f.name for f in dataclasses.fields(SweepConfig) if f.name != "train")  # all but the runs' train mapping


def load_config(argv: list[str] | None) -> tuple[SweepConfig, argparse.Namespace]:
    """The ``sweep:`` section of --params (strict; its runs' settings from ``sweep_section``) < flags; the section's
    values are the flags' defaults, so ``--help`` shows what a run would use."""
    parser = build_parser()
    section = sweep_section(params_path(argv))
    parser.set_defaults(**{k: v for k, v in section.items() if k in FLAGS})
    args = parser.parse_args(argv)
    given = {k: getattr(args, k) for k in FLAGS if getattr(args, k) is not REQUIRED}  # budgets, shapes: no default
    return SweepConfig.from_dict(section | given), args


def print_plan(runs: list[Run], skipped: list[str], done: dict[str, dict], cfg: SweepConfig) -> tuple[float, float]:
    """The plan table and the budget line; returns (FLOPs planned, FLOPs already spent)."""
    todo = [r for r in runs if r.run_id not in done]
    spent = sum(charged(row) for row in done.values())
    planned = sum(r.charged for r in todo)
    print(format_plan(runs, done, cfg))
    for message in skipped:
        print(message)
    print(f"plan: {len(runs)} runs ({len(runs) - len(todo)} done, {len(todo)} to run, {len(skipped)} skipped), "
          f"{planned:.3g} FLOPs planned + {spent:.3g} spent = {planned + spent:.3g} of total_flops "
          f"{cfg.total_flops:.3g}; est. {planned / cfg.est_flops_per_s / 60:.1f} min at {cfg.est_flops_per_s:.3g} "
          f"FLOP/s (plus per-run overhead)")
    return planned, spent


def run_all(todo: list[Run], done: dict[str, dict], spent: float, cfg: SweepConfig) -> tuple[int, float]:
    """Train every run (``cfg.workers`` at once), rewriting the results CSV, in plan order, after each finishes;
    returns (exit code, FLOPs spent)."""
    order = {run.run_id: i for i, run in enumerate(todo)}
    bar = tqdm(total=len(todo), desc="sweep", unit="run", dynamic_ncols=True, file=sys.stderr)
    for run, outcome in _results(todo, cfg.workers):
        if isinstance(outcome, BaseException) and (line := error_line(outcome)) is not None:
            print(f"error: {run.run_id}: {line}", file=sys.stderr)
            return 2, spent
        if isinstance(outcome, TrainingDiverged):
            print(f"error: {run.run_id}: training diverged: {outcome}", file=sys.stderr)
            return 1, spent
        if isinstance(outcome, BaseException):
            raise outcome
        row = result_row(run, outcome)
        done[run.run_id] = row
        write_results(cfg.results, sorted(done.values(), key=lambda r: order.get(r["run_id"], -1)))
        bar.update()
        bar.set_postfix_str(run.run_id)
        spent += row["flops_charged"]
        tqdm.write(f"{run.run_id}: val loss {row['val_loss']:.4f}, {row['flops_actual']:.3g} FLOPs in "
                   f"{row['seconds']:.0f} s | spent {spent:.3g}, left {cfg.total_flops - spent:.3g} of total_flops",
                   file=sys.stdout)
    bar.close()
    return 0, spent


def print_results(runs: list[Run], done: dict[str, dict]) -> None:
    print(f"{'run_id':<24}{'params':>11}{'tokens':>11}{'FLOPs':>10}{'loss':>8}")
    for r in runs:
        row = done[r.run_id]
        print(f"{r.run_id:<24}{int(float(row['params'])):>11,}{int(float(row['tokens'])):>11,}"
              f"{float(row['flops_actual']):>10.3g}"
              f"{float(row['loss']):>8.4f}")


def main(argv: list[str] | None = None) -> int:
    try:
        cfg, args = load_config(argv)
        runs, skipped = plan_runs(cfg)
        done = read_results(cfg.results)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    remove_stale_temps_of(cfg.results)
    todo = [r for r in runs if r.run_id not in done]
    planned, spent = print_plan(runs, skipped, done, cfg)
    if planned + spent > cfg.total_flops:
        print(f"error: planned {planned:.3g} + spent {spent:.3g} = {planned + spent:.3g} FLOPs exceeds "
              f"total_flops={cfg.total_flops:.3g}", file=sys.stderr)
        return 2
    if args.dry_run:
        return 0
    try:
        code, spent = run_all(todo, done, spent, cfg)
    except OSError as exc:
        return exit_on_error(exc)
    if code:
        return code
    print_results(runs, done)
    print(f"sweep: {len(runs)} runs in {cfg.results} ({len(todo)} new), spent {spent:.3g} of "
          f"{cfg.total_flops:.3g} FLOPs; next: python -m scaling.fit {cfg.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
