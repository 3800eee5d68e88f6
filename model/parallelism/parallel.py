"""The training loop's view of ``--parallel {none,ddp,zero1,zero2,fsdp}``.

``Parallel`` applies one mode to the plain model and optimizer (with ``model.parallelism.distributed`` and
``model.parallelism.zero``) and answers the few questions the loop asks: which module to call, whether a
micro-step communicates, how to synchronize and clip gradients, how to average a logged number,
and how to save and restore a checkpoint. With ``mode="none"`` every answer is the single-process
one, so ``model.train`` reads the same either way.

Checkpoints: none/ddp/zero1/zero2 write the usual single-file ``ckpt-<step>.pt`` from rank 0 (the
ZeRO optimizer state is consolidated first), so any world size can resume it and
``model.training.checkpoint.load_model`` reads it. FSDP writes sharded ``torch.distributed.checkpoint``
folders ``dcp/step-<step>`` from every rank, and at the end of training also a model-only
``ckpt-<step>.pt`` gathered on rank 0 for export and evaluation.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from model.parallelism.distributed import (
    DDP,
    DistInfo,
    apply_fsdp,
    broadcast_module,
    full_model_state_dict,
    init_distributed,
    load_sharded_checkpoint,
    save_sharded_checkpoint,
)
from model.parallelism.zero import ShardedOptimizer
from model.training.optim import clip_grad_norm
from model.training.train_config import PARALLEL_MODES
from workbench.files import write_json

MODES = PARALLEL_MODES


class Parallel:
    def __init__(self, mode: str, device: str, timeout_s: float = 300.0, bucket_size_mb: float = 25.0):
        if mode not in MODES:
            raise ValueError(f"parallel={mode!r}: expected one of {MODES}")
        self.mode = mode
        self.bucket_size_mb = bucket_size_mb
        self.info: DistInfo | None = init_distributed(device, timeout_s) if mode != "none" else None
        self.rank = self.info.rank if self.info else 0
        self.world_size = self.info.world_size if self.info else 1
        self.model: nn.Module | None = None
        self.wrapped: nn.Module | None = None
        self.optimizer: torch.optim.Optimizer | None = None

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    # ---- set-up ---------------------------------------------------------------------------------
    def wrap(self, model: nn.Module, compute_dtype: torch.dtype | None = None) -> nn.Module:
        """Apply the mode to ``model`` (load any single-file checkpoint before this); returns the
        module to call. ``compute_dtype`` is FSDP's all-gather/compute dtype (fp32 master weights)."""
        self.model = model
        if self.mode in ("ddp", "zero1"):
            self.wrapped = DDP(model, bucket_size_mb=self.bucket_size_mb)
        elif self.mode == "zero2":
            broadcast_module(model)
            self.wrapped = model
        elif self.mode == "fsdp":
            broadcast_module(model)
            self.wrapped = apply_fsdp(model, param_dtype=compute_dtype)
        else:
            self.wrapped = model
        return self.wrapped

    def make_optimizer(self, param_groups: list[dict], optimizer_cls, **kwargs) -> torch.optim.Optimizer:
        if self.mode in ("zero1", "zero2"):
            self.optimizer = ShardedOptimizer(param_groups, optimizer_cls, stage=int(self.mode[-1]), **kwargs)
        else:
            self.optimizer = optimizer_cls(param_groups, **kwargs)
        return self.optimizer

    # ---- per step -------------------------------------------------------------------------------
    def batch_index(self, micro_step: int) -> int:
        """Which micro-batch of the step this rank draws: ranks interleave, so world N with
        accumulation k sees exactly the batches one process with accumulation N·k would."""
        return micro_step * self.world_size + self.rank

    def micro_step(self, last: bool):
        """Context for one micro-batch's forward+backward: communicates only on the last one."""
        if last or self.mode == "none":
            if self.mode == "fsdp":
                self.wrapped.set_requires_gradient_sync(True)
            return contextlib.nullcontext()
        if self.mode == "fsdp":
            self.wrapped.set_requires_gradient_sync(False)
            return contextlib.nullcontext()
        return (self.optimizer if self.mode == "zero2" else self.wrapped).no_sync()

    def finish_gradients(self) -> None:
        """Wait for the gradient communication started during backward (before unscaling/clipping)."""
        if self.mode in ("ddp", "zero1"):
            self.wrapped.finish_gradient_synchronization()
        if self.mode == "zero2":
            self.optimizer.finish_gradient_synchronization()

    def clip_gradients(self, params: list[nn.Parameter], max_norm: float) -> float:
        """Clip synchronized gradients; returns the global norm before clipping."""
        if self.mode in ("zero1", "zero2"):
            return float(self.optimizer.clip_grad_norm(max_norm))
        if self.mode == "fsdp":
            norm = torch.nn.utils.clip_grad_norm_(params, max_norm if max_norm > 0 else float("inf"))
            return float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)
        return float(clip_grad_norm(params, max_norm))

    def mean(self, value: torch.Tensor) -> torch.Tensor:
        """Average of a scalar over ranks (for logging the global loss)."""
        if self.mode == "none":
            return value
        value = value.detach().clone().float()
        dist.all_reduce(value)
        return value / self.world_size

    def any(self, flag: bool) -> bool:
        """True on every rank when it is true on any (so all ranks stop together)."""
        if self.mode == "none":
            return flag
        device = self.info.device
        tensor = torch.tensor([1.0 if flag else 0.0], device=device)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return bool(tensor.item())

    # ---- checkpoints ----------------------------------------------------------------------------
    def checkpoint_state(self) -> tuple[dict, dict | None]:
        """(model state, optimizer state) for a single-file checkpoint; collective for ZeRO.
        The optimizer state is None on ranks other than 0 for ZeRO."""
        optimizer = (self.optimizer.consolidate_state_dict(to=0) if isinstance(self.optimizer, ShardedOptimizer)
                     else self.optimizer.state_dict())
        return self.model.state_dict(), optimizer

    def load_checkpoint_state(self, state: dict) -> None:
        """Load a single-file checkpoint: model before ``wrap``'s broadcast, optimizer after."""
        if state.get("optimizer") is None:
            raise ValueError("this checkpoint has no optimizer state (the model-only export of an FSDP run): "
                             "resume it with --parallel fsdp")
        self.optimizer.load_state_dict(state["optimizer"])

    def save_sharded(self, out_dir: Path, step: int, trainer: dict, keep_last: int) -> Path:
        """FSDP: every rank writes its shards into dcp/step-<step> (atomic rename by rank 0)."""
        root = Path(out_dir) / "dcp"
        final, tmp = root / f"step-{step:08d}", root / f".step-{step:08d}.tmp"
        if self.is_main:
            shutil.rmtree(tmp, ignore_errors=True)
        dist.barrier()
        save_sharded_checkpoint(tmp, self.wrapped, self.optimizer, {})
        dist.barrier()
        if self.is_main:
            write_json(tmp / "trainer.json", trainer, sort_keys=False)
            shutil.rmtree(final, ignore_errors=True)
            tmp.rename(final)
            write_json(root / "latest", {"dir": final.name, "step": step}, sort_keys=False)
            for old in sorted(root.glob("step-*"))[:-max(1, keep_last)]:
                shutil.rmtree(old, ignore_errors=True)
        dist.barrier()
        return final

    def load_sharded(self, out_dir: Path) -> dict | None:
        """FSDP resume: load the newest dcp/step-* folder; returns its trainer.json, or None."""
        root = Path(out_dir) / "dcp"
        try:
            latest = json.loads((root / "latest").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        folder = root / latest["dir"]
        load_sharded_checkpoint(folder, self.wrapped, self.optimizer)
        return json.loads((folder / "trainer.json").read_text(encoding="utf-8"))

    def full_model_state(self) -> dict:
        """The unsharded model state on rank 0 (collective under FSDP)."""
        return full_model_state_dict(self.wrapped) if self.mode == "fsdp" else self.model.state_dict()

    def close(self) -> None:
        if self.info is not None and dist.is_initialized():
            dist.destroy_process_group()
