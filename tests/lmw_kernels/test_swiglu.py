"""lmw_kernels.swiglu vs the plain-PyTorch references — `swiglu_torch` (fp32 math, cast back), the model's eager
`silu(a) * b` in the input dtype, and float64 — forward and both gradients. On CPU it runs under the Triton
interpreter (tests/conftest.py); bf16 only on CUDA (the interpreter computes bf16 wrongly)."""

import pytest
import torch
import torch.nn.functional as F

from lmw_kernels import swiglu as swiglu_mod
from lmw_kernels.swiglu import SwiGLUTriton, swiglu, swiglu_torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
CUDA_ONLY = pytest.mark.skipif(not torch.cuda.is_available(), reason="bf16 is wrong under the Triton interpreter")
DTYPES = [torch.float32, torch.float16, pytest.param(torch.bfloat16, marks=CUDA_ONLY)]
# (atol, rtol): vs the fp32-math reference (same math: ~1 ulp of the output dtype) ...
TOL = {torch.float32: (1e-6, 1e-5), torch.float16: (1e-3, 1e-3), torch.bfloat16: (1e-2, 1e-2)}
# ... vs float64 on the same rounded inputs, and vs eager math in the input dtype (rounds at every op)
TOL64 = {torch.float32: (1e-5, 1e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (2e-2, 2e-2)}
TOL_EAGER = {torch.float32: (1e-5, 1e-5), torch.float16: (1e-2, 1e-2), torch.bfloat16: (6e-2, 6e-2)}


def _eager(a, b):
    return F.silu(a) * b  # the model's formula, computed in the input dtype


def _inputs(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = (3.0 * torch.randn(shape, generator=g)).to(DEVICE, dtype)  # spans the curved part of silu
    b = torch.randn(shape, generator=g).to(DEVICE, dtype)
    dc = torch.randn(shape, generator=g).to(DEVICE, dtype)
    return a, b, dc


def _grads(fn, a, b, dc):
    a, b = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    c = fn(a, b)
    c.backward(dc)
    return c.detach(), a.grad, b.grad


def _check(name, got, want, tol):
    atol, rtol = tol
    for what, g, w in zip(("c", "da", "db"), got, want):
        err = (g.double() - w.double()).abs().max().item() if g.numel() else 0.0
        assert torch.allclose(g.double(), w.double(), atol=atol, rtol=rtol), f"{name} {what}: max |diff| {err:.3g}"


SHAPES = [(1,), (7,), (3, 33), (2, 3, 100), (5, 1000), (3, 7000)]  # the last spans two interpreter blocks


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_swiglu_matches_torch_ref(shape, dtype):
    a, b, dc = _inputs(shape, dtype)
    got = _grads(swiglu, a, b, dc)
    assert all(t.dtype == dtype and t.shape == a.shape for t in got)
    _check("vs swiglu_torch", got, _grads(swiglu_torch, a, b, dc), TOL[dtype])
    _check("vs eager silu(a)*b", got, _grads(_eager, a, b, dc), TOL_EAGER[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(7,), (2, 3, 100), (3, 7000)])
def test_swiglu_matches_float64(shape, dtype):
    a, b, dc = _inputs(shape, dtype, seed=1)
    got = _grads(swiglu, a, b, dc)
    want = _grads(_eager, a.double(), b.double(), dc.double())
    _check("vs float64", got, want, TOL64[dtype])


def test_swiglu_hand_computed_values():
    a = torch.tensor([0.0, 1.0, -2.0], device=DEVICE)
    b = torch.tensor([5.0, 2.0, 3.0], device=DEVICE)
    sig = 1.0 / (1.0 + torch.exp(-a))
    c, da, db = _grads(swiglu, a, b, torch.ones(3, device=DEVICE))
    torch.testing.assert_close(c, a * sig * b)
    torch.testing.assert_close(db, a * sig)
    torch.testing.assert_close(da, b * sig * (1 + a * (1 - sig)))  # d silu / da at 0 is 1/2
    assert da[0].item() == pytest.approx(2.5)


def test_swiglu_non_contiguous_inputs_and_grad():
    g = torch.Generator().manual_seed(2)
    a = (3.0 * torch.randn(40, 6, generator=g)).to(DEVICE).t()  # (6, 40), transposed
    b = torch.randn(6, 80, generator=g).to(DEVICE)[:, ::2]  # (6, 40), strided columns
    dc = torch.randn(40, 6, generator=g).to(DEVICE).t()
    assert not (a.is_contiguous() or b.is_contiguous() or dc.is_contiguous())
    _check("non-contiguous", _grads(swiglu, a, b, dc), _grads(swiglu_torch, a, b, dc), TOL[torch.float32])


def _saved_bytes(fn, a, b) -> int:
    a, b = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    sizes = []

    def pack(t):
        sizes.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(a, b)
    return sum(sizes)


def test_swiglu_saves_only_a_and_b():
    a, b, _ = _inputs((4, 256), torch.float32, seed=3)
    ours = _saved_bytes(SwiGLUTriton.apply, a, b)
    assert ours == a.nbytes + b.nbytes
    assert _saved_bytes(_eager, a, b) > ours  # eager also keeps silu(a)


def test_swiglu_backward_twice_with_retained_graph():
    a, b, dc = _inputs((3, 33), torch.float32, seed=4)
    a.requires_grad_()
    b.requires_grad_()
    c = swiglu(a, b)
    c.backward(dc, retain_graph=True)
    first = (a.grad.clone(), b.grad.clone())
    c.backward(dc)  # the saved a, b were not overwritten by the first backward
    torch.testing.assert_close(a.grad, 2 * first[0])
    torch.testing.assert_close(b.grad, 2 * first[1])


@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")  # numpy, interpreter
def test_swiglu_empty_and_extreme_inputs():
    for shape in [(0,), (2, 0, 5)]:
        a, b, dc = _inputs(shape, torch.float32)
        c, da, db = _grads(swiglu, a, b, dc)
        assert c.shape == da.shape == db.shape == shape
    # saturated sigmoid in fp32 and large fp16 values: finite, and equal to the reference
    a = torch.tensor([-1e4, -100.0, -30.0, 30.0, 100.0, 1e4], device=DEVICE)
    b, dc = torch.full_like(a, 0.5), torch.ones_like(a)
    got = _grads(swiglu, a, b, dc)
    assert all(torch.isfinite(t).all() for t in got)
    _check("saturated", got, _grads(swiglu_torch, a, b, dc), TOL[torch.float32])
    a16 = torch.tensor([-6e4, -20.0, 20.0, 6e4], dtype=torch.float16, device=DEVICE)
    b16, dc16 = torch.full_like(a16, 0.5), torch.ones_like(a16)
    _check("fp16 large", _grads(swiglu, a16, b16, dc16), _grads(swiglu_torch, a16, b16, dc16), TOL[torch.float16])


@pytest.mark.parametrize(
    "a, b, match",
    [
        (torch.zeros(2, 3), torch.zeros(3, 2), "shape"),
        (torch.zeros(4), torch.zeros(4, dtype=torch.float16), "b dtype"),
        (torch.zeros(4, dtype=torch.float64), torch.zeros(4, dtype=torch.float64), "a dtype"),
        (torch.zeros(4, dtype=torch.int64), torch.zeros(4, dtype=torch.int64), "a dtype"),
    ],
)
def test_swiglu_bad_inputs_raise_value_error(a, b, match):
    with pytest.raises(ValueError, match=match):
        swiglu(a.to(DEVICE), b.to(DEVICE))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU path without the interpreter")
def test_swiglu_without_cuda_or_interpreter_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(swiglu_mod, "_INTERPRET", False)
    with pytest.raises(RuntimeError, match="CUDA tensor or TRITON_INTERPRET=1"):
        swiglu(torch.ones(4), torch.ones(4))


@pytest.mark.parametrize("shape", [(3, 8), (5, 66), (2, 3, 2050), (1, 2)])
def test_swiglu_packed_matches_the_halves(shape):
    """h = [a, b] along the last dim: the same c as the reference on the halves, and dh = [da, db] in one tensor."""
    from lmw_kernels.swiglu import swiglu_packed

    g = torch.Generator().manual_seed(5)
    h0 = torch.randn(shape, generator=g).to(DEVICE)
    dc = torch.randn(*shape[:-1], shape[-1] // 2, generator=g).to(DEVICE)
    h = h0.clone().requires_grad_()
    c = swiglu_packed(h)
    c.backward(dc)
    ref_h = h0.clone().requires_grad_()
    ref = swiglu_torch(*ref_h.chunk(2, dim=-1))
    ref.backward(dc)
    torch.testing.assert_close(c, ref, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(h.grad, ref_h.grad, rtol=1e-5, atol=1e-6)


def test_swiglu_packed_rejects_an_odd_width():
    from lmw_kernels.swiglu import swiglu_packed

    with pytest.raises(ValueError, match="even"):
        swiglu_packed(torch.ones(2, 5, device=DEVICE))
