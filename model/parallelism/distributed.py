"""Data parallelism applied to a plain model from the outside (torchtitan style).

* ``NaiveDDP``: after backward, one blocking all-reduce per parameter. The baseline.
* ``DDP(module, bucket_size_mb)``: gradients all-reduced asynchronously from per-parameter
  post-accumulate hooks while backward is still running, grouped into buckets filled in reverse
  parameter order (the order backward produces them), as in Li et al. 2020, "PyTorch Distributed"
  §3.2. ``bucket_size_mb=0`` launches one all-reduce per parameter as soon as it is ready.
* ZeRO stage 1/2 sharded optimizers live in ``model.parallelism.zero``; ``apply_fsdp`` wraps the model with
  ``torch.distributed.fsdp.fully_shard`` per block (ZeRO-3 / FSDP2).

Every wrapper is a ``torch.nn.Module`` that forwards to ``.module``. Call
``finish_gradient_synchronization()`` after the last backward of an optimizer step; inside
``with ddp.no_sync():`` (inner gradient-accumulation micro-steps) nothing is communicated.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from torch import Tensor, nn

from model.training.checkpoint import save_checkpoint
from workbench.params import REQUIRED, parse_flags, setting

# torch.distributed.fsdp / .checkpoint stay imported inside the functions below: they add ~0.6 s to every
# ``import model.train`` and only FSDP runs use them.


@dataclass(frozen=True)
class DistInfo:
    rank: int
    world_size: int
    local_rank: int
    device: str
    backend: str

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def launched_by_torchrun() -> bool:
    return "WORLD_SIZE" in os.environ and "RANK" in os.environ


def init_distributed(device: str = "auto", timeout_s: float = 300.0) -> DistInfo:
    """Join the process group torchrun describes in the environment (NCCL on CUDA, gloo on CPU).

    ``timeout_s`` bounds every collective: when a rank dies, the others fail with a timeout
    instead of hanging forever."""
    if not launched_by_torchrun():
        raise ValueError("distributed training needs the torchrun environment (RANK, WORLD_SIZE): launch with "
                         "`torchrun --nproc_per_node N -m model.train --parallel ...`")
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    use_cuda = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    if use_cuda:
        if not torch.cuda.is_available():
            raise ValueError(f"device={device!r} but CUDA is not available")
        torch.cuda.set_device(local_rank)
        device = f"cuda:{local_rank}"
    else:
        device = "cpu"
    backend = "nccl" if use_cuda else "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s),
                                device_id=torch.device(device) if use_cuda else None)
    return DistInfo(dist.get_rank(), dist.get_world_size(), local_rank, device, backend)


def broadcast_module(module: nn.Module, src: int = 0) -> None:
    """Make every rank's parameters and buffers equal to rank ``src``'s."""
    with torch.no_grad():
        for tensor in [*unique_parameters(module), *module.buffers()]:
            dist.broadcast(tensor.data, src)


def unique_parameters(module: nn.Module) -> list[nn.Parameter]:
    """Parameters in registration order, each once (tied weights appear a single time)."""
    return list({id(p): p for p in module.parameters()}.values())


class GradientSyncSwitch:
    """``no_sync()``: gradients accumulate locally, with no communication, inside this context."""

    require_backward_grad_sync = True

    @contextlib.contextmanager
    def no_sync(self):
        previous, self.require_backward_grad_sync = self.require_backward_grad_sync, False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous


class _DataParallel(GradientSyncSwitch, nn.Module):
    def __init__(self, module: nn.Module):
        super().__init__()
        if not dist.is_initialized():
            raise RuntimeError("initialize torch.distributed (init_distributed) before wrapping a model")
        self.module = module
        self.world_size = dist.get_world_size()
        self.require_backward_grad_sync = True
        self.bytes_reduced = 0  # payload bytes all-reduced since construction (ring cost ≈ 2(N−1)/N of this)
        broadcast_module(module)

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)


class NaiveDDP(_DataParallel):
    """Blocking all-reduce of each parameter's gradient after backward has finished."""

    def finish_gradient_synchronization(self) -> None:
        for p in unique_parameters(self.module):
            if not p.requires_grad:
                continue
            grad = p.grad if p.grad is not None else torch.zeros_like(p)
            dist.all_reduce(grad)
            grad.div_(self.world_size)
            self.bytes_reduced += grad.numel() * grad.element_size()
            if p.grad is None and grad.any():
                p.grad = grad


class _Bucket:
    def __init__(self, params: list[nn.Parameter]):
        self.params = params
        self.ready: set[int] = set()
        self.flat: Tensor | None = None
        self.work = None

    def is_full(self) -> bool:
        return len(self.ready) == len(self.params)


class DDP(_DataParallel):
    """Bucketed all-reduce overlapped with backward.

    Buckets are launched strictly in order (a ready bucket waits for the ones before it), so every
    rank issues the same collectives in the same sequence even when ranks' backward passes touch
    different parameters. A parameter whose gradient never arrives (unused in this forward) is
    reduced with zeros when ``finish_gradient_synchronization`` flushes its bucket; it keeps
    ``grad=None`` unless another rank produced a non-zero gradient for it."""

    def __init__(self, module: nn.Module, bucket_size_mb: float = 25.0):
        super().__init__(module)
        if bucket_size_mb < 0:
            raise ValueError(f"DDP: bucket_size_mb must be >= 0, got {bucket_size_mb}")
        self.bucket_size_mb = bucket_size_mb
        self.buckets: list[_Bucket] = []
        self._bucket_of: dict[int, _Bucket] = {}
        self._next = 0  # index of the first bucket not launched yet
        limit = bucket_size_mb * 2**20
        current, size = [], 0
        for p in reversed([p for p in unique_parameters(module) if p.requires_grad]):
            nbytes = p.numel() * p.element_size()
            if current and (size + nbytes > limit or p.dtype != current[0].dtype or p.device != current[0].device):
                self._add_bucket(current)
                current, size = [], 0
            current.append(p)
            size += nbytes
        if current:
            self._add_bucket(current)
        self._hooks = [p.register_post_accumulate_grad_hook(self._on_grad_ready)
                       for b in self.buckets for p in b.params]

    def _add_bucket(self, params: list[nn.Parameter]) -> None:
        bucket = _Bucket(params)
        self.buckets.append(bucket)
        for p in params:
            self._bucket_of[id(p)] = bucket

    def _on_grad_ready(self, param: nn.Parameter) -> None:
        if not self.require_backward_grad_sync:
            return
        bucket = self._bucket_of[id(param)]
        bucket.ready.add(id(param))
        while self._next < len(self.buckets) and self.buckets[self._next].is_full():
            self._launch(self.buckets[self._next])

    def _launch(self, bucket: _Bucket) -> None:
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in bucket.params]
        bucket.flat = grads[0].reshape(-1) if len(grads) == 1 else torch.cat([g.reshape(-1) for g in grads])
        if len(grads) == 1 and bucket.params[0].grad is None:
            bucket.flat = bucket.flat.clone()
        bucket.work = dist.all_reduce(bucket.flat, async_op=True)
        self._next += 1
        self.bytes_reduced += bucket.flat.numel() * bucket.flat.element_size()

    def finish_gradient_synchronization(self) -> None:
        """Flush buckets still waiting on unused parameters, wait for every all-reduce, average."""
        while self._next < len(self.buckets):
            self._launch(self.buckets[self._next])
        for bucket in self.buckets:
            bucket.work.wait()
            bucket.flat.div_(self.world_size)
            offset = 0
            for p in bucket.params:
                chunk = bucket.flat[offset:offset + p.numel()].view_as(p)
                offset += p.numel()
                if p.grad is not None:
                    if p.grad.data_ptr() != chunk.data_ptr():
                        p.grad.copy_(chunk)
                elif chunk.any():
                    p.grad = chunk.clone()
            bucket.flat, bucket.work = None, None
            bucket.ready.clear()
        self._next = 0


def apply_fsdp(model: nn.Module, param_dtype: torch.dtype | None = None,
               reduce_dtype: torch.dtype | None = torch.float32, reshard_after_forward: bool = True) -> nn.Module:
    """Shard parameters, gradients and optimizer state across ranks with FSDP2 (ZeRO-3).

    Each Transformer block is its own unit (all-gathered just before it runs, resharded after),
    then the root holds the embeddings, final norm and head. ``param_dtype=torch.bfloat16``
    all-gathers and computes in bf16 while the sharded master weights (and so the optimizer
    state) stay fp32; gradients are reduce-scattered in ``reduce_dtype``."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mp = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=reduce_dtype)
    for block in getattr(model, "layers", []):
        fully_shard(block, mp_policy=mp, reshard_after_forward=reshard_after_forward)
    fully_shard(model, mp_policy=mp, reshard_after_forward=reshard_after_forward)
    return model


def full_model_state_dict(model: nn.Module) -> dict[str, Tensor]:
    """Unsharded CPU state dict of an FSDP (or plain) model on rank 0, {} elsewhere (collective)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def save_sharded_checkpoint(directory: str | os.PathLike, model: nn.Module, optimizer, extra: dict) -> None:
    """Each rank writes its shards with torch.distributed.checkpoint (collective)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_state, optim_state = get_state_dict(model, optimizer)
    dcp.save({"model": model_state, "optimizer": optim_state, "extra": extra}, checkpoint_id=str(directory))


def load_sharded_checkpoint(directory: str | os.PathLike, model: nn.Module, optimizer) -> dict:
    """Load a ``save_sharded_checkpoint`` directory into the (already sharded) model and optimizer."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model_state, optim_state = get_state_dict(model, optimizer)
    state = {"model": model_state, "optimizer": optim_state, "extra": {}}
    dcp.load(state, checkpoint_id=str(directory))
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])
    return state["extra"]


def export_sharded_checkpoint(run_dir: str | os.PathLike, step: int | None = None) -> str:
    """Turn an FSDP run's ``dcp/step-N`` folder into a model-only ``ckpt-N.pt`` in the run folder,
    on one process with no process group (``model.training.checkpoint.load_model`` and ``model.inference.export``
    read it). Default: the newest folder. Returns the written path."""
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    run_dir = Path(run_dir)
    folders = sorted((run_dir / "dcp").glob("step-*"))
    if step is not None:
        folders = [f for f in folders if f.name == f"step-{step:08d}"]
    if not folders:
        raise FileNotFoundError(f"{run_dir}/dcp: no sharded checkpoint folder"
                                + (f" for step {step}" if step is not None else ""))
    folder = folders[-1]
    config = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
    trainer = json.loads((folder / "trainer.json").read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        dcp_to_torch_save(folder, Path(tmp) / "full.pt")
        full = torch.load(Path(tmp) / "full.pt", weights_only=True)
    state = {"model": full["model"], "optimizer": None, **trainer, "model_config": config["model"],
             "train_config": config["train"], "tokenizer": config.get("tokenizer")}
    return str(save_checkpoint(run_dir, trainer["step"], state, keep_last=10**6))


@dataclass(frozen=True)
class ExportShardedSettings:
    command: str = setting(REQUIRED, "export: the sharded checkpoint to one file", choices=("export",),
                           positional=True)
    run_dir: str = setting(REQUIRED, "run folder holding dcp/step-*", positional=True)
    step: int | None = setting(None, "which step (none: the newest)")


def main(argv: list[str] | None = None) -> int:
    args = parse_flags(ExportShardedSettings, argv, prog="python -m model.parallelism.distributed",
                       description="Export an FSDP run's sharded checkpoint to a single file.")
    try:
        print(export_sharded_checkpoint(args.run_dir, args.step))
    except (FileNotFoundError, KeyError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
