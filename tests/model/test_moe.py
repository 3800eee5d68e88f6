"""MoE FFN against a naive per-token reference, hand-computed losses, and a dense SwiGLU."""

from __future__ import annotations

import math

import pytest
import torch

from model.core.config import ModelConfig
from model.core.layers import SwiGLU
from model.core.moe import MoEFeedForward, expert_capacity, switch_loss
from model.core.transformer import TransformerLM


def _cfg(**kw) -> ModelConfig:
    base = dict(vocab_size=32, context_length=16, d_model=16, n_layers=1, n_heads=2, d_ff=24,
                n_experts=4, moe_top_k=2, moe_capacity_factor=None)
    base.update(kw)
    return ModelConfig(**base)


def naive_moe(x, router_w, w1, w2, w3, top_k, capacity_factor):
    """Per-token Python loop: softmax, top-k (by sorting), renormalise, capacity in priority order
    (all 1st choices in token order, then all 2nd choices, ...), sum of gated SwiGLU experts."""
    B, T, d = x.shape
    E = router_w.shape[0]
    xs = x.reshape(B * T, d)
    N = xs.shape[0]
    choices = []
    for n in range(N):
        logits = router_w @ xs[n]
        p = torch.exp(logits - logits.max())
        p = p / p.sum()
        experts = sorted(range(E), key=lambda e: -float(p[e].detach()))[:top_k]
        sel = torch.stack([p[e] for e in experts])
        choices.append((experts, sel / sel.sum()))
    cap = math.ceil(capacity_factor * N * top_k / E) if capacity_factor is not None else N * top_k
    used, kept = [0] * E, set()
    for r in range(top_k):
        for n in range(N):
            e = choices[n][0][r]
            if used[e] < cap:
                used[e] += 1
                kept.add((n, r))
    rows = []
    for n in range(N):
        y = torch.zeros(d, dtype=x.dtype)
        for r, e in enumerate(choices[n][0]):
            if (n, r) in kept:
                h = torch.nn.functional.silu(w1[e] @ xs[n]) * (w3[e] @ xs[n])
                y = y + choices[n][1][r] * (w2[e] @ h)
        rows.append(y)
    dropped = N * top_k - len(kept)
    return torch.stack(rows).view(B, T, d), dropped, [u / (N * top_k) for u in used]


@pytest.mark.parametrize("capacity_factor", [None, 0.5])
def test_moe_matches_naive_reference(capacity_factor):
    torch.manual_seed(0)
    moe = MoEFeedForward(_cfg(moe_capacity_factor=capacity_factor))
    x = torch.randn(2, 7, 16, requires_grad=True)
    probe = torch.randn(2, 7, 16)
    params = [moe.router.weight, moe.w1, moe.w2, moe.w3]

    y = moe(x)
    grads = torch.autograd.grad((y * probe).sum(), [x, *params])
    y_ref, dropped, load = naive_moe(x, *params[:1], moe.w1, moe.w2, moe.w3, 2, capacity_factor)
    grads_ref = torch.autograd.grad((y_ref * probe).sum(), [x, *params])

    torch.testing.assert_close(y, y_ref, atol=1e-5, rtol=1e-5)
    for name, g, g_ref in zip(["x", "router", "w1", "w2", "w3"], grads, grads_ref):
        torch.testing.assert_close(g, g_ref, atol=1e-5, rtol=1e-5, msg=f"grad {name}")
    if capacity_factor is not None:
        assert dropped > 0  # the tight capacity really drops
    assert moe.stats["dropped_fraction"] == pytest.approx(dropped / (14 * 2))
    assert moe.stats["load"] == pytest.approx(load)


def test_dropped_accounting_and_priority_with_one_hot_router():
    """Every token prefers expert 0, then expert 1: expert 0 keeps only the first C tokens."""
    torch.manual_seed(1)
    cfg = _cfg(d_model=4, n_heads=2, n_experts=4, moe_top_k=2, moe_capacity_factor=1.0)
    moe = MoEFeedForward(cfg)
    with torch.no_grad():
        moe.router.weight.copy_(torch.tensor([[3.0, 0, 0, 0], [2.0, 0, 0, 0], [0.0] * 4, [0.0] * 4]))
    x = torch.zeros(1, 10, 4)
    x[..., 0] = 1.0  # logits (3, 2, 0, 0) for every token
    y = moe(x)
    C = expert_capacity(1.0, 10, 2, 4)
    assert C == 5
    # experts 0 and 1 each keep 5 of their 10 assignments: 10 of 20 dropped
    assert moe.stats["dropped_fraction"] == pytest.approx(0.5)
    assert moe.stats["load"] == pytest.approx([0.25, 0.25, 0.0, 0.0])
    y_ref, dropped, _ = naive_moe(x, moe.router.weight, moe.w1, moe.w2, moe.w3, 2, 1.0)
    assert dropped == 10
    torch.testing.assert_close(y, y_ref, atol=1e-6, rtol=1e-5)
    assert y[0, 5:].abs().max() == 0  # later tokens lost both experts: only the residual carries them


def test_switch_loss_is_one_for_uniform_router_and_z_loss_hand_computed():
    cfg = _cfg(n_experts=4, moe_top_k=2, moe_aux_loss_coef=0.1, moe_z_loss_coef=0.01)
    moe = MoEFeedForward(cfg)
    with torch.no_grad():
        moe.router.weight.zero_()  # all logits 0: probs 1/4 everywhere
    moe(torch.randn(2, 5, 16))
    assert moe.stats["switch_loss"] == pytest.approx(1.0)
    assert moe.stats["z_loss"] == pytest.approx(math.log(4) ** 2)
    assert moe.aux_loss.item() == pytest.approx(0.1 * 1.0 + 0.01 * math.log(4) ** 2)


def test_switch_and_z_loss_hand_made_router():
    """E=2, k=1, logits (ln3, 0), (ln3, 0), (0, ln3): probs (.75,.25),(.75,.25),(.25,.75);
    f = (2/3, 1/3), P = (1.75/3, 1.25/3) → loss = 2·(2/3·1.75/3 + 1/3·1.25/3) = 9.5/9;
    logsumexp = ln 4 for every token → z = (ln 4)²."""
    cfg = _cfg(d_model=2, n_heads=1, n_experts=2, moe_top_k=1, moe_aux_loss_coef=1.0, moe_z_loss_coef=0.5)
    moe = MoEFeedForward(cfg)
    with torch.no_grad():
        moe.router.weight.copy_(torch.eye(2))
    ln3 = math.log(3)
    x = torch.tensor([[[ln3, 0.0], [ln3, 0.0], [0.0, ln3]]])
    moe(x)
    assert moe.stats["switch_loss"] == pytest.approx(9.5 / 9)
    assert moe.stats["z_loss"] == pytest.approx(math.log(4) ** 2)
    assert moe.aux_loss.item() == pytest.approx(9.5 / 9 + 0.5 * math.log(4) ** 2)
    assert moe.stats["load"] == pytest.approx([2 / 3, 1 / 3])
    probs = torch.tensor([[0.75, 0.25], [0.25, 0.75], [0.5, 0.5]])  # direct call, k=2: f = (1/2, 1/2)
    idx = torch.tensor([[0, 1], [1, 0], [0, 1]])
    assert float(switch_loss(probs, idx, 2)) == pytest.approx(2 * (0.5 * 0.5 + 0.5 * 0.5))


def test_aux_loss_gradient_reaches_router():
    moe = MoEFeedForward(_cfg(moe_aux_loss_coef=1.0, moe_z_loss_coef=1.0))
    moe(torch.randn(2, 6, 16))
    (g,) = torch.autograd.grad(moe.aux_loss, [moe.router.weight])
    assert g.abs().sum() > 0


def test_parameter_count_matches_config():
    for kw in (dict(n_experts=4, moe_top_k=2), dict(n_experts=3, moe_top_k=1, d_ff=40)):
        cfg = _cfg(**kw)
        moe = MoEFeedForward(cfg)
        assert sum(p.numel() for p in moe.parameters()) == cfg.ffn_params()
        std = math.sqrt(2 / (cfg.d_model + cfg.d_ff))
        assert moe.w2.abs().max() <= 3 * std + 1e-6


def test_single_expert_top1_equals_swiglu():
    torch.manual_seed(2)
    moe = MoEFeedForward(_cfg(n_experts=1, moe_top_k=1, moe_capacity_factor=None))
    dense = SwiGLU(16, 24)
    with torch.no_grad():
        dense.w1.weight.copy_(moe.w1[0])
        dense.w2.weight.copy_(moe.w2[0])
        dense.w3.weight.copy_(moe.w3[0])
    x = torch.randn(3, 5, 16)
    torch.testing.assert_close(moe(x), dense(x), atol=1e-6, rtol=1e-5)
    assert moe.stats["load"] == [1.0] and moe.stats["dropped_fraction"] == 0.0


def test_autocast_bf16_close_to_fp32_and_differentiable():
    torch.manual_seed(3)
    moe = MoEFeedForward(_cfg(moe_capacity_factor=1.25))
    x = torch.randn(2, 8, 16)
    y32 = moe(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y16 = moe(x)
        loss = y16.float().pow(2).mean() + moe.aux_loss
    assert y16.dtype == torch.bfloat16
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in moe.parameters())
    # routing is fp32 in both, so the same tokens are kept; only expert math is bf16
    torch.testing.assert_close(y16.float(), y32, atol=3e-2, rtol=3e-2)


def test_bad_inputs_do_not_crash():
    moe = MoEFeedForward(_cfg(moe_capacity_factor=1.0))
    empty = moe(torch.zeros(2, 0, 16))
    assert empty.shape == (2, 0, 16) and moe.stats["dropped_fraction"] == 0.0
    one = moe(torch.randn(1, 1, 16))  # decode step: one token, capacity 1
    assert one.shape == (1, 1, 16) and moe.stats["dropped_fraction"] == 0.0
    big = moe(torch.full((1, 4, 16), 1e4))  # huge activations: routing stays finite
    assert torch.isfinite(big).all() and math.isfinite(moe.stats["z_loss"])


def test_transformer_lm_with_moe_trains_and_reports_load():
    torch.manual_seed(4)
    cfg = ModelConfig(vocab_size=32, context_length=16, d_model=32, n_layers=2, n_heads=2, d_ff=32,
                      n_experts=4, moe_top_k=2, moe_capacity_factor=1.25)
    model = TransformerLM(cfg)
    assert model.num_parameters() == cfg.param_count()
    tokens = torch.randint(0, 32, (4, 16))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(8):
        logits = model(tokens[:, :-1])
        lm = torch.nn.functional.cross_entropy(logits.reshape(-1, 32), tokens[:, 1:].reshape(-1))
        loss = lm + model.aux_loss()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.5
    stats = model.moe_stats()
    assert sorted(stats) == [0, 1]
    for s in stats.values():
        assert len(s["load"]) == 4
        assert sum(s["load"]) == pytest.approx(1 - s["dropped_fraction"])


def test_activation_checkpointing_recomputes_same_routing():
    torch.manual_seed(5)
    cfg = ModelConfig(vocab_size=32, context_length=16, d_model=16, n_layers=2, n_heads=2, d_ff=16,
                      n_experts=4, moe_top_k=2, moe_capacity_factor=1.0)
    model = TransformerLM(cfg)
    ckpt = TransformerLM(cfg.replace(checkpoint_every=1))
    ckpt.load_state_dict(model.state_dict())
    tokens = torch.randint(0, 32, (2, 12))
    grads = []
    for m in (model, ckpt):
        (m(tokens).pow(2).mean() + m.aux_loss()).backward()
        grads.append([p.grad for p in m.parameters()])
    for g, g_ref in zip(grads[1], grads[0]):
        torch.testing.assert_close(g, g_ref, atol=1e-6, rtol=1e-5)
