"""Weight-only int8: rounding error bounds, quantized model vs fp32, memory, generation, state dict, perplexity."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch
from torch import nn

from model.core.config import ModelConfig
from model.core.layers import Embedding, Linear
from model.core.transformer import TransformerLM
from model.inference.generate import generate
from model.inference.quantize import Int8Embedding, Int8Linear, model_bytes, perplexity, quantize_absmax, quantize_int8


def tiny_model(seed: int = 0, **overrides) -> TransformerLM:
    torch.manual_seed(seed)
    cfg = ModelConfig(**(dict(vocab_size=97, context_length=64, d_model=32, n_layers=2, n_heads=4) | overrides))
    return TransformerLM(cfg).eval()


def test_dequantization_error_at_most_half_a_step():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(24, 40, generator=g)
    w[3] = 0.0  # an all-zero row
    w[5, 7] = 50.0  # an outlier: its row gets a coarse step
    w[9] *= 1e-6  # a row of tiny weights
    w_int8, scale = quantize_absmax(w)
    assert w_int8.dtype == torch.int8 and w_int8.shape == (24, 40) and scale.shape == (24,)
    # independent reference in numpy (float64): scale = absmax / 127 per row
    ref = w.double().numpy()
    absmax = np.abs(ref).max(axis=1)
    nonzero = absmax > 0
    np.testing.assert_allclose(scale.numpy()[nonzero], absmax[nonzero] / 127, rtol=1e-6)
    assert (w_int8.abs().amax(dim=1)[torch.from_numpy(nonzero)] == 127).all()  # the absmax maps to ±127
    err = np.abs(ref - w_int8.double().numpy() * scale.double().numpy()[:, None])
    assert (err <= scale.double().numpy()[:, None] / 2 * (1 + 1e-5)).all()
    assert (w_int8[3] == 0).all() and err[3].max() == 0


def test_int8_linear_output_within_derived_bound():
    """|y_q − y|_o = |Σ_j x_j (Ŵ − W)_oj| <= Σ_j |x_j| · s_o/2."""
    torch.manual_seed(1)
    linear = Linear(48, 20)
    q = Int8Linear.from_linear(linear)
    x = torch.randn(7, 3, 48)
    with torch.no_grad():
        diff = (q(x) - linear(x)).abs()
    bound = x.abs().sum(-1, keepdim=True) * q.scale / 2  # (7, 3, 20)
    assert (diff <= bound * (1 + 1e-4) + 1e-6).all()
    assert diff.max() > 0  # it did quantize
    torch.testing.assert_close(q.weight, q.weight_int8.float() * q.scale[:, None])


def test_quantize_replaces_every_linear_and_keeps_original():
    model = tiny_model()
    q = quantize_int8(model)
    assert not any(isinstance(m, Linear) for m in q.modules())
    assert sum(isinstance(m, Int8Linear) for m in q.modules()) == 2 * 7 + 1  # 7 per block + the head
    assert isinstance(q.token_embeddings, Embedding) and q.token_embeddings.weight.dtype == torch.float32
    assert any(isinstance(m, Linear) for m in model.modules())  # a copy by default
    same = quantize_int8(model, inplace=True)
    assert same is model and isinstance(model.lm_head, Int8Linear)


def test_quantized_lm_logits_close_to_fp32():
    model = tiny_model()
    q = quantize_int8(model)
    tokens = torch.randint(0, 97, (3, 40), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        ref, out = model(tokens), q(tokens)
    # Rounding error is ~uniform on ±s/2: rms s/√12 with s = absmax/127 ≈ 3σ/127 (init clipped at 3σ),
    # i.e. ~0.7% of a weight's σ per layer; measured ~0.7% mean, ~4% max of the logits' spread.
    assert (out - ref).abs().mean() < 0.02 * ref.std()
    assert (out - ref).abs().max() < 0.1 * ref.std()
    assert (out.argmax(-1) == ref.argmax(-1)).float().mean() > 0.9


def test_linear_memory_is_a_quarter_plus_scales():
    model = tiny_model()
    q = quantize_int8(model)

    def linear_bytes(m, cls):
        return sum(t.numel() * t.element_size() for mod in m.modules() if isinstance(mod, cls)
                   for t in [*mod.parameters(), *mod.buffers()])

    fp32, int8 = linear_bytes(model, Linear), linear_bytes(q, Int8Linear)
    rows = sum(mod.weight.shape[0] for mod in model.modules() if isinstance(mod, Linear))
    assert int8 == fp32 // 4 + 4 * rows  # 1 byte per weight + one fp32 scale per output channel
    assert model_bytes(model) - model_bytes(q) == fp32 - int8 == _saved_bytes(model)


def _saved_bytes(model) -> int:
    """Each distinct Linear weight goes from 4 bytes to 1 per entry, plus 4 bytes per output row."""
    weights = {id(m.weight): m.weight for m in model.modules() if isinstance(m, Linear)}
    return sum(3 * w.numel() - 4 * w.shape[0] for w in weights.values())


def test_model_bytes_counts_each_storage_once():
    m = nn.Module()
    m.a = nn.Parameter(torch.zeros(10, 10))  # 400 bytes
    m.sub = nn.Module()
    m.sub.a = m.a  # tied: counted once
    m.register_buffer("b", torch.zeros(7, dtype=torch.int8))  # 7 bytes
    m.register_buffer("c", torch.zeros(3, dtype=torch.float64), persistent=False)  # 24 bytes
    assert model_bytes(m) == 431
    model = tiny_model()
    params = 4 * sum(p.numel() for p in model.parameters())
    rope = model.layers[0].attn.rope
    assert model_bytes(model) == params + 4 * (rope.cos.numel() + rope.sin.numel())  # one table shared by all layers


def test_quantized_model_generates_with_kv_cache():
    q = quantize_int8(tiny_model())
    prompts = [[1, 2, 3], [5, 6, 7, 8, 9], [4]]
    cached = generate(q, prompts, 12, temperature=0)
    assert cached == generate(q, prompts, 12, temperature=0, use_cache=False)
    assert [len(c) for c in cached] == [12, 12, 12]
    assert len(generate(q, prompts, 8, temperature=0.9, top_k=10, seed=0)[0]) == 8


def test_state_dict_round_trip():
    model = tiny_model()
    q = quantize_int8(model)
    state = q.state_dict()
    assert state["lm_head.weight_int8"].dtype == torch.int8 and state["lm_head.scale"].dtype == torch.float32
    assert "lm_head.weight" not in state
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)
    fresh = quantize_int8(tiny_model(seed=9), inplace=True)  # different weights before loading
    fresh.load_state_dict(loaded)
    tokens = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6]])
    with torch.no_grad():
        assert torch.equal(fresh(tokens), q(tokens))


def test_tied_embeddings_share_one_int8_table():
    model = tiny_model(tie_embeddings=True)
    q = quantize_int8(model)
    assert isinstance(q.token_embeddings, Int8Embedding) and isinstance(q.lm_head, Int8Linear)
    assert not any(k.startswith("token_embeddings") for k in q.state_dict())
    tokens = torch.tensor([[3, 1, 4, 1, 5]])
    expected = q.lm_head.weight_int8[tokens].float() * q.lm_head.scale[tokens][..., None]
    torch.testing.assert_close(q.token_embeddings(tokens), expected)
    assert model_bytes(model) - model_bytes(q) == _saved_bytes(model)  # the table is not kept in fp32 too
    with torch.no_grad():
        assert (q(tokens) - model(tokens)).abs().mean() < 0.05 * model(tokens).std()
    assert generate(q, [[1, 2]], 6, temperature=0) == generate(q, [[1, 2]], 6, temperature=0, use_cache=False)


def test_moe_router_stays_fp32():
    q = quantize_int8(tiny_model(n_experts=4, moe_top_k=2))
    router = q.layers[0].ffn.router
    assert isinstance(router, Linear)
    with torch.no_grad():
        assert q(torch.tensor([[1, 2, 3]])).shape == (1, 3, 97)


def test_perplexity_uniform_model_is_vocab_size():
    """Zero head ⇒ uniform logits ⇒ perplexity exactly V, whatever the tokens."""
    model = tiny_model()
    with torch.no_grad():
        model.lm_head.weight.zero_()
    tokens = np.random.default_rng(0).integers(0, 97, size=500).astype(np.uint16)
    assert perplexity(model, tokens, 16, batches=2, batch_size=3) == pytest.approx(97, rel=1e-5)


def test_perplexity_matches_manual_cross_entropy():
    from model.training.data import batch_rng, get_batch

    model = tiny_model()
    tokens = np.random.default_rng(1).integers(0, 97, size=400).astype(np.uint16)
    losses = []
    for i in range(3):
        x, y = get_batch(tokens, 2, 20, rng=batch_rng(5, i, split="val"))
        with torch.no_grad():
            losses.append(torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten()).item())
    expected = math.exp(sum(losses) / 3)
    assert perplexity(model, tokens, 20, batches=3, batch_size=2, seed=5) == pytest.approx(expected, rel=1e-5)
    q = quantize_int8(model)
    assert perplexity(q, tokens, 20, batches=3, batch_size=2, seed=5) == pytest.approx(expected, rel=0.02)


def test_bad_input():
    model = tiny_model()
    tokens = np.arange(50, dtype=np.uint16)
    with pytest.raises(ValueError, match="batches"):
        perplexity(model, tokens, 8, batches=0)
    with pytest.raises(ValueError, match="batch_size"):
        perplexity(model, tokens, 8, batch_size=0)
    with pytest.raises(ValueError, match="context_length"):
        perplexity(model, tokens, 65)
    with pytest.raises(ValueError, match="fewer than context_length"):
        perplexity(model, np.arange(5, dtype=np.uint16), 8)
    empty = nn.Sequential(nn.ReLU())
    assert quantize_int8(empty)[0].__class__ is nn.ReLU  # nothing to quantize: unchanged
    w_int8, scale = quantize_absmax(torch.zeros(3, 4))
    assert (w_int8 == 0).all() and (scale == 1).all()
    nan_free = quantize_absmax(torch.full((2, 3), 1e30))[1]
    assert torch.isfinite(nan_free).all()
