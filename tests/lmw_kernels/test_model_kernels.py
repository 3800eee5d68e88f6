"""The model with every Triton kernel switched on trains like the plain PyTorch model.

Same initial weights, same batches, a few AdamW steps: losses and gradients agree within fp32
round-off (on CPU the kernels run under the Triton interpreter, tests/conftest.py)."""

import importlib.util

import pytest
import torch

from model.core.config import ModelConfig
from model.core.transformer import TransformerLM
from model.training.optim import AdamW

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
KERNELS = dict(attention="triton", norm="triton", ffn="triton", fused_projections=True)
if importlib.util.find_spec("lmw_kernels.cross_entropy"):
    KERNELS["loss"] = "fused"


def _config(**switches) -> ModelConfig:
    return ModelConfig(vocab_size=211, context_length=48, d_model=64, n_layers=2, n_heads=4, **switches)


def _train(cfg: ModelConfig, steps: int = 3):
    torch.manual_seed(0)
    model = TransformerLM(cfg).to(DEVICE)
    optimizer = AdamW(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(1)
    losses, grads = [], []
    for _ in range(steps):
        tokens = torch.randint(0, cfg.vocab_size, (2, 38), generator=gen).to(DEVICE)  # 37: not a tile multiple
        loss = model(tokens[:, :-1], targets=tokens[:, 1:])
        optimizer.zero_grad()
        loss.backward()
        losses.append(loss.item())
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
        optimizer.step()
    return losses, grads


@pytest.mark.parametrize("switches", [KERNELS, {"attention": "triton"}, {"norm": "triton", "ffn": "triton"},
                                      {"kernels": "all"}], ids=["all", "attention", "norm+ffn", "kernels-all"])
def test_kernels_train_like_the_naive_model(switches):
    want_losses, want_grads = _train(_config())
    got_losses, got_grads = _train(_config(**switches))
    tol = 1e-5 if DEVICE == "cpu" else 2e-3  # CUDA fp32 matmuls inside the kernels run in TF32
    assert got_losses == pytest.approx(want_losses, rel=tol, abs=tol)
    for step, (got, want) in enumerate(zip(got_grads, want_grads)):
        for name in want:
            scale = want[name].abs().max().item() + 1e-8
            err = (got[name] - want[name]).abs().max().item() / scale
            assert err < 20 * tol, f"step {step} {name}: relative gradient error {err:.1e}"


def test_kernel_model_generates_like_the_naive_model():
    """Prefill (causal) and cached decoding (one query, many keys) both go through the kernels."""
    from model.inference.generate import generate

    outputs = []
    for switches in ({}, KERNELS):
        torch.manual_seed(0)
        model = TransformerLM(_config(**switches)).to(DEVICE).eval()
        outputs.append(generate(model, [[5, 17, 42, 8]], max_new_tokens=6, temperature=0.0))
    assert outputs[0] == outputs[1]


def test_compiled_kernel_model_matches_eager():
    """torch.compile reaches every kernel as a custom op (no graph break into a Triton launch): the compiled
    model's loss and gradients are the eager ones."""
    results = []
    for compiled in (False, True):
        torch.manual_seed(0)
        model = TransformerLM(_config(**KERNELS)).to(DEVICE)
        forward = torch.compile(model) if compiled else model
        tokens = torch.randint(0, 211, (2, 38), generator=torch.Generator().manual_seed(1)).to(DEVICE)
        loss = forward(tokens[:, :-1], targets=tokens[:, 1:])
        loss.backward()
        results.append((loss.item(), {n: p.grad for n, p in model.named_parameters()}))
    (want_loss, want), (got_loss, got) = results
    assert got_loss == pytest.approx(want_loss, rel=1e-5)
    bound = 1e-4 if DEVICE == "cpu" else 1e-3  # CUDA: Inductor's fused elementwise rounding through TF32 attention dots
    for name in want:
        err = (got[name] - want[name]).abs().max().item() / (want[name].abs().max().item() + 1e-8)
        assert err < bound, f"{name}: relative gradient error {err:.1e}"
