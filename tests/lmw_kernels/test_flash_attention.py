"""FlashAttention-2 (Triton and the tiled PyTorch reference) against naive attention in float64.

On CPU the Triton kernels run under TRITON_INTERPRET=1 (tests/conftest.py); bf16 is checked on CUDA only (the
interpreter computes bf16 wrongly); torch.compile on both."""

import math

import pytest
import torch

from lmw_kernels.flash_attention import FlashAttentionTorch, FlashAttentionTriton, flash_attention

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
# max |error| allowed against the float64 reference, outputs and gradients of unit-variance inputs
# CUDA fp32 runs TF32 dots: every dot operand (Q, K, V, dO and the fp32 P, dS) rounded to a 10-bit mantissa,
# so the bound sits between fp16's (inputs rounded once) and bf16's (7-bit mantissa)
TOL = {torch.float32: 2e-5 if not CUDA else 1.5e-2, torch.float16: 4e-3, torch.bfloat16: 3e-2}


def _inputs(shape_q, shape_kv, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(s, generator=gen, dtype=torch.float64) for s in (shape_q, shape_kv, shape_kv))
    grad_out = torch.randn(shape_q, generator=gen, dtype=torch.float64)
    return [t.to(DEVICE, dtype) for t in (q, k, v)], grad_out.to(DEVICE, dtype)


def _run(fn, q, k, v, grad_out, is_causal):
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out = fn(q, k, v, is_causal)
    out.backward(grad_out)
    return out, q.grad, k.grad, v.grad


def _reference(q, k, v, grad_out, is_causal):
    return _run(_attention64, *(t.double() for t in (q, k, v, grad_out)), is_causal)


def _attention64(q, k, v, is_causal):
    """The reference, written here and computed in float64 throughout: softmax(Q Kᵀ / √d) V, keys after the
    query masked (top-left aligned)."""
    assert q.dtype == k.dtype == v.dtype == torch.float64
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if is_causal:
        n, m = scores.shape[-2:]
        scores = scores.masked_fill(torch.ones(n, m, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def _assert_close(got, want, tol, label):
    for name, g, w in zip(("out", "dq", "dk", "dv"), got, want):
        err = (g.double() - w).abs().max().item()
        assert err <= tol, f"{label}: {name} max error {err:.2e} > {tol:.0e}"


SHAPES = [  # batch, heads, queries, keys, d_head, causal
    (1, 2, 37, 37, 16, True), (2, 1, 50, 50, 32, False), (1, 2, 64, 64, 64, True), (1, 1, 65, 65, 64, False),
    (1, 1, 1, 1, 32, True), (1, 1, 19, 45, 64, False), (1, 1, 33, 1, 32, False), (1, 1, 40, 40, 128, True),
    (1, 1, 23, 23, 48, True), (1, 3, 17, 17, 24, False),
]


@pytest.mark.parametrize("B,H,N,M,d,causal", SHAPES)
def test_triton_matches_naive_fp32(B, H, N, M, d, causal):
    (q, k, v), grad_out = _inputs((B, H, N, d), (B, H, M, d), torch.float32)
    got = _run(FlashAttentionTriton.apply, q, k, v, grad_out, causal)
    _assert_close(got, _reference(q, k, v, grad_out, causal), TOL[torch.float32], f"fp32 {B, H, N, M, d, causal}")


@pytest.mark.parametrize("dtype", [torch.float16, pytest.param(torch.bfloat16, marks=pytest.mark.skipif(
    not CUDA, reason="the Triton interpreter computes bf16 wrongly: bf16 is checked on CUDA"))])
@pytest.mark.parametrize("causal", [True, False])
def test_triton_half_precision(dtype, causal):
    (q, k, v), grad_out = _inputs((2, 2, 45, 64), (2, 2, 45, 64), dtype, seed=1)
    got = _run(flash_attention, q, k, v, grad_out, causal)
    assert all(t.dtype == dtype for t in got)
    _assert_close(got, _reference(q, k, v, grad_out, causal), TOL[dtype], f"{dtype} causal={causal}")


@pytest.mark.parametrize("N,d,causal", [(37, 16, True), (64, 32, False), (130, 64, True), (9, 8, False)])
def test_torch_reference_matches_naive(N, d, causal):
    (q, k, v), grad_out = _inputs((2, 3, N, d), (2, 3, N, d), torch.float32, seed=2)
    q, k, v, grad_out = (t.cpu() for t in (q, k, v, grad_out))
    got = _run(FlashAttentionTorch.apply, q, k, v, grad_out, causal)
    _assert_close(got, _reference(q, k, v, grad_out, causal), 2e-5, f"torch reference {N, d, causal}")


def test_saves_logsumexp_of_scaled_scores():
    (q, k, v), _ = _inputs((1, 2, 29, 32), (1, 2, 29, 32), torch.float32, seed=3)
    q.requires_grad_()
    out = FlashAttentionTriton.apply(q, k, v, True)
    lse = out.grad_fn.saved_tensors[-1]
    scores = (q.detach().double() @ k.double().transpose(-2, -1)) / math.sqrt(32)
    scores = scores.masked_fill(torch.ones(29, 29, dtype=torch.bool, device=DEVICE).triu(1), float("-inf"))
    assert lse.shape == (1, 2, 29) and lse.dtype == torch.float32
    assert (lse.double() - scores.logsumexp(-1)).abs().max() < (1e-5 if not CUDA else TOL[torch.float32])


def test_flat_batch_seq_d_is_one_head():
    (q, k, v), grad_out = _inputs((3, 21, 32), (3, 21, 32), torch.float32, seed=4)
    got = _run(FlashAttentionTriton.apply, q, k, v, grad_out, True)
    assert got[0].shape == (3, 21, 32)
    _assert_close(got, _reference(q, k, v, grad_out, True), TOL[torch.float32], "flat")


def test_strided_inputs_as_the_model_passes_them():
    """(B, T, H, d) projections viewed as (B, H, T, d): no copy, same answer."""
    (q, k, v), grad_out = _inputs((2, 27, 3, 32), (2, 27, 3, 32), torch.float32, seed=5)
    q, k, v, grad_out = (t.transpose(1, 2) for t in (q, k, v, grad_out))
    assert not q.is_contiguous()
    got = _run(flash_attention, q, k, v, grad_out, True)
    _assert_close(got, _reference(q, k, v, grad_out, True), TOL[torch.float32], "strided")
    # the output is compact (B, H, T, d) whatever the inputs' strides (lmw_kernels.runtime.dense)
    assert got[0].is_contiguous()


@pytest.mark.parametrize("q_shape,k_shape,causal,match", [
    ((1, 2, 8, 16), (1, 1, 8, 16), False, "grouped"),
    ((1, 2, 8, 8), (1, 2, 8, 8), False, "d_head=8"),
    ((1, 2, 8, 256), (1, 2, 8, 256), False, "d_head=256"),
    ((1, 2, 4, 16), (1, 2, 8, 16), True, "as many queries as keys"),
    ((2, 8, 16), (2, 8, 16, 1), False, "4-D"),
])
def test_bad_shapes_are_refused(q_shape, k_shape, causal, match):
    q = torch.zeros(q_shape, device=DEVICE)
    k = torch.zeros(k_shape, device=DEVICE)
    with pytest.raises(ValueError, match=match):
        flash_attention(q, k, k, causal)


def test_mixed_dtypes_are_refused():
    q = torch.zeros(1, 1, 8, 16, device=DEVICE)
    with pytest.raises(ValueError, match="share one of"):
        flash_attention(q, q.half(), q, False)


def test_torch_compile_matches_eager():
    """fullgraph: Dynamo must see the kernels as the custom ops, not trace into the autotuned launches."""
    shape, dtype = ((2, 4, 256, 64), torch.bfloat16) if CUDA else ((1, 2, 40, 32), torch.float32)
    (q, k, v), grad_out = _inputs(shape, shape, dtype, seed=6)
    eager = _run(flash_attention, q, k, v, grad_out, True)
    compiled = _run(torch.compile(flash_attention, fullgraph=True), q, k, v, grad_out, True)
    for a, b in zip(eager, compiled):
        assert torch.equal(a, b)
