"""Loss math for SFT, GRPO and DPO as small pure functions (CS336 assignment 5 building blocks).

Names and semantics follow the CS336 A5 handout (``masked_normalize``, ``sft_microbatch_train_step``,
``compute_group_normalized_rewards``, ``compute_grpo_clip_loss``, ``grpo_microbatch_train_step``, ``dpo_loss``),
with the options TRL exposes and cites:

- GRPO: Shao et al. 2024, "DeepSeekMath" (group-normalized advantages, clipped surrogate, KL to a
  reference policy);
- Dr. GRPO: Liu et al. 2025, "Understanding R1-Zero-Like Training" (no std division, a constant
  length normalizer instead of each sequence's own length);
- DAPO: Yu et al. 2025 (asymmetric "clip-higher" ranges ``cliprange_low`` / ``cliprange_high``);
- k3 KL estimator: Schulman 2020, "Approximating KL Divergence" (blog);
- DPO: Rafailov et al. 2023, "Direct Preference Optimization".

Shapes: ``B`` sequences, ``T`` response positions, ``V`` vocabulary. Per-token losses are (B, T);
sequence-level rewards/advantages are (B,) or (B, 1) and broadcast over T. Metadata values are
detached tensors under namespaced keys, as TRL logs them. Nothing here runs a model: CS336's
``per_instance_dpo_loss``, which does, lives in ``alignment.core.preference``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

LOSS_TYPES = ("no_baseline", "reinforce_with_baseline", "grpo_clip")
LENGTH_NORMALIZATIONS = ("masked_mean", "constant")


def compute_entropy(logits: Tensor) -> Tensor:
    """Entropy (...,) of the next-token distribution softmax(logits (..., V)), in fp32.

    H = -Σ p log p with log p = logits - logsumexp(logits) (stable; -inf logits contribute 0)."""
    logits = logits.float()
    log_p = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
    log_p = log_p.clamp(min=torch.finfo(log_p.dtype).min)  # p = 0 entries: 0 * finite = 0
    return -(log_p.exp() * log_p).sum(dim=-1)


def masked_mean(tensor: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Σ(tensor · mask) / Σ mask over ``dim`` (all elements when None); an all-masked slice is nan."""
    mask = mask.to(tensor.dtype)
    return (tensor * mask).sum(dim=dim) / mask.sum(dim=dim)


def masked_normalize(tensor: Tensor, mask: Tensor, normalize_constant: float, dim: int | None = None) -> Tensor:
    """Σ(tensor · mask) over ``dim`` (all elements when None) divided by ``normalize_constant``."""
    return (tensor * mask.to(tensor.dtype)).sum(dim=dim) / normalize_constant


def _check_accumulation(gradient_accumulation_steps) -> None:
    if not isinstance(gradient_accumulation_steps, int) or gradient_accumulation_steps < 1:
        raise ValueError(f"gradient_accumulation_steps must be a positive integer, got {gradient_accumulation_steps!r}")


def sft_microbatch_train_step(policy_log_probs: Tensor, response_mask: Tensor, gradient_accumulation_steps: int,
                              normalize_constant: float = 1.0) -> tuple[Tensor, dict[str, Tensor]]:
    """One SFT microbatch (CS336 A5): NLL summed over each sequence's response tokens, divided by
    ``normalize_constant``, averaged over the batch and divided by the accumulation steps;
    calls ``backward`` (gradients add up across calls). Returns (detached loss, metadata)."""
    _check_accumulation(gradient_accumulation_steps)
    if normalize_constant == 0:
        raise ValueError("normalize_constant must be non-zero, got 0")
    per_sequence = masked_normalize(-policy_log_probs, response_mask, normalize_constant, dim=-1)  # (B,)
    loss = per_sequence.mean() / gradient_accumulation_steps
    loss.backward()
    with torch.no_grad():
        tokens = response_mask.sum()
        metadata = {
            "sft/loss": loss.detach() * gradient_accumulation_steps,
            "sft/nll_per_token": masked_mean(-policy_log_probs.detach(), response_mask),
            "sft/response_tokens": tokens.detach(),
        }
    return loss.detach(), metadata


# ---- GRPO ------------------------------------------------------------------------------------

def compute_group_normalized_rewards(
    reward_fn: Callable[[str, str], dict[str, float]],
    rollout_responses: Sequence[str],
    repeated_ground_truths: Sequence[str],
    group_size: int,
    advantage_eps: float,
    normalize_by_std: bool,
) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    """Group-normalized advantages (GRPO, Shao et al. 2024; Dr. GRPO drops the std, Liu et al. 2025).

    Responses come in consecutive groups of ``group_size`` answers to one prompt. With r the
    rewards of a group: A = (r - mean(r)) / (std(r) + eps), std the sample std (n - 1), or
    A = r - mean(r) when not ``normalize_by_std``. Returns (advantages (B,), raw rewards (B,), metadata)."""
    n = len(rollout_responses)
    if len(repeated_ground_truths) != n:
        raise ValueError(f"rollout_responses has {n} items but repeated_ground_truths has "
                         f"{len(repeated_ground_truths)}")
    if not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group_size must be a positive integer, got {group_size!r}")
    if normalize_by_std and group_size < 2:
        raise ValueError(f"group_size={group_size}: normalize_by_std needs groups of at least 2 (sample std)")
    if n == 0 or n % group_size:
        raise ValueError(f"{n} rollout responses do not split into groups of group_size={group_size}")
    scores = [reward_fn(r, t) for r, t in zip(rollout_responses, repeated_ground_truths, strict=False)]
    raw = torch.tensor([float(s["reward"]) for s in scores], dtype=torch.float32)
    fmt = torch.tensor([float(s.get("format_reward", 0.0)) for s in scores], dtype=torch.float32)
    ans = torch.tensor([float(s.get("answer_reward", 0.0)) for s in scores], dtype=torch.float32)
    grouped = raw.view(-1, group_size)  # (n_prompts, G)
    centered = grouped - grouped.mean(dim=-1, keepdim=True)
    group_std = grouped.std(dim=-1, keepdim=True) if group_size > 1 else torch.zeros_like(grouped[:, :1])
    advantages = centered / (group_std + advantage_eps) if normalize_by_std else centered
    advantages = advantages.reshape(-1)
    metadata = {
        "rewards/mean": raw.mean(),
        "rewards/std": raw.std() if n > 1 else torch.tensor(0.0),
        "rewards/max": raw.max(),
        "rewards/min": raw.min(),
        "rewards/format_mean": fmt.mean(),
        "rewards/answer_mean": ans.mean(),
        "rewards/group_std_mean": group_std.mean(),  # mean within-group spread of the rewards
        "rewards/frac_zero_std": (group_std == 0).float().mean(),  # groups with no learning signal
        "advantages/mean": advantages.mean(),
        "advantages/std": advantages.std() if n > 1 else torch.tensor(0.0),
    }
    return advantages, raw, metadata


def _per_sequence(values: Tensor, like: Tensor) -> Tensor:
    """Sequence-level (B,) or (B, 1) values as (B, 1) to broadcast over ``like`` (B, T)."""
    values = values.to(device=like.device, dtype=like.dtype)
    if values.dim() == like.dim() - 1:
        values = values.unsqueeze(-1)
    return values


def compute_naive_policy_gradient_loss(raw_rewards_or_advantages: Tensor, policy_log_probs: Tensor) -> Tensor:
    """REINFORCE per-token loss -A · log π(o_t) (B, T) (Williams 1992; CS336 A5), with A the raw
    reward (no baseline) or a group-normalized advantage (Shao et al. 2024)."""
    return -_per_sequence(raw_rewards_or_advantages, policy_log_probs) * policy_log_probs


def compute_grpo_clip_loss(advantages: Tensor, policy_log_probs: Tensor, old_log_probs: Tensor,
                           cliprange: float | None, *, cliprange_low: float | None = None,
                           cliprange_high: float | None = None) -> tuple[Tensor, dict[str, Tensor]]:
    """Clipped surrogate per token (GRPO, Shao et al. 2024; PPO's clip, Schulman et al. 2017):
    -min(ρ A, clip(ρ, 1 - ε_low, 1 + ε_high) A), ρ = exp(log π - log π_old).

    ε_low = ``cliprange_low`` or ``cliprange``; ε_high = ``cliprange_high`` or ``cliprange``
    (DAPO's clip-higher, Yu et al. 2025, uses ε_high > ε_low). Metadata: ``clipped`` (B, T), true
    where the clipped term was taken (it is strictly smaller, so the token has no gradient),
    ``clipped_low``/``clipped_high`` by side, and ``clip_fraction`` over all B·T tokens."""
    low = cliprange if cliprange_low is None else cliprange_low
    high = cliprange if cliprange_high is None else cliprange_high
    if low is None or high is None:
        raise ValueError("compute_grpo_clip_loss needs cliprange (or both cliprange_low and cliprange_high)")
    if low < 0 or high < 0:
        raise ValueError(f"clip ranges must be >= 0, got cliprange_low={low}, cliprange_high={high}")
    adv = _per_sequence(advantages, policy_log_probs)
    ratio = torch.exp(policy_log_probs - old_log_probs)
    unclipped = ratio * adv
    clipped_term = ratio.clamp(1.0 - low, 1.0 + high) * adv
    loss = -torch.minimum(unclipped, clipped_term)
    with torch.no_grad():
        clipped = clipped_term < unclipped
        below = ratio < 1.0 - low
        metadata = {
            "clipped": clipped,
            "clipped_low": clipped & below,
            "clipped_high": clipped & ~below,
            "clip_fraction": clipped.float().mean(),
            "ratio_mean": ratio.detach().mean(),
        }
    return loss, metadata


def compute_kl_penalty(policy_log_probs: Tensor, ref_log_probs: Tensor) -> Tensor:
    """Per-token k3 estimate of KL(π || π_ref) (Schulman 2020; used by GRPO, Shao et al. 2024):
    exp(log π_ref - log π) - (log π_ref - log π) - 1, unbiased and always >= 0."""
    delta = ref_log_probs - policy_log_probs
    return torch.exp(delta) - delta - 1.0


def compute_policy_gradient_loss(policy_log_probs: Tensor, loss_type: str, raw_rewards: Tensor | None = None,
                                 advantages: Tensor | None = None, old_log_probs: Tensor | None = None,
                                 cliprange: float | None = None, *, cliprange_low: float | None = None,
                                 cliprange_high: float | None = None) -> tuple[Tensor, dict[str, Tensor]]:
    """Per-token policy-gradient loss (B, T) for ``loss_type`` (CS336 A5 dispatcher):

    - ``no_baseline``: -r · log π (REINFORCE on raw rewards; needs ``raw_rewards``);
    - ``reinforce_with_baseline``: -A · log π (group-normalized advantages, Shao et al. 2024;
      needs ``advantages``);
    - ``grpo_clip``: the clipped surrogate of ``compute_grpo_clip_loss`` (needs ``advantages``,
      ``old_log_probs`` and ``cliprange`` or both of ``cliprange_low``/``cliprange_high``)."""
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"loss_type={loss_type!r}: expected one of {', '.join(LOSS_TYPES)}")
    has_range = cliprange is not None or (cliprange_low is not None and cliprange_high is not None)
    given = {"raw_rewards": raw_rewards, "advantages": advantages, "old_log_probs": old_log_probs,
             "cliprange": 0.0 if has_range else None}
    needed = {"no_baseline": ["raw_rewards"], "reinforce_with_baseline": ["advantages"],
              "grpo_clip": ["advantages", "old_log_probs", "cliprange"]}[loss_type]
    missing = [name for name in needed if given[name] is None]
    if missing:
        raise ValueError(f"loss_type={loss_type!r} needs {', '.join(missing)} (got None)")
    if loss_type != "grpo_clip":
        return compute_naive_policy_gradient_loss(raw_rewards if loss_type == "no_baseline" else advantages,
                                                  policy_log_probs), {}
    return compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange,
                                  cliprange_low=cliprange_low, cliprange_high=cliprange_high)


def grpo_microbatch_train_step(
    policy_log_probs: Tensor,
    response_mask: Tensor,
    gradient_accumulation_steps: int,
    loss_type: str,
    raw_rewards: Tensor | None = None,
    advantages: Tensor | None = None,
    old_log_probs: Tensor | None = None,
    cliprange: float | None = None,
    *,
    length_normalization: str = "masked_mean",
    normalize_constant: float | None = None,
    ref_log_probs: Tensor | None = None,
    kl_coef: float = 0.0,
    cliprange_low: float | None = None,
    cliprange_high: float | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """One GRPO microbatch (CS336 A5): per-token loss (+ ``kl_coef`` · k3 KL to ``ref_log_probs``,
    Shao et al. 2024) -> per sequence ``masked_mean`` over response tokens, or with
    ``length_normalization="constant"`` the masked sum / ``normalize_constant`` (Dr. GRPO, Liu et
    al. 2025; default: the padded length T) -> mean over the batch -> / accumulation steps ->
    ``backward``. A sequence without response tokens gives nan under ``masked_mean``.
    Returns (detached loss, metadata)."""
    _check_accumulation(gradient_accumulation_steps)
    if length_normalization not in LENGTH_NORMALIZATIONS:
        raise ValueError(f"length_normalization={length_normalization!r}: expected one of {LENGTH_NORMALIZATIONS}")
    if kl_coef and ref_log_probs is None:
        raise ValueError(f"kl_coef={kl_coef} needs ref_log_probs (got None)")
    per_token, pg_meta = compute_policy_gradient_loss(
        policy_log_probs, loss_type, raw_rewards, advantages, old_log_probs, cliprange,
        cliprange_low=cliprange_low, cliprange_high=cliprange_high)
    metadata: dict[str, Tensor] = {}
    if ref_log_probs is not None:
        kl = compute_kl_penalty(policy_log_probs, ref_log_probs)
        if kl_coef:
            per_token = per_token + kl_coef * kl
        metadata["policy/kl"] = masked_mean(kl.detach(), response_mask)
    if length_normalization == "masked_mean":
        per_sequence = masked_mean(per_token, response_mask, dim=-1)  # (B,)
    else:
        constant = response_mask.shape[-1] if normalize_constant is None else normalize_constant
        if constant == 0:
            raise ValueError("normalize_constant must be non-zero, got 0")
        per_sequence = masked_normalize(per_token, response_mask, constant, dim=-1)  # (B,)
    loss = per_sequence.mean() / gradient_accumulation_steps
    loss.backward()
    with torch.no_grad():
        metadata["policy/loss"] = loss.detach() * gradient_accumulation_steps
        metadata["policy/response_tokens"] = response_mask.sum().detach()
        if "clipped" in pg_meta:
            for side in ("", "_low", "_high"):
                metadata[f"policy/clip_fraction{side}"] = masked_mean(pg_meta[f"clipped{side}"].float(), response_mask)
            metadata["policy/clipped"] = pg_meta["clipped"]
    return loss.detach(), metadata


# ---- DPO -------------------------------------------------------------------------------------

def dpo_loss(policy_chosen_logps: Tensor, policy_rejected_logps: Tensor, ref_chosen_logps: Tensor,
             ref_rejected_logps: Tensor, beta: float = 0.1) -> tuple[Tensor, dict[str, Tensor]]:
    """Batched DPO loss (Rafailov et al. 2023) from summed response log-probs (B,):
    mean of -log σ(β[(log π(y_w) - log π_ref(y_w)) - (log π(y_l) - log π_ref(y_l))]).

    Metrics (TRL's names): rewards/chosen and rewards/rejected (β · log-ratio, batch means),
    rewards/margins, rewards/accuracies (chosen reward > rejected reward), logps/chosen, logps/rejected."""
    chosen_rewards = beta * (policy_chosen_logps - ref_chosen_logps)
    rejected_rewards = beta * (policy_rejected_logps - ref_rejected_logps)
    margins = chosen_rewards - rejected_rewards
    loss = -F.logsigmoid(margins).mean()
    with torch.no_grad():
        metrics = {
            "rewards/chosen": chosen_rewards.detach().mean(),
            "rewards/rejected": rejected_rewards.detach().mean(),
            "rewards/margins": margins.detach().mean(),
            "rewards/accuracies": (margins.detach() > 0).float().mean(),
            "logps/chosen": policy_chosen_logps.detach().mean(),
            "logps/rejected": policy_rejected_logps.detach().mean(),
        }
    return loss, metrics

