"""The Transformer's building blocks, written from scratch (CS336 assignment 1, Llama layout).

Reference path uses no nn.Linear / nn.Embedding / F.scaled_dot_product_attention; the `sdpa`
and `triton` attention switches and the `triton` norm and FFN switches are opt-in fast paths
(lmw_kernels/ holds the Triton kernels).
Attention variants: grouped-query / multi-query attention (Ainslie et al. 2023, "GQA"; Shazeer
2019, "MQA"), and sliding-window causal attention (Beltagy et al. 2020, "Longformer"; Jiang et al.
2023, "Mistral 7B"): query i sees keys j with i - window < j <= i.
"""

from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def trunc_normal_(weight: Tensor, std: float) -> Tensor:
    return nn.init.trunc_normal_(weight, mean=0.0, std=std, a=-3 * std, b=3 * std)


class Linear(nn.Module):
    """y = x Wᵀ, W of shape (d_out, d_in), no bias; init N(0, 2/(d_in+d_out)) clipped at ±3σ."""

    def __init__(self, d_in: int, d_out: int, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d_out, d_in, device=device, dtype=dtype))
        trunc_normal_(self.weight, math.sqrt(2.0 / (d_in + d_out)))

    def forward(self, x: Tensor) -> Tensor:
        return x @ self.weight.T

    def extra_repr(self) -> str:
        d_out, d_in = self.weight.shape
        return f"d_in={d_in}, d_out={d_out}"


class Embedding(nn.Module):
    """Lookup table (num_embeddings, d); init N(0, 1) clipped at ±3."""

    def __init__(self, num_embeddings: int, embedding_dim: int, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        trunc_normal_(self.weight, 1.0)

    def forward(self, token_ids: Tensor) -> Tensor:
        return self.weight[token_ids]


def rms_norm_ref(x: Tensor, weight: Tensor, eps: float = 1e-5) -> Tensor:
    """x / RMS(x) · g, computed in fp32 and cast back to x's dtype."""
    x32 = x.float()
    normed = x32 * torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (normed * weight.float()).to(x.dtype)


class RMSNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5, impl: str = "torch", device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))
        self._norm = rms_norm_ref
        self._add_norm = None
        if impl == "triton":
            with kernel_import("norm='triton'", "lmw_kernels.rmsnorm.rms_norm"):
                from lmw_kernels.rmsnorm import add_rms_norm, rms_norm
            self._norm, self._add_norm = rms_norm, add_rms_norm

    def forward(self, x: Tensor) -> Tensor:
        if self._add_norm is not None:
            return self._norm(x, self.weight, self.eps, _autocast_dtype(x))
        return self._norm(x, self.weight, self.eps)

    def add_forward(self, x: Tensor, delta: Tensor) -> tuple[Tensor, Tensor]:
        """(x + delta, norm(x + delta)): the residual add and this norm, one fused kernel with norm='triton'."""
        if self._add_norm is not None:
            return self._add_norm(x, delta, self.weight, self.eps, _autocast_dtype(x))
        x = x + delta
        return x, self(x)


def _autocast_dtype(x: Tensor) -> torch.dtype | None:
    """Under autocast the norm's output only feeds matmuls, which read it in the autocast dtype: the Triton norm
    stores it in that dtype directly (the same values a cast would give; no cast kernel either way)."""
    return torch.get_autocast_dtype(x.device.type) if torch.is_autocast_enabled(x.device.type) else None


def silu(x: Tensor) -> Tensor:
    return x * torch.sigmoid(x)


def silu_mul(a: Tensor, b: Tensor) -> Tensor:
    return silu(a) * b


class SwiGLU(nn.Module):
    """FFN(x) = W2(SiLU(W1 x) ⊙ W3 x) (Shazeer 2020); impl='triton' fuses SiLU(a) ⊙ b into one kernel."""

    def __init__(self, d_model: int, d_ff: int, impl: str = "torch", fused_projections: bool = False,
                 device=None, dtype=None):
        super().__init__()
        self.w1 = Linear(d_model, d_ff, device=device, dtype=dtype)
        self.w2 = Linear(d_ff, d_model, device=device, dtype=dtype)
        self.w3 = Linear(d_model, d_ff, device=device, dtype=dtype)
        self.fused_projections = fused_projections
        self._activation = silu_mul
        self._packed = lambda h: silu_mul(*h.chunk(2, dim=-1))
        if impl == "triton":
            with kernel_import("ffn='triton'", "lmw_kernels.swiglu.swiglu"):
                from lmw_kernels.swiglu import swiglu, swiglu_packed
            self._activation, self._packed = swiglu, swiglu_packed

    def forward(self, x: Tensor) -> Tensor:
        if self.fused_projections:  # one (d_model -> 2·d_ff) GEMM instead of two; the activation reads both halves
            return self.w2(self._packed(fused_linear(x, self.w1.weight, self.w3.weight)))
        return self.w2(self._activation(self.w1(x), self.w3(x)))


def fused_linear(x: Tensor, *weights: Tensor) -> Tensor:
    """x @ [W_1; W_2; ...]ᵀ: the projections that read the same input as one GEMM (the weights are concatenated
    each call, a copy of a few MB; their gradients come back as slices). Same math as the separate products."""
    return x @ torch.cat(weights).T


class RotaryEmbedding(nn.Module):
    """RoPE (Su et al. 2021) rotating consecutive pairs (x[2i], x[2i+1]) by angle p·θ^(-2i/d)."""

    def __init__(self, theta: float, d_head: int, max_seq_len: int, device=None):
        super().__init__()
        self.max_seq_len = max_seq_len
        inv_freq = theta ** (-torch.arange(0, d_head, 2, device=device, dtype=torch.float64) / d_head)
        angles = torch.arange(max_seq_len, device=device, dtype=torch.float64)[:, None] * inv_freq  # (S, d/2)
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)

    def forward(self, x: Tensor, positions: Tensor) -> Tensor:
        """x: (..., seq, d_head); positions: broadcastable to (..., seq), any integer positions."""
        # Checked on CPU only: on CUDA the check would sync every layer (TransformerLM checks once).
        if positions.device.type == "cpu" and positions.numel() and int(positions.max()) >= self.max_seq_len:
            raise ValueError(f"position {int(positions.max())} is beyond the RoPE table "
                             f"(context_length={self.max_seq_len})")
        cos, sin = self.cos[positions], self.sin[positions]  # (..., seq, d/2)
        x1, x2 = x[..., 0::2].float(), x[..., 1::2].float()
        rotated = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)  # (..., seq, d/2, 2)
        return rotated.flatten(-2).to(x.dtype)


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    """Numerically stable softmax: subtract the max before exponentiating."""
    shifted = x - x.amax(dim=dim, keepdim=True).detach()  # the shift cancels: no gradient needed
    exp = shifted.exp()
    return exp / exp.sum(dim=dim, keepdim=True)


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> Tensor:
    """softmax(Q Kᵀ / √d) V; q: (..., n, d), k/v: (..., m, d), mask: (..., n, m) bool, True = attend."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., n, m)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return softmax(scores, dim=-1) @ v


@contextlib.contextmanager
def kernel_import(switch: str, kernel: str):
    """Around a kernel's import inside the layer that asks for it (so the model imports without Triton; an import
    statement, so lint-imports and the DVC deps see it): a failed import is a ValueError naming the config switch."""
    try:
        yield
    except ImportError as exc:
        raise ValueError(f"ModelConfig {switch} needs {kernel} (Triton kernels): {exc}") from exc


class CausalSelfAttention(nn.Module):
    """Causal self-attention with RoPE on queries and keys, optional QK-norm, KV cache, grouped-query
    K/V heads and a sliding window.

    n_kv_heads (default n_heads): K/V heads; query head h uses K/V head h // (n_heads / n_kv_heads),
    the grouping of ``repeat_interleave`` and of HF Llama. sliding_window (default None = all): a query
    sees itself and the window - 1 keys before it."""

    def __init__(self, d_model: int, n_heads: int, rope: RotaryEmbedding, impl: str = "naive",
                 qk_norm: bool = False, norm_eps: float = 1e-5, n_kv_heads: int | None = None,
                 sliding_window: int | None = None, fused_projections: bool = False, device=None, dtype=None):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if n_kv_heads <= 0 or n_heads % n_kv_heads:
            raise ValueError(f"n_kv_heads={n_kv_heads} must be a positive divisor of n_heads={n_heads}")
        if sliding_window is not None and sliding_window <= 0:
            raise ValueError(f"sliding_window={sliding_window} must be a positive integer or None")
        self.n_heads, self.d_head, self.impl = n_heads, d_model // n_heads, impl
        self.n_kv_heads, self.sliding_window = n_kv_heads, sliding_window
        self.fused_projections = fused_projections
        self.q_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.k_proj = Linear(d_model, n_kv_heads * self.d_head, device=device, dtype=dtype)
        self.v_proj = Linear(d_model, n_kv_heads * self.d_head, device=device, dtype=dtype)
        self.output_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.rope = rope
        self.q_norm = RMSNorm(self.d_head, norm_eps, device=device, dtype=dtype) if qk_norm else None
        self.k_norm = RMSNorm(self.d_head, norm_eps, device=device, dtype=dtype) if qk_norm else None
        self._flash = None
        if impl == "triton":
            if n_kv_heads != n_heads or sliding_window is not None:
                raise ValueError(f"ModelConfig attention='triton' supports neither n_kv_heads != n_heads nor "
                                 f"sliding_window (got n_kv_heads={n_kv_heads}, n_heads={n_heads}, "
                                 f"sliding_window={sliding_window}): use attention='sdpa' or 'naive'")
            with kernel_import("attention='triton'", "lmw_kernels.flash_attention.flash_attention"):
                from lmw_kernels.flash_attention import flash_attention
            self._flash = flash_attention

    def forward(self, x: Tensor, positions: Tensor, cache=None, layer: int = 0,
                valid: Tensor | None = None) -> Tensor:
        """x: (B, T, d); positions: (B, T) or (T,); cache: a KVCache (tokens appended in place);
        valid: (B, T) bool, False for padding tokens (they never serve as keys to real tokens)."""
        B, T, _ = x.shape
        if self.fused_projections:  # one GEMM for Q, K and V
            kv = self.n_kv_heads * self.d_head
            q, k, v = fused_linear(x, self.q_proj.weight, self.k_proj.weight, self.v_proj.weight).split(
                [self.n_heads * self.d_head, kv, kv], dim=-1)
        else:
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        q = q.view(B, T, self.n_heads, self.d_head).transpose(1, 2)  # (B, H, T, dh)
        k = k.view(B, T, self.n_kv_heads, self.d_head).transpose(1, 2)  # (B, Hkv, T, dh)
        v = v.view(B, T, self.n_kv_heads, self.d_head).transpose(1, 2)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        pos = positions[:, None, :] if positions.dim() == 2 else positions  # broadcast over heads
        q, k = self.rope(q, pos), self.rope(k, pos)

        # The window counts slots; a sequence's real tokens sit in consecutive slots (padding is on
        # the left and masked), so slot distance equals position distance for every real query.
        window, mask, causal = self.sliding_window, None, True
        if cache is not None:
            start = cache.length  # slots filled before this call
            k, v, key_valid = cache.update(layer, k, v, valid)  # (B, Hkv, S, dh), (B, S)
            offset = start
            if window is not None and start >= window:  # slots before start - window + 1 are seen by no query
                low = start - window + 1
                k, v, key_valid, offset = k[:, :, low:], v[:, :, low:], key_valid[:, low:], window - 1
            windowed = window is not None and k.shape[2] > window  # some query loses some key
            if cache.has_padding or windowed or (offset > 0 and T > 1):
                mask = _cache_mask(offset, T, key_valid, window)
            elif offset > 0:  # one new token per sequence, no padding: it sees every key kept
                causal = False
        elif valid is not None:
            mask = _cache_mask(0, T, valid, window)
        elif window is not None and T > window:
            mask = _window_mask(0, T, T, window, x.device)
        out = self._attend(q, k, v, mask, causal)  # (B, H, T, dh)
        return self.output_proj(out.transpose(1, 2).reshape(B, T, -1))

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool) -> Tensor:
        """q (B, H, T, dh), k/v (B, Hkv, S, dh); mask (B, 1, T, S) or (T, S) bool, or None for plain
        causal (``causal``) or full attention."""
        if self.impl == "triton" and mask is None:
            return self._flash(q, k, v, causal)
        if self.impl in ("sdpa", "triton"):
            gqa = {"enable_gqa": True} if k.shape[1] != q.shape[1] else {}  # torch >= 2.5
            sdpa = F.scaled_dot_product_attention
            return sdpa(q, k, v, is_causal=causal, **gqa) if mask is None else sdpa(q, k, v, attn_mask=mask, **gqa)
        if mask is None and causal:
            T = q.shape[-2]
            mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
        return grouped_attention(q, k, v, mask)


def grouped_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> Tensor:
    """Grouped-query attention without copying K/V: q (B, H, T, dh), k/v (B, Hkv, S, dh) with
    H = G·Hkv, query head h using K/V head h // G; mask (T, S) or (B, 1, T, S) bool, True = attend.

    The G query heads of a group are stacked as G·T query rows against their one K/V head, so each
    K/V head is read once per group (a plain batched matmul) instead of being repeated G times."""
    B, H, T, dh = q.shape
    Hkv, S = k.shape[1], k.shape[2]
    G = H // Hkv
    if G == 1:
        return scaled_dot_product_attention(q, k, v, mask)
    q = q.reshape(B, Hkv, G * T, dh)  # rows (g, t) of group kv = query head kv·G + g at step t
    if mask is not None:
        mask = mask.unsqueeze(-3).expand(*mask.shape[:-2], G, T, S).flatten(-3, -2)  # (..., G·T, S)
    return scaled_dot_product_attention(q, k, v, mask).reshape(B, H, T, dh)


def _window_mask(offset: int, T: int, S: int, window: int | None, device) -> Tensor:
    """(T, S) bool: query slot offset+i sees key slot j when j <= offset+i (and j > offset+i - window)."""
    query_slot = torch.arange(offset, offset + T, device=device)[:, None]  # (T, 1)
    key_slot = torch.arange(S, device=device)[None, :]  # (1, S)
    allowed = key_slot <= query_slot
    if window is not None:
        allowed &= key_slot > query_slot - window
    return allowed


def _cache_mask(offset: int, T: int, key_valid: Tensor, window: int | None = None) -> Tensor:
    """(B, 1, T, S) bool: query slot offset+i sees key slot j <= offset+i (within the window) when the
    key is valid. A query always sees its own slot, so a padding query never has an all-masked (NaN) row."""
    S = key_valid.shape[1]
    allowed = _window_mask(offset, T, S, window, key_valid.device)  # (T, S)
    own = torch.arange(offset, offset + T, device=key_valid.device)[:, None] == torch.arange(S, device=key_valid.device)
    return ((allowed & key_valid[:, None, :]) | own)[:, None]
