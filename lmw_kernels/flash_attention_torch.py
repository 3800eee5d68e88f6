"""FlashAttention-2 in plain PyTorch: the readable reference the Triton kernel is tested against.

Dao 2023, "FlashAttention-2", algorithms 1 (forward) and 2 (backward); CS336 assignment 2. The
forward walks query tiles and, inside each, key tiles with an online softmax, so no (S × S) matrix
exists; it saves the output O and the row log-sum-exp L. The backward recomputes every tile's
probabilities P = exp(S − L) from Q, K, L and uses D = rowsum(dO ⊙ O) in place of rowsum(dP ⊙ P).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def naive_attention(q: Tensor, k: Tensor, v: Tensor, is_causal: bool = False) -> Tensor:
    """softmax(Q Kᵀ / √d) V with an upper-triangular −inf mask when causal; fp32 scores."""
    scores = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if is_causal:
        n, m = scores.shape[-2:]
        scores = scores.masked_fill(torch.ones(n, m, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v.float()).to(q.dtype)


def _tile_scores(q: Tensor, k: Tensor, scale: float, q0: int, k0: int, is_causal: bool) -> Tensor:
    """Scaled scores of one (query tile, key tile), −inf where a key lies after its query."""
    scores = (q @ k.transpose(-2, -1)) * scale
    if is_causal:
        rows = torch.arange(q0, q0 + q.shape[-2], device=q.device)[:, None]
        cols = torch.arange(k0, k0 + k.shape[-2], device=q.device)[None, :]
        scores = scores.masked_fill(cols > rows, float("-inf"))
    return scores


def flash_forward_torch(q: Tensor, k: Tensor, v: Tensor, is_causal: bool = False,
                        block_q: int = 64, block_k: int = 64) -> tuple[Tensor, Tensor]:
    """(O, L): O like q, L (..., n_queries) fp32 natural-log log-sum-exp of the scaled scores."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    qf, kf, vf = q.float(), k.float(), v.float()
    n, m = q.shape[-2], k.shape[-2]
    out = torch.empty_like(qf)
    lse = torch.empty(q.shape[:-1], dtype=torch.float32, device=q.device)
    for q0 in range(0, n, block_q):
        qi = qf[..., q0:q0 + block_q, :]
        row_max = torch.full(qi.shape[:-1], float("-inf"), device=q.device)
        row_sum = torch.zeros(qi.shape[:-1], device=q.device)
        acc = torch.zeros_like(qi)
        k_end = min(m, q0 + block_q) if is_causal else m  # causal: tiles past the diagonal are all −inf
        for k0 in range(0, k_end, block_k):
            scores = _tile_scores(qi, kf[..., k0:k0 + block_k, :], scale, q0, k0, is_causal)
            new_max = torch.maximum(row_max, scores.amax(dim=-1))
            p = torch.exp(scores - new_max[..., None])
            correction = torch.exp(row_max - new_max)
            row_sum = row_sum * correction + p.sum(dim=-1)
            acc = acc * correction[..., None] + p @ vf[..., k0:k0 + block_k, :]
            row_max = new_max
        out[..., q0:q0 + block_q, :] = acc / row_sum[..., None]
        lse[..., q0:q0 + block_q] = row_max + torch.log(row_sum)
    return out.to(q.dtype), lse


def flash_backward_torch(q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor, grad_out: Tensor,
                         is_causal: bool = False, block_q: int = 64,
                         block_k: int = 64) -> tuple[Tensor, Tensor, Tensor]:
    """dQ, dK, dV by recomputation, tile by tile, in fp32; returned in the inputs' dtypes."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    qf, kf, vf, do = q.float(), k.float(), v.float(), grad_out.float()
    delta = (do * out.float()).sum(dim=-1)  # D = rowsum(dO ⊙ O) = rowsum(dP ⊙ P)
    dq, dk, dv = torch.zeros_like(qf), torch.zeros_like(kf), torch.zeros_like(vf)
    n, m = q.shape[-2], k.shape[-2]
    for k0 in range(0, m, block_k):
        kj, vj = kf[..., k0:k0 + block_k, :], vf[..., k0:k0 + block_k, :]
        q_start = (k0 // block_q) * block_q if is_causal else 0  # earlier query tiles see none of these keys
        for q0 in range(q_start, n, block_q):
            rows = slice(q0, q0 + block_q)
            p = torch.exp(_tile_scores(qf[..., rows, :], kj, scale, q0, k0, is_causal) - lse[..., rows, None])
            dv[..., k0:k0 + block_k, :] += p.transpose(-2, -1) @ do[..., rows, :]
            dp = do[..., rows, :] @ vj.transpose(-2, -1)
            ds = p * (dp - delta[..., rows, None]) * scale
            dq[..., rows, :] += ds @ kj
            dk[..., k0:k0 + block_k, :] += ds.transpose(-2, -1) @ qf[..., rows, :]
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


class FlashAttentionTorch(torch.autograd.Function):
    """Tiled FlashAttention-2 in PyTorch; ``.apply(q, k, v, is_causal=False)`` on (..., seq, d)."""

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, is_causal: bool = False) -> Tensor:
        out, lse = flash_forward_torch(q, k, v, is_causal)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.is_causal = is_causal
        return out

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        q, k, v, out, lse = ctx.saved_tensors
        return (*flash_backward_torch(q, k, v, out, lse, grad_out, ctx.is_causal), None)
