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

ATTENTION_IMPLS = ("naive", "sdpa", "triton")
NORM_IMPLS = ("torch", "triton")

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


def check_fields(cls, data: dict, label: str) -> None:
    """Raise ValueError naming any key of ``data`` that is not a field of dataclass ``cls``."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{label}: unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")


def swiglu_hidden_size(d_model: int, multiple_of: int = 64) -> int:
    """d_ff ≈ 8/3·d_model rounded to the nearest multiple of 64 (keeps FFN params ≈ 8·d²)."""
    return max(multiple_of, int(round(8 * d_model / 3 / multiple_of)) * multiple_of)


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    context_length: int
    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int | None = None  # None: swiglu_hidden_size(d_model)
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    attention: str = "naive"  # naive | sdpa | triton
    norm: str = "torch"  # torch | triton
    tie_embeddings: bool = False
    qk_norm: bool = False

    def __post_init__(self) -> None:
        for name in ("vocab_size", "context_length", "d_model", "n_layers", "n_heads"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"ModelConfig.{name} must be a positive integer, got {value!r}")
        if self.d_ff is None:
            object.__setattr__(self, "d_ff", swiglu_hidden_size(self.d_model))
        if not isinstance(self.d_ff, int) or self.d_ff <= 0:
            raise ValueError(f"ModelConfig.d_ff must be a positive integer, got {self.d_ff!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"ModelConfig.d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.d_head % 2:
            raise ValueError(f"ModelConfig: d_head={self.d_head} (d_model/n_heads) must be even for RoPE")
        if self.attention not in ATTENTION_IMPLS:
            raise ValueError(f"ModelConfig.attention={self.attention!r}: expected one of {ATTENTION_IMPLS}")
        if self.norm not in NORM_IMPLS:
            raise ValueError(f"ModelConfig.norm={self.norm!r}: expected one of {NORM_IMPLS}")
        if self.rope_theta <= 0:
            raise ValueError(f"ModelConfig.rope_theta must be > 0, got {self.rope_theta}")
        if self.norm_eps <= 0:
            raise ValueError(f"ModelConfig.norm_eps must be > 0, got {self.norm_eps}")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @classmethod
    def from_preset(cls, name: str, *, vocab_size: int, context_length: int, **overrides) -> ModelConfig:
        if name not in PRESETS:
            raise ValueError(f"unknown model preset {name!r}; choose from {', '.join(PRESETS)}")
        d_model, n_layers, n_heads, d_ff = PRESETS[name]
        shape = dict(d_model=d_model, n_layers=n_layers, n_heads=n_heads, d_ff=d_ff)
        shape.update({k: v for k, v in overrides.items() if v is not None})
        return cls(vocab_size=vocab_size, context_length=context_length, **shape)

    def replace(self, **changes) -> ModelConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ModelConfig:
        check_fields(cls, data, "ModelConfig")
        return cls(**data)

    @classmethod
    def from_json(cls, path: str | Path) -> ModelConfig:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return cls.from_dict(data.get("model", data))

    # ---- accounting -------------------------------------------------------------------------

    def block_params(self) -> int:
        d, f = self.d_model, self.d_ff
        attention = 4 * d * d
        ffn = 3 * d * f
        norms = 2 * d + (2 * self.d_head if self.qk_norm else 0)
        return attention + ffn + norms

    def param_count(self, include_embeddings: bool = True) -> int:
        """Exact number of trainable scalars. Without embeddings: the token embedding and the LM
        head are both excluded (Kaplan et al. 2020's non-embedding N)."""
        body = self.n_layers * self.block_params() + self.d_model  # + final norm
        if not include_embeddings:
            return body
        embeddings = self.vocab_size * self.d_model
        head = 0 if self.tie_embeddings else self.vocab_size * self.d_model
        return body + embeddings + head

    def matmul_params(self) -> int:
        """Weights that take part in a matmul for every token (blocks' linears + LM head)."""
        d, f = self.d_model, self.d_ff
        return self.n_layers * (4 * d * d + 3 * d * f) + self.vocab_size * d

    def flops_per_token(self, seq_len: int | None = None, training: bool = True) -> float:
        """FLOPs per token: forward = 2·N_matmul + 4·n_layers·d_model·T (QKᵀ and AV); training
        (forward + backward) is 3x forward, i.e. 6N + 12·L·d·T as in PaLM app. B."""
        seq_len = self.context_length if seq_len is None else seq_len
        forward = 2 * self.matmul_params() + 4 * self.n_layers * self.d_model * seq_len
        return 3 * forward if training else forward
