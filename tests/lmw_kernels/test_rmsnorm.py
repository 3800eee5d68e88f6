"""lmw_kernels.rmsnorm vs the plain-PyTorch reference (autograd through `rms_norm_torch`, the model's
`rms_norm_ref`) and a float64 reference. On CPU it runs under the Triton interpreter (tests/conftest.py);
bf16 only on CUDA (the interpreter computes bf16 wrongly)."""

import pytest
import torch

from lmw_kernels import rmsnorm
from lmw_kernels.rmsnorm import MAX_HIDDEN, RMSNormTriton, rms_norm, rms_norm_torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
CUDA_ONLY = pytest.mark.skipif(not torch.cuda.is_available(), reason="bf16 is wrong under the Triton interpreter")
DTYPES = [torch.float32, torch.float16, pytest.param(torch.bfloat16, marks=CUDA_ONLY)]
# (atol, rtol) vs the fp32-math torch reference (same formula, only the reduction order differs) ...
TOL = {torch.float32: (1e-5, 1e-5), torch.float16: (1e-2, 1e-2), torch.bfloat16: (3e-2, 3e-2)}
# ... and vs float64 math on the same (rounded) inputs
TOL64 = {torch.float32: (1e-4, 1e-4), torch.float16: (1e-2, 1e-2), torch.bfloat16: (5e-2, 5e-2)}


def _rms_norm_f64(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    x64 = x.double()
    return x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * w.double()


def _inputs(shape, dtype, seed=0, wdtype=None):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(DEVICE, dtype)
    w = (1.0 + 0.5 * torch.randn(shape[-1], generator=g)).to(DEVICE, wdtype or dtype)  # not all ones
    dy = torch.randn(shape, generator=g).to(DEVICE, dtype)
    return x, w, dy


def _grads(fn, x, w, dy, eps):
    x, w = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    y = fn(x, w, eps)
    y.backward(dy)
    return y.detach(), x.grad, w.grad


def _close(name, got, want, atol, rtol):
    err = (got.double() - want.double()).abs().max().item() if got.numel() else 0.0
    assert torch.allclose(got.double(), want.double(), atol=atol, rtol=rtol), f"{name}: max |diff| {err:.3g}"


SHAPES = [(3, 1), (4, 7), (5, 33), (3, 100), (9, 1000), (2, 3000), (2, 3, 100)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_rmsnorm_matches_torch_ref(shape, dtype):
    x, w, dy = _inputs(shape, dtype)
    y, dx, dw = _grads(rms_norm, x, w, dy, 1e-5)
    y_ref, dx_ref, dw_ref = _grads(rms_norm_torch, x, w, dy, 1e-5)
    assert y.dtype == dtype and dx.dtype == dtype and dw.dtype == dtype and y.shape == x.shape
    atol, rtol = TOL[dtype]
    _close("y", y, y_ref, atol, rtol)
    _close("dx", dx, dx_ref, atol, rtol)
    _close("dw", dw, dw_ref, atol * shape[0], rtol)  # dw sums over the rows


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 7), (9, 1000), (2, 3, 100)])
def test_rmsnorm_matches_float64(shape, dtype):
    x, w, dy = _inputs(shape, dtype, seed=1)
    y, dx, dw = _grads(rms_norm, x, w, dy, 1e-5)
    y64, dx64, dw64 = _grads(_rms_norm_f64, x.double(), w.double(), dy.double(), 1e-5)
    atol, rtol = TOL64[dtype]
    _close("y", y, y64, atol, rtol)
    _close("dx", dx, dx64, atol, rtol)
    _close("dw", dw, dw64, atol * shape[0], rtol)


def test_rmsnorm_matches_model_rms_norm_ref():
    from model.core.layers import rms_norm_ref

    x, w, _ = _inputs((6, 48), torch.float32, seed=2)
    torch.testing.assert_close(rms_norm(x, w, 1e-6), rms_norm_ref(x, w, 1e-6), atol=1e-6, rtol=1e-6)


def test_rmsnorm_eps_is_honoured():
    x = torch.full((2, 16), 1e-3, device=DEVICE)
    x[1] = 0.0  # an all-zero row: rstd = 1/sqrt(eps), the output stays 0
    w = torch.ones(16, device=DEVICE)
    for eps in (1e-6, 1e-2):
        torch.testing.assert_close(rms_norm(x, w, eps), rms_norm_torch(x, w, eps), atol=1e-6, rtol=1e-5)
    assert not torch.allclose(rms_norm(x, w, 1e-6), rms_norm(x, w, 1e-2))
    assert rms_norm(x, w, 1e-2)[1].abs().max() == 0


def test_rmsnorm_non_contiguous_inputs_and_grad():
    g = torch.Generator().manual_seed(3)
    w = torch.randn(40, generator=g).to(DEVICE)
    cases = {
        "transposed": torch.randn(40, 6, generator=g).to(DEVICE).t(),  # column stride != 1: copied
        "row_slice": torch.randn(6, 80, generator=g).to(DEVICE)[:, :40],  # row stride 80: used in place
        "every_other_row": torch.randn(12, 40, generator=g).to(DEVICE)[::2],
    }
    dy = torch.randn(40, 6, generator=g).to(DEVICE).t()  # non-contiguous upstream gradient too
    for name, x in cases.items():
        assert not x.is_contiguous(), name
        y, dx, dw = _grads(rms_norm, x, w, dy, 1e-5)
        y_ref, dx_ref, dw_ref = _grads(rms_norm_torch, x, w, dy, 1e-5)
        for what, got, want in (("y", y, y_ref), ("dx", dx, dx_ref), ("dw", dw, dw_ref)):
            _close(f"{name} {what}", got, want, 1e-5, 1e-5)


def test_rmsnorm_zero_rows():
    for shape in [(0, 16), (2, 0, 16)]:
        x, w, dy = _inputs(shape, torch.float32)
        y, dx, dw = _grads(rms_norm, x, w, dy, 1e-5)
        assert y.shape == shape and dx.shape == shape
        assert torch.equal(dw, torch.zeros_like(dw))


def test_rmsnorm_mixed_dtypes_fp16_x_fp32_weight():
    x, w, dy = _inputs((5, 33), torch.float16, seed=4, wdtype=torch.float32)
    y, dx, dw = _grads(rms_norm, x, w, dy, 1e-5)
    y_ref, dx_ref, dw_ref = _grads(rms_norm_torch, x, w, dy, 1e-5)
    assert (y.dtype, dx.dtype, dw.dtype) == (torch.float16, torch.float16, torch.float32)
    _close("y", y, y_ref, 1e-2, 1e-2)
    _close("dx", dx, dx_ref, 1e-2, 1e-2)
    _close("dw", dw, dw_ref, 1e-3, 1e-3)  # fp32 partial sums of fp16-exact products


def test_rmsnorm_autograd_function_and_large_fp16_values():
    x = torch.tensor([[6e4, -6e4, 1.0, 3e4]], dtype=torch.float16, device=DEVICE)  # x² overflows fp16, not fp32
    w = torch.ones(4, dtype=torch.float16, device=DEVICE)
    y = RMSNormTriton.apply(x, w, 1e-5)
    assert torch.isfinite(y).all()
    torch.testing.assert_close(y, rms_norm_torch(x, w, 1e-5), atol=1e-3, rtol=1e-3)


def test_rmsnorm_nan_propagates_like_the_reference():
    x, w, _ = _inputs((3, 8), torch.float32, seed=5)
    x[1, 2] = float("nan")
    y, y_ref = rms_norm(x, w, 1e-5), rms_norm_torch(x, w, 1e-5)
    torch.testing.assert_close(y, y_ref, equal_nan=True, atol=1e-5, rtol=1e-5)
    assert torch.isnan(y[1]).all() and torch.isfinite(y[[0, 2]]).all()


@pytest.mark.parametrize(
    "x_shape, w_shape, dtype, match",
    [
        ((2, 8), (7,), torch.float32, "weight shape"),
        ((2, 8), (2, 8), torch.float32, "weight shape"),
        ((2, 0), (0,), torch.float32, "non-empty last"),
        ((), (1,), torch.float32, "non-empty last"),
        ((2, 8), (8,), torch.float64, "x dtype"),
        ((2, 8), (8,), torch.int32, "x dtype"),
        ((0, MAX_HIDDEN + 1), (MAX_HIDDEN + 1,), torch.float32, "hidden size"),
    ],
)
def test_rmsnorm_bad_inputs_raise_value_error(x_shape, w_shape, dtype, match):
    x = torch.zeros(x_shape, dtype=dtype, device=DEVICE)
    w = torch.ones(w_shape, dtype=torch.float32, device=DEVICE)
    with pytest.raises(ValueError, match=match):
        rms_norm(x, w, 1e-5)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU path without the interpreter")
def test_rmsnorm_without_cuda_or_interpreter_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(rmsnorm, "_INTERPRET", False)
    with pytest.raises(RuntimeError, match="CUDA tensor or TRITON_INTERPRET=1"):
        rms_norm(torch.ones(2, 4), torch.ones(4))


# ---- the residual add folded into the norm ------------------------------------------------------------------


def _add_norm_reference(x, r, w, eps):
    """What the pre-norm block computes without the kernel: s = x + r in PyTorch, then the reference norm."""
    s = x + r
    return s, rms_norm_torch(s, w, eps)


@pytest.mark.parametrize("shape", [(3, 1), (5, 33), (9, 1000), (2, 3, 100), (70, 64)])
@pytest.mark.parametrize("dtypes", [(torch.float32, torch.float32), (torch.float16, torch.float16),
                                    (torch.float32, torch.float16)])  # the model's fp32 stream + a half delta
def test_add_rms_norm_matches_add_then_norm(shape, dtypes):
    """Forward (s and y) and every gradient, with both outputs used downstream (ds_next) as in the model."""
    xd, rd = dtypes
    g = torch.Generator().manual_seed(1)
    x0, r0 = torch.randn(shape, generator=g), torch.randn(shape, generator=g)
    w0 = 1.0 + 0.5 * torch.randn(shape[-1], generator=g)
    dy, ds = torch.randn(shape, generator=g), torch.randn(shape, generator=g)
    results = []
    for fn in (rmsnorm.add_rms_norm, _add_norm_reference):
        x = x0.to(DEVICE, xd).requires_grad_()
        r = r0.to(DEVICE, rd).requires_grad_()
        w = w0.to(DEVICE).requires_grad_()
        s, y = fn(x, r, w, 1e-5)
        ((s.float() * ds.to(DEVICE)).sum() + (y.float() * dy.to(DEVICE)).sum()).backward()
        results.append((s, y, x.grad, r.grad, w.grad))
    atol, rtol = TOL[torch.float16] if torch.float16 in dtypes else TOL[torch.float32]
    for name, got, want in zip(("s", "y", "dx", "dr", "dw"), *results, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape, name
        _close(name, got, want, atol, rtol * (10 if name == "dw" else 1))


def test_add_rms_norm_sum_unused_downstream():
    """Only the normalized output feeds the loss (ds_next is None): dx = dr = the norm's input gradient."""
    x, w, dy = _inputs((6, 40), torch.float32)
    r = torch.randn(6, 40, device=DEVICE)
    xs, rs = x.clone().requires_grad_(), r.clone().requires_grad_()
    _, y = rmsnorm.add_rms_norm(xs, rs, w, 1e-5)
    y.backward(dy)
    ref_y, ref_dx, ref_dw = _grads(rms_norm_torch, x + r, w, dy, 1e-5)
    _close("y", y.detach(), ref_y, 1e-5, 1e-5)
    _close("dx", xs.grad, ref_dx, 1e-5, 1e-5)
    _close("dr", rs.grad, ref_dx, 1e-5, 1e-5)


@pytest.mark.parametrize("hidden, block_rows", [(8, 256), (100, 32), (1000, 4), (3000, 1)])
def test_settings_stack_short_rows(hidden, block_rows):
    """Short rows share a program (a ~4096-element tile); a long row gets one to itself."""
    cfg = rmsnorm.settings(hidden)
    assert cfg["BLOCK"] >= hidden and cfg["BLOCK_ROWS"] == block_rows
    assert rmsnorm.settings(hidden, n_rows=3)["BLOCK_ROWS"] == min(block_rows, 4)


def test_many_rows_per_program_in_the_backward():
    """More row blocks than programs: each backward program walks a stripe and adds its dw once (atomics)."""
    x, w, dy = _inputs((517, 24), torch.float32, seed=3)  # 24 -> 128 rows per block, 5 blocks over 4 programs
    got = _grads(rms_norm, x, w, dy, 1e-5)
    want = _grads(rms_norm_torch, x, w, dy, 1e-5)
    for name, g, ref in zip(("y", "dx", "dw"), got, want, strict=True):
        _close(name, g, ref, 1e-5, 1e-4)


def test_add_rms_norm_rejects_a_mismatched_residual():
    with pytest.raises(ValueError, match="residual shape"):
        rmsnorm.add_rms_norm(torch.ones(2, 4, device=DEVICE), torch.ones(2, 5, device=DEVICE),
                             torch.ones(4, device=DEVICE))


def test_out_dtype_is_the_reference_cast_once():
    """out_dtype (the autocast dtype of the next matmul): the fp32 norm rounded once; the half-precision
    gradient flows back into the fp32 input and weight as the cast's backward would."""
    x, w, _ = _inputs((7, 40), torch.float32, seed=4)
    r = torch.randn(7, 40, device=DEVICE).to(torch.float16)
    dy = torch.randn(7, 40, device=DEVICE).to(torch.float16)
    got = [t.clone().requires_grad_() for t in (x, r, w)]
    want = [t.clone().requires_grad_() for t in (x, r, w)]
    _, y = rmsnorm.add_rms_norm(*got, 1e-5, out_dtype=torch.float16)
    _, ref = _add_norm_reference(*want, 1e-5)
    ref = ref.to(torch.float16)
    assert y.dtype == torch.float16
    _close("y", y, ref, 0, 0)
    y.backward(dy)
    ref.backward(dy)
    for name, a, b in zip(("dx", "dr", "dw"), got, want, strict=True):
        # dr is fp16: the fp32 sums' order (kernel vs autograd) can move it by one fp16 step (~1e-3 relative)
        _close(name, a.grad, b.grad, *((1e-4, 2e-3) if name == "dr" else (1e-5, 1e-4)))
    plain = rmsnorm.rms_norm(x, w, 1e-5, out_dtype=torch.float16)
    _close("rms_norm y", plain, rms_norm_torch(x, w, 1e-5).to(torch.float16), 0, 0)
