"""Fused SwiGLU activation c = silu(a) · b (Shazeer 2020), forward and backward in Triton.

The FFN is w2(silu(w1 x) · w3 x); this fuses its elementwise part, with a = w1 x and b = w3 x. Mirrors
Liger-Kernel `src/liger_kernel/ops/swiglu.py` (`LigerSiLUMulFunction`) and Unsloth's `swiglu` kernels:

    forward   c  = a · σ(a) · b                                       (fp32 math, stored in the input dtype)
    backward  da = dc · b · σ(a) · (1 + a · (1 − σ(a)))        db = dc · silu(a)

The backward recomputes σ(a) from a, so only a and b are saved — eager `F.silu(a) * b` also keeps
silu(a) (one more activation-sized tensor per FFN). Unlike Liger, the gradients go to fresh buffers
instead of overwriting a and b, so a retained graph can be backpropagated twice.

Elementwise over the flattened tensors (any shape; non-contiguous inputs are copied to contiguous).
The reference `swiglu_torch` computes in fp32 and casts back (`F.silu(a.float()) * b.float()`), which is
what the kernel computes; the model's eager formula `silu(a) * b` in the input dtype differs from it only
by low-precision rounding (the tests check both).

Runs on CUDA, or on CPU tensors under the Triton interpreter (`TRITON_INTERPRET=1`, read at import, as
Triton does). Elsewhere the launchers — and `swiglu`, which does NOT fall back to the reference — raise a
one-line RuntimeError.
"""

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from kernels.runtime import DTYPES as _DTYPES
from kernels.runtime import INTERPRET as _INTERPRET
from kernels.runtime import kernel_op, launch

_CUDA_BLOCK, _CUDA_WARPS = 1024, 4
_CPU_MAX_BLOCK = 16384  # the interpreter runs programs one by one: few, wide ones are fastest


def swiglu_torch(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Reference: silu(a) · b computed in fp32, cast back to a's dtype (the kernel's semantics)."""
    return (F.silu(a.float()) * b.float()).to(a.dtype)


@triton.jit
def _swiglu_fwd(A, B, C, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    a = tl.load(A + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(B + offs, mask=mask, other=0.0).to(tl.float32)
    c = a * tl.sigmoid(a) * b
    tl.store(C + offs, c.to(C.dtype.element_ty), mask=mask)


@triton.jit
def _swiglu_bwd(DC, A, B, DA, DB, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    dc = tl.load(DC + offs, mask=mask, other=0.0).to(tl.float32)
    a = tl.load(A + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(B + offs, mask=mask, other=0.0).to(tl.float32)
    sig = tl.sigmoid(a)
    silu = a * sig
    db = dc * silu
    da = dc * b * sig * (1.0 + a * (1.0 - sig))
    tl.store(DA + offs, da.to(DA.dtype.element_ty), mask=mask)
    tl.store(DB + offs, db.to(DB.dtype.element_ty), mask=mask)


def _launch(n_elements: int, device: torch.device) -> tuple[int, int, int]:
    """(grid, BLOCK, num_warps) for n_elements > 0."""
    if device.type == "cuda":
        block, num_warps = _CUDA_BLOCK, _CUDA_WARPS
    else:
        block, num_warps = min(_CPU_MAX_BLOCK, triton.next_power_of_2(n_elements)), 4
    return triton.cdiv(n_elements, block), block, num_warps


def _check_runnable(t: torch.Tensor) -> None:
    if t.device.type != "cuda" and not _INTERPRET:
        raise RuntimeError(f"kernels.swiglu needs a CUDA tensor or TRITON_INTERPRET=1 (got device {t.device})")


def _validate(a: torch.Tensor, b: torch.Tensor) -> None:
    if a.shape != b.shape:
        raise ValueError(f"swiglu: a shape {tuple(a.shape)} != b shape {tuple(b.shape)}")
    if a.dtype not in _DTYPES:
        raise ValueError(f"swiglu: a dtype {a.dtype} not in fp16/bf16/fp32")
    if b.dtype != a.dtype:
        raise ValueError(f"swiglu: b dtype {b.dtype} != a dtype {a.dtype}")
    if a.device != b.device:
        raise ValueError(f"swiglu: a on {a.device} but b on {b.device}")


def swiglu_forward(a: torch.Tensor, b: torch.Tensor):
    """Launch the forward: returns (c, a contiguous, b contiguous); c has a's shape and dtype."""
    _validate(a, b)
    _check_runnable(a)
    a, b = a.contiguous(), b.contiguous()
    return _swiglu_fwd_op(a, b), a, b


def swiglu_backward(dc: torch.Tensor, a: torch.Tensor, b: torch.Tensor):
    """Launch the backward for contiguous a, b: returns (da, db) in their dtype."""
    _check_runnable(a)
    return _swiglu_bwd_op(dc.contiguous(), a, b)


def _fwd_fake(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(a)


@kernel_op("swiglu_fwd", fake=_fwd_fake)
def _swiglu_fwd_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    c = torch.empty_like(a)
    n = a.numel()
    if n > 0:
        grid, block, num_warps = _launch(n, a.device)
        launch(_swiglu_fwd)[(grid,)](a, b, c, n, BLOCK=block, num_warps=num_warps)
    return c


def _bwd_fake(dc: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty_like(a), torch.empty_like(b)


@kernel_op("swiglu_bwd", fake=_bwd_fake)
def _swiglu_bwd_op(dc: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    da, db = torch.empty_like(a), torch.empty_like(b)
    n = a.numel()
    if n > 0:
        grid, block, num_warps = _launch(n, a.device)
        launch(_swiglu_bwd)[(grid,)](dc, a, b, da, db, n, BLOCK=block, num_warps=num_warps)
    return da, db


class SwiGLUTriton(torch.autograd.Function):
    """`SwiGLUTriton.apply(a, b)` = silu(a) · b, fused; saves only a and b (silu recomputed in backward)."""

    @staticmethod
    def forward(ctx, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        c, a_c, b_c = swiglu_forward(a, b)
        ctx.save_for_backward(a_c, b_c)
        return c

    @staticmethod
    def backward(ctx, dc: torch.Tensor):
        a, b = ctx.saved_tensors
        return swiglu_backward(dc, a, b)


def swiglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """silu(a) · b over same-shape, same-dtype tensors; the same result as `swiglu_torch`.

    Needs CUDA or TRITON_INTERPRET=1; raises RuntimeError otherwise (no silent fallback to the reference).
    """
    return SwiGLUTriton.apply(a, b)
