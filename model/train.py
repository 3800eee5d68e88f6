"""``python -m model.train``: train a TransformerLM on token shards.

One straight loop (nanoGPT style): sample a batch → forward under autocast → backward (with
gradient accumulation) → clip → AdamW step; a log line and a ``metrics.csv`` row every
``log_interval`` steps, validation every ``eval_interval``, an atomic checkpoint every
``ckpt_interval``. ``--resume`` continues from the newest good checkpoint and ends with exactly
the parameters an uninterrupted run would have (CPU, ``--deterministic``).

Under ``torchrun``, ``--parallel {ddp,zero1,zero2,fsdp}`` trains data-parallel (``model.parallel``):
each rank draws distinct micro-batches, ``batch_size`` is per rank, and only rank 0 logs and
writes files. A failing or timed-out rank makes every rank exit non-zero.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import logging
import math
import os
import platform
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch

from model.checkpoint import load_latest, save_checkpoint, write_json_atomically
from model.config import ModelConfig
from model.data import batch_rng, get_batch, load_tokens, read_meta, unigram_entropy
from model.distributed import launched_by_torchrun
from model.optim import AdamW, cosine_schedule, wsd_schedule
from model.parallel import Parallel
from model.profiling import StepProfiler
from model.train_config import TrainConfig, add_arguments, from_sources, resolve_device
from model.transformer import TransformerLM
from workbench.hardware import peak_flops_of

log = logging.getLogger("model.train")

CSV_FIELDS = ("step", "tokens", "loss", "val_loss", "lr", "grad_norm", "tokens_per_s", "mfu")
MOE_FIELDS = ("aux_loss", "moe_dropped", "moe_load")  # appended for mixture-of-experts models
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
    return ModelConfig.from_preset(
        cfg.preset, vocab_size=cfg.vocab_size or vocab_size, context_length=cfg.context_length,
        d_model=cfg.d_model, n_layers=cfg.n_layers, n_heads=cfg.n_heads, d_ff=cfg.d_ff, rope_theta=cfg.rope_theta,
        attention=cfg.attention, norm=cfg.norm, ffn=cfg.ffn, loss=cfg.loss, tie_embeddings=cfg.tie_embeddings,
        qk_norm=cfg.qk_norm, n_kv_heads=cfg.n_kv_heads, sliding_window=cfg.sliding_window, n_experts=cfg.n_experts,
        moe_top_k=cfg.moe_top_k, moe_aux_loss_coef=cfg.moe_aux_loss_coef, moe_z_loss_coef=cfg.moe_z_loss_coef,
        checkpoint_every=cfg.checkpoint_every).replace(moe_capacity_factor=cfg.moe_capacity_factor or None)


def learning_rate(cfg: TrainConfig, step: int) -> float:
    if cfg.schedule == "cosine":
        return cosine_schedule(step, cfg.lr, cfg.min_lr, cfg.warmup_steps, cfg.total_steps)
    if cfg.schedule == "wsd":
        return wsd_schedule(step, cfg.lr, cfg.min_lr, cfg.warmup_steps, cfg.total_steps, cfg.decay_fraction)
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


def rng_state() -> dict:
    state = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


@torch.no_grad()
def evaluate(model, val: np.ndarray, cfg: TrainConfig, device: str, autocast) -> float:
    """Mean loss over fixed validation windows (the same ones at every evaluation)."""
    was_training = model.training
    model.eval()
    losses = []
    for i in range(cfg.eval_batches):
        x, y = get_batch(val, cfg.batch_size, cfg.context_length, device, batch_rng(cfg.seed, 0, i, split="val"))
        with autocast():
            losses.append(model(x, targets=y).item())
    model.train(was_training)
    return float(np.mean(losses))


class MetricsLog:
    """metrics.csv of a run; on resume, rows after the resumed step are dropped (they get redone)."""

    def __init__(self, path: Path, resume_step: int | None, fields: tuple[str, ...] = CSV_FIELDS):
        self.path, self.fields = path, fields
        rows = []
        if resume_step is not None and path.exists():
            with open(path, newline="", encoding="utf-8") as fh:
                for row in csv.DictReader(fh):
                    with contextlib.suppress(TypeError, ValueError):
                        if None not in row.values() and int(row["step"]) <= resume_step:
                            rows.append(row)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fields, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
        tmp.replace(path)
        self.fh = open(path, "a", newline="", encoding="utf-8")
        self.writer = csv.DictWriter(self.fh, fields)

    def write(self, row: dict) -> None:
        self.writer.writerow({k: ("" if row.get(k) is None else row[k]) for k in self.fields})
        self.fh.flush()

    def close(self) -> None:
        self.fh.close()


def _tracker(cfg: TrainConfig, out_dir: Path):
    if cfg.tracker == "tensorboard":
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(str(out_dir / "tensorboard"))
        return lambda row: [writer.add_scalar(k, v, row["step"]) for k, v in row.items() if v is not None]
    if cfg.tracker == "wandb":
        import wandb

        wandb.init(project="lm-workbench", name=out_dir.name, config=cfg.to_dict(), resume="allow")
        return lambda row: wandb.log({k: v for k, v in row.items() if v is not None}, step=row["step"])
    return lambda row: None


def train(cfg: TrainConfig, resume: bool = False, parallel: Parallel | None = None) -> dict:
    """Run (or resume) training; returns the run summary that is also written to summary.json."""
    parallel = parallel or Parallel(cfg.parallel, cfg.device, cfg.dist_timeout_s, cfg.bucket_size_mb)
    main_rank, world = parallel.is_main, parallel.world_size
    device = parallel.info.device if parallel.info else resolve_device(cfg.device)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    if cfg.deterministic:
        torch.use_deterministic_algorithms(True)
    meta = read_meta(cfg.data)
    train_tokens, val_tokens = load_tokens(cfg.data, "train"), load_tokens(cfg.data, "val")
    mcfg = model_config(cfg, int(meta["vocab_size"]))
    if mcfg.vocab_size < int(meta["vocab_size"]):
        raise ValueError(f"TrainConfig.vocab_size={mcfg.vocab_size} is smaller than the shards' "
                         f"vocab_size={meta['vocab_size']} ({cfg.data}/meta.json)")
    for name, tokens in (("train", train_tokens), ("val", val_tokens)):
        if len(tokens) <= cfg.context_length:
            raise ValueError(f"{cfg.data}/{name}.bin has {len(tokens)} tokens; TrainConfig.context_length="
                             f"{cfg.context_length} needs more")

    out_dir = Path(cfg.out_dir)
    fsdp = cfg.parallel == "fsdp"
    found = load_latest(out_dir, map_location=device) if resume and not fsdp else None
    if not resume and (any(out_dir.glob("ckpt-*.pt")) or (out_dir / "dcp" / "latest").exists()):
        raise ValueError(f"{out_dir} already holds checkpoints: pass --resume to continue, or remove it")
    if main_rank:
        out_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomically(out_dir / "config.json", {"model": mcfg.to_dict(), "train": cfg.to_dict()})

    use_cuda = device.startswith("cuda")
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": None}[cfg.dtype]
    amp_dtype = amp_dtype if use_cuda else None
    if amp_dtype == torch.float16 and cfg.parallel in ("zero2", "fsdp"):
        raise ValueError(f"TrainConfig.dtype='fp16' (loss scaling) is not supported with parallel={cfg.parallel!r}: "
                         "use dtype bf16")

    torch.manual_seed(cfg.seed)
    model = TransformerLM(mcfg, device=device)
    step, bad_steps, elapsed = 0, 0, 0.0
    if found is not None:
        model.load_state_dict(found[1]["model"])
    # FSDP computes in the low-precision dtype itself (fp32 master weights); the others autocast.
    wrapped = parallel.wrap(model, compute_dtype=amp_dtype if fsdp else None)
    amp_dtype = None if fsdp else amp_dtype
    optimizer = parallel.make_optimizer(param_groups(model, cfg.weight_decay), AdamW, lr=cfg.lr,
                                        betas=(cfg.beta1, cfg.beta2), eps=cfg.eps)
    resumed = found is not None
    if found is not None:
        path, state = found
        parallel.load_checkpoint_state(state)
        set_rng_state(state["rng"])
        step, bad_steps, elapsed = state["step"], state.get("bad_steps", 0), state.get("seconds", 0.0)
        log.info("resumed from %s (step %d)", path, step)
    elif resume and fsdp and (trainer := parallel.load_sharded(out_dir)) is not None:
        step, bad_steps, elapsed = trainer["step"], trainer["bad_steps"], trainer["seconds"]
        resumed = True
        log.info("resumed from %s/dcp (step %d)", out_dir, step)
    elif resume:
        log.info("no checkpoint in %s: starting from scratch", out_dir)

    def autocast():
        return torch.autocast("cuda", dtype=amp_dtype) if amp_dtype else contextlib.nullcontext()

    scaler = torch.amp.GradScaler("cuda") if amp_dtype == torch.float16 else None
    forward = torch.compile(wrapped) if cfg.compile else wrapped
    flops_per_token = mcfg.flops_per_token(cfg.context_length)
    peak = peak_flops(device, cfg.peak_flops)
    peak = peak * world if peak else None
    tokens_per_step = cfg.tokens_per_step * world
    entropy = unigram_entropy(train_tokens, mcfg.vocab_size)
    fields = CSV_FIELDS + (MOE_FIELDS if mcfg.is_moe else ())
    metrics = MetricsLog(out_dir / "metrics.csv", step if resumed else None, fields) if main_rank else None
    track = _tracker(cfg, out_dir) if main_rank else (lambda row: None)
    total = cfg.total_steps if cfg.max_tokens is None else -(-cfg.max_tokens // tokens_per_step)
    params = [p for g in optimizer.param_groups for p in g["params"]]

    if main_rank:
        print(f"model {cfg.preset}: {mcfg.param_count():,} params ({mcfg.param_count(False):,} non-embedding), "
              f"{tokens_per_step:,} tokens/step × {total} steps on {device}"
              f"{f' × {world} ranks ({cfg.parallel})' if world > 1 or parallel.info else ''}; "
              f"train unigram entropy {entropy:.3f} nats/token", flush=True)

    def checkpoint(at_step: int, final: bool = False) -> Path | None:
        trainer = {"step": at_step, "bad_steps": bad_steps, "seconds": elapsed}
        if fsdp:
            path = parallel.save_sharded(out_dir, at_step, trainer, cfg.keep_last)
            if not final:
                return path
            model_state, optimizer_state = parallel.full_model_state(), None  # model-only export
        else:
            model_state, optimizer_state = parallel.checkpoint_state()
        if not main_rank:
            return None
        state = {"model": model_state, "optimizer": optimizer_state, **trainer, "rng": rng_state(),
                 "model_config": mcfg.to_dict(), "train_config": cfg.to_dict(),
                 "data": {"seed": cfg.seed, "next_step": at_step, "world_size": world}}
        return save_checkpoint(out_dir, at_step, state, cfg.keep_last)

    from tqdm import tqdm

    model.train()
    val_loss = loss_value = None
    window_tokens, window_start, started = 0, time.perf_counter(), time.perf_counter() - elapsed
    bar = tqdm(total=total, initial=step, desc="train", unit="step", dynamic_ncols=True, file=sys.stderr,
               disable=not main_rank)
    profiler = StepProfiler(cfg.profile, out_dir, cfg.profile_steps, device, parallel.rank)
    try:
        while step < total:
            lr = learning_rate(cfg, step)
            for group in optimizer.param_groups:
                group["lr"] = lr
            loss_sum = torch.zeros((), device=device)
            aux_sum = torch.zeros((), device=device)
            for micro in range(cfg.grad_accum):
                x, y = get_batch(train_tokens, cfg.batch_size, cfg.context_length, device,
                                 batch_rng(cfg.seed, step, parallel.batch_index(micro)))
                with parallel.micro_step(last=micro == cfg.grad_accum - 1):
                    with profiler.region("forward"), autocast():
                        loss = forward(x, targets=y)
                        aux = model.aux_loss()  # MoE load-balancing + z-loss (0 for dense models)
                    with profiler.region("backward"):
                        scaled = (loss + aux) / cfg.grad_accum
                        (scaler.scale(scaled) if scaler else scaled).backward()
                loss_sum += loss.detach()
                aux_sum += aux.detach() if torch.is_tensor(aux) else aux
            parallel.finish_gradients()
            if scaler:
                scaler.unscale_(optimizer)
            grad_norm = parallel.clip_gradients(params, cfg.grad_clip)
            loss_value = float(parallel.mean(loss_sum)) / cfg.grad_accum
            step += 1
            if not (math.isfinite(loss_value) and math.isfinite(grad_norm)):
                optimizer.zero_grad(set_to_none=True)
                bad_steps += 1
                if scaler:
                    scaler.update()
                if bad_steps > cfg.max_bad_steps:
                    raise TrainingDiverged(f"loss {loss_value} / grad norm {grad_norm} at step {step}: more than "
                                           f"max_bad_steps={cfg.max_bad_steps} non-finite steps")
                log.warning("step %d: non-finite loss or gradient, update skipped (%d/%d)", step, bad_steps,
                            cfg.max_bad_steps)
                continue
            with profiler.region("optimizer"):
                if scaler:
                    scaler.step(optimizer)
                    scaler.update()
                else:
                    optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            profiler.step()
            window_tokens += tokens_per_step
            bar.update(1)

            do_eval = step % cfg.eval_interval == 0 or step == total
            stop_early = cfg.time_budget_s is not None and time.perf_counter() - started >= cfg.time_budget_s
            if cfg.time_budget_s is not None:
                stop_early = parallel.any(stop_early)  # every rank stops at the same step
            if do_eval or stop_early:
                val_loss = evaluate(forward, val_tokens, cfg, device, autocast)
            if step % cfg.log_interval == 0 or do_eval or stop_early:
                now = time.perf_counter()
                tokens_per_s = window_tokens / max(now - window_start, 1e-9)
                mfu = tokens_per_s * flops_per_token / peak if peak else None
                row = {"step": step, "tokens": step * tokens_per_step, "loss": round(loss_value, 5),
                       "val_loss": round(val_loss, 5) if do_eval or stop_early else None, "lr": lr,
                       "grad_norm": round(grad_norm, 5), "tokens_per_s": round(tokens_per_s, 1),
                       "mfu": round(mfu, 4) if mfu is not None else None, **moe_metrics(model, aux_sum, cfg)}
                if metrics:
                    metrics.write(row)
                track(row)
                bar.set_postfix(loss=f"{loss_value:.3f}", tok_s=f"{tokens_per_s:,.0f}",
                                **({"mfu": f"{mfu:.1%}"} if mfu is not None else {}))
                if row["val_loss"] is not None:
                    bar.write(f"step {step}/{total} | loss {loss_value:.4f} | val {val_loss:.4f} | lr {lr:.2e} | "
                              f"grad {grad_norm:.3f} | {tokens_per_s:,.0f} tok/s" +
                              (f" | mfu {mfu:.1%}" if mfu is not None else ""))
                window_tokens, window_start = 0, now
            elapsed = time.perf_counter() - started
            if step % cfg.ckpt_interval == 0 or step == total or stop_early:
                checkpoint(step, final=step == total or stop_early)
            if stop_early:
                bar.write(f"time budget of {cfg.time_budget_s}s reached at step {step}")
                break
    finally:
        bar.close()
        profiler.close()
        if metrics:
            metrics.close()

    if val_loss is None:  # resumed at the end: nothing left to train
        val_loss = evaluate(forward, val_tokens, cfg, device, autocast)
    summary = {
        "params": mcfg.param_count(), "params_non_embedding": mcfg.param_count(False), "steps": step,
        "tokens": step * tokens_per_step, "flops": step * tokens_per_step * flops_per_token,
        "train_loss": loss_value, "val_loss": val_loss, "val_perplexity": math.exp(val_loss),
        "unigram_entropy": entropy, "nats_below_unigram": entropy - val_loss, "seconds": round(elapsed, 2),
        "tokens_per_s": round(step * tokens_per_step / max(elapsed, 1e-9), 1), "device": device,
        "bad_steps": bad_steps, "parallel": cfg.parallel, "world_size": world,
        "hardware": hardware_name(device, world),
    }
    if not main_rank:
        return summary
    write_json_atomically(out_dir / "summary.json", summary)
    if cfg.metrics:
        Path(cfg.metrics).parent.mkdir(parents=True, exist_ok=True)
        write_json_atomically(Path(cfg.metrics), summary)
    parallel.close()
    print(f"done: val loss {val_loss:.4f} (perplexity {math.exp(val_loss):.1f}) vs train unigram entropy "
          f"{entropy:.4f}: {entropy - val_loss:.3f} nats below, {step} steps in {elapsed:.0f}s", flush=True)
    return summary


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m model.train", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--params", type=Path, default=Path("params.yaml"),
                        help="params file whose `train` section supplies the defaults")
    parser.add_argument("--resume", action="store_true", help="continue from the run folder's newest good checkpoint")
    add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        from workbench.params import load_section

        cfg = from_sources(load_section("train", args.params), args)
        if cfg.parallel != "none" and launched_by_torchrun():
            try:
                train(cfg, resume=args.resume)
            except BaseException as exc:  # noqa: BLE001 — every failure must end this rank non-zero
                _fail_rank(exc, 2 if isinstance(exc, (ValueError, FileNotFoundError)) else 1)
        else:
            train(cfg, resume=args.resume)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except TrainingDiverged as exc:
        found = load_latest(cfg.out_dir)
        kept = f"last good checkpoint: {found[0]}" if found else "no checkpoint was written"
        print(f"error: training diverged: {exc}; {kept}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
