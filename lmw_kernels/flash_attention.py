"""FlashAttention-2 forward and backward as Triton kernels.

Dao 2023, "FlashAttention-2"; the layout follows Triton's fused-attention tutorial (06) written
with plain pointer arithmetic, so it runs on Triton 3.6 (CUDA) and under the 3.8 CPU interpreter.
- Forward: one program per (query tile, batch·head); an online softmax over key tiles in base 2
  (exp2 with log2(e) folded into the scale); saves O and the natural-log row log-sum-exp L.
  Causal: tiles fully above the diagonal are never visited; only diagonal tiles are masked.
- Backward, by recomputation, without atomics: D = rowsum(dO ⊙ O) (a small kernel), then a dK/dV
  pass (one program per key tile, walking the query tiles that see it) and a dQ pass (one program
  per query tile, walking its key tiles).

Inputs (batch, heads, seq, d_head) with any strides (the last one 1 is fastest), d_head 16..128, any
sequence length; (batch, seq, d) is taken as one head. Causal attention needs as many queries as
keys (top-left aligned, like SDPA's is_causal); non-causal takes any number of each. fp32 inputs get
Triton's default TF32 tensor-core dots (10-bit mantissa operands, fp32 accumulation): "ieee" and "tf32x3"
dots overflow shared memory or spill at these tiles (measured with lmw_kernels.compile_check).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from torch import Tensor

from lmw_kernels.flash_attention_torch import FlashAttentionTorch, naive_attention
from lmw_kernels.runtime import DTYPES, INTERPRET, dense, kernel_op, launch

__all__ = ["FlashAttentionTorch", "FlashAttentionTriton", "flash_attention", "naive_attention"]


def _configs(specs: list[tuple[int, int, int, int]]) -> list[triton.Config]:
    return [triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=s) for m, n, w, s in specs]


# Candidate (BLOCK_M, BLOCK_N, warps, stages) per pass: what `bench.benchmarks.kernel_select --attention-sweep` times
# and `lmw_kernels.compile_check` compiles. Forward and dQ: a query tile (BLOCK_M) walks key tiles (BLOCK_N); dK/dV: a
# key tile (BLOCK_N) walks query tiles (BLOCK_M). The larger block is a multiple of the smaller, so the causal diagonal
# tiles line up.
FWD_CONFIGS = _configs([(128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 3), (128, 32, 4, 4),
                        (64, 64, 4, 3), (64, 32, 4, 4), (128, 64, 4, 4), (64, 64, 4, 4)])
DQ_CONFIGS = _configs([(128, 32, 4, 3), (128, 32, 8, 3), (128, 64, 8, 3), (64, 32, 4, 3),
                       (64, 64, 4, 3), (128, 16, 4, 3), (128, 32, 4, 5)])
DKDV_CONFIGS = _configs([(32, 128, 4, 3), (32, 128, 8, 3), (64, 128, 8, 3), (32, 64, 4, 3), (32, 64, 8, 3),
                         (64, 64, 4, 3), (16, 128, 4, 3), (16, 64, 4, 3), (32, 128, 4, 5)])
CANDIDATES = {"fwd": FWD_CONFIGS, "dq": DQ_CONFIGS, "dkdv": DKDV_CONFIGS}

# The launch config per pass, head-dim block and sequence length: the first row whose longest sequence covers N
# (None: any). Chosen on an H200 by `python -m bench.benchmarks.kernel_select --attention-sweep`
# (docs/benchmarks/kernels.md) from CANDIDATES; one fixed config per shape class instead of autotuning: nothing to
# time on the first call, and a launch torch.compile and CUDA graphs take as they are.
# d64 rows: the H200 sweep of 2026-11-27 (B16 H12 S1024 and B1 H16 S16384, plain launches; docs/benchmarks/kernels.md,
# "Kernels at the model's shapes"); d128 rows: not swept yet (the former autotuner's first candidates).
TUNED: dict[tuple[str, int], list[tuple[int | None, tuple[int, int, int, int]]]] = {
    ("fwd", 64): [(1024, (128, 64, 8, 3)), (None, (64, 64, 4, 3))],
    ("fwd", 128): [(None, (128, 64, 8, 3))],
    ("dq", 64): [(1024, (64, 64, 4, 3)), (None, (128, 64, 8, 3))],
    ("dq", 128): [(None, (128, 32, 8, 3))],
    ("dkdv", 64): [(None, (32, 64, 4, 3))],
    ("dkdv", 128): [(None, (32, 128, 8, 3))],
}
# under the interpreter: small tiles, so tests exercise several tiles and the causal diagonal
INTERPRET_CONFIG = {"fwd": (32, 16, 1, 1), "dq": (32, 16, 1, 1), "dkdv": (16, 32, 1, 1)}
FP32_WIDE_CONFIG = {"fwd": (64, 32, 4, 3), "dq": (64, 32, 4, 3), "dkdv": (32, 64, 4, 3)}


def _prune_fp32_wide(configs: list[triton.Config], nargs: dict, **kwargs) -> list[triton.Config]:
    """fp32 I/O at d_head > 64 (BLOCK_D 128) doubles the operand tiles in shared memory: keep the tiles of at
    most 2048 (BLOCK_M·BLOCK_N) elements, which fit an A100's 163 KB per block (measured by
    lmw_kernels.compile_check); fp16/bf16, and d_head <= 64, keep every config."""
    if nargs["Q"].element_size() < 4 or kwargs["BLOCK_D"] <= 64:
        return configs
    return [c for c in configs if c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"] <= 2048] or configs


def launch_config(pass_: str, block_d: int, seq: int, element_size: int) -> dict:
    """Meta-parameters of one pass (fwd | dq | dkdv): BLOCK_M, BLOCK_N, num_warps, num_stages."""
    if INTERPRET:
        m, n, w, s = INTERPRET_CONFIG[pass_]
    else:
        rows = TUNED[(pass_, 64 if block_d <= 64 else 128)]
        m, n, w, s = next(cfg for longest, cfg in rows if longest is None or seq <= longest)
        if element_size >= 4 and block_d > 64 and m * n > 2048:
            m, n, w, s = FP32_WIDE_CONFIG[pass_]
    return {"BLOCK_M": m, "BLOCK_N": n, "num_warps": w, "num_stages": s}


@triton.jit
def _load_tile(base, offs_rows, stride_row, n_rows, offs_d, HEAD_DIM: tl.constexpr):
    """(rows, BLOCK_D) tile of a (seq, d_head) slice; zeros past the sequence end and past d_head."""
    mask = (offs_rows[:, None] < n_rows) & (offs_d[None, :] < HEAD_DIM)
    return tl.load(base + offs_rows[:, None] * stride_row + offs_d[None, :], mask=mask, other=0.0)


@triton.jit
def _query_program(H, N_Q, IS_CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr):
    """(start_m, bh, b, h): this program's first query and its batch·head, batch and head. Causal: the longest rows
    (most key tiles) first, for a better load balance at the end."""
    pid_m = tl.program_id(0)
    if IS_CAUSAL:
        pid_m = tl.cdiv(N_Q, BLOCK_M) - 1 - pid_m
    bh = tl.program_id(1)
    return pid_m * BLOCK_M, bh, bh // H, bh % H


@triton.jit
def _key_split(start_m, N_K, IS_CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """(mid, hi): a query tile's keys [0, mid) need no mask, [mid, hi) are masked; causal: the tiles left of the
    diagonal, then the diagonal tiles; else: the full tiles, then the ragged tail."""
    if IS_CAUSAL:
        mid, hi = start_m, tl.minimum(start_m + BLOCK_M, N_K)
    else:
        mid, hi = (N_K // BLOCK_N) * BLOCK_N, N_K
    return mid, hi


@triton.jit
def _key_tile(q, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d, start_n, N_K, qk_scale,
              HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL_MASK: tl.constexpr, BOUNDS_MASK: tl.constexpr):
    """The K and V tiles of the keys from start_n, and the base-2 logits of the query tile q against them
    (-inf where masked: a key after the query, or past the sequence end)."""
    offs_n = start_n + tl.arange(0, BLOCK_N)
    k = _load_tile(k_base, offs_n, stride_kn, N_K, offs_d, HEAD_DIM)
    v = _load_tile(v_base, offs_n, stride_vn, N_K, offs_d, HEAD_DIM)
    qk = tl.dot(q, tl.trans(k)) * qk_scale
    if CAUSAL_MASK:
        qk = tl.where(offs_m[:, None] >= offs_n[None, :], qk, float("-inf"))
    if BOUNDS_MASK:
        qk = tl.where(offs_n[None, :] < N_K, qk, float("-inf"))
    return k, v, qk


@triton.jit
def _fwd_tiles(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d, lo, hi, N_K, qk_scale,
               HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL_MASK: tl.constexpr,
               BOUNDS_MASK: tl.constexpr):
    """Online-softmax update of (acc, l_i, m_i) over key tiles [lo, hi)."""
    for start_n in range(lo, hi, BLOCK_N):
        _, v, qk = _key_tile(q, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d, start_n, N_K, qk_scale,
                             HEAD_DIM, BLOCK_N, CAUSAL_MASK, BOUNDS_MASK)
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _fwd_kernel(Q, K, V, OUT, LSE, sm_scale,
                stride_qb, stride_qh, stride_qm, stride_kb, stride_kh, stride_kn,
                stride_vb, stride_vh, stride_vn, stride_ob, stride_oh, stride_om,
                H, N_Q, N_K,
                HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, IS_CAUSAL: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m, bh, b, h = _query_program(H, N_Q, IS_CAUSAL, BLOCK_M)
    q_base = Q + b.to(tl.int64) * stride_qb + h * stride_qh
    k_base = K + b.to(tl.int64) * stride_kb + h * stride_kh
    v_base = V + b.to(tl.int64) * stride_vb + h * stride_vh
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    q_mask = (offs_m[:, None] < N_Q) & (offs_d[None, :] < HEAD_DIM)
    q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :], mask=q_mask, other=0.0)
    sm_scale = tl.cast(sm_scale, tl.float32)  # torch.compile passes Python floats as fp64
    qk_scale = sm_scale * 1.4426950408889634
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    mid, hi = _key_split(start_m, N_K, IS_CAUSAL, BLOCK_M, BLOCK_N)
    acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d,
                               0, mid, N_K, qk_scale, HEAD_DIM, BLOCK_N, False, False)
    acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d,
                               mid, hi, N_K, qk_scale, HEAD_DIM, BLOCK_N, IS_CAUSAL, True)
    acc = acc / l_i[:, None]
    lse = (m_i + tl.math.log2(l_i)) * 0.6931471805599453  # back to natural log
    tl.store(LSE + bh.to(tl.int64) * N_Q + offs_m, lse, mask=offs_m < N_Q)
    o_base = OUT + b.to(tl.int64) * stride_ob + h * stride_oh
    tl.store(o_base + offs_m[:, None] * stride_om + offs_d[None, :], acc.to(OUT.dtype.element_ty), mask=q_mask)


@triton.jit
def _bwd_delta_kernel(OUT, DO, DELTA, H, N_Q, stride_ob, stride_oh, stride_om, stride_dob, stride_doh, stride_dom,
                      HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr):
    """D = rowsum(dO ⊙ O) in fp32, shape (batch·heads, N_Q)."""
    bh = tl.program_id(1)
    b, h = bh // H, bh % H
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    mask = (offs_m[:, None] < N_Q) & (offs_d[None, :] < HEAD_DIM)
    o = tl.load(OUT + b.to(tl.int64) * stride_ob + h * stride_oh + offs_m[:, None] * stride_om + offs_d[None, :],
                mask=mask, other=0.0).to(tl.float32)
    do = tl.load(DO + b.to(tl.int64) * stride_dob + h * stride_doh + offs_m[:, None] * stride_dom
                 + offs_d[None, :], mask=mask, other=0.0).to(tl.float32)
    tl.store(DELTA + bh.to(tl.int64) * N_Q + offs_m, tl.sum(o * do, 1), mask=offs_m < N_Q)


@triton.jit
def _dkdv_tiles(dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qm, stride_dom, offs_n, offs_d,
                lo, hi, N_Q, qk_scale, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, CAUSAL_MASK: tl.constexpr):
    """Accumulate one key tile's dK and dV over query tiles [lo, hi). Works transposed: (keys, queries)."""
    for start_m in range(lo, hi, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        q = _load_tile(q_base, offs_m, stride_qm, N_Q, offs_d, HEAD_DIM)
        do = _load_tile(do_base, offs_m, stride_dom, N_Q, offs_d, HEAD_DIM)
        # Rows past N_Q get L = +inf, hence P = 0: no bounds mask needed on the scores.
        lse = tl.load(lse_base + offs_m, mask=offs_m < N_Q, other=float("inf")) * 1.4426950408889634
        delta = tl.load(delta_base + offs_m, mask=offs_m < N_Q, other=0.0)
        p_t = tl.math.exp2(tl.dot(k, tl.trans(q)) * qk_scale - lse[None, :])  # (BLOCK_N, BLOCK_M)
        if CAUSAL_MASK:
            p_t = tl.where(offs_m[None, :] >= offs_n[:, None], p_t, 0.0)
        dv += tl.dot(p_t.to(do.dtype), do)
        dp_t = tl.dot(v, tl.trans(do))
        ds_t = p_t * (dp_t - delta[None, :])
        dk += tl.dot(ds_t.to(q.dtype), q)
    return dk, dv


@triton.jit
def _bwd_dkdv_kernel(Q, K, V, DO, LSE, DELTA, DK, DV, sm_scale,
                     stride_qb, stride_qh, stride_qm, stride_kb, stride_kh, stride_kn,
                     stride_vb, stride_vh, stride_vn, stride_dob, stride_doh, stride_dom,
                     stride_dkb, stride_dkh, stride_dkn, stride_dvb, stride_dvh, stride_dvn,
                     H, N_Q, N_K,
                     HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, IS_CAUSAL: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    bh = tl.program_id(1)
    b, h = bh // H, bh % H
    start_n = tl.program_id(0) * BLOCK_N
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    kv_mask = (offs_n[:, None] < N_K) & (offs_d[None, :] < HEAD_DIM)
    k = tl.load(K + b.to(tl.int64) * stride_kb + h * stride_kh + offs_n[:, None] * stride_kn + offs_d[None, :],
                mask=kv_mask, other=0.0)
    v = tl.load(V + b.to(tl.int64) * stride_vb + h * stride_vh + offs_n[:, None] * stride_vn + offs_d[None, :],
                mask=kv_mask, other=0.0)
    q_base = Q + b.to(tl.int64) * stride_qb + h * stride_qh
    do_base = DO + b.to(tl.int64) * stride_dob + h * stride_doh
    lse_base = LSE + bh.to(tl.int64) * N_Q
    delta_base = DELTA + bh.to(tl.int64) * N_Q
    sm_scale = tl.cast(sm_scale, tl.float32)  # torch.compile passes Python floats as fp64
    qk_scale = sm_scale * 1.4426950408889634
    dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    if IS_CAUSAL:  # queries before start_n see none of these keys; the diagonal tiles are masked
        diag_end = tl.minimum(start_n + BLOCK_N, N_Q)
        dk, dv = _dkdv_tiles(dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qm, stride_dom,
                             offs_n, offs_d, start_n, diag_end, N_Q, qk_scale, HEAD_DIM, BLOCK_M, True)
        dk, dv = _dkdv_tiles(dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qm, stride_dom,
                             offs_n, offs_d, diag_end, N_Q, N_Q, qk_scale, HEAD_DIM, BLOCK_M, False)
    else:
        dk, dv = _dkdv_tiles(dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qm, stride_dom,
                             offs_n, offs_d, 0, N_Q, N_Q, qk_scale, HEAD_DIM, BLOCK_M, False)
    dk *= sm_scale
    tl.store(DK + b.to(tl.int64) * stride_dkb + h * stride_dkh + offs_n[:, None] * stride_dkn + offs_d[None, :],
             dk.to(DK.dtype.element_ty), mask=kv_mask)
    tl.store(DV + b.to(tl.int64) * stride_dvb + h * stride_dvh + offs_n[:, None] * stride_dvn + offs_d[None, :],
             dv.to(DV.dtype.element_ty), mask=kv_mask)


@triton.jit
def _dq_tiles(dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d, lo, hi, N_K, qk_scale,
              HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL_MASK: tl.constexpr,
              BOUNDS_MASK: tl.constexpr):
    """Accumulate one query tile's dQ over key tiles [lo, hi)."""
    for start_n in range(lo, hi, BLOCK_N):
        k, v, qk = _key_tile(q, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d, start_n, N_K, qk_scale,
                             HEAD_DIM, BLOCK_N, CAUSAL_MASK, BOUNDS_MASK)
        p = tl.math.exp2(qk - lse[:, None])  # 0 where masked
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k)
    return dq


@triton.jit
def _bwd_dq_kernel(Q, K, V, DO, LSE, DELTA, DQ, sm_scale,
                   stride_qb, stride_qh, stride_qm, stride_kb, stride_kh, stride_kn,
                   stride_vb, stride_vh, stride_vn, stride_dob, stride_doh, stride_dom,
                   stride_dqb, stride_dqh, stride_dqm,
                   H, N_Q, N_K,
                   HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, IS_CAUSAL: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m, bh, b, h = _query_program(H, N_Q, IS_CAUSAL, BLOCK_M)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    q_mask = (offs_m[:, None] < N_Q) & (offs_d[None, :] < HEAD_DIM)
    q = tl.load(Q + b.to(tl.int64) * stride_qb + h * stride_qh + offs_m[:, None] * stride_qm + offs_d[None, :],
                mask=q_mask, other=0.0)
    do = tl.load(DO + b.to(tl.int64) * stride_dob + h * stride_doh + offs_m[:, None] * stride_dom
                 + offs_d[None, :], mask=q_mask, other=0.0)
    lse = tl.load(LSE + bh.to(tl.int64) * N_Q + offs_m, mask=offs_m < N_Q, other=float("inf")) * 1.4426950408889634
    delta = tl.load(DELTA + bh.to(tl.int64) * N_Q + offs_m, mask=offs_m < N_Q, other=0.0)
    k_base = K + b.to(tl.int64) * stride_kb + h * stride_kh
    v_base = V + b.to(tl.int64) * stride_vb + h * stride_vh
    sm_scale = tl.cast(sm_scale, tl.float32)  # torch.compile passes Python floats as fp64
    qk_scale = sm_scale * 1.4426950408889634
    dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    mid, hi = _key_split(start_m, N_K, IS_CAUSAL, BLOCK_M, BLOCK_N)
    dq = _dq_tiles(dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d,
                   0, mid, N_K, qk_scale, HEAD_DIM, BLOCK_N, False, False)
    dq = _dq_tiles(dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d,
                   mid, hi, N_K, qk_scale, HEAD_DIM, BLOCK_N, IS_CAUSAL, True)
    dq *= sm_scale
    tl.store(DQ + b.to(tl.int64) * stride_dqb + h * stride_dqh + offs_m[:, None] * stride_dqm + offs_d[None, :],
             dq.to(DQ.dtype.element_ty), mask=q_mask)


def _check(q: Tensor, k: Tensor, v: Tensor, is_causal: bool) -> None:
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(f"flash_attention: expected 4-D (batch, heads, seq, d_head) tensors, got q {tuple(q.shape)}, "
                         f"k {tuple(k.shape)}, v {tuple(v.shape)}")
    B, H, _, d = q.shape
    if k.shape != v.shape or k.shape[:2] != (B, H) or k.shape[3] != d:
        raise ValueError(f"flash_attention: k {tuple(k.shape)} and v {tuple(v.shape)} must be (batch, heads, keys, "
                         f"d_head) matching q {tuple(q.shape)} (grouped K/V heads are not supported)")
    if not 16 <= d <= 128:
        raise ValueError(f"flash_attention: d_head={d} must be in 16..128")
    if is_causal and q.shape[2] != k.shape[2]:
        raise ValueError(f"flash_attention: is_causal needs as many queries as keys, got {q.shape[2]} and {k.shape[2]}")
    if q.dtype not in DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"flash_attention: q, k, v must share one of fp16/bf16/fp32, got {q.dtype}, {k.dtype}, "
                         f"{v.dtype}")
    if not (q.is_cuda or INTERPRET):
        raise RuntimeError("flash_attention (Triton) needs CUDA tensors, or TRITON_INTERPRET=1 set before triton "
                           "is imported; on CPU use attention='sdpa' or FlashAttentionTorch")


def _unit_last(t: Tensor) -> Tensor:
    return t if t.stride(-1) == 1 else t.contiguous()


def _shape_args(q: Tensor, k: Tensor) -> dict:
    B, H, n_q, d = q.shape
    return dict(H=H, N_Q=n_q, N_K=k.shape[2], HEAD_DIM=d, BLOCK_D=max(16, triton.next_power_of_2(d)))


def _strides(t: Tensor) -> tuple[int, int, int]:
    return t.stride(0), t.stride(1), t.stride(2)


def flash_forward_triton(q: Tensor, k: Tensor, v: Tensor, is_causal: bool,
                         config: dict | None = None) -> tuple[Tensor, Tensor]:
    """(O, L) for unit-last-stride q, k, v (batch, heads, seq, d_head); `config` overrides the tuned launch."""
    B, H, n_q, d = q.shape
    shape = _shape_args(q, k)
    cfg = config or launch_config("fwd", shape["BLOCK_D"], max(n_q, k.shape[2]), q.element_size())
    out = torch.empty(B, H, n_q, d, device=q.device, dtype=q.dtype)
    lse = torch.empty(B, H, n_q, device=q.device, dtype=torch.float32)
    launch(_fwd_kernel, q)[(triton.cdiv(n_q, cfg["BLOCK_M"]), B * H)](
        q, k, v, out, lse, 1.0 / math.sqrt(d), *_strides(q), *_strides(k), *_strides(v), *_strides(out),
        IS_CAUSAL=is_causal, **shape, **cfg)
    return out, lse


def flash_backward_triton(q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor, grad_out: Tensor,
                          is_causal: bool, configs: dict | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """dQ, dK, dV; `configs` ({"dq": ..., "dkdv": ...}) overrides the tuned launches."""
    B, H, n_q, d = q.shape
    grad_out = _unit_last(grad_out)
    shape = _shape_args(q, k)
    seq = max(n_q, k.shape[2])
    configs = configs or {}
    dq_cfg = configs.get("dq") or launch_config("dq", shape["BLOCK_D"], seq, q.element_size())
    dkdv_cfg = configs.get("dkdv") or launch_config("dkdv", shape["BLOCK_D"], seq, q.element_size())
    delta = torch.empty_like(lse)
    launch(_bwd_delta_kernel, q)[(triton.cdiv(n_q, 64), B * H)](
        out, grad_out, delta, H, n_q, *_strides(out), *_strides(grad_out), HEAD_DIM=d, BLOCK_D=shape["BLOCK_D"],
        BLOCK_M=64)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    scale = 1.0 / math.sqrt(d)
    common = (*_strides(q), *_strides(k), *_strides(v), *_strides(grad_out))
    # causal dK/dV: program 0 holds the first keys, which the most queries see: the longest work starts first
    launch(_bwd_dkdv_kernel, q)[(triton.cdiv(k.shape[2], dkdv_cfg["BLOCK_N"]), B * H)](
        q, k, v, grad_out, lse, delta, dk, dv, scale, *common, *_strides(dk), *_strides(dv),
        IS_CAUSAL=is_causal, **shape, **dkdv_cfg)
    launch(_bwd_dq_kernel, q)[(triton.cdiv(n_q, dq_cfg["BLOCK_M"]), B * H)](
        q, k, v, grad_out, lse, delta, dq, scale, *common, *_strides(dq), IS_CAUSAL=is_causal, **shape, **dq_cfg)
    return dq, dk, dv


def _fwd_fake(q: Tensor, k: Tensor, v: Tensor, is_causal: bool) -> tuple[Tensor, Tensor]:
    B, H, n_q, d = q.shape
    return (torch.empty(B, H, n_q, d, dtype=q.dtype, device=q.device),
            torch.empty(B, H, n_q, dtype=torch.float32, device=q.device))


# Inside the ops every input is made compact first (lmw_kernels.runtime.dense): the kernels take strides, but the ones
# a compiled graph passes are those read while tracing.
@kernel_op("flash_attention_fwd", fake=_fwd_fake)
def _flash_fwd_op(q: Tensor, k: Tensor, v: Tensor, is_causal: bool) -> tuple[Tensor, Tensor]:
    return flash_forward_triton(*dense(q, k, v), is_causal)


def _bwd_fake(q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor, grad_out: Tensor,
              is_causal: bool) -> tuple[Tensor, Tensor, Tensor]:
    return tuple(torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in (q, k, v))  # compact, as dense() makes


@kernel_op("flash_attention_bwd", fake=_bwd_fake)
def _flash_bwd_op(q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor, grad_out: Tensor,
                  is_causal: bool) -> tuple[Tensor, Tensor, Tensor]:
    return flash_backward_triton(*dense(q, k, v, out, lse, grad_out), is_causal)


class FlashAttentionTriton(torch.autograd.Function):
    """FlashAttention-2 in Triton; ``.apply(q, k, v, is_causal=False)`` on (batch, heads, seq, d_head)
    or (batch, seq, d). Saves Q, K, V, O and L (batch, heads, seq) for the backward."""

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, is_causal: bool = False) -> Tensor:
        flat = q.dim() == 3
        if flat:
            q, k, v = q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1)
        _check(q, k, v, is_causal)
        q, k, v = _unit_last(q), _unit_last(k), _unit_last(v)
        out, lse = _flash_fwd_op(q, k, v, is_causal)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.is_causal, ctx.flat = is_causal, flat
        return out.squeeze(1) if flat else out

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        q, k, v, out, lse = ctx.saved_tensors
        if ctx.flat:
            grad_out = grad_out.unsqueeze(1)
        grads = _flash_bwd_op(q, k, v, out, lse, grad_out, ctx.is_causal)
        if ctx.flat:
            grads = tuple(g.squeeze(1) for g in grads)
        return (*grads, None)


def flash_attention(q: Tensor, k: Tensor, v: Tensor, is_causal: bool = False) -> Tensor:
    """FlashAttention-2 (Triton) on (batch, heads, seq, d_head) or (batch, seq, d); scale 1/√d_head."""
    return FlashAttentionTriton.apply(q, k, v, is_causal)
