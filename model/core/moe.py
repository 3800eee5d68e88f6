"""Mixture-of-experts feed-forward layer: token-choice top-k routing over SwiGLU experts.

Follows Switch Transformer (Fedus et al. 2021) and GShard (Lepikhin et al. 2020) for routing,
capacity and the load-balancing loss, and ST-MoE (Zoph et al. 2022) for the router z-loss;
the dispatch mirrors the capacity-buffer formulation of Mesh-TensorFlow / GShard, written with
sort + index_add instead of one-hot einsums.

Per token: router logits (fp32) → softmax probs → top-k experts; gate weights are the top-k
probs renormalised to sum to 1. Each expert has ``C = ceil(capacity_factor · tokens · top_k / E)``
slots (no limit when the factor is None). When an expert overflows, slots go by priority
(GShard/Switch convention): every token's 1st choice before any token's 2nd choice, and within
one choice rank earlier tokens (flattened B·T order) first. A dropped assignment contributes
nothing — the block's residual connection carries the token — and the token's remaining gate
weights are NOT renormalised after the drop.

Dispatch: each kept assignment gets a slot ``expert·C + rank-within-expert`` in an (E, C, d)
buffer (tokens copied there with index_add), the experts run as three batched matmuls
(torch.bmm over E), and outputs are added back to their tokens, weighted by the gates, with
index_add. No Python loop over tokens or experts.

After each forward, ``aux_loss`` holds moe_aux_loss_coef·switch_loss + moe_z_loss_coef·z_loss
(in the graph) and ``stats`` plain floats: per-expert ``load`` (fraction of all assignments that
were kept, per expert), ``dropped_fraction``, ``switch_loss`` and ``z_loss``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from model.core.config import ModelConfig
from model.core.layers import Linear, silu, trunc_normal_


def expert_capacity(capacity_factor: float | None, tokens: int, top_k: int, n_experts: int) -> int | None:
    """Slots per expert: ceil(capacity_factor · tokens · top_k / n_experts); None = no limit."""
    if capacity_factor is None:
        return None
    return math.ceil(capacity_factor * tokens * top_k / n_experts)


def switch_loss(probs: Tensor, expert_idx: Tensor, n_experts: int) -> Tensor:
    """Switch load-balancing loss E · Σ_i f_i · P_i (Fedus et al. 2021, eq. 4), top-k form.

    probs: (N, E) router probabilities; expert_idx: (N, k) chosen experts (before any capacity
    drop). f_i = share of the N·k assignments sent to expert i, P_i = mean probability of i.
    Equals 1 for a perfectly uniform router; differentiable through P only."""
    counts = torch.bincount(expert_idx.reshape(-1), minlength=n_experts).to(probs.dtype)  # (E,)
    f = counts / max(expert_idx.numel(), 1)
    return n_experts * (f * probs.mean(dim=0)).sum()


def router_z_loss(logits: Tensor) -> Tensor:
    """Mean over tokens of logsumexp(logits)² (Zoph et al. 2022, ST-MoE eq. 5)."""
    return torch.logsumexp(logits, dim=-1).pow(2).mean()


def assignment_slots(expert_idx: Tensor, n_experts: int) -> tuple[Tensor, Tensor]:
    """Rank of each assignment within its expert, in priority order, and the per-expert counts.

    expert_idx: (N, k). Assignments are ordered choice-rank major (all 1st choices, then all 2nd
    choices, ...), tokens in order within a rank. Returns (rank (k·N,), counts (E,)) where entry
    r·N + n of ``rank`` belongs to token n's r-th choice."""
    flat = expert_idx.t().reshape(-1)  # (k·N,) choice-rank major
    sorted_expert, order = torch.sort(flat, stable=True)  # stable: keeps priority order per expert
    counts = torch.bincount(flat, minlength=n_experts)  # (E,)
    starts = torch.cumsum(counts, 0) - counts  # (E,) first sorted position of each expert
    rank = torch.empty_like(flat)
    rank[order] = torch.arange(flat.numel(), device=flat.device) - starts[sorted_expert]
    return rank, counts


class MoEFeedForward(nn.Module):
    """Token-choice top-k mixture of ``cfg.n_experts`` SwiGLU experts of width ``cfg.d_ff``."""

    def __init__(self, cfg: ModelConfig, device=None, dtype=None):
        super().__init__()
        E, d, f = cfg.n_experts, cfg.d_model, cfg.d_ff
        self.n_experts, self.top_k = E, cfg.moe_top_k
        self.capacity_factor = cfg.moe_capacity_factor
        self.aux_loss_coef, self.z_loss_coef = cfg.moe_aux_loss_coef, cfg.moe_z_loss_coef
        self.router = Linear(d, E, device=device, dtype=dtype)
        # stacked expert weights, each laid out like model.core.layers.Linear: (E, d_out, d_in)
        self.w1 = nn.Parameter(torch.empty(E, f, d, device=device, dtype=dtype))
        self.w3 = nn.Parameter(torch.empty(E, f, d, device=device, dtype=dtype))
        self.w2 = nn.Parameter(torch.empty(E, d, f, device=device, dtype=dtype))
        std = math.sqrt(2.0 / (d + f))
        for w in (self.w1, self.w3, self.w2):
            trunc_normal_(w, std)
        self.aux_loss: Tensor | None = None
        self.stats: dict = {}

    def extra_repr(self) -> str:
        E, f, d = self.w1.shape
        return f"n_experts={E}, top_k={self.top_k}, d_model={d}, d_ff={f}, capacity_factor={self.capacity_factor}"

    def forward(self, x: Tensor) -> Tensor:
        B, T, d = x.shape
        E, k = self.n_experts, self.top_k
        N = B * T
        x_flat = x.reshape(N, d)  # (N, d)

        # router in fp32 (or wider), outside autocast: routing decisions are precision-sensitive
        router_dtype = torch.promote_types(x.dtype, torch.float32)
        with torch.autocast(x.device.type, enabled=False):
            logits = x_flat.to(router_dtype) @ self.router.weight.to(router_dtype).T  # (N, E)
        probs = torch.softmax(logits, dim=-1)
        top_p, top_idx = probs.topk(k, dim=-1)  # (N, k)
        gates = top_p / top_p.sum(dim=-1, keepdim=True)  # renormalised over the top-k

        if N == 0:
            zero = logits.sum()
            self.aux_loss = zero
            self.stats = dict(load=[0.0] * E, dropped_fraction=0.0, switch_loss=0.0, z_loss=0.0)
            return x.new_zeros(B, T, d)

        rank, counts = assignment_slots(top_idx, E)  # (k·N,), (E,)
        capacity = expert_capacity(self.capacity_factor, N, k, E)
        capacity = int(counts.max()) if capacity is None else min(capacity, N)  # an expert gets <= N
        expert = top_idx.t().reshape(-1)  # (k·N,) same order as rank
        token = torch.arange(N, device=x.device).repeat(k)  # (k·N,)
        gate = gates.t().reshape(-1)  # (k·N,)
        keep = rank < capacity
        expert, token, gate, slot = expert[keep], token[keep], gate[keep], expert[keep] * capacity + rank[keep]

        # dispatch: (E·C, d) buffer, empty slots stay zero
        buffer = x_flat.new_zeros(E * capacity, d).index_add(0, slot, x_flat[token])
        buffer = buffer.view(E, capacity, d)  # (E, C, d)
        h = silu(torch.bmm(buffer, self.w1.transpose(1, 2))) * torch.bmm(buffer, self.w3.transpose(1, 2))  # (E, C, f)
        out = torch.bmm(h, self.w2.transpose(1, 2)).reshape(E * capacity, d)  # (E·C, d)

        # combine: gate-weighted sum over each token's kept assignments (fp32 accumulation)
        weighted = out[slot].float() * gate[:, None].float()  # (kept, d)
        y = weighted.new_zeros(N, d).index_add(0, token, weighted).to(out.dtype)

        z = router_z_loss(logits)
        sw = switch_loss(probs, top_idx, E)
        self.aux_loss = self.aux_loss_coef * sw + self.z_loss_coef * z
        kept = torch.bincount(expert, minlength=E)  # (E,)
        total = N * k
        summary = torch.cat([kept.to(torch.float64) / total,
                             torch.stack([1 - kept.sum().double() / total, sw.detach().double(), z.detach().double()])])
        *load, dropped, sw_val, z_val = summary.tolist()  # the one host sync of the stats
        self.stats = dict(load=load, dropped_fraction=dropped, switch_loss=sw_val, z_loss=z_val)
        return y.view(B, T, d)
