"""AdamW, learning-rate schedules, global-norm gradient clipping and the one optimizer step of pretraining and
alignment.

AdamW is Loshchilov & Hutter 2019's decoupled weight decay in the CS336 handout's order: the
bias correction folded into the step size as in Kingma & Ba 2015 §2, α_t = α·√(1−β₂ᵗ)/(1−β₁ᵗ),
θ ← θ − α_t·m/(√v+ε), then θ ← θ − α·λ·θ (torch.optim.AdamW decays first and puts ε on √v̂;
the two differ by O(α²λ) per step).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch import Tensor


def closure_loss(closure) -> torch.Tensor | None:
    """The loss of an optimizer step's ``closure`` (run with gradients on, as torch.optim's contract says), or None."""
    if closure is None:
        return None
    with torch.enable_grad():
        return closure()


class AdamW(torch.optim.Optimizer):
    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01):
        if lr < 0:
            raise ValueError(f"AdamW: lr must be >= 0, got {lr}")
        if not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError(f"AdamW: betas must be in [0, 1), got {betas}")
        if eps <= 0:
            raise ValueError(f"AdamW: eps must be > 0, got {eps}")
        if weight_decay < 0:
            raise ValueError(f"AdamW: weight_decay must be >= 0, got {weight_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure_loss(closure)
        for group in self.param_groups:
            lr, (beta1, beta2), eps, decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            params, grads, exp_avgs, exp_avg_sqs = [], [], [], []
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("AdamW does not support sparse gradients")
                state = self.state[p]
                if not state:
                    state["step"] = torch.tensor(0.0)  # a tensor so state_dict round-trips with weights_only
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
                params.append(p)
                grads.append(p.grad)
                exp_avgs.append(state["exp_avg"])
                exp_avg_sqs.append(state["exp_avg_sq"])
            if not params:
                continue
            # All parameters of a group share the step count unless some skipped steps (no grad);
            # update per distinct step count, each with the vectorized foreach ops.
            for t in sorted({int(self.state[p]["step"]) for p in params}):
                idx = [i for i, p in enumerate(params) if int(self.state[p]["step"]) == t]
                ps, gs = [params[i] for i in idx], [grads[i] for i in idx]
                ms, vs = [exp_avgs[i] for i in idx], [exp_avg_sqs[i] for i in idx]
                torch._foreach_lerp_(ms, gs, 1 - beta1)  # m ← β₁m + (1−β₁)g
                torch._foreach_mul_(vs, beta2)
                torch._foreach_addcmul_(vs, gs, gs, value=1 - beta2)  # v ← β₂v + (1−β₂)g²
                step_size = lr * math.sqrt(1 - beta2**t) / (1 - beta1**t)
                denom = torch._foreach_sqrt(vs)
                torch._foreach_add_(denom, eps)
                torch._foreach_addcdiv_(ps, ms, denom, value=-step_size)  # θ ← θ − α_t m/(√v+ε)
                if decay:
                    torch._foreach_mul_(ps, 1 - lr * decay)  # θ ← θ − αλθ
        return loss


def cosine_schedule(t: int, max_lr: float, min_lr: float, warmup_iters: int, cosine_iters: int) -> float:
    """Linear warmup to max_lr over warmup_iters, cosine decay to min_lr at cosine_iters, then min_lr."""
    if t < warmup_iters:
        return t / warmup_iters * max_lr
    if t <= cosine_iters:
        if cosine_iters == warmup_iters:
            return min_lr
        progress = (t - warmup_iters) / (cosine_iters - warmup_iters)
        return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (max_lr - min_lr)
    return min_lr


def wsd_decay_start(total_iters: int, warmup_iters: int, decay_fraction: float) -> int:
    """The first step of a WSD run's decay: the last ``decay_fraction`` of ``total_iters`` (never inside warmup)."""
    return max(warmup_iters, total_iters - int(round(decay_fraction * total_iters)))


def wsd_schedule(t: int, max_lr: float, min_lr: float, warmup_iters: int, total_iters: int,
                 decay_fraction: float = 0.2, decay_shape: str = "linear") -> float:
    """Warmup-stable-decay (Hu et al. 2024, MiniCPM): linear warmup, constant max_lr, then a decay to min_lr over
    the last ``decay_fraction`` of training, ``linear`` or ``1-sqrt`` (lr falls as 1 - sqrt(progress): Hägele et
    al. 2024, whose cooldowns of ~20% match a cosine run of the same length). Before the decay it does not depend
    on ``total_iters``, so a run branched off a constant-LR trunk at its decay start equals a straight run."""
    if t < warmup_iters:
        return t / warmup_iters * max_lr
    decay_start = wsd_decay_start(total_iters, warmup_iters, decay_fraction)
    if t < decay_start:
        return max_lr
    if t >= total_iters:
        return min_lr
    progress = (t - decay_start) / max(1, total_iters - decay_start)
    if decay_shape == "1-sqrt":
        progress = math.sqrt(progress)
    return max_lr + progress * (min_lr - max_lr)


def clip_grad_norm(parameters: Iterable[torch.nn.Parameter], max_norm: float, eps: float = 1e-6) -> Tensor:
    """Scale all gradients by max_norm/(‖g‖₂+ε) when their global L2 norm exceeds max_norm.

    Returns the norm before clipping (a tensor; NaN/inf when a gradient is not finite)."""
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return torch.tensor(0.0)
    norms = torch._foreach_norm(grads)
    total = torch.linalg.vector_norm(torch.stack([n.to(grads[0].device).float() for n in norms]))
    if max_norm > 0:
        scale = torch.clamp(max_norm / (total + eps), max=1.0)
        torch._foreach_mul_(grads, scale.to(grads[0].dtype))
    return total


def optimizer_step(optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler | None = None) -> None:
    """Apply the gradients, through the AMP ``scaler`` when there is one (it skips an update whose gradients are not
    finite and adjusts its scale), then drop them. Pretraining (``model.train``) and alignment (``alignment.loop``)
    both step here, each after clipping its gradients."""
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
