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

from lmw_kernels.runtime import DTYPES as _DTYPES
from lmw_kernels.runtime import INTERPRET as _INTERPRET
from lmw_kernels.runtime import dense, kernel_op, launch

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


@triton.jit
def _swiglu_packed_fwd(H, C, n_rows, F, stride_h, stride_c, BLOCK_R: tl.constexpr, BLOCK_F: tl.constexpr):
    """c = silu(a)·b with a = h[:, :F] and b = h[:, F:] of one (rows, 2F) buffer (the fused W1/W3 GEMM's output)."""
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
    mask = (rows < n_rows)[:, None] & (cols < F)[None, :]
    h = H + rows.to(tl.int64)[:, None] * stride_h + cols[None, :]
    a = tl.load(h, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(h + F, mask=mask, other=0.0).to(tl.float32)
    tl.store(C + rows.to(tl.int64)[:, None] * stride_c + cols[None, :], (a * tl.sigmoid(a) * b).to(C.dtype.element_ty),
             mask=mask)


@triton.jit
def _swiglu_packed_bwd(DC, H, DH, n_rows, F, stride_dc, stride_h, stride_dh, BLOCK_R: tl.constexpr,
                       BLOCK_F: tl.constexpr):
    """dh = [da, db] into one (rows, 2F) buffer: the gradient the fused GEMM's backward reads, no concatenation."""
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
    mask = (rows < n_rows)[:, None] & (cols < F)[None, :]
    r = rows.to(tl.int64)[:, None]
    dc = tl.load(DC + r * stride_dc + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    h = H + r * stride_h + cols[None, :]
    a = tl.load(h, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(h + F, mask=mask, other=0.0).to(tl.float32)
    sig = tl.sigmoid(a)
    dh = DH + r * stride_dh + cols[None, :]
    tl.store(dh, (dc * b * sig * (1.0 + a * (1.0 - sig))).to(DH.dtype.element_ty), mask=mask)
    tl.store(dh + F, (dc * a * sig).to(DH.dtype.element_ty), mask=mask)


def packed_settings(n_rows: int, F: int, cuda: bool) -> dict:
    """BLOCK_F columns (at most 1024) x BLOCK_R rows per program: ~4096 elements on CUDA, few big programs on CPU."""
    block_f = min(1024, triton.next_power_of_2(F))
    target = 4096 if cuda else _CPU_MAX_BLOCK
    block_r = max(1, min(target // block_f, triton.next_power_of_2(max(n_rows, 1))))
    return {"BLOCK_R": block_r, "BLOCK_F": block_f, "num_warps": 8 if cuda else 4}


def _launch(n_elements: int, device: torch.device) -> tuple[int, int, int]:
    """(grid, BLOCK, num_warps) for n_elements > 0."""
    if device.type == "cuda":
        block, num_warps = _CUDA_BLOCK, _CUDA_WARPS
    else:
        block, num_warps = min(_CPU_MAX_BLOCK, triton.next_power_of_2(n_elements)), 4
    return triton.cdiv(n_elements, block), block, num_warps


def _check_runnable(t: torch.Tensor) -> None:
    if t.device.type != "cuda" and not _INTERPRET:
        raise RuntimeError(f"lmw_kernels.swiglu needs a CUDA tensor or TRITON_INTERPRET=1 (got device {t.device})")


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
    a, b = dense(a, b)
    c = torch.empty_like(a)
    n = a.numel()
    if n > 0:
        grid, block, num_warps = _launch(n, a.device)
        launch(_swiglu_fwd, a)[(grid,)](a, b, c, n, BLOCK=block, num_warps=num_warps)
    return c


def _bwd_fake(dc: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty_like(a), torch.empty_like(b)


@kernel_op("swiglu_bwd", fake=_bwd_fake)
def _swiglu_bwd_op(dc: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    dc, a, b = dense(dc, a, b)
    da, db = torch.empty_like(a), torch.empty_like(b)
    n = a.numel()
    if n > 0:
        grid, block, num_warps = _launch(n, a.device)
        launch(_swiglu_bwd, a)[(grid,)](dc, a, b, da, db, n, BLOCK=block, num_warps=num_warps)
    return da, db


def _packed_fwd_fake(h2: torch.Tensor) -> torch.Tensor:
    return h2.new_empty(h2.shape[0], h2.shape[1] // 2)


@kernel_op("swiglu_packed_fwd", fake=_packed_fwd_fake)
def _swiglu_packed_fwd_op(h2: torch.Tensor) -> torch.Tensor:
    (h2,) = dense(h2)
    n_rows, F = h2.shape[0], h2.shape[1] // 2
    c = torch.empty((n_rows, F), dtype=h2.dtype, device=h2.device)
    if n_rows > 0:
        cfg = packed_settings(n_rows, F, h2.is_cuda)
        launch(_swiglu_packed_fwd, h2)[(triton.cdiv(n_rows, cfg["BLOCK_R"]), triton.cdiv(F, cfg["BLOCK_F"]))](
            h2, c, n_rows, F, h2.stride(0), c.stride(0), BLOCK_R=cfg["BLOCK_R"], BLOCK_F=cfg["BLOCK_F"],
            num_warps=cfg["num_warps"])
    return c


def _packed_bwd_fake(dc2: torch.Tensor, h2: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(h2)


@kernel_op("swiglu_packed_bwd", fake=_packed_bwd_fake)
def _swiglu_packed_bwd_op(dc2: torch.Tensor, h2: torch.Tensor) -> torch.Tensor:
    dc2, h2 = dense(dc2, h2)
    n_rows, F = h2.shape[0], h2.shape[1] // 2
    dh = torch.empty_like(h2)
    if n_rows > 0:
        cfg = packed_settings(n_rows, F, h2.is_cuda)
        launch(_swiglu_packed_bwd, h2)[(triton.cdiv(n_rows, cfg["BLOCK_R"]), triton.cdiv(F, cfg["BLOCK_F"]))](
            dc2, h2, dh, n_rows, F, dc2.stride(0), h2.stride(0), dh.stride(0), BLOCK_R=cfg["BLOCK_R"],
            BLOCK_F=cfg["BLOCK_F"], num_warps=cfg["num_warps"])
    return dh


class SwiGLUPackedTriton(torch.autograd.Function):
    """`SwiGLUPackedTriton.apply(h)` = silu(h[..., :F]) · h[..., F:]; saves h; the gradient is one (..., 2F) tensor."""

    @staticmethod
    def forward(ctx, h: torch.Tensor) -> torch.Tensor:
        if h.shape[-1] % 2:
            raise ValueError(f"swiglu_packed: the last dim must hold [a, b] (even), got shape {tuple(h.shape)}")
        if h.dtype not in _DTYPES:
            raise ValueError(f"swiglu_packed: dtype {h.dtype} not in fp16/bf16/fp32")
        _check_runnable(h)
        h2 = h.reshape(-1, h.shape[-1])
        h2 = h2 if h2.stride(-1) == 1 else h2.contiguous()
        ctx.save_for_backward(h2)
        ctx.shape = h.shape
        return _swiglu_packed_fwd_op(h2).view(*h.shape[:-1], h.shape[-1] // 2)

    @staticmethod
    def backward(ctx, dc: torch.Tensor):
        (h2,) = ctx.saved_tensors
        dc2 = dc.reshape(-1, dc.shape[-1])
        return _swiglu_packed_bwd_op(dc2 if dc2.stride(-1) == 1 else dc2.contiguous(), h2).view(ctx.shape)


def swiglu_packed(h: torch.Tensor) -> torch.Tensor:
    """silu(a) · b for h = [a, b] along the last dim (the fused W1/W3 projection's output), without splitting h:
    the same result as `swiglu_torch(*h.chunk(2, -1))`; the backward writes [da, db] into one tensor."""
    return SwiGLUPackedTriton.apply(h)


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
