"""Roofline of the Transformer block's main matmuls: FLOPs, bytes moved, arithmetic intensity.

A matmul (m × k) @ (k × n) costs 2·m·k·n FLOPs and, done in one pass with 16-bit operands, moves
the weight k·n, the input m·k and the output m·n: 2·(m·k + k·n + m·n) bytes. Its arithmetic intensity
(FLOPs per byte) against the hardware's ridge point peak_flops / hbm_bandwidth says whether it is
compute-bound (above) or memory-bound (below) — the roofline model of Williams, Waterman & Patterson
2009, "Roofline: an insightful visual performance model for multicore architectures", as used in
CS336 lecture 2 and in "How to Scale Your Model" (Austin et al. 2025, ch. 1). A square m = n = k
matmul has intensity m/3; in decoding m = b (one new token per sequence) and for b ≪ k, n the
intensity is ≈ b, so batch size, not model size, decides whether decoding can use the tensor cores.

Per GPU under tensor parallelism t (Megatron-LM, Shoeybi et al. 2019, §3): QKV and FFN up/gate are
column-parallel (n/t), attention-out and FFN down row-parallel (k/t), the LM head vocabulary-parallel
(n/t). For MoE FFNs each expert sees on average m·top_k/n_experts tokens (no capacity limit).
Attention's own matmuls (QKᵀ, AV) are left out: FlashAttention keeps them on chip.
"""

from __future__ import annotations

from dataclasses import dataclass

from model.core.config import ModelConfig
from workbench.params import REQUIRED, Checked, setting


@dataclass(frozen=True)
class Matmul(Checked):
    """``count`` identical (m × k) @ (k × n) matmuls, operands and result ``bytes_per_value`` wide."""

    name: str = setting(REQUIRED, "what the matmul computes")
    m: float = setting(REQUIRED, "rows: tokens of the activations", above=0)
    k: float = setting(REQUIRED, "the inner dimension", above=0)
    n: float = setting(REQUIRED, "columns: the weight's output width", above=0)
    count: float = setting(1, "identical matmuls", above=0)
    bytes_per_value: float = setting(2, "bytes of one operand value", above=0)

    @property
    def flops(self) -> float:
        return self.count * 2 * self.m * self.k * self.n

    @property
    def bytes(self) -> float:
        """Weights + input + output, each read or written once from HBM."""
        return self.count * self.bytes_per_value * (self.k * self.n + self.m * self.k + self.m * self.n)

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes


def ridge_point(peak_flops: float, hbm_bandwidth: float) -> float:
    """FLOPs per byte at which a kernel turns from memory- to compute-bound."""
    if not peak_flops > 0 or not hbm_bandwidth > 0:
        raise ValueError(f"peak_flops and hbm_bandwidth must be > 0, got {peak_flops!r}, {hbm_bandwidth!r}")
    return peak_flops / hbm_bandwidth


def roofline_row(mm: Matmul, peak_flops: float, hbm_bandwidth: float) -> dict:
    """One matmul against one accelerator: time is max(FLOPs / peak, bytes / bandwidth)."""
    ridge = ridge_point(peak_flops, hbm_bandwidth)
    compute_s, memory_s = mm.flops / peak_flops, mm.bytes / hbm_bandwidth
    return {"name": mm.name, "m": mm.m, "k": mm.k, "n": mm.n, "count": mm.count, "flops": mm.flops,
            "bytes": mm.bytes, "intensity": mm.intensity, "ridge": ridge,
            "bound": "compute" if mm.intensity >= ridge else "memory",
            "time_s": max(compute_s, memory_s),
            "attainable_flops": min(peak_flops, mm.intensity * hbm_bandwidth)}


def block_matmuls(cfg: ModelConfig, tokens: float, *, tp: int = 1, bytes_per_value: int = 2) -> list[Matmul]:
    """The main matmuls of one block (and the LM head) for ``tokens`` rows per GPU."""
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise ValueError(f"tp must be an integer >= 1, got {tp!r}")
    d, kv = cfg.d_model, cfg.n_kv_heads * cfg.d_head
    ffn_tokens, experts = tokens, 1
    if cfg.is_moe:
        ffn_tokens, experts = tokens * cfg.moe_top_k / cfg.n_experts, cfg.n_experts

    def shard(size: int) -> int:  # the largest rank's share when size is not a multiple of tp
        return -(-size // tp)

    def mm(name, m, k, n, count=1):
        return Matmul(name, m, k, n, count, bytes_per_value)

    return [
        mm("QKV", tokens, d, shard(d + 2 * kv)),
        mm("attn-out", tokens, shard(d), d),
        mm("FFN up/gate", ffn_tokens, d, shard(cfg.d_ff), 2 * experts),
        mm("FFN down", ffn_tokens, shard(cfg.d_ff), d, experts),
        mm("LM head", tokens, d, shard(cfg.vocab_size)),
    ]


def decode_batch_for_ridge(k: int, n: int, ridge: float) -> float:
    """Smallest m with 2·m·k·n / (2·(m·k + k·n + m·n)) >= ridge, i.e. m·k·n >= ridge·(m·(k+n) + k·n):
    m = ridge·k·n / (k·n − ridge·(k + n)); inf when the weight alone caps the intensity below it."""
    room = k * n - ridge * (k + n)
    return ridge * k * n / room if room > 0 else float("inf")


def roofline_table(cfg: ModelConfig, tokens: float, peak_flops: float, hbm_bandwidth: float, *,
                   tp: int = 1) -> list[dict]:
    return [roofline_row(mm, peak_flops, hbm_bandwidth) for mm in block_matmuls(cfg, tokens, tp=tp)]


def format_roofline(rows: list[dict], title: str) -> str:
    lines = [title, f"  {'matmul':<12} {'m×k×n (×count)':>28} {'GFLOP':>10} {'MB moved':>10} "
                    f"{'FLOP/B':>8}  bound (ridge {rows[0]['ridge']:.0f} FLOP/B)"]
    for r in rows:
        shape = f"{r['m']:,.0f}×{r['k']}×{r['n']}" + (f" ×{r['count']}" if r["count"] > 1 else "")
        lines.append(f"  {r['name']:<12} {shape:>28} {r['flops'] / 1e9:>10.2f} {r['bytes'] / 1e6:>10.1f} "
                     f"{r['intensity']:>8.1f}  {r['bound']}")
    return "\n".join(lines)
