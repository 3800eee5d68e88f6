"""``python -m model.train``: train a TransformerLM on token shards.

One straight loop (nanoGPT style): sample a batch → forward under autocast → backward (with
gradient accumulation) → clip → AdamW step; a log line and a ``metrics.csv`` row every
``log_interval`` steps, validation every ``eval_interval``, an atomic checkpoint every
``ckpt_interval``. ``--resume`` continues from the newest good checkpoint and ends with exactly
the parameters an uninterrupted run would have (CPU, ``--deterministic``).

Under ``torchrun``, ``--parallel {ddp,zero1,zero2,fsdp}`` trains data-parallel (``model.parallelism.parallel``):
each rank draws distinct micro-batches, ``batch_size`` is per rank, and only rank 0 logs and
writes files. A failing or timed-out rank makes every rank exit non-zero.

``--metrics metrics/train.json`` gets the run's headline numbers (``headline``); the whole summary goes to
``metrics/details/train.json`` and to the run folder's ``summary.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import math
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from model.core.config import ModelConfig
from model.core.kernel_choice import resolve_kernels
from model.core.transformer import TransformerLM
from model.parallelism.distributed import launched_by_torchrun
from model.parallelism.parallel import Parallel
from model.training.checkpoint import (
    CheckpointError,
    clear_run,
    load_latest,
    remove_stale_temps,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from model.training.data import batch_rng, get_batch, load_tokens, read_meta, unigram_entropy
from model.training.optim import AdamW, cosine_schedule, optimizer_step, wsd_schedule
from model.training.progress import Monitor
from model.training.threads import CpuThreads
from model.training.train_config import TrainConfig
from workbench.files import error_line, exit_on_error, write_json, write_metrics
from workbench.hardware import peak_flops_of
from workbench.params import (
    Parser,
    add_config_flags,
    add_params_flag,
    field_names,
    flatten,
    load_section,
    params_path,
    parse_config,
    setting,
)

log = logging.getLogger("model.train")


class TrainingDiverged(RuntimeError):
    pass


def peak_flops(device: str, override: float | None) -> float | None:
    if override:
        return override
    if device.startswith("cuda"):
        name = torch.cuda.get_device_name(torch.device(device))
        return peak_flops_of(name)
    return None


def hardware_name(device: str, world: int = 1) -> str:
    """What ran the job, for reports: "cuda: 8x NVIDIA H100 80GB HBM3" or "cpu: 2 threads (<model name>)"."""
    if device.startswith("cuda"):
        return f"cuda: {world}x {torch.cuda.get_device_name(torch.device(device))}"
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), cpu)
    except OSError:
        pass
    ranks = f"{world} ranks x " if world > 1 else ""
    return f"cpu: {ranks}{torch.get_num_threads()} threads ({cpu})"


def model_config(cfg: TrainConfig, vocab_size: int) -> ModelConfig:
    """The run's model, the one place a TrainConfig's is completed: ``cfg.model`` with the preset's d_model,
    n_layers, n_heads and d_ff where it gives none, and ``vocab_size`` (the shards') unless it gives one."""
    given = cfg.model.to_dict()
    return ModelConfig.from_preset(cfg.preset, **given | {"vocab_size": given["vocab_size"] or vocab_size})


def learning_rate(cfg: TrainConfig, step: int) -> float:
    if cfg.schedule == "cosine":
        return cosine_schedule(step, cfg.lr, cfg.min_lr, cfg.warmup_steps, cfg.total_steps)
    if cfg.schedule == "wsd":
        return wsd_schedule(step, cfg.lr, cfg.min_lr, cfg.warmup_steps, cfg.total_steps, cfg.decay_fraction,
                            cfg.decay_shape)
    return cosine_schedule(step, cfg.lr, cfg.lr, cfg.warmup_steps, cfg.total_steps)


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """Decay matrices (linears, embeddings); leave norm gains alone."""
    decay, no_decay = [], []
    for p in {id(p): p for p in model.parameters() if p.requires_grad}.values():
        (decay if p.dim() >= 2 else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def moe_metrics(model: TransformerLM, aux_sum: torch.Tensor, cfg: TrainConfig) -> dict:
    """MoE columns of metrics.csv (last micro-batch's router statistics, averaged over layers)."""
    stats = model.moe_stats()
    if not stats:
        return {}
    loads = [layer["load"] for layer in stats.values()]
    mean_load = [sum(col) / len(loads) for col in zip(*loads, strict=False)]
    return {"aux_loss": round(float(aux_sum) / cfg.grad_accum, 5),
            "moe_dropped": round(sum(layer["dropped_fraction"] for layer in stats.values()) / len(stats), 4),
            "moe_load": "/".join(f"{v:.3f}" for v in mean_load)}


def validation_batches(val: np.ndarray, cfg: TrainConfig, device: str):
    """(x, y) batches to evaluate on: ``eval_batches`` batches of windows drawn from the run's seed, or with
    ``eval_batches: 0`` every non-overlapping window of val.bin in order (the same for every seed and run)."""
    length = cfg.model.context_length
    if cfg.eval_batches:
        for i in range(cfg.eval_batches):
            yield get_batch(val, cfg.batch_size, length, device, batch_rng(cfg.seed, 0, i, split="val"))
        return
    windows = (len(val) - 1) // length
    if windows == 0:
        raise ValueError(f"val.bin has {len(val)} tokens, fewer than context_length + 1 = {length + 1}")
    for start in range(0, windows, cfg.batch_size):
        rows = np.arange(start, min(windows, start + cfg.batch_size))
        batch = torch.from_numpy(np.asarray(val[rows[:, None] * length + np.arange(length + 1)], dtype=np.int64))
        batch = batch.to(device)
        yield batch[:, :-1], batch[:, 1:]


@torch.no_grad()
def evaluate(model, val: np.ndarray, cfg: TrainConfig, device: str, autocast) -> float:
    """Mean loss per validation window (``validation_batches``; the same windows at every evaluation)."""
    was_training = model.training
    model.eval()
    losses, sizes = [], []
    for x, y in validation_batches(val, cfg, device):
        with autocast():
            losses.append(model(x, targets=y).item())
        sizes.append(len(x))
    model.train(was_training)
    # drawn batches are all batch_size windows: their plain mean (bit for bit what it always was)
    return float(np.mean(losses)) if cfg.eval_batches else float(np.average(losses, weights=sizes))


def resolve_device(name: str) -> str:
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"TrainConfig.device={name!r} but CUDA is not available")
    return name


# ---- setup --------------------------------------------------------------------------------------------


@dataclass
class Run:
    """Everything the loop works with, built once by ``setup``; ``step``, ``bad_steps`` and ``elapsed`` advance."""

    cfg: TrainConfig
    parallel: Parallel
    device: str
    mcfg: ModelConfig
    model: TransformerLM
    forward: Callable  # the wrapped (and maybe compiled) model
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler | None
    amp_dtype: torch.dtype | None  # autocast dtype; None: no autocast (CPU, fp32, FSDP's own mixed precision)
    train_tokens: np.ndarray
    val_tokens: np.ndarray
    peak: float | None  # peak FLOP/s of all ranks together (None when unknown: no MFU)
    tokenizer: dict | None = None  # the shards' tokenizer identity: config.json and every checkpoint record it
    cpu_threads: CpuThreads | None = None  # the thread policy when --threads is not given (model.training.threads)
    step: int = 0
    bad_steps: int = 0
    elapsed: float = 0.0
    resumed: bool = False

    @property
    def out_dir(self) -> Path:
        return Path(self.cfg.out_dir)

    @property
    def main_rank(self) -> bool:
        return self.parallel.is_main

    @property
    def world(self) -> int:
        return self.parallel.world_size

    @property
    def tokens_per_step(self) -> int:
        return self.cfg.tokens_per_step * self.world

    @property
    def total(self) -> int:
        cfg = self.cfg
        return cfg.total_steps if cfg.max_tokens is None else -(-cfg.max_tokens // self.tokens_per_step)

    @property
    def flops_per_token(self) -> float:
        return self.mcfg.flops_per_token(self.cfg.model.context_length)

    @property
    def params(self) -> list[torch.nn.Parameter]:
        return [p for g in self.optimizer.param_groups for p in g["params"]]

    def autocast(self):
        return torch.autocast("cuda", dtype=self.amp_dtype) if self.amp_dtype else contextlib.nullcontext()


def _check_shards(cfg: TrainConfig, mcfg: ModelConfig, meta: dict, train_tokens, val_tokens) -> None:
    if mcfg.vocab_size < int(meta["vocab_size"]):
        raise ValueError(f"TrainConfig.model.vocab_size={mcfg.vocab_size} is smaller than the shards' "
                         f"vocab_size={meta['vocab_size']} ({cfg.data}/meta.json)")
    for name, tokens in (("train", train_tokens), ("val", val_tokens)):
        if len(tokens) <= cfg.model.context_length:
            raise ValueError(f"{cfg.data}/{name}.bin has {len(tokens)} tokens; TrainConfig.model.context_length="
                             f"{cfg.model.context_length} needs more")


def shards_tokenizer(meta: dict) -> dict | None:
    """The identity of the tokenizer the shards were encoded with (``workbench.files.tokenizer_identity``), from
    their meta.json; None for shards written without it."""
    if "tokenizer_sha256" not in meta:
        return None
    return {"vocab_size": int(meta["vocab_size"]), "sha256": meta["tokenizer_sha256"]}


def _check_same_tokenizer(cfg: TrainConfig, out_dir: Path, tokenizer: dict | None) -> None:
    """Resuming on shards of another tokenizer than the run's (its config.json) is a ValueError."""
    recorded = read_run_config(out_dir).get("tokenizer")
    if recorded and tokenizer and recorded["sha256"] != tokenizer["sha256"]:
        raise ValueError(f"{cfg.data} was encoded with another tokenizer (sha256 {tokenizer['sha256'][:12]}) than "
                         f"the run in {out_dir} (sha256 {recorded['sha256'][:12]}): resume on the run's shards")


def _check_same_batches(cfg: TrainConfig, state: dict, world: int) -> None:
    """A step draws micro-batches ``grad_accum`` x ranks (``Parallel.batch_index``): resuming on another number of
    ranks must keep that product, or the batches (and the weights) are not the run's."""
    grad_accum, ranks = state.get("train_config", {}).get("grad_accum"), state.get("data", {}).get("world_size")
    if grad_accum and ranks and grad_accum * ranks != cfg.grad_accum * world:
        raise ValueError(f"grad_accum {cfg.grad_accum} x {world} rank(s) is not the run's {grad_accum} x {ranks}: "
                         f"give --grad-accum {grad_accum * ranks // world} on {world} rank(s) to resume it")


def read_run_config(out_dir: str | Path) -> dict:
    """A run folder's config.json ({} when there is none yet)."""
    path = Path(out_dir) / "config.json"
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"{path}: unreadable ({exc})") from None


def _amp_dtype(cfg: TrainConfig, device: str) -> torch.dtype | None:
    """The low-precision compute dtype on CUDA (None on CPU and for fp32)."""
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": None}[cfg.dtype]
    amp_dtype = amp_dtype if device.startswith("cuda") else None
    if amp_dtype == torch.float16 and cfg.parallel in ("zero2", "fsdp"):
        raise ValueError(f"TrainConfig.dtype='fp16' (loss scaling) is not supported with parallel={cfg.parallel!r}: "
                         "use dtype bf16")
    return amp_dtype


def _restore(parallel: Parallel, found: tuple[Path, dict] | None, resume: bool, out_dir: Path,
             fsdp: bool) -> tuple[int, int, float, bool]:
    """Optimizer and RNG state from the checkpoint ``found`` (or FSDP's sharded one): (step, bad_steps,
    elapsed seconds, resumed)."""
    if found is not None:
        path, state = found
        parallel.load_checkpoint_state(state)
        set_rng_state(state["rng"])
        log.info("resumed from %s (step %d)", path, state["step"])
        return state["step"], state.get("bad_steps", 0), state.get("seconds", 0.0), True
    if resume and fsdp and (trainer := parallel.load_sharded(out_dir)) is not None:
        log.info("resumed from %s/dcp (step %d)", out_dir, trainer["step"])
        return trainer["step"], trainer["bad_steps"], trainer["seconds"], True
    if resume:
        log.info("no checkpoint in %s: starting from scratch", out_dir)
    return 0, 0, 0.0, False


def setup(cfg: TrainConfig, resume: bool, parallel: Parallel) -> Run:
    """Load the shards, build (or resume) the model and optimizer, write the run's config.json."""
    device = parallel.info.device if parallel.info else resolve_device(cfg.device)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    # no --threads: as many as the cores other processes leave free, re-checked as the run goes (a changing count
    # could change the last bits of a --deterministic run, so that keeps torch's)
    cpu_threads = CpuThreads() if not cfg.threads and device == "cpu" and not cfg.deterministic else None
    if cfg.deterministic:
        torch.use_deterministic_algorithms(True)
    meta = read_meta(cfg.data)
    train_tokens, val_tokens = load_tokens(cfg.data, "train"), load_tokens(cfg.data, "val")
    mcfg = resolve_kernels(model_config(cfg, int(meta["vocab_size"])), device)
    _check_shards(cfg, mcfg, meta, train_tokens, val_tokens)
    tokenizer = shards_tokenizer(meta)

    out_dir = Path(cfg.out_dir)
    if parallel.is_main:
        remove_stale_temps(out_dir)  # a checkpoint or metrics file a kill left half-written
    fsdp = cfg.parallel == "fsdp"
    found = load_latest(out_dir, map_location=device) if resume and not fsdp else None
    if not resume and (any(out_dir.glob("ckpt-*.pt")) or (out_dir / "dcp" / "latest").exists()):
        raise ValueError(f"{out_dir} already holds checkpoints: pass --resume to continue, or remove it")
    if resume:
        _check_same_tokenizer(cfg, out_dir, tokenizer)
    if found is not None:
        _check_same_batches(cfg, found[1], parallel.world_size)
    if parallel.is_main:
        write_json(out_dir / "config.json", {"model": mcfg.to_dict(), "train": cfg.to_dict(), "tokenizer": tokenizer},
                   sort_keys=False)

    amp_dtype = _amp_dtype(cfg, device)
    torch.manual_seed(cfg.seed)
    model = TransformerLM(mcfg, device=device)
    model.tokenizer_identity = tokenizer
    if found is not None:
        model.load_state_dict(found[1]["model"])
    # FSDP computes in the low-precision dtype itself (fp32 master weights); the others autocast.
    wrapped = parallel.wrap(model, compute_dtype=amp_dtype if fsdp else None)
    amp_dtype = None if fsdp else amp_dtype
    optimizer = parallel.make_optimizer(param_groups(model, cfg.weight_decay), AdamW, lr=cfg.lr,
                                        betas=(cfg.beta1, cfg.beta2), eps=cfg.eps)
    step, bad_steps, elapsed, resumed = _restore(parallel, found, resume, out_dir, fsdp)
    scaler = torch.amp.GradScaler("cuda") if amp_dtype == torch.float16 else None
    forward = torch.compile(wrapped) if cfg.compile else wrapped
    peak = peak_flops(device, cfg.peak_flops)
    return Run(cfg, parallel, device, mcfg, model, forward, optimizer, scaler, amp_dtype, train_tokens, val_tokens,
               peak * parallel.world_size if peak else None, tokenizer, cpu_threads, step, bad_steps, elapsed,
               resumed)


def announce(run: Run, entropy: float) -> None:
    cfg, mcfg, world = run.cfg, run.mcfg, run.world
    print(f"model {cfg.preset}: {mcfg.param_count():,} params ({mcfg.param_count(False):,} non-embedding), "
          f"{run.tokens_per_step:,} tokens/step × {run.total} steps on {run.device}"
          f"{f' × {world} ranks ({cfg.parallel})' if world > 1 or run.parallel.info else ''}; "
          f"train unigram entropy {entropy:.3f} nats/token", flush=True)


# ---- one optimizer step ------------------------------------------------------------------------------


def set_learning_rate(run: Run) -> float:
    lr = learning_rate(run.cfg, run.step)
    for group in run.optimizer.param_groups:
        group["lr"] = lr
    return lr


def forward_backward(run: Run, profiler) -> tuple[float, float, torch.Tensor]:
    """Accumulate the gradients of ``grad_accum`` micro-batches, synchronize and clip them:
    (mean loss over ranks, gradient norm before clipping, summed MoE aux loss)."""
    cfg, parallel = run.cfg, run.parallel
    loss_sum = torch.zeros((), device=run.device)
    aux_sum = torch.zeros((), device=run.device)
    for micro in range(cfg.grad_accum):
        x, y = get_batch(run.train_tokens, cfg.batch_size, cfg.model.context_length, run.device,
                         batch_rng(cfg.seed, run.step, parallel.batch_index(micro)))
        with parallel.micro_step(last=micro == cfg.grad_accum - 1):
            with profiler.region("forward"), run.autocast():
                loss = run.forward(x, targets=y)
                aux = run.model.aux_loss()  # MoE load-balancing + z-loss (0 for dense models)
            with profiler.region("backward"):
                scaled = (loss + aux) / cfg.grad_accum
                (run.scaler.scale(scaled) if run.scaler else scaled).backward()
        loss_sum += loss.detach()
        aux_sum += aux.detach() if torch.is_tensor(aux) else aux
    parallel.finish_gradients()
    if run.scaler:
        run.scaler.unscale_(run.optimizer)
    grad_norm = parallel.clip_gradients(run.params, cfg.grad_clip)
    return float(parallel.mean(loss_sum)) / cfg.grad_accum, grad_norm, aux_sum


def skip_step(run: Run, loss_value: float, grad_norm: float) -> None:
    """A non-finite loss or gradient: drop the update; raise TrainingDiverged past ``max_bad_steps``."""
    run.optimizer.zero_grad(set_to_none=True)
    run.bad_steps += 1
    if run.scaler:
        run.scaler.update()
    if run.bad_steps > run.cfg.max_bad_steps:
        raise TrainingDiverged(f"loss {loss_value} / grad norm {grad_norm} at step {run.step}: more than "
                               f"max_bad_steps={run.cfg.max_bad_steps} non-finite steps")
    log.warning("step %d: non-finite loss or gradient, update skipped (%d/%d)", run.step, run.bad_steps,
                run.cfg.max_bad_steps)


def out_of_time(run: Run, started: float) -> bool:
    """The time budget is spent (on any rank: every rank stops at the same step)."""
    if run.cfg.time_budget_s is None:
        return False
    return run.parallel.any(time.perf_counter() - started >= run.cfg.time_budget_s)


# ---- logging and checkpoints --------------------------------------------------------------------------


def log_step(run: Run, monitor: Monitor, lr: float, loss_value: float, grad_norm: float, aux_sum: torch.Tensor,
             val_loss: float | None) -> None:
    """A metrics.csv row (and tracker / bar update); with ``val_loss``, also a line above the bar."""
    tokens_per_s, now = monitor.tokens_per_s()
    mfu = tokens_per_s * run.flops_per_token / run.peak if run.peak else None
    row = {"step": run.step, "tokens": run.step * run.tokens_per_step, "loss": round(loss_value, 5),
           "val_loss": round(val_loss, 5) if val_loss is not None else None, "lr": lr,
           "grad_norm": round(grad_norm, 5), "tokens_per_s": round(tokens_per_s, 1),
           "mfu": round(mfu, 4) if mfu is not None else None, **moe_metrics(run.model, aux_sum, run.cfg)}
    monitor.log(row, loss=loss_value, tokens_per_s=tokens_per_s, mfu=mfu, now=now)
    if val_loss is not None:
        monitor.write(f"step {run.step}/{run.total} | loss {loss_value:.4f} | val {val_loss:.4f} | lr {lr:.2e} | "
                      f"grad {grad_norm:.3f} | {tokens_per_s:,.0f} tok/s" +
                      (f" | mfu {mfu:.1%}" if mfu is not None else ""))


def save(run: Run, final: bool = False) -> Path | None:
    """Checkpoint the current step: sharded folders under FSDP (plus a model-only file at the end), else
    one ckpt-<step>.pt from rank 0."""
    trainer = {"step": run.step, "bad_steps": run.bad_steps, "seconds": run.elapsed}
    if run.cfg.parallel == "fsdp":
        path = run.parallel.save_sharded(run.out_dir, run.step, trainer, run.cfg.keep_last)
        if not final:
            return path
        model_state, optimizer_state = run.parallel.full_model_state(), None  # model-only export
    else:
        model_state, optimizer_state = run.parallel.checkpoint_state()
    if not run.main_rank:
        return None
    state = {"model": model_state, "optimizer": optimizer_state, **trainer, "rng": rng_state(),
             "model_config": run.mcfg.to_dict(), "train_config": run.cfg.to_dict(), "tokenizer": run.tokenizer,
             "data": {"seed": run.cfg.seed, "next_step": run.step, "world_size": run.world}}
    return save_checkpoint(run.out_dir, run.step, state, run.cfg.keep_last)


# ---- the loop -------------------------------------------------------------------------------------------


def train(cfg: TrainConfig, resume: bool = False, parallel: Parallel | None = None) -> dict:
    """Run (or resume) training; returns the run summary that is also written to summary.json."""
    run = setup(cfg, resume, parallel or Parallel(cfg.parallel, cfg.device, cfg.dist_timeout_s, cfg.bucket_size_mb))
    entropy = unigram_entropy(run.train_tokens, run.mcfg.vocab_size)
    if run.main_rank:
        announce(run, entropy)
    run.model.train()
    loss_value, val_loss = loop(run)
    if val_loss is None:  # resumed at the end: nothing left to train
        val_loss = evaluate(run.forward, run.val_tokens, cfg, run.device, run.autocast)
    summary = summarize(run, loss_value, val_loss, entropy)
    if run.main_rank:
        finish(run, summary)
    return summary


def loop(run: Run) -> tuple[float | None, float | None]:
    """Train from ``run.step`` to the last step (or the time budget): (last train loss, last val loss)."""
    cfg, total = run.cfg, run.total
    loss_value = val_loss = None
    started = time.perf_counter() - run.elapsed
    monitor = Monitor(cfg, run.out_dir, main_rank=run.main_rank, rank=run.parallel.rank, device=run.device,
                      is_moe=run.mcfg.is_moe, step=run.step, total=total, resumed=run.resumed)
    try:
        while run.step < total:
            lr = set_learning_rate(run)
            loss_value, grad_norm, aux_sum = forward_backward(run, monitor.profiler)
            run.step += 1
            if not (math.isfinite(loss_value) and math.isfinite(grad_norm)):
                skip_step(run, loss_value, grad_norm)
                continue
            with monitor.profiler.region("optimizer"):
                optimizer_step(run.optimizer, run.scaler)
            monitor.stepped(run.tokens_per_step)
            if run.cpu_threads:
                run.cpu_threads.update()

            do_eval = run.step % cfg.eval_interval == 0 or run.step == total
            stop_early = out_of_time(run, started)
            if do_eval or stop_early:
                val_loss = evaluate(run.forward, run.val_tokens, cfg, run.device, run.autocast)
            if run.step % cfg.log_interval == 0 or do_eval or stop_early:
                log_step(run, monitor, lr, loss_value, grad_norm, aux_sum,
                         val_loss if do_eval or stop_early else None)
            run.elapsed = time.perf_counter() - started
            if run.step % cfg.ckpt_interval == 0 or run.step == total or stop_early:
                save(run, final=run.step == total or stop_early)
            if stop_early:
                monitor.write(f"time budget of {cfg.time_budget_s}s reached at step {run.step}")
                break
    finally:
        monitor.close()
    return loss_value, val_loss


# ---- the summary ----------------------------------------------------------------------------------------


def summarize(run: Run, loss_value: float | None, val_loss: float, entropy: float) -> dict:
    step, tokens_per_step, elapsed = run.step, run.tokens_per_step, run.elapsed
    return {
        "params": run.mcfg.param_count(), "params_non_embedding": run.mcfg.param_count(False), "steps": step,
        "tokens": step * tokens_per_step, "flops": step * tokens_per_step * run.flops_per_token,
        # the train split's tokens, the pool batches are drawn from: epochs > 1 means tokens were seen again
        "unique_tokens": len(run.train_tokens), "epochs": round(step * tokens_per_step / len(run.train_tokens), 4),
        "train_loss": loss_value, "val_loss": val_loss, "val_perplexity": math.exp(val_loss),
        "unigram_entropy": entropy, "nats_below_unigram": entropy - val_loss, "seconds": round(elapsed, 2),
        "tokens_per_s": round(step * tokens_per_step / max(elapsed, 1e-9), 1), "device": run.device,
        "bad_steps": run.bad_steps, "parallel": run.cfg.parallel, "world_size": run.world,
        "hardware": hardware_name(run.device, run.world),
    }


def headline(summary: dict, peak_flops: float | None = None) -> dict:
    """The numbers ``dvc metrics show`` lists for a run (the shared metric names); ``mfu`` needs the peak
    FLOP/s of all ranks together (left out when unknown, e.g. on CPU)."""
    numbers = {"params": summary["params"], "tokens": summary["tokens"], "flops": summary["flops"],
               "loss": summary["train_loss"], "val_loss": summary["val_loss"],
               "tokens_per_s": summary["tokens_per_s"], "seconds": summary["seconds"]}
    if peak_flops and summary["seconds"] > 0:
        numbers["mfu"] = round(summary["flops"] / summary["seconds"] / peak_flops, 4)
    return numbers


def finish(run: Run, summary: dict) -> None:
    """Rank 0: write summary.json (and the --metrics headline + details), close the process group, say done."""
    write_json(run.out_dir / "summary.json", summary, sort_keys=False)
    if run.cfg.metrics:
        write_metrics(run.cfg.metrics, summary, headline(summary, run.peak))
    run.parallel.close()
    val_loss, entropy = summary["val_loss"], summary["unigram_entropy"]
    print(f"done: val loss {val_loss:.4f} (perplexity {math.exp(val_loss):.1f}) vs train unigram entropy "
          f"{entropy:.4f}: {entropy - val_loss:.3f} nats below, {run.step} steps in {run.elapsed:.0f}s", flush=True)


# ---- CLI ------------------------------------------------------------------------------------------------


def _fail_rank(exc: BaseException, code: int) -> None:
    """A distributed rank failed: say which and why on one line, then exit at once (a clean
    interpreter exit could block in process-group teardown while peers wait on a collective)."""
    rank, world = os.environ.get("RANK", "?"), os.environ.get("WORLD_SIZE", "?")
    message = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__
    if "timed out" in message.lower() or "connection closed" in message.lower():
        message += " (another rank probably died or hung: see its log)"
    print(f"error: rank {rank}/{world}: {message}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(code)


@dataclass(frozen=True)
class ResumeFlag:
    resume: bool = setting(False, "continue from the run folder's newest good checkpoint (its config.json gives the "
                                  "settings)")
    restart: bool = setting(False, "remove the run folder's checkpoints first and start over (a run none of whose "
                                   "checkpoints loads)")


def build_parser() -> argparse.ArgumentParser:
    """--params, --resume, and one flag per TrainConfig field (bools as --x / --no-x); --help shows the
    value a run would use (the params file's where it sets one)."""
    parser = Parser(prog="python -m model.train", description=__doc__.split("\n\n")[0])
    add_params_flag(parser, "train")
    add_config_flags(parser, ResumeFlag, bool_switches=True)
    add_config_flags(parser, TrainConfig, bool_switches=True)
    return parser


# the machine a resumed run goes on with: this invocation's (flags, params file, defaults), not the run's
THIS_MACHINE = ("device", "threads", "compile", "parallel", "bucket_size_mb", "dist_timeout_s", "peak_flops")
# what else a flag may change on resume: how it reports and stops, not what it computes; ``data`` (setup checks
# the shards there were encoded with the run's tokenizer) and ``grad_accum`` (on another number of ranks, as long
# as grad_accum x ranks stays: setup checks it)
RESUME_MAY_CHANGE = frozenset(THIS_MACHINE) | {
    "data", "out_dir", "metrics", "time_budget_s", "tracker", "profile", "profile_steps", "log_interval",
    "eval_interval", "eval_batches", "ckpt_interval", "keep_last", "max_bad_steps", "grad_accum"}


def given_flags(argv: list[str] | None) -> dict:
    """{setting: value} of the TrainConfig flags on the command line itself (not the params file's)."""
    parser = build_parser()
    for action in parser._actions:
        action.default = argparse.SUPPRESS
    given = vars(parser.parse_args(argv))
    return {key: value for key, value in given.items() if key not in ("params", "resume", "restart")}


def resumed_config(cfg: TrainConfig, argv: list[str] | None) -> TrainConfig:
    """``--resume``: the run's own settings, from its config.json (the params file is not read for them), on this
    machine (``THIS_MACHINE``), with the flags given that only change how it runs; a flag that contradicts the run
    is a ValueError."""
    recorded = read_run_config(cfg.out_dir).get("train")
    if recorded is None:  # nothing written yet: a fresh start (setup says so)
        return cfg
    run = TrainConfig.from_dict(recorded)
    settings = flatten(run.to_dict(), field_names(TrainConfig))
    changes = {"out_dir": cfg.out_dir} | {key: getattr(cfg, key) for key in THIS_MACHINE}
    for key, value in given_flags(argv).items():
        if value == settings[key]:
            continue
        if key not in RESUME_MAY_CHANGE:
            raise ValueError(f"--{key.replace('_', '-')} {value} contradicts the run in {cfg.out_dir} (its "
                             f"config.json has {key} = {settings[key]!r}): drop the flag to continue the run, or "
                             "give another --out-dir to start a new one")
        changes[key] = value
    return dataclasses.replace(run, **changes)


def parse_args(argv: list[str] | None = None) -> tuple[TrainConfig, argparse.Namespace]:
    """TrainConfig from dataclass defaults < the params file's ``train`` section < flags; with ``--resume``, the
    run's config.json (``resumed_config``). A section key that is not a TrainConfig field is a ValueError naming
    it, the section and the file."""
    load_section("train", params_path(argv), known=TrainConfig)
    cfg, args = parse_config(TrainConfig, "train", argv, parser=build_parser())
    return (resumed_config(cfg, argv) if args.resume else cfg), args


def main(argv: list[str] | None = None) -> int:
    try:
        cfg, args = parse_args(argv)
        if args.restart and args.resume:
            raise ValueError("--restart starts the run over and --resume continues it: give one")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.restart and (removed := clear_run(cfg.out_dir)):
        log.info("--restart: removed %s from %s", ", ".join(removed), cfg.out_dir)
    try:
        if cfg.parallel != "none" and launched_by_torchrun():
            try:
                train(cfg, resume=args.resume)
            except BaseException as exc:  # noqa: BLE001 — every failure must end this rank non-zero
                _fail_rank(exc, 1 if error_line(exc, CheckpointError) is None else 2)
        else:
            train(cfg, resume=args.resume)
    except TrainingDiverged as exc:
        try:
            found = load_latest(cfg.out_dir)
        except CheckpointError:
            found = None
        kept = f"last good checkpoint: {found[0]}" if found else "no good checkpoint was written"
        print(f"error: training diverged: {exc}; {kept}", file=sys.stderr)
        return 1
    except Exception as exc:
        return exit_on_error(exc, CheckpointError)
    return 0


if __name__ == "__main__":
    sys.exit(main())
