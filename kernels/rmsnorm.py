"""Fused RMSNorm (Zhang & Sennrich 2019) forward and backward in Triton.

    y = x · rstd · w,   rstd = 1 / sqrt(mean(x²) + eps)       (per row, fp32)

Mirrors Liger-Kernel `src/liger_kernel/ops/rms_norm.py` (and Unsloth's `fast_rms_layernorm`, the Triton
layer-norm tutorial): the forward runs one program per row with the whole row in one block, accumulates in
fp32 and saves the per-row fp32 `rstd`; the backward recomputes x̂ = x · rstd and gives

    dx = rstd · (dy·w − x̂ · mean(dy·w·x̂))        dw = Σ_rows dy · x̂

Each backward program walks a stripe of rows (grid = number of SMs on CUDA) and keeps a partial dw in
fp32 registers, written to an (n_programs, hidden) buffer that torch sums in a second pass.

Semantics equal `model/layers.py::rms_norm_ref` (copied here as `rms_norm_torch`): statistics and the
product with the weight in fp32, one cast back to x's dtype. I/O in fp16/bf16/fp32 (x and weight may
differ, e.g. bf16 activations with an fp32 weight); gradients come back in the input dtypes.

Runs on CUDA, or on CPU tensors under the Triton interpreter (`TRITON_INTERPRET=1`, read at import, as
Triton does). Elsewhere the launchers — and `rms_norm`, which does NOT fall back to the torch reference,
so a benchmark can never time the reference by accident — raise a one-line RuntimeError.
"""

import torch
import triton
import triton.language as tl

from kernels.runtime import DTYPES as _DTYPES
from kernels.runtime import INTERPRET as _INTERPRET

MAX_HIDDEN = 65536  # one row must fit in one block (registers / interpreter memory)
_CPU_BWD_PROGRAMS = 4  # few programs under the interpreter, so the row-stripe loop is exercised


def rms_norm_torch(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Reference: the model's `rms_norm_ref` — fp32 statistics and weight product, cast back to x.dtype."""
    x32 = x.float()
    normed = x32 * torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (normed * weight.float()).to(x.dtype)


@triton.jit
def _rms_norm_fwd(X, W, Y, RSTD, stride_x, stride_y, n_cols, eps, BLOCK: tl.constexpr):
    """One row per program: y = x · rstd · w with rstd saved (fp32) for the backward."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(RSTD + row, rstd)
    y = (x * rstd) * w
    tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _rms_norm_bwd(DY, X, W, RSTD, DX, DW_PART, stride_dy, stride_x, stride_dx, n_rows, n_cols,
                  rows_per_program, BLOCK: tl.constexpr):
    """Rows [pid·rows_per_program, …) : dx per row, and this stripe's partial dw into DW_PART[pid]."""
    pid = tl.program_id(0)
    row_start = pid * rows_per_program
    row_end = tl.minimum(row_start + rows_per_program, n_rows)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK,), dtype=tl.float32)
    first = row_start.to(tl.int64)  # 64-bit offsets; then walk the stripe by advancing the pointers
    DY += first * stride_dy
    X += first * stride_x
    DX += first * stride_dx
    RSTD += first
    for _ in range(row_start, row_end):
        dy = tl.load(DY + cols, mask=mask, other=0.0).to(tl.float32)
        x = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(RSTD)
        x_hat = x * rstd
        wdy = dy * w
        c = tl.sum(wdy * x_hat, axis=0) / n_cols
        dx = (wdy - x_hat * c) * rstd
        tl.store(DX + cols, dx.to(DX.dtype.element_ty), mask=mask)
        dw += dy * x_hat
        DY += stride_dy
        X += stride_x
        DX += stride_dx
        RSTD += 1
    tl.store(DW_PART + pid.to(tl.int64) * n_cols + cols, dw, mask=mask)


def _settings(n_cols: int) -> tuple[int, int]:
    """(BLOCK, num_warps): the whole row in one block; warps grow with it (Liger's `calculate_settings`)."""
    block = max(16, triton.next_power_of_2(n_cols))
    num_warps = 32 if block >= 32768 else 16 if block >= 8192 else 8 if block >= 2048 else 4
    return block, num_warps


def _check_runnable(t: torch.Tensor) -> None:
    if t.device.type != "cuda" and not _INTERPRET:
        raise RuntimeError(f"kernels.rmsnorm needs a CUDA tensor or TRITON_INTERPRET=1 (got device {t.device})")


def _rows(t: torch.Tensor, n_cols: int) -> torch.Tensor:
    """(..., n_cols) -> (rows, n_cols) with unit column stride (a view when possible, else a copy)."""
    t2 = t.reshape(-1, n_cols)
    return t2 if t2.stride(-1) == 1 else t2.contiguous()


def _validate(x: torch.Tensor, weight: torch.Tensor) -> None:
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


def rms_norm_forward(x: torch.Tensor, weight: torch.Tensor, eps: float):
    """Launch the forward: returns (y shaped like x, x as (rows, hidden), rstd (rows,) fp32)."""
    _validate(x, weight)
    _check_runnable(x)
    x2 = _rows(x, x.shape[-1])  # (R, H)
    y, rstd = _rms_norm_fwd_op(x2, weight, eps)
    return y.view(x.shape), x2, rstd


def rms_norm_backward(dy: torch.Tensor, x2: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor):
    """Launch the backward: returns (dx as (rows, hidden) in x's dtype, dw in weight's dtype)."""
    _check_runnable(x2)
    return _rms_norm_bwd_op(_rows(dy, x2.shape[1]), x2, weight, rstd)


# The launches as custom ops: torch.compile calls them as opaque ops with known output shapes instead of
# tracing into the Triton launch (which it cannot do under TRITON_INTERPRET).
@torch.library.custom_op("lm_workbench::rms_norm_fwd", mutates_args=())
def _rms_norm_fwd_op(x2: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    n_rows, n_cols = x2.shape
    y = torch.empty((n_rows, n_cols), dtype=x2.dtype, device=x2.device)
    rstd = torch.empty(n_rows, dtype=torch.float32, device=x2.device)
    if n_rows > 0:
        block, num_warps = _settings(n_cols)
        _rms_norm_fwd[(n_rows,)](x2, weight.contiguous(), y, rstd, x2.stride(0), y.stride(0), n_cols, eps,
                                 BLOCK=block, num_warps=num_warps)
    return y, rstd


@_rms_norm_fwd_op.register_fake
def _(x2: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    return x2.new_empty(x2.shape), x2.new_empty(x2.shape[0], dtype=torch.float32)


@torch.library.custom_op("lm_workbench::rms_norm_bwd", mutates_args=())
def _rms_norm_bwd_op(dy2: torch.Tensor, x2: torch.Tensor, weight: torch.Tensor,
                     rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    n_rows, n_cols = x2.shape
    dx = torch.empty((n_rows, n_cols), dtype=x2.dtype, device=x2.device)
    if n_rows == 0:
        return dx, torch.zeros_like(weight)
    if x2.device.type == "cuda":
        n_programs = torch.cuda.get_device_properties(x2.device).multi_processor_count
    else:
        n_programs = _CPU_BWD_PROGRAMS
    rows_per_program = triton.cdiv(n_rows, min(n_programs, n_rows))
    grid = triton.cdiv(n_rows, rows_per_program)
    dw_part = torch.empty((grid, n_cols), dtype=torch.float32, device=x2.device)  # (P, H) partial sums
    block, num_warps = _settings(n_cols)
    _rms_norm_bwd[(grid,)](dy2, x2, weight.contiguous(), rstd, dx, dw_part, dy2.stride(0), x2.stride(0),
                           dx.stride(0), n_rows, n_cols, rows_per_program, BLOCK=block, num_warps=num_warps)
    return dx, dw_part.sum(0).to(weight.dtype)


@_rms_norm_bwd_op.register_fake
def _(dy2: torch.Tensor, x2: torch.Tensor, weight: torch.Tensor,
      rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x2.new_empty(x2.shape), torch.empty_like(weight)


class RMSNormTriton(torch.autograd.Function):
    """`RMSNormTriton.apply(x, weight, eps)`: fused RMSNorm; saves x, weight and the fp32 rstd (rows,)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        y, x2, rstd = rms_norm_forward(x, weight, eps)
        ctx.save_for_backward(x2, weight, rstd)
        ctx.x_shape = x.shape
        return y

    @staticmethod
    def backward(ctx, dy: torch.Tensor):
        x2, weight, rstd = ctx.saved_tensors
        dx, dw = rms_norm_backward(dy, x2, weight, rstd)
        return dx.view(ctx.x_shape), dw, None


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Fused RMSNorm over the last dim; x (..., hidden), weight (hidden,). Same result as `rms_norm_torch`.

    Needs CUDA or TRITON_INTERPRET=1; raises RuntimeError otherwise (no silent fallback to the reference).
    """
    return RMSNormTriton.apply(x, weight, eps)
