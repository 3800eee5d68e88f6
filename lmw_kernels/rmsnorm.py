"""Fused RMSNorm (Zhang & Sennrich 2019), with the residual add folded in, forward and backward in Triton.

    s = x + r            (optional residual add, stored: the next residual)
    y = s · rstd · w,    rstd = 1 / sqrt(mean(s²) + eps)       (per row, fp32)

Mirrors Liger-Kernel `src/liger_kernel/ops/rms_norm.py` and llm.c's `fused_residual_forward` /
`rmsnorm_backward`: the forward saves the per-row fp32 `rstd`; the backward recomputes ŝ = s · rstd and gives

    ds = rstd · (dy·w − ŝ · mean(dy·w·ŝ)) + ds_next        dw = Σ_rows dy · ŝ

where ds_next is the gradient arriving at the stored sum s from its own later use (the residual stream),
so dx = dr = ds. Inductor does not fuse pointwise neighbours into a user kernel, which is why the add
lives inside it.

Layout: every program takes a block of BLOCK_ROWS whole rows (short rows: several per program, so one
launch keeps enough loads in flight; long rows: one). The backward runs a persistent grid (a few programs
per SM), each walking a stripe of row blocks and keeping its dw partial in fp32 registers; at the end each
program adds its partial into one fp32 (hidden,) buffer with atomics, so dw is finished inside the kernel
(the order of those ≤ a few hundred fp32 adds is not fixed: dw can differ between runs in the last bits).

Semantics equal `model/core/layers.py::rms_norm_ref` (copied here as `rms_norm_torch`): statistics and the
product with the weight in fp32, one cast back to x's dtype (or to `out_dtype`: under autocast the model asks
for the bf16 its next matmul reads, so the cast that autocast would add is done by the kernel's store and the
gradient comes back in bf16 without a cast kernel either way); s = x + r is rounded to its dtype (the
promotion of x's and r's) before it is normalized, as `x = x + r` then the norm would be in PyTorch.

Runs on CUDA, or on CPU tensors under the Triton interpreter (`TRITON_INTERPRET=1`, read at import, as
Triton does). Elsewhere the launchers — and `rms_norm`, which does NOT fall back to the torch reference,
so a benchmark can never time the reference by accident — raise a one-line RuntimeError.
"""

import torch
import triton
import triton.language as tl

from lmw_kernels.runtime import DTYPES as _DTYPES
from lmw_kernels.runtime import INTERPRET as _INTERPRET
from lmw_kernels.runtime import dense, kernel_op, launch, programs_for

MAX_HIDDEN = 65536  # one row must fit in one block (registers / interpreter memory)
TILE_ELEMENTS = 4096  # elements per program tile when rows are short: BLOCK_ROWS = TILE_ELEMENTS // BLOCK


def rms_norm_torch(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Reference: the model's `rms_norm_ref` — fp32 statistics and weight product, cast back to x.dtype."""
    x32 = x.float()
    normed = x32 * torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (normed * weight.float()).to(x.dtype)


@triton.jit
def _rms_norm_fwd(X, R, S, W, Y, RSTD, n_rows, n_cols, stride_x, stride_r, stride_s, stride_y, eps,
                  HAS_RESIDUAL: tl.constexpr, BLOCK_ROWS: tl.constexpr, BLOCK: tl.constexpr):
    """BLOCK_ROWS rows per program: (s = x + r, stored), y = s · rstd · w, rstd saved (fp32)."""
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    cols = tl.arange(0, BLOCK)
    row_ok = rows < n_rows
    mask = row_ok[:, None] & (cols < n_cols)[None, :]
    rows = rows.to(tl.int64)[:, None]
    x = tl.load(X + rows * stride_x + cols[None, :], mask=mask, other=0.0)
    if HAS_RESIDUAL:
        r = tl.load(R + rows * stride_r + cols[None, :], mask=mask, other=0.0)
        x = (x.to(tl.float32) + r.to(tl.float32)).to(S.dtype.element_ty)
        tl.store(S + rows * stride_s + cols[None, :], x, mask=mask)
    x = x.to(tl.float32)
    w = tl.load(W + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + tl.cast(eps, tl.float32))  # torch.compile passes floats as fp64
    tl.store(RSTD + tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS), rstd, mask=row_ok)
    y = x * rstd[:, None] * w[None, :]
    tl.store(Y + rows * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _rms_norm_bwd(DY, DS_NEXT, S, W, RSTD, DX, DW, n_rows, n_cols, stride_dy, stride_dn, stride_s, stride_dx,
                  blocks_per_program, HAS_DS_NEXT: tl.constexpr, BLOCK_ROWS: tl.constexpr, BLOCK: tl.constexpr):
    """Row blocks [pid·blocks_per_program, …): ds per row (+ ds_next), and this stripe's dw into DW (atomics)."""
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    col_ok = cols < n_cols
    w = tl.load(W + cols, mask=col_ok, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK_ROWS, BLOCK), dtype=tl.float32)
    first = pid * blocks_per_program * BLOCK_ROWS
    last = tl.minimum(first + blocks_per_program * BLOCK_ROWS, n_rows)
    for start in range(first, last, BLOCK_ROWS):
        offs = start + tl.arange(0, BLOCK_ROWS)
        row_ok = offs < last
        mask = row_ok[:, None] & col_ok[None, :]
        rows = offs.to(tl.int64)[:, None]
        dy = tl.load(DY + rows * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        s = tl.load(S + rows * stride_s + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(RSTD + offs, mask=row_ok, other=0.0)
        s_hat = s * rstd[:, None]
        wdy = dy * w[None, :]
        c = tl.sum(wdy * s_hat, axis=1) / n_cols
        ds = (wdy - s_hat * c[:, None]) * rstd[:, None]
        if HAS_DS_NEXT:
            ds += tl.load(DS_NEXT + rows * stride_dn + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        tl.store(DX + rows * stride_dx + cols[None, :], ds.to(DX.dtype.element_ty), mask=mask)
        dw += dy * s_hat
    tl.atomic_add(DW + cols, tl.sum(dw, axis=0), mask=col_ok)


def settings(n_cols: int, n_rows: int = 0) -> dict:
    """Launch shape for a hidden size: BLOCK (the whole row), BLOCK_ROWS rows per program, warps, and
    backward programs per SM. Short rows are stacked so one program holds ~TILE_ELEMENTS elements;
    warps grow with the tile (Liger's `calculate_settings` for one row)."""
    block = max(16, triton.next_power_of_2(n_cols))
    block_rows = max(1, TILE_ELEMENTS // block)
    if n_rows:
        block_rows = min(block_rows, triton.next_power_of_2(n_rows))
    tile = block * block_rows
    num_warps = 32 if tile >= 32768 else 16 if tile >= 8192 else 8 if tile >= 2048 else 4
    return {"BLOCK": block, "BLOCK_ROWS": block_rows, "num_warps": num_warps, "per_sm": 2}


def _check_runnable(t: torch.Tensor) -> None:
    if t.device.type != "cuda" and not _INTERPRET:
        raise RuntimeError(f"lmw_kernels.rmsnorm needs a CUDA tensor or TRITON_INTERPRET=1 (got device {t.device})")


def _rows(t: torch.Tensor, n_cols: int) -> torch.Tensor:
    """(..., n_cols) -> (rows, n_cols) with unit column stride (a view when possible, else a copy)."""
    t2 = t.reshape(-1, n_cols)
    return t2 if t2.stride(-1) == 1 else t2.contiguous()


def _validate(x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor | None = None) -> None:
    if x.dim() < 1 or x.shape[-1] == 0:
        raise ValueError(f"rms_norm: x needs a non-empty last (hidden) dim, got shape {tuple(x.shape)}")
    if weight.dim() != 1 or weight.shape[0] != x.shape[-1]:
        raise ValueError(f"rms_norm: weight shape {tuple(weight.shape)} != (hidden,) = ({x.shape[-1]},)")
    if x.dtype not in _DTYPES:
        raise ValueError(f"rms_norm: x dtype {x.dtype} not in fp16/bf16/fp32")
    if weight.dtype not in _DTYPES:
        raise ValueError(f"rms_norm: weight dtype {weight.dtype} not in fp16/bf16/fp32")
    if x.shape[-1] > MAX_HIDDEN:
        raise ValueError(f"rms_norm: hidden size {x.shape[-1]} > {MAX_HIDDEN} (one row must fit one block)")
    if x.device != weight.device:
        raise ValueError(f"rms_norm: x on {x.device} but weight on {weight.device}")
    if residual is not None:
        if residual.shape != x.shape:
            raise ValueError(f"add_rms_norm: residual shape {tuple(residual.shape)} != x shape {tuple(x.shape)}")
        if residual.dtype not in _DTYPES or residual.device != x.device:
            raise ValueError(f"add_rms_norm: residual ({residual.dtype} on {residual.device}) must be fp16/bf16/fp32 "
                             f"on {x.device}")


def _fwd(x2: torch.Tensor, r2: torch.Tensor | None, weight: torch.Tensor, eps: float, out_dtype: torch.dtype | None):
    x2, weight = dense(x2, weight)
    r2 = None if r2 is None else r2.contiguous()
    n_rows, n_cols = x2.shape
    s_dtype = x2.dtype if r2 is None else torch.promote_types(x2.dtype, r2.dtype)
    y = torch.empty((n_rows, n_cols), dtype=out_dtype or s_dtype, device=x2.device)
    s = y if r2 is None else torch.empty((n_rows, n_cols), dtype=s_dtype, device=x2.device)
    rstd = torch.empty(n_rows, dtype=torch.float32, device=x2.device)
    if n_rows > 0:
        cfg = settings(n_cols, n_rows)
        r = x2 if r2 is None else r2
        launch(_rms_norm_fwd, x2)[(triton.cdiv(n_rows, cfg["BLOCK_ROWS"]),)](
            x2, r, s, weight, y, rstd, n_rows, n_cols, x2.stride(0), r.stride(0), s.stride(0), y.stride(0), eps,
            HAS_RESIDUAL=r2 is not None, BLOCK_ROWS=cfg["BLOCK_ROWS"], BLOCK=cfg["BLOCK"], num_warps=cfg["num_warps"])
    return y, s, rstd


def _fwd_fake(x2, weight, eps, out_dtype, r2=None):
    dtype = x2.dtype if r2 is None else torch.promote_types(x2.dtype, r2.dtype)
    return (x2.new_empty(x2.shape, dtype=out_dtype or dtype), x2.new_empty(x2.shape, dtype=dtype),
            x2.new_empty(x2.shape[0], dtype=torch.float32))


@kernel_op("rms_norm_fwd", fake=lambda x2, weight, eps, out_dtype: _fwd_fake(x2, weight, eps, out_dtype)[::2])
def _rms_norm_fwd_op(x2: torch.Tensor, weight: torch.Tensor, eps: float,
                     out_dtype: torch.dtype | None) -> tuple[torch.Tensor, torch.Tensor]:
    y, _, rstd = _fwd(x2, None, weight, eps, out_dtype)
    return y, rstd


@kernel_op("add_rms_norm_fwd",
           fake=lambda x2, r2, weight, eps, out_dtype: _fwd_fake(x2, weight, eps, out_dtype, r2))
def _add_rms_norm_fwd_op(x2: torch.Tensor, r2: torch.Tensor, weight: torch.Tensor, eps: float,
                         out_dtype: torch.dtype | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _fwd(x2, r2, weight, eps, out_dtype)


def _bwd(dy2: torch.Tensor, ds_next: torch.Tensor | None, s2: torch.Tensor, weight: torch.Tensor,
         rstd: torch.Tensor, dx_dtype: torch.dtype):
    dy2, s2, weight, rstd = dense(dy2, s2, weight, rstd)
    ds_next = None if ds_next is None else ds_next.contiguous()
    n_rows, n_cols = s2.shape
    dx = torch.empty((n_rows, n_cols), dtype=dx_dtype, device=s2.device)
    dw = torch.zeros(n_cols, dtype=torch.float32, device=s2.device)
    if n_rows > 0:
        cfg = settings(n_cols, n_rows)
        n_blocks = triton.cdiv(n_rows, cfg["BLOCK_ROWS"])
        blocks_per_program = triton.cdiv(n_blocks, min(programs_for(s2, cfg["per_sm"]), n_blocks))
        dn = dy2 if ds_next is None else ds_next
        launch(_rms_norm_bwd, s2)[(triton.cdiv(n_blocks, blocks_per_program),)](
            dy2, dn, s2, weight, rstd, dx, dw, n_rows, n_cols, dy2.stride(0), dn.stride(0), s2.stride(0), dx.stride(0),
            blocks_per_program, HAS_DS_NEXT=ds_next is not None, BLOCK_ROWS=cfg["BLOCK_ROWS"], BLOCK=cfg["BLOCK"],
            num_warps=cfg["num_warps"])
    return dx, dw.to(weight.dtype)


def _bwd_fake(dy2, s2, weight, rstd, *rest):
    return s2.new_empty(s2.shape), torch.empty_like(weight)


@kernel_op("rms_norm_bwd", fake=_bwd_fake)
def _rms_norm_bwd_op(dy2: torch.Tensor, s2: torch.Tensor, weight: torch.Tensor,
                     rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _bwd(dy2, None, s2, weight, rstd, s2.dtype)


@kernel_op("add_rms_norm_bwd", fake=_bwd_fake)
def _add_rms_norm_bwd_op(dy2: torch.Tensor, s2: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor,
                         ds_next: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _bwd(dy2, ds_next, s2, weight, rstd, s2.dtype)


def rms_norm_forward(x: torch.Tensor, weight: torch.Tensor, eps: float, out_dtype: torch.dtype | None = None):
    """Launch the forward: returns (y shaped like x, in out_dtype or x's, x as (rows, hidden), rstd (rows,) fp32)."""
    _validate(x, weight)
    _check_runnable(x)
    x2 = _rows(x, x.shape[-1])  # (R, H)
    y, rstd = _rms_norm_fwd_op(x2, weight.contiguous(), eps, out_dtype)
    return y.view(x.shape), x2, rstd


def rms_norm_backward(dy: torch.Tensor, x2: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor):
    """Launch the backward: returns (dx as (rows, hidden) in x's dtype, dw in weight's dtype)."""
    _check_runnable(x2)
    return _rms_norm_bwd_op(_rows(dy, x2.shape[1]), x2, weight.contiguous(), rstd)


class RMSNormTriton(torch.autograd.Function):
    """`RMSNormTriton.apply(x, weight, eps, out_dtype)`: fused RMSNorm; saves x, weight and the fp32 rstd (rows,)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, eps: float,
                out_dtype: torch.dtype | None = None) -> torch.Tensor:
        y, x2, rstd = rms_norm_forward(x, weight, eps, out_dtype)
        ctx.save_for_backward(x2, weight, rstd)
        ctx.x_shape = x.shape
        return y

    @staticmethod
    def backward(ctx, dy: torch.Tensor):
        x2, weight, rstd = ctx.saved_tensors
        dx, dw = rms_norm_backward(dy, x2, weight, rstd)
        return dx.view(ctx.x_shape), dw, None, None


class AddRMSNormTriton(torch.autograd.Function):
    """`AddRMSNormTriton.apply(x, residual, weight, eps, out_dtype)` -> (s = x + residual, rms_norm(s)); saves s and
    rstd."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float,
                out_dtype: torch.dtype | None = None):
        _validate(x, weight, residual)
        _check_runnable(x)
        n_cols = x.shape[-1]
        y, s2, rstd = _add_rms_norm_fwd_op(_rows(x, n_cols), _rows(residual, n_cols), weight.contiguous(), eps,
                                           out_dtype)
        ctx.save_for_backward(s2, weight, rstd)
        ctx.shape, ctx.dtypes = x.shape, (x.dtype, residual.dtype)
        return s2.view(x.shape), y.view(x.shape)

    @staticmethod
    def backward(ctx, ds_next: torch.Tensor | None, dy: torch.Tensor):
        s2, weight, rstd = ctx.saved_tensors
        n_cols = s2.shape[1]
        dy2 = _rows(dy, n_cols)
        if ds_next is None:
            ds, dw = _rms_norm_bwd_op(dy2, s2, weight.contiguous(), rstd)
        else:
            ds, dw = _add_rms_norm_bwd_op(dy2, s2, weight.contiguous(), rstd, _rows(ds_next, n_cols))
        ds = ds.view(ctx.shape)
        return ds.to(ctx.dtypes[0]), ds.to(ctx.dtypes[1]), dw, None, None


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5,
             out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """Fused RMSNorm over the last dim; x (..., hidden), weight (hidden,). Same result as `rms_norm_torch`, cast
    to `out_dtype` when given (e.g. the autocast dtype of the matmul that reads it: one rounding, in the kernel).

    Needs CUDA or TRITON_INTERPRET=1; raises RuntimeError otherwise (no silent fallback to the reference).
    """
    return RMSNormTriton.apply(x, weight, eps, out_dtype)


def add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5,
                 out_dtype: torch.dtype | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(s, rms_norm(s)) with s = x + residual, in one kernel each way: the pre-norm block's residual add and
    the next norm. Same results as `s = x + residual; rms_norm_torch(s, weight, eps)` (the norm cast to
    `out_dtype` when given)."""
    return AddRMSNormTriton.apply(x, residual, weight, eps, out_dtype)
