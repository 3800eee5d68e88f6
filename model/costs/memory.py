"""Memory per GPU for a parallel layout: ZeRO model states and activations (pure functions).

* Model states per GPU — ZeRO (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training
  Trillion Parameter Models", §3 and Fig. 1): mixed-precision Adam keeps 2Ψ bf16 params, 2Ψ bf16
  grads and K·Ψ = 12Ψ optimizer states (fp32 master params, m, v). Stage 0 (DDP) 16Ψ, stage 1
  4Ψ + 12Ψ/N, stage 2 2Ψ + 14Ψ/N, stage 3 16Ψ/N. ``precision="fp32"`` is our CPU path: 4Ψ params,
  4Ψ grads, 8Ψ for Adam's m and v.
* Activations per GPU — Korthikanti et al. 2022 (see ``model.costs.accounting``'s docstring for the formulas).

``model.costs.accounting`` (communication, step estimates, the scale-out tables) and ``model.costs.napkin`` (the
one-run report) both build on these.
"""

from __future__ import annotations

from dataclasses import dataclass

from model.core.config import ModelConfig
from workbench.params import REQUIRED, Checked, setting

GB = 1e9  # decimal gigabytes, as in the ZeRO paper

# ---- parallel layout ------------------------------------------------------------------------------

PRECISIONS = {"mixed": (2, 2, 12), "fp32": (4, 4, 8)}  # bytes per parameter: params, grads, optimizer
RECOMPUTE = ("none", "full")
ZERO_FORMULAS = {0: "16Ψ", 1: "4Ψ + 12Ψ/N", 2: "2Ψ + 14Ψ/N", 3: "16Ψ/N"}  # mixed precision, K = 12


def check_int(name: str, value, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def check_stage(stage) -> None:
    if stage not in (0, 1, 2, 3) or isinstance(stage, bool):
        raise ValueError(f"unknown ZeRO stage {stage!r}; expected 0, 1, 2 or 3")


def check_precision(precision) -> None:
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; expected one of {', '.join(PRECISIONS)}")


@dataclass(frozen=True)
class Layout(Checked):
    """gpus = tp × dp; ZeRO ``zero_stage`` shards over the dp axis; TP uses sequence parallelism."""

    gpus: int = setting(REQUIRED, "GPUs in all", at_least=1)
    tp: int = setting(1, "tensor-parallel degree", at_least=1)
    zero_stage: int = setting(0, "ZeRO stage", choices=(0, 1, 2, 3))
    precision: str = setting("mixed", "bytes per parameter: mixed or fp32", choices=tuple(PRECISIONS))
    recompute: str = setting("none", "activation checkpointing: none, or full (every layer)", choices=RECOMPUTE)
    sequence_parallel: bool = setting(True, "TP shards the norms' and dropout's activations too")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.gpus % self.tp:  # a rule across two settings
            raise ValueError(f"Layout.gpus={self.gpus} is not divisible by Layout.tp={self.tp}")

    @property
    def dp(self) -> int:
        return self.gpus // self.tp


# ---- memory ---------------------------------------------------------------------------------------


def zero_model_state_bytes(n_params: float, world: int, stage: int, precision: str = "mixed") -> dict[str, float]:
    """Bytes per GPU of params, grads and optimizer states (and their total) under ZeRO ``stage``
    sharded over ``world`` data-parallel ranks (ZeRO paper §3, Fig. 1). Stage 0 is plain DDP."""
    if not n_params > 0:
        raise ValueError(f"n_params must be > 0, got {n_params!r}")
    check_int("world", world, 1)
    check_stage(stage)
    check_precision(precision)
    p, g, o = (b * n_params for b in PRECISIONS[precision])
    params = p / world if stage >= 3 else p
    grads = g / world if stage >= 2 else g
    optimizer = o / world if stage >= 1 else o
    return {"params": params, "grads": grads, "optimizer": optimizer, "total": params + grads + optimizer}


def activation_bytes(cfg: ModelConfig, seq_len: int, micro_batch: int, *, tp: int = 1,
                     sequence_parallel: bool = True, recompute: str = "none",
                     flash_attention: bool = True) -> dict[str, float]:
    """Activation bytes per GPU for one micro-batch of ``micro_batch`` sequences (16-bit activations).

    ``layers``: n_layers × Korthikanti eq. 1-2 (see the module docstring); with full recomputation the
    stored layer inputs (2·s·b·h per layer, /t under sequence parallelism) plus one layer's full
    activations, rebuilt during its backward. ``logits``: one fp32 copy of the logits for the loss,
    4·s·b·V/t (Korthikanti §4.3)."""
    check_int("seq_len", seq_len, 1)
    check_int("micro_batch", micro_batch, 1)
    check_int("tp", tp, 1)
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute={recompute!r}: expected one of {RECOMPUTE}")
    s, b, h, a, t = seq_len, micro_batch, cfg.d_model, cfg.n_heads, tp
    scores = 0.0 if flash_attention else 5 * a * s / h
    if sequence_parallel or t == 1:
        per_layer = s * b * h / t * (34 + scores)
    else:
        per_layer = s * b * h * (10 + 24 / t + scores / t)
    if recompute == "full":
        inputs = 2 * s * b * h / (t if sequence_parallel else 1)
        layers = cfg.n_layers * inputs + per_layer
    else:
        layers = cfg.n_layers * per_layer
    logits = 4 * s * b * cfg.vocab_size / t
    return {"layers": layers, "logits": logits, "total": layers + logits}
