"""Model shapes, presets, and exact parameter / FLOP accounting.

Presets follow the CS336 size table (GPT-2 small … 2.7B) plus tiny CPU presets. FLOP counts use
the PaLM convention (Chowdhery et al. 2022, app. B): a training token costs 6·N_matmul FLOPs for
the weight matmuls plus 12·n_layers·d_model·T for attention scores and values (T = context),
with no discount for the causal mask. Embedding lookups cost nothing; the LM head is a matmul.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from workbench.params import Checked, setting

ATTENTION_IMPLS = ("naive", "sdpa", "triton")
NORM_IMPLS = ("torch", "triton")
FFN_IMPLS = ("torch", "triton")
LOSS_IMPLS = ("torch", "fused")
KERNEL_SETS = (None, "auto", "all", "none")  # overrides the four switches when set (model/core/kernel_choice.py)

# name -> (d_model, n_layers, n_heads, d_ff or None for the 8/3 rule)
PRESETS: dict[str, tuple[int, int, int, int | None]] = {
    "nano": (64, 2, 2, None),
    "micro": (128, 4, 4, None),
    "tiny": (256, 4, 8, None),
    "tinystories": (512, 4, 16, 1344),  # the CS336 assignment-1 TinyStories model
    "small": (768, 12, 12, None),
    "medium": (1024, 24, 16, None),
    "large": (1280, 36, 20, None),
    "xl": (1600, 48, 25, None),
    "2.7B": (2560, 32, 32, None),
}


def swiglu_hidden_size(d_model: int, multiple_of: int = 64) -> int:
    """d_ff ≈ 8/3·d_model rounded to the nearest multiple of 64 (keeps FFN params ≈ 8·d²)."""
    return max(multiple_of, int(round(8 * d_model / 3 / multiple_of)) * multiple_of)


# the fields a model cannot be built without; a ModelConfig that leaves one as None is a partial one (the `model:`
# mapping of a TrainConfig: model.train.model_config completes it from the preset and the shards)
SHAPE_FIELDS = ("vocab_size", "context_length", "d_model", "n_layers", "n_heads")
PRESET_FIELDS = ("d_model", "n_layers", "n_heads", "d_ff")  # what a preset sets (PRESETS)



@dataclass(frozen=True)
class ModelConfig(Checked):
    """A TransformerLM's shape, implementations and variants. A complete one (``from_preset``, a checkpoint's
    ``model_config``) derives ``d_ff`` and ``n_kv_heads`` when they are None; a partial one (a SHAPE_FIELDS value
    None: a TrainConfig's ``model``) checks each value it has and derives nothing."""

    vocab_size: int | None = setting(None, "vocabulary size (none: the shards' vocab_size)", at_least=1)
    context_length: int = setting(128, "tokens per training sequence (also the RoPE table size)", at_least=1)
    d_model: int | None = setting(None, "residual stream width (none: the preset's)", at_least=1)
    n_layers: int | None = setting(None, "transformer blocks (none: the preset's)", at_least=1)
    n_heads: int | None = setting(None, "attention heads (none: the preset's)", at_least=1)
    d_ff: int | None = setting(None, "SwiGLU hidden size (none: the preset's, else 8/3·d_model rounded to 64)",
                               at_least=1)
    rope_theta: float = setting(10000.0, "RoPE base θ", above=0)
    norm_eps: float = setting(1e-5, "RMSNorm ε", above=0)
    attention: str = setting("naive", "attention implementation: naive | sdpa | triton", choices=ATTENTION_IMPLS)
    norm: str = setting("torch", "RMSNorm implementation: torch | triton", choices=NORM_IMPLS)
    ffn: str = setting("torch", "SwiGLU activation silu(a)·b: torch | triton (fused kernel)", choices=FFN_IMPLS)
    loss: str = setting("torch", "LM head + cross-entropy: torch | fused (chunked; the logits never exist)",
                        choices=LOSS_IMPLS)
    fused_projections: bool = setting(False, "Q/K/V and SwiGLU's W1/W3 as one GEMM each (same math, wider GEMMs)")
    kernels: str | None = setting(None, "set attention/norm/ffn/loss at once: auto (the fastest per op on this GPU, "
                                        "from lmw_kernels/selection.json) | all (every Triton kernel) | none (PyTorch "
                                        "+ SDPA)", choices=KERNEL_SETS)
    tie_embeddings: bool = setting(False, "share the token embedding and LM head weights")
    qk_norm: bool = setting(False, "RMSNorm on queries and keys per head")
    # attention variants
    n_kv_heads: int | None = setting(None, "grouped-query attention: K/V heads (none: n_heads; 1 = multi-query)",
                                     at_least=1)
    sliding_window: int | None = setting(None, "attend to at most this many most recent tokens (none: all)", at_least=1)
    # mixture of experts (0 experts = dense SwiGLU); each expert is a SwiGLU of width d_ff
    n_experts: int = setting(0, "mixture of experts: experts per FFN layer (0 = dense SwiGLU)", at_least=0)
    moe_top_k: int = setting(2, "MoE: experts per token")
    moe_capacity_factor: float | None = setting(1.25, "MoE: expert capacity = factor · tokens · top_k / experts "
                                                      "(none or 0: no limit)", at_least=0)
    moe_aux_loss_coef: float = setting(0.01, "MoE: load-balancing loss weight (Switch Transformer)", at_least=0)
    moe_z_loss_coef: float = setting(0.001, "MoE: router z-loss weight (ST-MoE)", at_least=0)
    checkpoint_every: int = setting(0, "activation checkpointing: recompute every k-th block in backward (0 = off)",
                                    at_least=0)

    def __post_init__(self) -> None:
        if self.moe_capacity_factor == 0:  # "no limit" in a profile, where `null` drops the key instead
            object.__setattr__(self, "moe_capacity_factor", None)
        super().__post_init__()
        self._check_shape()
        self._check_variants()

    @property
    def is_complete(self) -> bool:
        """Every SHAPE_FIELDS value is given: a model can be built."""
        return all(getattr(self, name) is not None for name in SHAPE_FIELDS)

    def _check_shape(self) -> None:
        """Rules across the shape's settings, and the d_ff a complete shape derives."""
        if self.d_model is None or self.n_heads is None:
            return
        if self.d_model % self.n_heads:
            raise ValueError(f"ModelConfig.d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.d_head % 2:
            raise ValueError(f"ModelConfig: d_head={self.d_head} (d_model/n_heads) must be even for RoPE")
        if self.d_ff is None and self.is_complete:
            object.__setattr__(self, "d_ff", swiglu_hidden_size(self.d_model))

    def _check_variants(self) -> None:
        """Rules across the variants' settings (grouped-query attention, mixture of experts), and the n_kv_heads a
        complete shape derives."""
        if self.n_kv_heads is None and self.is_complete:
            object.__setattr__(self, "n_kv_heads", self.n_heads)
        if self.n_kv_heads is not None and self.n_heads is not None and self.n_heads % self.n_kv_heads:
            raise ValueError(f"ModelConfig.n_kv_heads={self.n_kv_heads!r} must be a positive divisor of "
                             f"n_heads={self.n_heads}")
        if self.n_experts and not 1 <= self.moe_top_k <= self.n_experts:
            raise ValueError(f"ModelConfig: need 1 <= moe_top_k <= n_experts, got n_experts={self.n_experts}, "
                             f"moe_top_k={self.moe_top_k}")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @classmethod
    def from_preset(cls, name: str, *, vocab_size: int, context_length: int, **overrides) -> ModelConfig:
        """The preset's d_model, n_layers, n_heads and d_ff, each unless ``overrides`` gives it (not None); every
        other override as given, None included (``moe_capacity_factor=None``: no capacity limit)."""
        if name not in PRESETS:
            raise ValueError(f"unknown model preset {name!r}; choose from {', '.join(PRESETS)}")
        shape = dict(zip(PRESET_FIELDS, PRESETS[name], strict=True))
        shape.update({k: v for k, v in overrides.items() if v is not None or k not in PRESET_FIELDS})
        return cls(vocab_size=vocab_size, context_length=context_length, **shape)

    def replace(self, **changes) -> ModelConfig:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_json(cls, path: str | Path) -> ModelConfig:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return cls.from_dict(data.get("model", data))

    # ---- accounting -------------------------------------------------------------------------

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    def attention_params(self) -> int:
        """Q and output projections d×d; K and V d×(n_kv_heads·d_head) each."""
        d, kv = self.d_model, self.n_kv_heads * self.d_head
        return 2 * d * d + 2 * d * kv

    def ffn_params(self, active: bool = False) -> int:
        """SwiGLU 3·d·d_ff, or per MoE layer: the router d×E plus E experts (top_k when ``active``)."""
        swiglu = 3 * self.d_model * self.d_ff
        if not self.is_moe:
            return swiglu
        return self.d_model * self.n_experts + swiglu * (self.moe_top_k if active else self.n_experts)

    def block_params(self, active: bool = False) -> int:
        norms = 2 * self.d_model + (2 * self.d_head if self.qk_norm else 0)
        return self.attention_params() + self.ffn_params(active) + norms

    def param_count(self, include_embeddings: bool = True, active: bool = False) -> int:
        """Exact number of trainable scalars. Without embeddings: the token embedding and the LM
        head are both excluded (Kaplan et al. 2020's non-embedding N). ``active``: an MoE model's
        parameters one token uses (top_k experts of each layer, the router included)."""
        body = self.n_layers * self.block_params(active) + self.d_model  # + final norm
        if not include_embeddings:
            return body
        embeddings = self.vocab_size * self.d_model
        head = 0 if self.tie_embeddings else self.vocab_size * self.d_model
        return body + embeddings + head

    def matmul_params(self) -> int:
        """Weights that take part in a matmul for every token (blocks' linears, for MoE the router
        and the top_k experts a token is sent to, + LM head)."""
        return self.n_layers * (self.attention_params() + self.ffn_params(active=True)) + self.vocab_size * self.d_model

    def flops_per_token(self, seq_len: int | None = None, training: bool = True) -> float:
        """FLOPs per token: forward = 2·N_matmul + 4·n_layers·d_model·T (QKᵀ and AV); training
        (forward + backward) is 3x forward, i.e. 6N + 12·L·d·T as in PaLM app. B. N_matmul counts
        active parameters only (MoE); with a sliding window a query sees at most ``window`` keys."""
        seq_len = self.context_length if seq_len is None else seq_len
        keys = min(seq_len, self.sliding_window) if self.sliding_window else seq_len
        forward = 2 * self.matmul_params() + 4 * self.n_layers * self.d_model * keys
        return 3 * forward if training else forward
