"""cross_entropy / perplexity checked against torch.nn.functional.cross_entropy and math.exp."""

import math

import pytest
import torch
import torch.nn.functional as F

from model.core.loss import cross_entropy, perplexity


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _reference(logits: torch.Tensor, targets: torch.Tensor, **kwargs) -> torch.Tensor:
    """F.cross_entropy on flattened (N, V) logits in fp32: the independent reference."""
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1), **kwargs)


@pytest.mark.parametrize("batch_shape", [(13,), (4, 7), (2, 3, 5)])
def test_matches_torch_on_random_logits(batch_shape):
    g = _gen(1)
    vocab = 11
    logits = torch.randn(*batch_shape, vocab, generator=g) * 3
    targets = torch.randint(0, vocab, batch_shape, generator=g)
    out = cross_entropy(logits, targets)
    assert out.shape == ()
    torch.testing.assert_close(out, _reference(logits, targets), rtol=1e-6, atol=1e-6)


def test_huge_logits_stay_finite_and_match():
    g = _gen(2)
    logits = torch.randn(6, 9, 32, generator=g) * 1e4  # exp() of these overflows without the max shift
    targets = torch.randint(0, 32, (6, 9), generator=g)
    out = cross_entropy(logits, targets)
    assert torch.isfinite(out)
    torch.testing.assert_close(out, _reference(logits, targets), rtol=1e-5, atol=1e-3)
    # one position where the target has the (unique) largest logit by a mile: loss exactly ~0
    one = torch.tensor([[1e4, -1e4, 0.0]])
    assert cross_entropy(one, torch.tensor([0])).item() == pytest.approx(0.0, abs=1e-6)
    assert cross_entropy(one, torch.tensor([1])).item() == pytest.approx(2e4, rel=1e-6)


def test_bf16_logits_computed_in_fp32():
    g = _gen(3)
    logits = (torch.randn(4, 16, 50, generator=g) * 4).to(torch.bfloat16)
    targets = torch.randint(0, 50, (4, 16), generator=g)
    out = cross_entropy(logits, targets)
    assert out.dtype == torch.float32
    # the reference sees the same bf16 values upcast exactly to fp32, so agreement is to fp32 precision
    torch.testing.assert_close(out, _reference(logits, targets), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("ignore_index", [-100, 0, 3])
def test_ignore_index_matches_torch(ignore_index):
    g = _gen(4)
    vocab = 7
    logits = torch.randn(3, 10, vocab, generator=g)
    targets = torch.randint(0, vocab, (3, 10), generator=g)
    mask = torch.rand(3, 10, generator=g) < 0.4
    targets = targets.masked_fill(mask, ignore_index)
    assert (targets == ignore_index).any() and (targets != ignore_index).any()
    out = cross_entropy(logits, targets, ignore_index=ignore_index)
    torch.testing.assert_close(out, _reference(logits, targets, ignore_index=ignore_index), rtol=1e-6, atol=1e-6)


def test_gradient_matches_torch():
    g = _gen(5)
    base = torch.randn(3, 8, 13, generator=g) * 2
    targets = torch.randint(0, 13, (3, 8), generator=g)
    ours = base.clone().requires_grad_(True)
    ref = base.clone().requires_grad_(True)
    cross_entropy(ours, targets).backward()
    _reference(ref, targets).backward()
    torch.testing.assert_close(ours.grad, ref.grad, rtol=1e-5, atol=1e-7)


def test_gradient_with_ignore_index_matches_torch():
    g = _gen(6)
    base = torch.randn(4, 6, 9, generator=g)
    targets = torch.randint(0, 9, (4, 6), generator=g)
    targets[0, :3] = -100
    targets[2, 5] = -100
    ours = base.clone().requires_grad_(True)
    ref = base.clone().requires_grad_(True)
    cross_entropy(ours, targets, ignore_index=-100).backward()
    _reference(ref, targets, ignore_index=-100).backward()
    torch.testing.assert_close(ours.grad, ref.grad, rtol=1e-5, atol=1e-7)
    assert torch.all(ours.grad[0, :3] == 0) and torch.all(ours.grad[2, 5] == 0)


def test_gradient_of_bf16_logits_matches_torch():
    g = _gen(7)
    base = torch.randn(2, 5, 17, generator=g).to(torch.bfloat16)
    targets = torch.randint(0, 17, (2, 5), generator=g)
    ours = base.clone().requires_grad_(True)
    ref = base.clone().requires_grad_(True)
    cross_entropy(ours, targets).backward()
    _reference(ref, targets).backward()
    assert ours.grad.dtype == torch.bfloat16
    torch.testing.assert_close(ours.grad, ref.grad)


@pytest.mark.parametrize("loss", [0.0, 1.5, math.log(50257)])
def test_perplexity(loss):
    assert perplexity(loss) == pytest.approx(math.exp(loss), rel=1e-6)
