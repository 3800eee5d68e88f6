"""A pre-norm decoder-only Transformer LM (Llama layout: RMSNorm, SwiGLU, RoPE, untied head).

token ids ─► Embedding ─► n_layers × [x + Attn(RMSNorm x); x + SwiGLU(RMSNorm x)] ─► RMSNorm ─► LM head
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from model.core import layers
from model.core.config import ModelConfig
from model.core.kernel_choice import resolve_kernels
from model.core.loss import cross_entropy
from model.core.moe import MoEFeedForward


class TransformerBlock(nn.Module):
    """Pre-norm block: x + Attn(RMSNorm(x)), then x + FFN(RMSNorm(x))."""

    def __init__(self, cfg, rope: layers.RotaryEmbedding, device=None, dtype=None):
        super().__init__()
        self.ln1 = layers.RMSNorm(cfg.d_model, cfg.norm_eps, cfg.norm, device=device, dtype=dtype)
        self.attn = layers.CausalSelfAttention(cfg.d_model, cfg.n_heads, rope, cfg.attention, cfg.qk_norm,
                                               cfg.norm_eps, cfg.n_kv_heads, cfg.sliding_window,
                                               cfg.fused_projections, device=device, dtype=dtype)
        self.ln2 = layers.RMSNorm(cfg.d_model, cfg.norm_eps, cfg.norm, device=device, dtype=dtype)
        if cfg.is_moe:
            self.ffn = MoEFeedForward(cfg, device=device, dtype=dtype)
        else:
            self.ffn = layers.SwiGLU(cfg.d_model, cfg.d_ff, cfg.ffn, cfg.fused_projections, device=device, dtype=dtype)

    def forward(self, x: Tensor, positions: Tensor, cache=None, layer: int = 0,
                valid: Tensor | None = None) -> Tensor:
        x, h = self.ln2.add_forward(x, self.attn(self.ln1(x), positions, cache, layer, valid))
        return x + self.ffn(h)


class KVCache:
    """Per-layer keys and values for incremental decoding, preallocated to ``max_len`` slots.

    Slot i holds the i-th token fed to the model (prompt padding included); ``valid`` marks the
    real tokens so padded sequences of different lengths can share a batch. Keys and values have
    n_kv_heads heads (grouped-query attention), so memory scales with n_kv_heads / n_heads. With a
    sliding window every slot is still kept; attention masks (and skips) the keys out of the window.
    """

    def __init__(self, cfg: ModelConfig, batch_size: int, max_len: int, device=None, dtype=torch.float32):
        shape = (cfg.n_layers, batch_size, cfg.n_kv_heads, max_len, cfg.d_head)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.valid = torch.zeros(batch_size, max_len, device=device, dtype=torch.bool)
        self.length = 0  # slots filled (advanced after the last layer)
        self.has_padding = False  # any slot holds a padding token (then every step needs a mask)
        self._pending = 0

    @property
    def max_len(self) -> int:
        return self.valid.shape[1]

    @property
    def nbytes(self) -> int:
        """Bytes held by the key and value tensors: 2·n_layers·B·n_kv_heads·max_len·d_head·itemsize."""
        return self.k.nbytes + self.v.nbytes

    def update(self, layer: int, k: Tensor, v: Tensor, valid: Tensor | None):
        """Store this step's k/v (B, Hkv, T, dh) for ``layer``; return all keys/values so far."""
        T = k.shape[2]
        start, end = self.length, self.length + T
        if end > self.max_len:
            raise ValueError(f"KV cache is full: {end} tokens > max_len={self.max_len}")
        self.k[layer, :, :, start:end] = k
        self.v[layer, :, :, start:end] = v
        if layer == 0:
            self.valid[:, start:end] = True if valid is None else valid
            if valid is not None and not bool(valid.all()):
                self.has_padding = True
        self._pending = T
        return self.k[layer, :, :, :end], self.v[layer, :, :, :end], self.valid[:, :end]

    def advance(self) -> None:
        self.length += self._pending
        self._pending = 0


class TransformerLM(nn.Module):
    def __init__(self, cfg: ModelConfig, device=None, dtype=None):
        super().__init__()
        if not cfg.is_complete:
            raise ValueError(f"TransformerLM needs a complete ModelConfig (vocab_size, context_length, d_model, "
                             f"n_layers, n_heads), got {cfg}")
        cfg = resolve_kernels(cfg, device)  # kernels: auto | all | none -> the four switches
        self.cfg = cfg
        self.tokenizer_identity: dict | None = None  # what checkpoints record of the run's tokenizer
        self.token_embeddings = layers.Embedding(cfg.vocab_size, cfg.d_model, device=device, dtype=dtype)
        rope = layers.RotaryEmbedding(cfg.rope_theta, cfg.d_head, cfg.context_length, device=device)
        self.layers = nn.ModuleList(TransformerBlock(cfg, rope, device=device, dtype=dtype)
                                    for _ in range(cfg.n_layers))
        self.ln_final = layers.RMSNorm(cfg.d_model, cfg.norm_eps, cfg.norm, device=device, dtype=dtype)
        self.lm_head = layers.Linear(cfg.d_model, cfg.vocab_size, device=device, dtype=dtype)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.token_embeddings.weight
        self._fused_loss = None
        if cfg.loss == "fused":
            with layers.kernel_import("loss='fused'", "lmw_kernels.cross_entropy.fused_linear_cross_entropy"):
                from lmw_kernels.cross_entropy import fused_linear_cross_entropy
            self._fused_loss = fused_linear_cross_entropy

    def forward(self, token_ids: Tensor, positions: Tensor | None = None, cache: KVCache | None = None,
                valid: Tensor | None = None, targets: Tensor | None = None) -> Tensor:
        """token_ids: (B, T) → logits (B, T, vocab); with targets (B, T), the mean cross-entropy instead.

        positions default to 0..T-1 (continuing from the cache's length when decoding); valid
        (B, T) marks real tokens when sequences are padded. With cfg.loss='fused' and targets, the
        loss is computed chunk by chunk from the final hidden states and the logits never exist."""
        B, T = token_ids.shape
        if positions is None:
            start = cache.length if cache is not None else 0
            positions = torch.arange(start, start + T, device=token_ids.device)
            last = start + T - 1  # known without a device sync
        else:
            last = int(positions.max()) if positions.numel() else 0
        if last >= self.cfg.context_length:
            raise ValueError(f"sequence reaches position {last} but the model's "
                             f"context_length is {self.cfg.context_length}")
        x = self.token_embeddings(token_ids)  # (B, T, d)
        every = self.cfg.checkpoint_every
        for i, block in enumerate(self.layers):
            if every and self.training and cache is None and i % every == 0 and torch.is_grad_enabled():
                # keep only the block's input; recompute its activations during backward
                x = checkpoint(block, x, positions, None, i, valid, use_reentrant=False)
            else:
                x = block(x, positions, cache, i, valid)
        if cache is not None:
            cache.advance()
        x = self.ln_final(x)
        if targets is None:
            return self.lm_head(x)
        if self._fused_loss is not None:
            return self._fused_loss(x.flatten(0, 1), self.lm_head.weight, targets.flatten())
        return cross_entropy(self.lm_head(x), targets)

    def aux_loss(self) -> Tensor | float:
        """Sum of the MoE layers' weighted load-balancing and router z-losses from the last
        forward (0.0 for a dense model): add it to the language-model loss."""
        losses = [block.ffn.aux_loss for block in self.layers if getattr(block.ffn, "aux_loss", None) is not None]
        return torch.stack(losses).sum() if losses else 0.0

    def moe_stats(self) -> dict:
        """Per-layer router statistics of the last forward (empty for a dense model)."""
        return {i: block.ffn.stats for i, block in enumerate(self.layers) if getattr(block.ffn, "stats", None)}

    def num_parameters(self, include_embeddings: bool = True) -> int:
        params = {id(p): p for p in self.parameters()}
        total = sum(p.numel() for p in params.values())
        if not include_embeddings:
            total -= self.token_embeddings.weight.numel()
            if self.lm_head.weight is not self.token_embeddings.weight:
                total -= self.lm_head.weight.numel()
        return total

    def new_cache(self, batch_size: int, max_len: int | None = None) -> KVCache:
        weight = self.lm_head.weight
        dtype = torch.get_autocast_dtype(weight.device.type) if torch.is_autocast_enabled(weight.device.type) \
            else weight.dtype
        return KVCache(self.cfg, batch_size, max_len or self.cfg.context_length, weight.device, dtype)
