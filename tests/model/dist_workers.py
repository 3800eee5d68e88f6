"""Functions run inside spawned gloo ranks by test_distributed.py (importable by child processes)."""

from __future__ import annotations

import os
from pathlib import Path

import torch
import torch.distributed as dist

from model.config import ModelConfig
from model.loss import cross_entropy
from model.optim import AdamW, clip_grad_norm
from model.transformer import TransformerLM

CFG = ModelConfig(vocab_size=32, context_length=8, d_model=16, n_layers=2, n_heads=2, tie_embeddings=False)
STEPS, BATCH = 3, 8  # BATCH sequences per step in total (split over ranks and micro-steps)
OPT = dict(lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1)


def build_model(seed: int = 0, cfg: ModelConfig = CFG) -> TransformerLM:
    torch.manual_seed(seed)
    return TransformerLM(cfg)


def global_batches(cfg: ModelConfig = CFG) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(123)
    data = [torch.randint(cfg.vocab_size, (BATCH, cfg.context_length + 1), generator=g) for _ in range(STEPS)]
    return [(d[:, :-1], d[:, 1:]) for d in data]


def reference_training(cfg: ModelConfig = CFG, clip: float = 1.0) -> dict[str, torch.Tensor]:
    """One process, the whole batch per step: what every parallel mode must reproduce."""
    model = build_model(0, cfg)
    opt = AdamW(model.parameters(), **OPT)
    for x, y in global_batches(cfg):
        cross_entropy(model(x), y).backward()
        clip_grad_norm(model.parameters(), clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def init(rank: int, world: int, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)


def train_parallel(rank: int, world: int, port: int, mode: str, accum: int, out: str, tied: bool = False,
                   clip: float = 1.0) -> None:
    from model.distributed import DDP, NaiveDDP, apply_fsdp, full_model_state_dict
    from model.zero import ShardedOptimizer

    init(rank, world, port)
    cfg = CFG.replace(tie_embeddings=tied)
    model = build_model(seed=rank, cfg=cfg)  # different per rank: wrappers must broadcast rank 0's
    if mode == "fsdp":
        from model.distributed import broadcast_module

        broadcast_module(model)
        wrapped = apply_fsdp(model)
        opt = AdamW(model.parameters(), **OPT)
    elif mode in ("zero1", "zero2"):
        stage = int(mode[-1])
        wrapped = DDP(model, bucket_size_mb=0.001) if stage == 1 else model
        if stage == 2:
            from model.distributed import broadcast_module

            broadcast_module(model)
        opt = ShardedOptimizer(model.parameters(), AdamW, stage=stage, **OPT)
    else:
        wrapped = {"naive": lambda: NaiveDDP(model), "per_param": lambda: DDP(model, bucket_size_mb=0),
                   "bucketed": lambda: DDP(model, bucket_size_mb=0.002)}[mode]()
        opt = AdamW(model.parameters(), **OPT)
    sync_owner = opt if mode == "zero2" else wrapped
    per_rank = BATCH // world
    micro = per_rank // accum
    for x, y in global_batches(cfg):
        xs, ys = x[rank * per_rank:(rank + 1) * per_rank], y[rank * per_rank:(rank + 1) * per_rank]
        for m in range(accum):
            last = m == accum - 1
            ctx = sync_owner.no_sync() if (not last and hasattr(sync_owner, "no_sync")) else _null()
            if mode == "fsdp":
                wrapped.set_requires_gradient_sync(last)
            with ctx:
                loss = cross_entropy(wrapped(xs[m * micro:(m + 1) * micro]), ys[m * micro:(m + 1) * micro])
                (loss / accum).backward()
        if hasattr(sync_owner, "finish_gradient_synchronization"):
            sync_owner.finish_gradient_synchronization()
        if mode.startswith("zero"):
            opt.clip_grad_norm(clip)
        elif mode == "fsdp":
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        else:
            clip_grad_norm(model.parameters(), clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
    state = full_model_state_dict(model) if mode == "fsdp" else model.state_dict()
    if mode != "fsdp" or rank == 0:
        torch.save({k: v.detach().clone() for k, v in state.items()}, Path(out) / f"rank{rank}.pt")
    dist.destroy_process_group()


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
