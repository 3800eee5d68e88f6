"""ZeRO optimizer-state sharding (Rajbhandari et al. 2020, "ZeRO", §5.1–5.2).

``ShardedOptimizer(params, optimizer_cls, **kwargs)`` gives each parameter one owner rank
(greedy, largest first, onto the least-loaded rank, so shards balance by size). Each rank keeps an
``optimizer_cls`` over the parameters it owns only, so the Adam moments (12Ψ of 16Ψ bytes with
mixed precision) are split N ways. After every rank has stepped its shard, each owner broadcasts
its updated parameters (one flat tensor per owner).

Stage 1 expects full, already averaged gradients on every rank (use it under ``DDP``).
Stage 2 (``stage=2``, used without DDP) reduces each gradient to its owner only, from hooks
while backward runs; the other ranks drop their copy, so gradient memory is also split N ways
after synchronization. Call ``finish_gradient_synchronization()`` before clipping and stepping,
and use ``clip_grad_norm`` (which sums the shards' squared norms across ranks).

The optimizer's hyper-parameters (``param_groups``) are the user-facing ones: a learning-rate
schedule writes them and ``step`` copies them to the local optimizer.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

from model.parallelism.distributed import GradientSyncSwitch
from model.training.optim import closure_loss


class ShardedOptimizer(GradientSyncSwitch, torch.optim.Optimizer):
    def __init__(self, params, optimizer_cls: type[torch.optim.Optimizer], stage: int = 1, **kwargs: Any):
        if not dist.is_initialized():
            raise RuntimeError("initialize torch.distributed (init_distributed) before building a ShardedOptimizer")
        if stage not in (1, 2):
            raise ValueError(f"ShardedOptimizer: stage must be 1 or 2, got {stage}")
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.stage = stage
        self.optimizer_cls, self.optimizer_kwargs = optimizer_cls, kwargs
        self.local: torch.optim.Optimizer | None = None
        self.owner: dict[int, int] = {}  # id(param) -> rank
        self.load = [0] * self.world_size  # elements owned per rank
        self.require_backward_grad_sync = True
        self._works: list[tuple[nn.Parameter, Any]] = []
        self._ready: set[int] = set()  # stage 2: gradients produced, not yet reduced
        self._hooks = []
        self._params: list[nn.Parameter] = []  # every parameter once, in param_groups order
        self._owned: dict[int, list[nn.Parameter]] = {}  # rank -> its parameters, in that order
        self._reduce_order: list[nn.Parameter] = []  # stage 2: reverse order (roughly backward's), same on all ranks
        super().__init__(params, kwargs)

    # ---- sharding ---------------------------------------------------------------------------
    def add_param_group(self, param_group: dict) -> None:
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        for p in sorted(group["params"], key=lambda p: -p.numel()):  # stable: ties keep group order
            if id(p) in self.owner:
                continue
            rank = min(range(self.world_size), key=lambda r: self.load[r])
            self.owner[id(p)] = rank
            self.load[rank] += p.numel()
            if self.stage == 2 and p.requires_grad:
                self._hooks.append(p.register_post_accumulate_grad_hook(self._reduce_to_owner))
        local_group = {**group, "params": [p for p in group["params"] if self.owner[id(p)] == self.rank]}
        if self.local is None:
            self.local = self.optimizer_cls([local_group], **self.optimizer_kwargs)
        else:
            self.local.add_param_group(local_group)
        for key, value in self.local.param_groups[-1].items():  # the local optimizer's defaults (eps, …)
            if key != "params":
                group.setdefault(key, value)
        # derived lists, rebuilt only here (hooks and every step read them)
        self._params = list({id(p): p for g in self.param_groups for p in g["params"]}.values())
        self._owned = {r: [p for p in self._params if self.owner[id(p)] == r] for r in range(self.world_size)}
        self._reduce_order = [p for p in reversed(self._params) if p.requires_grad]

    def owned(self, rank: int | None = None) -> list[nn.Parameter]:
        return self._owned[self.rank if rank is None else rank]

    def _all_params(self) -> list[nn.Parameter]:
        return self._params

    # ---- stage 2: gradients reduced to their owner -------------------------------------------

    def _reduce_to_owner(self, param: nn.Parameter) -> None:
        """Hook: reduce every gradient that is ready and whose predecessors in the fixed order
        have been launched, so all ranks issue the same collectives in the same sequence."""
        if not self.require_backward_grad_sync:
            return
        self._ready.add(id(param))
        order = self._reduce_order
        while len(self._works) < len(order) and id(order[len(self._works)]) in self._ready:
            self._launch_reduce(order[len(self._works)])

    def _launch_reduce(self, p: nn.Parameter) -> None:
        if p.grad is None:  # unused in this backward: reduce zeros so every rank's collectives match
            p.grad = torch.zeros_like(p)
        self._works.append((p, dist.reduce(p.grad, dst=self.owner[id(p)], async_op=True)))

    def finish_gradient_synchronization(self) -> None:
        """Stage 2: wait for the reductions, average on the owner, free the gradients of others."""
        if self.stage != 2:
            return
        order = self._reduce_order
        while len(self._works) < len(order):
            self._launch_reduce(order[len(self._works)])
        self._ready.clear()
        for p, work in self._works:
            work.wait()
            if self.owner[id(p)] == self.rank:
                p.grad.div_(self.world_size)
            else:
                p.grad = None
        self._works.clear()

    def clip_grad_norm(self, max_norm: float, eps: float = 1e-6) -> Tensor:
        """Global L2 gradient norm (clipped to ``max_norm`` when > 0), correct for both stages."""
        params = self.owned() if self.stage == 2 else self._all_params()
        grads = [p.grad for p in params if p.grad is not None]
        device = next(iter(self._all_params())).device
        sq = torch.zeros((), device=device, dtype=torch.float32)
        for g in grads:
            sq += g.detach().float().pow(2).sum()
        if self.stage == 2:
            dist.all_reduce(sq)
        total = sq.sqrt()
        if max_norm > 0 and grads:
            scale = torch.clamp(max_norm / (total + eps), max=1.0)
            torch._foreach_mul_(grads, scale.to(grads[0].dtype))
        return total

    # ---- stepping ----------------------------------------------------------------------------
    @torch.no_grad()
    def step(self, closure=None):
        loss = closure_loss(closure)
        for group, local in zip(self.param_groups, self.local.param_groups, strict=False):
            local.update({k: v for k, v in group.items() if k != "params"})
        self.local.step()
        self._broadcast_parameters()
        return loss

    def _broadcast_parameters(self) -> None:
        """Each owner sends its freshly updated parameters to every other rank (one flat tensor)."""
        works = []
        for rank in range(self.world_size):
            params = self.owned(rank)
            if not params:
                continue
            for dtype in dict.fromkeys(p.dtype for p in params):
                same = [p for p in params if p.dtype == dtype]
                flat = _flatten_dense_tensors([p.data for p in same])
                works.append((same, flat, dist.broadcast(flat, src=rank, async_op=True)))
        for same, flat, work in works:
            work.wait()
            if self.owner[id(same[0])] != self.rank:
                for p, value in zip(same, _unflatten_dense_tensors(flat, [p.data for p in same]), strict=False):
                    p.data.copy_(value)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self._all_params():
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.zero_()

    # ---- state: sharded (same world size) and consolidated (any world size) ------------------
    def state_dict(self) -> dict:
        """This rank's shard: the local optimizer's state dict plus the layout it belongs to."""
        return {"local": self.local.state_dict(), "rank": self.rank, "world_size": self.world_size,
                "stage": self.stage, "param_groups": [{k: v for k, v in g.items() if k != "params"}
                                                      for g in self.param_groups]}

    def load_state_dict(self, state_dict: dict) -> None:
        if "local" not in state_dict:  # a consolidated (single-rank) optimizer state dict
            return self.load_full_state_dict(state_dict)
        if state_dict["world_size"] != self.world_size or state_dict["rank"] != self.rank:
            raise ValueError(f"sharded optimizer state of rank {state_dict['rank']}/{state_dict['world_size']} "
                             f"cannot be loaded on rank {self.rank}/{self.world_size}: load the consolidated "
                             "state dict instead (consolidate_state_dict)")
        for group, saved in zip(self.param_groups, state_dict["param_groups"], strict=False):
            group.update(saved)
        self.local.load_state_dict(state_dict["local"])

    def consolidate_state_dict(self, to: int = 0) -> dict | None:
        """The state dict an unsharded ``optimizer_cls`` over all parameters would have, on rank
        ``to`` (None elsewhere); parameter indices follow ``param_groups`` order. Collective."""
        index = {id(p): i for i, p in enumerate(self._all_params())}
        local_index = [index[id(p)] for g in self.local.param_groups for p in g["params"]]
        local_state = self.local.state_dict()["state"]
        mine = {local_index[i]: {k: (v.detach().cpu().clone() if torch.is_tensor(v) else v) for k, v in s.items()}
                for i, s in local_state.items()}
        gathered = [None] * self.world_size if self.rank == to else None
        dist.gather_object(mine, gathered, dst=to)
        if self.rank != to:
            return None
        state = {k: v for shard in gathered for k, v in shard.items()}
        groups = [{**{k: v for k, v in g.items() if k != "params"}, "params": [index[id(p)] for p in g["params"]]}
                  for g in self.param_groups]
        return {"state": dict(sorted(state.items())), "param_groups": groups}

    def load_full_state_dict(self, full: dict) -> None:
        """Take this rank's shard of a consolidated state dict (any world size saved it)."""
        params = self._all_params()
        if len(full["param_groups"]) != len(self.param_groups):
            raise ValueError(f"optimizer state has {len(full['param_groups'])} parameter groups, "
                             f"this optimizer {len(self.param_groups)}")
        index = {id(p): i for i, p in enumerate(params)}
        local_state, local_groups, n = {}, [], 0
        for group, saved in zip(self.param_groups, full["param_groups"], strict=False):
            group.update({k: v for k, v in saved.items() if k != "params"})
            ids = []
            for p in group["params"]:
                if self.owner[id(p)] == self.rank:
                    if index[id(p)] in full["state"]:
                        local_state[n] = full["state"][index[id(p)]]
                    ids.append(n)
                    n += 1
            local_groups.append({**{k: v for k, v in saved.items() if k != "params"}, "params": ids})
        device = params[0].device
        local_state = {i: {k: (v.to(device) if torch.is_tensor(v) and v.dim() else v) for k, v in s.items()}
                       for i, s in local_state.items()}
        self.local.load_state_dict({"state": local_state, "param_groups": local_groups})

    def state_bytes(self) -> int:
        """Bytes of optimizer state (moments, step counters) held by this rank."""
        return sum(v.numel() * v.element_size() for s in self.local.state.values() for v in s.values()
                   if torch.is_tensor(v))
