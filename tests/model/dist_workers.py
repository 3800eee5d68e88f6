"""Functions run inside spawned gloo ranks by test_distributed.py (importable by child processes)."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import torch
import torch.distributed as dist

from model.core.config import ModelConfig
from model.core.loss import cross_entropy
from model.core.transformer import TransformerLM
from model.training.optim import AdamW, clip_grad_norm

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


def train_parallel(rank: int, world: int, port: int, mode: str, out: str, tied: bool = False) -> None:
    """Train every gradient-accumulation setting in ``ACCUMS`` with ``mode``; save each result."""
    init(rank, world, port)
    for accum in ACCUMS:
        state = _train(rank, world, mode, accum, CFG.replace(tie_embeddings=tied))
        if state:  # FSDP gathers the full state on rank 0 only
            torch.save(state, Path(out) / f"{mode}-accum{accum}-rank{rank}.pt")
    dist.destroy_process_group()


ACCUMS = (1, 2)


def _train(rank: int, world: int, mode: str, accum: int, cfg: ModelConfig, clip: float = 1.0) -> dict:
    from model.parallelism.distributed import DDP, NaiveDDP, apply_fsdp, broadcast_module, full_model_state_dict
    from model.parallelism.zero import ShardedOptimizer

    model = build_model(seed=rank, cfg=cfg)  # different per rank: wrappers must broadcast rank 0's
    if mode.startswith("fsdp"):
        broadcast_module(model)
        wrapped = apply_fsdp(model, param_dtype=torch.bfloat16 if mode == "fsdp_bf16" else None)
        opt = AdamW(model.parameters(), **OPT)
        assert all(p.dtype == torch.float32 for p in model.parameters()), "master weights must stay fp32"
    elif mode in ("zero1", "zero2"):
        stage = int(mode[-1])
        if stage == 1:
            wrapped = DDP(model, bucket_size_mb=0.001)
        else:
            broadcast_module(model)
            wrapped = model
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
            if mode.startswith("fsdp"):
                wrapped.set_requires_gradient_sync(last)
            with ctx:
                logits = wrapped(xs[m * micro:(m + 1) * micro])
                assert logits.dtype == (torch.bfloat16 if mode == "fsdp_bf16" else torch.float32)
                loss = cross_entropy(logits, ys[m * micro:(m + 1) * micro])
                (loss / accum).backward()
        if hasattr(sync_owner, "finish_gradient_synchronization"):
            sync_owner.finish_gradient_synchronization()
        if mode.startswith("zero"):
            opt.clip_grad_norm(clip)
        elif mode.startswith("fsdp"):
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        else:
            clip_grad_norm(model.parameters(), clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
    state = full_model_state_dict(model) if mode.startswith("fsdp") else model.state_dict()
    if mode.startswith("fsdp") and rank != 0:
        return {}
    return {k: v.detach().clone() for k, v in state.items()}


class TiedUnused(torch.nn.Module):
    """``shared`` is used twice (a tied weight), ``sometimes`` only on rank 0's batches,
    ``never`` by nobody."""

    def __init__(self):
        super().__init__()
        self.shared = torch.nn.Linear(4, 4, bias=False)
        self.sometimes = torch.nn.Linear(4, 4)
        self.never = torch.nn.Linear(4, 4)
        self.out = torch.nn.Linear(4, 1)

    def forward(self, x: torch.Tensor, use_sometimes: bool) -> torch.Tensor:
        h = self.shared(torch.tanh(self.shared(x)))
        if use_sometimes:
            h = h + self.sometimes(h)
        return self.out(h).sum()


def tied_unused_batch(rank: int) -> torch.Tensor:
    return torch.randn(3, 4, generator=torch.Generator().manual_seed(10 + rank))


def tied_unused_grads(rank: int, world: int, port: int, out: str) -> None:
    """Gradients after synchronization, for each DDP variant, saved per rank."""
    from model.parallelism.distributed import DDP, NaiveDDP

    init(rank, world, port)
    for name, wrap in (("naive", NaiveDDP), ("per_param", lambda m: DDP(m, bucket_size_mb=0)),
                       ("bucketed", lambda m: DDP(m, bucket_size_mb=1e-4))):
        torch.manual_seed(rank)
        ddp = wrap(TiedUnused())
        ddp(tied_unused_batch(rank), use_sometimes=rank == 0).backward()
        ddp.finish_gradient_synchronization()
        grads = {n: (None if p.grad is None else p.grad.clone()) for n, p in ddp.module.named_parameters()}
        torch.save(grads, Path(out) / f"{name}-rank{rank}.pt")
    dist.destroy_process_group()


def sharded_state(rank: int, world: int, port: int, out: str, optimizer: str) -> None:
    """ZeRO-1: 2 steps, then the consolidated and sharded state dicts; a third step three ways
    (uninterrupted, resumed from the shard, resumed from the consolidated dict)."""
    from model.parallelism.distributed import DDP
    from model.parallelism.zero import ShardedOptimizer

    init(rank, world, port)
    opt_cls = {"ours": AdamW, "torch": torch.optim.AdamW}[optimizer]
    batches = global_batches()
    per_rank = BATCH // world

    def build():
        model = build_model(0)
        ddp = DDP(model, bucket_size_mb=0.001)
        matrices = [p for p in model.parameters() if p.dim() >= 2]
        vectors = [p for p in model.parameters() if p.dim() < 2]
        opt = ShardedOptimizer([{"params": matrices}], opt_cls, **OPT)
        opt.add_param_group({"params": vectors, "weight_decay": 0.0})
        return model, ddp, opt

    def step(ddp, opt, i):
        x, y = batches[i]
        sl = slice(rank * per_rank, (rank + 1) * per_rank)
        cross_entropy(ddp(x[sl]), y[sl]).backward()
        ddp.finish_gradient_synchronization()
        opt.step()
        opt.zero_grad()

    model, ddp, opt = build()
    for i in range(2):
        step(ddp, opt, i)
    full = opt.consolidate_state_dict(to=0)
    shard = copy.deepcopy(opt.state_dict())  # state_dict() holds live references
    torch.save({"shard": shard, "state_bytes": opt.state_bytes(),
                "owned_numel": sum(p.numel() for p in opt.owned())}, Path(out) / f"shard-rank{rank}.pt")
    if rank == 0:
        torch.save({"full": full, "params": {k: v.clone() for k, v in model.state_dict().items()}},
                   Path(out) / "after2.pt")
    step(ddp, opt, 2)
    results = {"uninterrupted": {k: v.clone() for k, v in model.state_dict().items()}}
    full_list = [full]
    dist.broadcast_object_list(full_list, src=0)
    for name, state in (("from_shard", shard), ("from_full", full_list[0])):
        model2, ddp2, opt2 = build()
        ddp2.module.load_state_dict(_params_after2(out))
        opt2.load_state_dict(state)
        step(ddp2, opt2, 2)
        results[name] = {k: v.clone() for k, v in model2.state_dict().items()}
    other = torch.load(Path(out) / f"shard-rank{1 - rank}.pt", weights_only=False)["shard"] if world == 2 else None
    if other is not None:
        try:
            opt.load_state_dict(other)
            results["mismatch_error"] = ""
        except ValueError as exc:
            results["mismatch_error"] = str(exc)
    torch.save(results, Path(out) / f"results-rank{rank}.pt")
    dist.destroy_process_group()


def _params_after2(out: str) -> dict:
    dist.barrier()  # rank 0 has written after2.pt
    return torch.load(Path(out) / "after2.pt", weights_only=False)["params"]


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
