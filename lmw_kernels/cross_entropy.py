"""Fused linear + cross-entropy over the LM head, never materializing the full (N, V) logits.

    loss = mean_{i: t_i != ignore} [ logsumexp_v(h_i · W_v) − h_i · W_{t_i} ]          (fp32 scalar)

Mirrors Liger-Kernel `src/liger_kernel/ops/fused_linear_cross_entropy.py` (Hsu et al. 2024, "Liger
Kernel: Efficient Triton Kernels for LLM Training", §3.3) and its row kernel in `ops/cross_entropy.py`:
the FORWARD walks row chunks of `hidden` and, per chunk,

    logits_c = h_c Wᵀ                        (chunk, V) in the input dtype — the only vocab-wide buffer
    kernel:   one program per row, online max/sum over V in blocks (Milakov & Gimelshein 2018) gives
              lse; loss_i = lse − x_{t_i}; then a second sweep overwrites logits_c IN PLACE with
              d loss / d logits = (softmax − onehot) / n_valid   (zero rows for ignored targets)
    grad_h_c = g_c W        grad_W += g_cᵀ h_c   (grad_W accumulated in fp32 across chunks)

so the gradients are finished during the forward and saved; the BACKWARD only scales them by the
(scalar) upstream gradient — always multiplied, no `.item()` sync. Chunk rows: the most that keep one
chunk's logits under CHUNK_BYTES (128 MiB), never fewer than Liger's rule `next_pow2(ceil(N / ceil(V / d)))`
(`default_chunk_size`): few large GEMMs instead of many small ones. Memory held for backward is grad_h
(N, d) + grad_W (V, d) instead of eager's fp32 log-softmax (N, V) (+ the input-dtype logits).

`n_valid` (non-ignored targets) stays a device tensor read by the kernel, so nothing syncs; all targets
ignored gives a NaN loss (0/0) and zero gradients, like `F.cross_entropy`. Targets outside [0, V) raise a
ValueError on CPU; on CUDA they are not checked (that would sync): the Triton row reads NaN for them.

Backends (`backend=`): "triton" runs the row kernel — on CUDA, or on CPU under `TRITON_INTERPRET=1` (read
at import, as Triton does) — and raises a one-line RuntimeError elsewhere; "torch" runs the same chunked
algorithm with the row step in plain torch (same memory profile); "auto" (default) picks "triton" when it
can run and otherwise falls back to "torch" (also for bf16 under the interpreter, which computes bf16
wrongly). Under autocast the inputs are cast to the autocast dtype first, as a matmul would be.
`linear_cross_entropy_torch` is the eager reference the tests compare against.
"""

import os

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from lmw_kernels.runtime import DTYPES as _DTYPES
from lmw_kernels.runtime import INTERPRET as _INTERPRET
from lmw_kernels.runtime import dense, kernel_op, launch

_BACKENDS = ("auto", "triton", "torch")
_CUDA_BLOCK_V = 4096  # vocab block per sweep step on the GPU (Liger: up to 32768 with 32 warps)
_CPU_BLOCK_V = 8192  # interpreter: bigger blocks = fewer interpreted steps
CHUNK_BYTES = 128 * 2**20  # the largest (chunk, V) logits buffer the default chunking allows


def linear_cross_entropy_torch(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                               ignore_index: int = -100) -> torch.Tensor:
    """Eager reference: full logits `hidden @ weight.T`, upcast to fp32, mean cross-entropy."""
    logits = hidden.reshape(-1, hidden.shape[-1]) @ weight.T  # (N, V)
    return F.cross_entropy(logits.float(), targets.reshape(-1), ignore_index=ignore_index)


@triton.jit
def _ce_loss_grad_rows(LOGITS, TARGETS, LOSS, N_VALID, stride_row, V, ignore_index, BLOCK_V: tl.constexpr):
    """One row per program: LOSS[row] = lse − x_t; LOGITS[row] := (softmax − onehot_t) / n_valid in place."""
    row = tl.program_id(0).to(tl.int64)
    LOGITS += row * stride_row
    cols = tl.arange(0, BLOCK_V)
    t = tl.load(TARGETS + row)
    if t == ignore_index:
        for start in range(0, V, BLOCK_V):
            offs = start + cols
            tl.store(LOGITS + offs, tl.zeros((BLOCK_V,), dtype=LOGITS.dtype.element_ty), mask=offs < V)
        tl.store(LOSS + row, 0.0)
        return
    # x_t before the row is overwritten; an out-of-range target (unchecked on CUDA) reads NaN, never OOB
    x_t = tl.load(LOGITS + t, mask=(t >= 0) & (t < V), other=float("nan")).to(tl.float32)
    # sweep 1: online max m and rescaled sum d = Σ exp(x − m)
    m = float("-inf")
    d = 0.0
    for start in range(0, V, BLOCK_V):
        offs = start + cols
        x = tl.load(LOGITS + offs, mask=offs < V, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    lse = m + tl.log(d)
    inv_n = 1.0 / tl.load(N_VALID).to(tl.float32)
    # sweep 2: gradient of the mean loss w.r.t. the logits, written over them
    for start in range(0, V, BLOCK_V):
        offs = start + cols
        mask = offs < V
        x = tl.load(LOGITS + offs, mask=mask, other=float("-inf")).to(tl.float32)
        g = tl.exp(x - lse)
        g = tl.where(offs == t, g - 1.0, g) * inv_n
        tl.store(LOGITS + offs, g.to(LOGITS.dtype.element_ty), mask=mask)
    tl.store(LOSS + row, lse - x_t)


def _triton_runnable(t: torch.Tensor) -> bool:
    return t.is_cuda or (_INTERPRET and t.device.type == "cpu")


def ce_loss_grad_rows_triton(logits: torch.Tensor, targets: torch.Tensor, loss: torch.Tensor,
                             n_valid: torch.Tensor, ignore_index: int = -100,
                             block_v: int | None = None) -> None:
    """Launch the row kernel: fills `loss` (rows,) fp32 and overwrites contiguous `logits` (rows, V) with
    d(mean loss)/d logits. `n_valid` is a 0-d tensor (the mean's denominator). `block_v` (power of 2)
    overrides the vocab block, e.g. to exercise the multi-block online softmax in tests."""
    if logits.shape[0] > 0:
        loss.copy_(_row_losses_triton(logits, targets, n_valid, ignore_index, block_v))


def _row_losses_triton(logits: torch.Tensor, targets: torch.Tensor, n_valid: torch.Tensor, ignore_index: int,
                       block_v: int | None = None) -> torch.Tensor:
    """The row kernel on one chunk: returns the rows' losses (fp32) and leaves the gradient in `logits`."""
    if not _triton_runnable(logits):
        raise RuntimeError(f"cross-entropy Triton kernel needs CUDA tensors or TRITON_INTERPRET=1 at import; "
                           f"got device={logits.device}, TRITON_INTERPRET={os.environ.get('TRITON_INTERPRET')}")
    V = logits.shape[1]
    if not logits.is_contiguous():
        raise ValueError(f"logits must be contiguous, got strides {tuple(logits.stride())}")
    cap = _CUDA_BLOCK_V if logits.is_cuda else _CPU_BLOCK_V
    block = block_v if block_v is not None else min(triton.next_power_of_2(V), cap)
    if block <= 0 or block & (block - 1):
        raise ValueError(f"block_v must be a positive power of 2, got {block_v}")
    return _ce_loss_grad_rows_op(logits, targets, n_valid, ignore_index, block)


def _rows_fake(logits: torch.Tensor, targets: torch.Tensor, n_valid: torch.Tensor, ignore_index: int,
               block: int) -> torch.Tensor:
    return logits.new_empty(logits.shape[0], dtype=torch.float32)


# Mutates only `logits`, a whole fresh matmul output; the losses come back as a new tensor (a mutated slice of a
# larger buffer would be a view whose layout the compiled graph may change).
@kernel_op("ce_loss_grad_rows", mutates_args=("logits",), fake=_rows_fake)
def _ce_loss_grad_rows_op(logits: torch.Tensor, targets: torch.Tensor, n_valid: torch.Tensor, ignore_index: int,
                          block: int) -> torch.Tensor:
    targets, n_valid = dense(targets, n_valid)
    loss = torch.empty(logits.shape[0], dtype=torch.float32, device=logits.device)
    if logits.shape[0] > 0:
        launch(_ce_loss_grad_rows, logits)[(logits.shape[0],)](
            logits, targets, loss, n_valid, logits.stride(0), logits.shape[1], ignore_index, BLOCK_V=block,
            num_warps=8 if block >= 2048 else 4)
    return loss


def ce_loss_grad_rows_torch(logits: torch.Tensor, targets: torch.Tensor, loss: torch.Tensor,
                            n_valid: torch.Tensor, ignore_index: int = -100) -> None:
    """Same contract as `ce_loss_grad_rows_triton`, in plain torch (fp32 math on the chunk)."""
    loss.copy_(_row_losses_torch(logits, targets, n_valid, ignore_index))


def _row_losses_torch(logits: torch.Tensor, targets: torch.Tensor, n_valid: torch.Tensor,
                      ignore_index: int) -> torch.Tensor:
    x = logits.float()  # (rows, V)
    valid = targets != ignore_index
    t = torch.where(valid, targets, 0).clamp(0, x.shape[1] - 1).long()[:, None]  # (rows, 1)
    lse = torch.logsumexp(x, dim=1)
    loss = torch.where(valid, lse - x.gather(1, t).squeeze(1), 0.0)
    g = torch.exp(x - lse[:, None])
    g.scatter_add_(1, t, torch.full_like(t, -1.0, dtype=g.dtype))
    g.mul_((valid.to(g.dtype) / n_valid)[:, None])
    logits.copy_(g)
    return loss


def default_chunk_size(n_rows: int, vocab: int, hidden: int, itemsize: int = 2) -> int:
    """Rows per chunk: as many as keep one chunk's logits under CHUNK_BYTES (a power of 2), and never fewer
    than Liger's rule (chunk·V ≈ N·d, i.e. next_pow2(ceil(N / ceil(V / d)))). Liger's rule alone gives
    256 rows at N 8192, d 768, V 32768: 32 small GEMMs per matrix, slower than eager (0.76x on an H200);
    at 128 MiB the same shape runs in 4 chunks and still holds far less than eager's (N, V) fp32 buffers."""
    liger = triton.next_power_of_2(triton.cdiv(max(n_rows, 1), triton.cdiv(vocab, hidden)))
    by_bytes = 1 << max(0, (CHUNK_BYTES // max(1, vocab * itemsize)).bit_length() - 1)
    return max(1, min(triton.next_power_of_2(max(n_rows, 1)), max(liger, by_bytes)))


class FusedLinearCrossEntropy(torch.autograd.Function):
    """loss = mean CE(h Wᵀ, t); gradients computed chunk by chunk in the forward and saved."""

    @staticmethod
    def forward(ctx, hidden, weight, targets, ignore_index=-100, chunk_size=None, use_triton=True, grad=True):
        # hidden (N, d), weight (V, d), targets (N,) int; grad=False (e.g. under no_grad) skips the gradients
        N, d = hidden.shape
        V = weight.shape[0]
        need_h, need_w = grad and ctx.needs_input_grad[0], grad and ctx.needs_input_grad[1]
        chunk = chunk_size if chunk_size is not None else default_chunk_size(N, V, d, hidden.element_size())
        targets = targets.contiguous()
        n_valid = (targets != ignore_index).sum()  # 0-d device tensor, no sync
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        grad_h = torch.empty(N, d, dtype=hidden.dtype, device=hidden.device) if need_h else None
        grad_w = torch.zeros(V, d, dtype=torch.float32, device=hidden.device) if need_w else None
        row_losses = _row_losses_triton if use_triton else _row_losses_torch
        for start in range(0, N, chunk):
            end = min(start + chunk, N)
            h_c = hidden[start:end]
            logits = h_c @ weight.T  # (c, V) input dtype, contiguous
            total = total + row_losses(logits, targets[start:end], n_valid, ignore_index).sum()
            if need_h:
                grad_h[start:end] = logits @ weight  # (c, d)
            if need_w:
                if logits.dtype == torch.float32:
                    grad_w.addmm_(logits.T, h_c)
                else:  # half-precision matmul (fp32 inside), fp32 accumulation across chunks
                    grad_w.add_(logits.T @ h_c)
        if need_w:
            grad_w = grad_w.to(weight.dtype)
        ctx.save_for_backward(grad_h, grad_w)
        return total / n_valid

    @staticmethod
    def backward(ctx, grad_out):
        grad_h, grad_w = ctx.saved_tensors
        # always multiply (a scalar): skipping it when grad_out == 1 would need a host sync
        if grad_h is not None:
            grad_h = grad_h * grad_out.to(grad_h.dtype)
        if grad_w is not None:
            grad_w = grad_w * grad_out.to(grad_w.dtype)
        return grad_h, grad_w, None, None, None, None, None


def _check_targets(targets: torch.Tensor, vocab: int, ignore_index: int) -> None:
    """CPU only (a check on CUDA would sync): every non-ignored target must lie in [0, vocab)."""
    if targets.device.type != "cpu" or torch.compiler.is_compiling() or targets.numel() == 0:
        return
    valid = targets != ignore_index
    bad = valid & ((targets < 0) | (targets >= vocab))
    if bool(bad.any()):
        raise ValueError(f"targets must lie in [0, {vocab}) or equal ignore_index={ignore_index}, "
                         f"got {int(targets[bad][0])}")


def fused_linear_cross_entropy(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                               ignore_index: int = -100, chunk_size: int | None = None,
                               backend: str = "auto") -> torch.Tensor:
    """Mean cross-entropy of `hidden @ weight.T` against `targets` (fp32 scalar), without full logits.

    hidden (..., d) float16/bfloat16/float32; weight (V, d) the LM head (no bias; may be tied to the
    embedding — its grad is returned and autograd accumulates); targets (...) integer. `chunk_size` = rows
    per chunk (default: Liger's rule). `backend`: "auto" | "triton" | "torch" (see the module docstring).
    """
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {_BACKENDS}, got {backend!r}")
    if hidden.dim() < 1 or weight.dim() != 2 or hidden.shape[-1] != weight.shape[1]:
        raise ValueError(f"hidden (..., d) and weight (V, d) must share d, got hidden {tuple(hidden.shape)}, "
                         f"weight {tuple(weight.shape)}")
    if targets.shape != hidden.shape[:-1]:
        raise ValueError(f"targets shape must equal hidden.shape[:-1]={tuple(hidden.shape[:-1])}, "
                         f"got {tuple(targets.shape)}")
    if targets.dtype.is_floating_point or targets.dtype.is_complex or targets.dtype == torch.bool:
        raise ValueError(f"targets must be an integer tensor, got dtype {targets.dtype}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"chunk_size must be a positive int or None, got {chunk_size!r}")
    device_type = hidden.device.type
    if torch.is_autocast_enabled(device_type):  # cast like autocast casts a matmul's inputs
        dtype = torch.get_autocast_dtype(device_type)
        hidden, weight = hidden.to(dtype), weight.to(dtype)
    if hidden.dtype not in _DTYPES or weight.dtype != hidden.dtype:
        raise ValueError(f"hidden and weight must share a dtype in {_DTYPES}, got hidden {hidden.dtype}, "
                         f"weight {weight.dtype}")
    _check_targets(targets, weight.shape[0], ignore_index)
    runnable = _triton_runnable(hidden) and not (_INTERPRET and hidden.dtype == torch.bfloat16)
    if backend == "triton" and not _triton_runnable(hidden):
        raise RuntimeError(f"fused_linear_cross_entropy(backend='triton') needs CUDA tensors or TRITON_INTERPRET=1 "
                           f"at import; got device={hidden.device}")
    use_triton = backend == "triton" or (backend == "auto" and runnable)
    grad = torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
    h2 = hidden.reshape(-1, hidden.shape[-1])  # (N, d)
    with torch.autocast(device_type, enabled=False):
        return FusedLinearCrossEntropy.apply(h2, weight, targets.reshape(-1), ignore_index, chunk_size,
                                             use_triton, grad)
