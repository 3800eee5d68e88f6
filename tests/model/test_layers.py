"""Transformer building blocks and the full LM, each checked against an independent reference:
PyTorch's own ops (F.linear, F.rms_norm, F.scaled_dot_product_attention, ...) or a naive
implementation written here (complex-number RoPE, a functional Llama forward from the state_dict)."""

import math
import sys

import pytest
import torch
import torch.nn.functional as F

from model.core.config import ModelConfig
from model.core.layers import (
    Embedding,
    Linear,
    RMSNorm,
    RotaryEmbedding,
    SwiGLU,
    rms_norm_ref,
    scaled_dot_product_attention,
    silu,
    softmax,
)
from model.core.transformer import TransformerLM


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _truncated_std(sigma: float, k: float = 3.0) -> float:
    """Std of N(0, σ²) truncated to [-kσ, kσ] (closed form, independent of torch's sampler)."""
    pdf = math.exp(-k * k / 2) / math.sqrt(2 * math.pi)
    mass = math.erf(k / math.sqrt(2))  # Φ(k) - Φ(-k)
    return sigma * math.sqrt(1 - 2 * k * pdf / mass)


def _cfg(**overrides) -> ModelConfig:
    base = dict(vocab_size=97, context_length=32, d_model=32, n_layers=2, n_heads=4, d_ff=48)
    base.update(overrides)
    return ModelConfig(**base)


def _model(seed: int = 0, **overrides) -> TransformerLM:
    torch.manual_seed(seed)
    return TransformerLM(_cfg(**overrides)).eval()


# ---- Linear / Embedding ---------------------------------------------------------------------


def test_linear_matches_f_linear():
    torch.manual_seed(0)
    lin = Linear(24, 40)
    assert lin.weight.shape == (40, 24)
    x = torch.randn(3, 5, 24, generator=_gen(1))
    torch.testing.assert_close(lin(x), F.linear(x, lin.weight), rtol=1e-6, atol=1e-6)


def test_linear_init_std_and_truncation():
    torch.manual_seed(0)
    d_in, d_out = 512, 256
    w = Linear(d_in, d_out).weight.detach().double()
    sigma = math.sqrt(2 / (d_in + d_out))
    assert abs(w.mean().item()) < 0.01 * sigma
    assert w.std().item() == pytest.approx(_truncated_std(sigma), rel=0.01)
    assert w.abs().max().item() <= 3 * sigma * (1 + 1e-6)
    assert w.abs().max().item() > 2.5 * sigma  # the tails are actually populated up to the clip


def test_embedding_matches_f_embedding_and_init():
    torch.manual_seed(0)
    emb = Embedding(1000, 128)
    assert emb.weight.shape == (1000, 128)
    ids = torch.randint(0, 1000, (4, 7), generator=_gen(1))
    torch.testing.assert_close(emb(ids), F.embedding(ids, emb.weight), rtol=0, atol=0)
    w = emb.weight.detach().double()
    assert w.std().item() == pytest.approx(_truncated_std(1.0), rel=0.01)
    assert w.abs().max().item() <= 3.0 + 1e-6


# ---- RMSNorm --------------------------------------------------------------------------------


def test_rmsnorm_matches_f_rms_norm_fp32():
    d, eps = 48, 1e-5
    norm = RMSNorm(d, eps)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(d, generator=_gen(2)))
    x = torch.randn(2, 6, d, generator=_gen(3)) * 5
    expected = F.rms_norm(x, (d,), norm.weight, eps)
    torch.testing.assert_close(norm(x), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(rms_norm_ref(x, norm.weight, eps), expected, rtol=1e-5, atol=1e-5)


def test_rmsnorm_bf16_computes_in_fp32_and_casts_back():
    d, eps = 64, 1e-5
    x = (torch.randn(4, 9, d, generator=_gen(4)) * 3).bfloat16()
    w = (1 + 0.5 * torch.randn(d, generator=_gen(5))).bfloat16()
    norm = RMSNorm(d, eps, dtype=torch.bfloat16)
    with torch.no_grad():
        norm.weight.copy_(w)
    out = norm(x)
    assert out.dtype == torch.bfloat16
    expected = F.rms_norm(x.double(), (d,), w.double(), eps).to(torch.bfloat16)
    # Only the final rounding to bf16 may differ (at most one bf16 ulp at a rounding boundary).
    diff = (out.float() - expected.float()).abs()
    ulp = expected.float().abs().clamp_min(1e-30) * 2.0**-7
    assert bool((diff <= ulp).all())
    assert (out != expected).float().mean().item() < 0.02


# ---- softmax / SiLU / SwiGLU ----------------------------------------------------------------


def test_softmax_matches_torch_including_huge_inputs():
    x = torch.randn(3, 4, 10, generator=_gen(6))
    for dim in (-1, 0, 1):
        torch.testing.assert_close(softmax(x, dim=dim), torch.softmax(x, dim=dim))
    huge = x.clone()
    huge[..., 0] = 1000.0
    huge[0, 0, 1] = 1e4
    huge[1, 2, 3] = float("-inf")
    out = softmax(huge, dim=-1)
    assert not torch.isnan(out).any()
    torch.testing.assert_close(out, torch.softmax(huge, dim=-1))
    torch.testing.assert_close(out.sum(-1), torch.ones(3, 4))


def test_silu_matches_f_silu():
    x = torch.linspace(-30, 30, 601)
    torch.testing.assert_close(silu(x), F.silu(x))


def test_swiglu_matches_hand_formula():
    torch.manual_seed(0)
    ffn = SwiGLU(16, 40)
    assert ffn.w1.weight.shape == (40, 16) and ffn.w3.weight.shape == (40, 16) and ffn.w2.weight.shape == (16, 40)
    x = torch.randn(2, 5, 16, generator=_gen(7))
    w1, w2, w3 = ffn.w1.weight, ffn.w2.weight, ffn.w3.weight
    a = F.linear(x, w1)
    expected = F.linear(a * torch.sigmoid(a) * F.linear(x, w3), w2)
    torch.testing.assert_close(ffn(x), expected, rtol=1e-5, atol=1e-6)


# ---- RoPE -----------------------------------------------------------------------------------


def _rope_complex(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotate consecutive pairs (x[2i], x[2i+1]) as complex numbers by angle p·θ^(-2i/d)."""
    d = x.shape[-1]
    inv_freq = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = positions.double()[..., None] * inv_freq  # (..., seq, d/2)
    rot = torch.polar(torch.ones_like(angles), angles)
    xc = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return torch.view_as_real(xc * rot).flatten(-2).to(x.dtype)


def test_rope_matches_complex_reference_with_shuffled_positions():
    theta, d, max_len = 10000.0, 16, 64
    rope = RotaryEmbedding(theta, d, max_len)
    x = torch.randn(2, 3, 7, d, generator=_gen(8))  # (B, H, T, dh)
    positions = torch.tensor([63, 0, 17, 5, 5, 40, 2])  # non-contiguous, unsorted, repeated
    torch.testing.assert_close(rope(x, positions), _rope_complex(x, positions, theta), rtol=1e-5, atol=1e-5)
    # per-sequence positions broadcast over heads
    per_seq = torch.stack([torch.randperm(max_len, generator=_gen(9))[:7], torch.arange(7) + 50])  # (B, T)
    got = rope(x, per_seq[:, None, :])
    torch.testing.assert_close(got, _rope_complex(x, per_seq[:, None, :], theta), rtol=1e-5, atol=1e-5)
    # rotations preserve the norm of each pair; position 0 is the identity
    torch.testing.assert_close(got.norm(dim=-1), x.norm(dim=-1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(rope(x, torch.zeros(7, dtype=torch.long)), x)


def test_rope_relative_property():
    """<R(p)q, R(p')k> depends only on p - p' (what makes RoPE a relative encoding)."""
    rope = RotaryEmbedding(500.0, 8, 128)
    q, k = torch.randn(2, 8, generator=_gen(10)).unbind(0)
    dots = [(rope(q[None], torch.tensor([p + s])) * rope(k[None], torch.tensor([p]))).sum().item()
            for p, s in ((3, 4), (50, 4), (120, 4))]
    assert dots == pytest.approx([dots[0]] * 3, rel=1e-4, abs=1e-5)


def test_rope_position_beyond_table_raises():
    rope = RotaryEmbedding(10000.0, 8, 16)
    x = torch.randn(1, 3, 8)
    rope(x, torch.tensor([0, 15, 3]))
    with pytest.raises(ValueError, match="16"):
        rope(x, torch.tensor([0, 16, 3]))


# ---- scaled dot-product attention -----------------------------------------------------------


def test_sdpa_matches_torch_with_random_mask_and_without():
    B, H, n, m, d = 2, 3, 5, 7, 8
    g = _gen(11)
    q = torch.randn(B, H, n, d, generator=g)
    k, v = torch.randn(2, B, H, m, d, generator=g).unbind(0)
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v), F.scaled_dot_product_attention(q, k, v),
                               rtol=1e-5, atol=1e-5)
    mask = torch.rand(B, H, n, m, generator=g) < 0.5
    mask[..., 0] = True  # no fully masked row
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v, mask),
                               F.scaled_dot_product_attention(q, k, v, attn_mask=mask), rtol=1e-5, atol=1e-5)
    # a mask broadcast over heads
    mask_b = mask[:, :1]
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v, mask_b),
                               F.scaled_dot_product_attention(q, k, v, attn_mask=mask_b), rtol=1e-5, atol=1e-5)
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    torch.testing.assert_close(scaled_dot_product_attention(q, k[..., :n, :], v[..., :n, :], causal),
                               F.scaled_dot_product_attention(q, k[..., :n, :], v[..., :n, :], is_causal=True),
                               rtol=1e-5, atol=1e-5)


# ---- the full model -------------------------------------------------------------------------


def _reference_forward(sd: dict, cfg: ModelConfig, ids: torch.Tensor) -> torch.Tensor:
    """Llama-style pre-norm decoder written with PyTorch functionals on the model's weights."""
    B, T = ids.shape
    H, dh, eps = cfg.n_heads, cfg.d_head, cfg.norm_eps
    pos = torch.arange(T)
    x = F.embedding(ids, sd["token_embeddings.weight"])
    for i in range(cfg.n_layers):
        p = f"layers.{i}."
        h = F.rms_norm(x, (cfg.d_model,), sd[p + "ln1.weight"], eps)
        q, k, v = (F.linear(h, sd[p + f"attn.{n}_proj.weight"]).view(B, T, H, dh).transpose(1, 2) for n in "qkv")
        if cfg.qk_norm:
            q = F.rms_norm(q, (dh,), sd[p + "attn.q_norm.weight"], eps)
            k = F.rms_norm(k, (dh,), sd[p + "attn.k_norm.weight"], eps)
        q, k = _rope_complex(q, pos, cfg.rope_theta), _rope_complex(k, pos, cfg.rope_theta)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, -1)
        x = x + F.linear(a, sd[p + "attn.output_proj.weight"])
        h = F.rms_norm(x, (cfg.d_model,), sd[p + "ln2.weight"], eps)
        x = x + F.linear(F.silu(F.linear(h, sd[p + "ffn.w1.weight"])) * F.linear(h, sd[p + "ffn.w3.weight"]),
                         sd[p + "ffn.w2.weight"])
    x = F.rms_norm(x, (cfg.d_model,), sd["ln_final.weight"], eps)
    head = sd["token_embeddings.weight"] if cfg.tie_embeddings else sd["lm_head.weight"]
    return F.linear(x, head)


def _randomize_norms(model: TransformerLM, seed: int = 0) -> None:
    """Norm gains start at 1; perturb them so the reference really exercises them."""
    g = _gen(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or "ln" in name:
                p.copy_(1 + 0.3 * torch.randn(p.shape, generator=g))


@pytest.mark.parametrize("overrides", [
    dict(attention="naive"),
    dict(attention="sdpa"),
    dict(attention="naive", qk_norm=True),
    dict(attention="sdpa", tie_embeddings=True),
])
def test_transformer_matches_reference_forward(overrides):
    model = _model(**overrides)
    _randomize_norms(model)
    ids = torch.randint(0, model.cfg.vocab_size, (2, 20), generator=_gen(12))
    with torch.no_grad():
        logits = model(ids)
        expected = _reference_forward(model.state_dict(), model.cfg, ids)
    assert logits.shape == (2, 20, model.cfg.vocab_size)
    torch.testing.assert_close(logits, expected, rtol=1e-4, atol=1e-4)


def test_naive_and_sdpa_attention_agree():
    naive = _model(attention="naive")
    sdpa = TransformerLM(naive.cfg.replace(attention="sdpa")).eval()
    sdpa.load_state_dict(naive.state_dict())
    ids = torch.randint(0, 97, (3, 32), generator=_gen(13))
    with torch.no_grad():
        torch.testing.assert_close(naive(ids), sdpa(ids), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attention", ["naive", "sdpa"])
def test_causality(attention):
    model = _model(attention=attention)
    ids = torch.randint(0, 97, (1, 16), generator=_gen(14))
    changed = ids.clone()
    changed[0, 10] = (ids[0, 10] + 1) % 97
    with torch.no_grad():
        a, b = model(ids), model(changed)
    torch.testing.assert_close(a[:, :10], b[:, :10], rtol=0, atol=1e-6)
    assert (a[:, 10:] - b[:, 10:]).abs().amax(-1).min() > 1e-4  # every later position sees the change


@pytest.mark.parametrize("overrides", [dict(), dict(qk_norm=True, tie_embeddings=True)])
def test_gradients_reach_every_parameter(overrides):
    model = _model(**overrides).train()
    ids = torch.randint(0, 97, (2, 12), generator=_gen(15))
    logits = model(ids[:, :-1])
    F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1)).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name


def test_position_beyond_context_raises():
    model = _model()
    with pytest.raises(ValueError, match="context_length"):
        model(torch.zeros(1, 33, dtype=torch.long))


# ---- KV cache and padding -------------------------------------------------------------------


@pytest.mark.parametrize("attention", ["naive", "sdpa"])
def test_kv_cache_chunks_match_full_forward(attention):
    model = _model(attention=attention, qk_norm=True)
    ids = torch.randint(0, 97, (2, 20), generator=_gen(16))
    with torch.no_grad():
        full = model(ids)
        cache = model.new_cache(2)
        chunks, start = [], 0
        for size in (5, 1, 1, 7, 2, 4):
            chunks.append(model(ids[:, start:start + size], cache=cache))
            start += size
            assert cache.length == start
    torch.testing.assert_close(torch.cat(chunks, dim=1), full, rtol=1e-5, atol=1e-5)


def test_kv_cache_overflow_raises():
    model = _model()
    cache = model.new_cache(1, max_len=4)
    with torch.no_grad():
        model(torch.zeros(1, 3, dtype=torch.long), cache=cache)
        with pytest.raises(ValueError, match="full"):
            model(torch.zeros(1, 2, dtype=torch.long), cache=cache)


def _left_pad(seqs: list[torch.Tensor], pad_id: int = 0):
    T = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), T), pad_id, dtype=torch.long)
    valid = torch.zeros(len(seqs), T, dtype=torch.bool)
    for b, s in enumerate(seqs):
        ids[b, T - len(s):] = s
        valid[b, T - len(s):] = True
    positions = (valid.long().cumsum(1) - 1).clamp(min=0)  # 0.. for real tokens, 0 for the padding
    return ids, valid, positions


@pytest.mark.parametrize("attention", ["naive", "sdpa"])
def test_left_padded_batch_matches_each_sequence_alone(attention):
    model = _model(attention=attention)
    g = _gen(17)
    lengths = (5, 9, 2)
    seqs = [torch.randint(1, 97, (n,), generator=g) for n in lengths]
    ids, valid, positions = _left_pad(seqs)
    with torch.no_grad():
        batched = model(ids, positions=positions, valid=valid)
        assert torch.isfinite(batched).all()  # padding queries never get an all-masked row
        for b, s in enumerate(seqs):
            alone = model(s[None])
            torch.testing.assert_close(batched[b, valid[b]], alone[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attention", ["naive", "sdpa"])
def test_left_padded_prefill_then_decode_with_cache(attention):
    model = _model(attention=attention)
    g = _gen(18)
    seqs = [torch.randint(1, 97, (n,), generator=g) for n in (3, 7)]
    extra = torch.randint(1, 97, (2, 4), generator=g)  # decoded one token at a time
    ids, valid, positions = _left_pad(seqs)
    with torch.no_grad():
        cache = model.new_cache(2, max_len=16)
        prefill = model(ids, positions=positions, valid=valid, cache=cache)
        steps = []
        next_pos = positions[:, -1] + 1
        for t in range(extra.shape[1]):
            steps.append(model(extra[:, t:t + 1], positions=next_pos[:, None] + t,
                               valid=torch.ones(2, 1, dtype=torch.bool), cache=cache))
        decoded = torch.cat(steps, dim=1)
        for b, s in enumerate(seqs):
            alone = model(torch.cat([s, extra[b]])[None])[0]
            torch.testing.assert_close(prefill[b, valid[b]], alone[:len(s)], rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(decoded[b], alone[len(s):], rtol=1e-5, atol=1e-5)


# ---- options --------------------------------------------------------------------------------


def test_tie_embeddings_shares_the_tensor():
    model = _model(tie_embeddings=True)
    assert model.lm_head.weight is model.token_embeddings.weight
    unique = {id(p) for p in model.parameters()}
    assert len(unique) == len(list(model.parameters()))
    untied = _model(tie_embeddings=False)
    assert untied.lm_head.weight is not untied.token_embeddings.weight
    n_tied = sum(p.numel() for p in model.parameters())
    n_untied = sum(p.numel() for p in untied.parameters())
    assert n_untied - n_tied == 97 * 32
    with torch.no_grad():  # a write through one name shows through the other
        model.token_embeddings.weight[3].zero_()
    assert model.lm_head.weight[3].abs().sum() == 0


def test_qk_norm_adds_parameters_and_runs():
    plain, normed = _model(), _model(qk_norm=True)
    extra = sum(p.numel() for p in normed.parameters()) - sum(p.numel() for p in plain.parameters())
    assert extra == 2 * 2 * 8  # n_layers × (q_norm + k_norm) × d_head
    names = {n for n, _ in normed.named_parameters()}
    assert {"layers.0.attn.q_norm.weight", "layers.1.attn.k_norm.weight"} <= names
    with torch.no_grad():
        out = normed(torch.randint(0, 97, (2, 8), generator=_gen(19)))
    assert out.shape == (2, 8, 97) and torch.isfinite(out).all()


@pytest.mark.parametrize("switch,module", [({"attention": "triton"}, "lmw_kernels.flash_attention"),
                                           ({"norm": "triton"}, "lmw_kernels.rmsnorm"),
                                           ({"ffn": "triton"}, "lmw_kernels.swiglu"),
                                           ({"loss": "fused"}, "lmw_kernels.cross_entropy")])
def test_kernel_switch_without_kernels_is_a_clear_error(switch, module, monkeypatch):
    monkeypatch.setitem(sys.modules, module, None)  # as if triton (or the kernel) were not installed
    cfg = ModelConfig(vocab_size=32, context_length=8, d_model=16, n_layers=1, n_heads=2, **switch)
    with pytest.raises(ValueError, match=module):
        TransformerLM(cfg)
