"""Grouped-query / multi-query attention and sliding-window attention, each checked against an
independent reference: a functional Llama forward written here (K/V heads repeated with
repeat_interleave, a band mask built by a Python loop, PyTorch's F.scaled_dot_product_attention),
an MHA model whose K/V projections are the GQA ones repeated per group (Ainslie et al. 2023), and
generation with the KV cache against recomputation and against each prompt alone."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from model.core.config import ModelConfig
from model.core.layers import CausalSelfAttention, RotaryEmbedding
from model.core.transformer import TransformerLM
from model.inference.generate import generate


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _model(seed: int = 0, **overrides) -> TransformerLM:
    shape = dict(vocab_size=97, context_length=48, d_model=32, n_layers=2, n_heads=4, d_ff=48)
    torch.manual_seed(seed)
    model = TransformerLM(ModelConfig(**{**shape, **overrides})).eval()
    with torch.no_grad():  # norm gains away from 1 so the reference really exercises them
        for name, p in model.named_parameters():
            if "norm" in name or "ln" in name:
                p.copy_(1 + 0.3 * torch.randn(p.shape, generator=_gen(seed + 1)))
    return model


# ---- an independent reference ---------------------------------------------------------------


def _rope_complex(x: torch.Tensor, pos: torch.Tensor, theta: float) -> torch.Tensor:
    """RoPE as complex multiplication of consecutive pairs (x[2i] + i·x[2i+1]) · e^{i·p·θ^(-2i/d)}."""
    d = x.shape[-1]
    freqs = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    rot = torch.polar(torch.ones(len(pos), d // 2, dtype=torch.float64), pos[:, None].double() * freqs)
    xc = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return torch.view_as_real(xc * rot).flatten(-2).to(x.dtype)


def _band_mask(T: int, window: int | None) -> torch.Tensor:
    """mask[i, j] = True iff key j is within query i's causal window: i - window < j <= i."""
    mask = torch.zeros(T, T, dtype=torch.bool)
    for i in range(T):
        for j in range(T):
            mask[i, j] = j <= i and (window is None or j > i - window)
    return mask


def _reference_forward(sd: dict, cfg: ModelConfig, ids: torch.Tensor) -> torch.Tensor:
    """Llama forward from the state dict with PyTorch functionals; K/V heads repeated for GQA."""
    B, T = ids.shape
    H, Hkv, dh, eps = cfg.n_heads, cfg.n_kv_heads, cfg.d_head, cfg.norm_eps
    pos, mask = torch.arange(T), _band_mask(T, cfg.sliding_window)
    x = F.embedding(ids, sd["token_embeddings.weight"])
    for i in range(cfg.n_layers):
        p = f"layers.{i}."
        h = F.rms_norm(x, (cfg.d_model,), sd[p + "ln1.weight"], eps)
        q = F.linear(h, sd[p + "attn.q_proj.weight"]).view(B, T, H, dh).transpose(1, 2)
        k, v = (F.linear(h, sd[p + f"attn.{n}_proj.weight"]).view(B, T, Hkv, dh).transpose(1, 2) for n in "kv")
        if cfg.qk_norm:
            q = F.rms_norm(q, (dh,), sd[p + "attn.q_norm.weight"], eps)
            k = F.rms_norm(k, (dh,), sd[p + "attn.k_norm.weight"], eps)
        q, k = _rope_complex(q, pos, cfg.rope_theta), _rope_complex(k, pos, cfg.rope_theta)
        k, v = k.repeat_interleave(H // Hkv, dim=1), v.repeat_interleave(H // Hkv, dim=1)  # (B, H, T, dh)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2).reshape(B, T, -1)
        x = x + F.linear(a, sd[p + "attn.output_proj.weight"])
        h = F.rms_norm(x, (cfg.d_model,), sd[p + "ln2.weight"], eps)
        x = x + F.linear(F.silu(F.linear(h, sd[p + "ffn.w1.weight"])) * F.linear(h, sd[p + "ffn.w3.weight"]),
                         sd[p + "ffn.w2.weight"])
    x = F.rms_norm(x, (cfg.d_model,), sd["ln_final.weight"], eps)
    return F.linear(x, sd["lm_head.weight"])


VARIANTS = {  # n_kv_heads, sliding_window, qk_norm
    "mqa": dict(n_kv_heads=1),
    "gqa": dict(n_kv_heads=2, qk_norm=True),
    "mha": dict(n_kv_heads=4),
    "window": dict(sliding_window=5),
    "gqa_window": dict(n_kv_heads=2, sliding_window=3),
    "mqa_window1": dict(n_kv_heads=1, sliding_window=1),
}


@pytest.mark.parametrize("attention", ["naive", "sdpa"])
@pytest.mark.parametrize("variant", VARIANTS.values(), ids=VARIANTS.keys())
def test_matches_functional_reference(attention, variant):
    model = _model(attention=attention, **variant)
    ids = torch.randint(0, 97, (2, 19), generator=_gen(3))
    with torch.no_grad():
        torch.testing.assert_close(model(ids), _reference_forward(model.state_dict(), model.cfg, ids),
                                   rtol=1e-4, atol=1e-4)


# ---- grouped-query attention ----------------------------------------------------------------


@pytest.mark.parametrize("attention", ["naive", "sdpa"])
@pytest.mark.parametrize("n_kv_heads", [1, 2])
def test_gqa_equals_mha_with_repeated_kv_weights(attention, n_kv_heads):
    gqa = _model(attention=attention, n_kv_heads=n_kv_heads)
    group, dh = gqa.cfg.n_heads // n_kv_heads, gqa.cfg.d_head
    mha = TransformerLM(gqa.cfg.replace(n_kv_heads=None)).eval()
    state = {}
    for name, w in gqa.state_dict().items():
        if name.endswith(("attn.k_proj.weight", "attn.v_proj.weight")):  # each K/V head serves its group
            w = w.view(n_kv_heads, dh, -1).repeat_interleave(group, dim=0).reshape(-1, w.shape[-1])
        state[name] = w
    mha.load_state_dict(state)
    assert mha.layers[0].attn.k_proj.weight.shape == (32, 32)
    assert gqa.layers[0].attn.k_proj.weight.shape == (n_kv_heads * dh, 32)
    ids = torch.randint(0, 97, (3, 17), generator=_gen(4))
    with torch.no_grad():
        torch.testing.assert_close(gqa(ids), mha(ids), rtol=1e-5, atol=1e-5)


def test_n_kv_heads_equal_n_heads_is_the_plain_model():
    plain = _model()
    explicit = TransformerLM(plain.cfg.replace(n_kv_heads=4)).eval()
    explicit.load_state_dict(plain.state_dict())  # same names, same shapes: old checkpoints load
    ids = torch.randint(0, 97, (2, 16), generator=_gen(5))
    with torch.no_grad():
        assert torch.equal(explicit(ids), plain(ids))


# ---- sliding window -------------------------------------------------------------------------


@pytest.mark.parametrize("attention", ["naive", "sdpa"])
def test_window_at_least_t_equals_plain_causal(attention):
    plain = _model(attention=attention, n_kv_heads=2)
    ids = torch.randint(0, 97, (2, 12), generator=_gen(6))
    with torch.no_grad():
        expected = plain(ids)
        for window in (12, 13, 48):
            windowed = TransformerLM(plain.cfg.replace(sliding_window=window)).eval()
            windowed.load_state_dict(plain.state_dict())
            torch.testing.assert_close(windowed(ids), expected, rtol=1e-6, atol=1e-6)
        short = TransformerLM(plain.cfg.replace(sliding_window=11)).eval()
        short.load_state_dict(plain.state_dict())
        out = short(ids)
    torch.testing.assert_close(out[:, :11], expected[:, :11], rtol=1e-6, atol=1e-6)
    assert (out[:, 11] - expected[:, 11]).abs().max() > 1e-4  # the last query lost key 0


@pytest.mark.parametrize("attention", ["naive", "sdpa"])
def test_window_one_sees_only_its_own_token(attention):
    """Hand-checkable: with window 1 a token's output ignores every other token and its position."""
    model = _model(attention=attention, sliding_window=1, n_kv_heads=2)
    ids = torch.randint(0, 97, (1, 10), generator=_gen(7))
    with torch.no_grad():
        out = model(ids)
        alone = torch.cat([model(ids[:, t:t + 1]) for t in range(10)], dim=1)
    torch.testing.assert_close(out, alone, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attention", ["naive", "sdpa"])
@pytest.mark.parametrize("variant", [dict(n_kv_heads=2, sliding_window=4), dict(n_kv_heads=1, sliding_window=1)])
def test_kv_cache_chunks_match_full_forward(attention, variant):
    model = _model(attention=attention, **variant)
    ids = torch.randint(0, 97, (2, 22), generator=_gen(8))
    with torch.no_grad():
        full = model(ids)
        cache = model.new_cache(2)
        chunks, start = [], 0
        for size in (3, 1, 1, 6, 2, 1, 5, 3):  # chunks shorter and longer than the window
            chunks.append(model(ids[:, start:start + size], cache=cache))
            start += size
    torch.testing.assert_close(torch.cat(chunks, dim=1), full, rtol=1e-5, atol=1e-5)


# ---- generation -----------------------------------------------------------------------------

PROMPTS = [[1, 2, 3], [5, 6, 7, 8, 9, 10, 11, 12, 13], [4], [9, 8, 7, 6, 5, 4]]


@pytest.mark.parametrize("attention", ["naive", "sdpa"])
@pytest.mark.parametrize("variant", [dict(n_kv_heads=2, sliding_window=4), dict(n_kv_heads=1, sliding_window=7),
                                     dict(n_kv_heads=1)])
def test_generate_cache_matches_recompute_and_single_prompts(attention, variant):
    model = _model(attention=attention, **variant)
    cached = generate(model, PROMPTS, 14, temperature=0, use_cache=True)
    recomputed = generate(model, PROMPTS, 14, temperature=0, use_cache=False)
    alone = [generate(model, [p], 14, temperature=0, use_cache=False)[0] for p in PROMPTS]
    assert [len(c) for c in cached] == [14] * len(PROMPTS)
    assert cached == recomputed
    assert cached == alone


def test_cached_padded_logits_match_reference():
    """Padded prefill + cached decode with GQA and a window reproduces the reference of each sequence."""
    model = _model(n_kv_heads=2, sliding_window=3)
    seqs = [torch.randint(1, 97, (n,), generator=_gen(9 + n)) for n in (2, 7)]
    extra = torch.randint(1, 97, (2, 5), generator=_gen(10))
    P = max(len(s) for s in seqs)
    ids, valid = torch.zeros(2, P, dtype=torch.long), torch.zeros(2, P, dtype=torch.bool)
    for b, s in enumerate(seqs):
        ids[b, P - len(s):], valid[b, P - len(s):] = s, True
    positions = (valid.long().cumsum(1) - 1).clamp(min=0)
    with torch.no_grad():
        cache = model.new_cache(2, P + 5)
        prefill = model(ids, positions, cache=cache, valid=valid)
        nxt = positions[:, -1:] + 1
        steps = [model(extra[:, t:t + 1], nxt + t, cache=cache) for t in range(5)]
        decoded = torch.cat(steps, dim=1)
        for b, s in enumerate(seqs):
            ref = _reference_forward(model.state_dict(), model.cfg, torch.cat([s, extra[b]])[None])[0]
            torch.testing.assert_close(prefill[b, valid[b]], ref[:len(s)], rtol=1e-4, atol=1e-4)
            torch.testing.assert_close(decoded[b], ref[len(s):], rtol=1e-4, atol=1e-4)


# ---- memory, parameters, gradients, errors --------------------------------------------------


def test_kv_cache_bytes_scale_with_n_kv_heads():
    cfg = ModelConfig.from_preset("micro", vocab_size=97, context_length=64)
    mha = TransformerLM(cfg).new_cache(8, 64)
    gqa = TransformerLM(cfg.replace(n_kv_heads=cfg.n_heads // 4)).new_cache(8, 64)
    assert mha.k.shape == (cfg.n_layers, 8, cfg.n_heads, 64, cfg.d_head)
    assert gqa.k.shape == gqa.v.shape == (cfg.n_layers, 8, cfg.n_heads // 4, 64, cfg.d_head)
    assert mha.nbytes == 2 * cfg.n_layers * 8 * cfg.n_heads * 64 * cfg.d_head * 4  # fp32
    assert gqa.nbytes * 4 == mha.nbytes


@pytest.mark.parametrize("variant", VARIANTS.values(), ids=VARIANTS.keys())
def test_parameter_count_matches_config(variant):
    for tie in (False, True):
        model = _model(tie_embeddings=tie, **variant)
        assert model.num_parameters() == model.cfg.param_count()
        assert model.num_parameters(include_embeddings=False) == model.cfg.param_count(include_embeddings=False)


@pytest.mark.parametrize("attention", ["naive", "sdpa"])
def test_gradients_reach_every_parameter(attention):
    model = _model(attention=attention, n_kv_heads=2, sliding_window=3, qk_norm=True).train()
    ids = torch.randint(0, 97, (2, 12), generator=_gen(11))
    logits = model(ids[:, :-1])
    F.cross_entropy(logits.reshape(-1, 97), ids[:, 1:].reshape(-1)).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name


@pytest.mark.parametrize("field, overrides", [("n_kv_heads", dict(n_kv_heads=2)),
                                              ("sliding_window", dict(sliding_window=8))])
def test_triton_rejects_variants_by_name(field, overrides):
    cfg = ModelConfig(vocab_size=32, context_length=16, d_model=32, n_layers=1, n_heads=4, attention="triton",
                      **overrides)
    with pytest.raises(ValueError, match=f"attention='triton'.*{field}"):
        TransformerLM(cfg)


def test_bad_attention_arguments_raise():
    rope = RotaryEmbedding(10000.0, 8, 16)
    with pytest.raises(ValueError, match="n_kv_heads=3"):
        CausalSelfAttention(32, 4, rope, n_kv_heads=3)
    with pytest.raises(ValueError, match="sliding_window=0"):
        CausalSelfAttention(32, 4, rope, sliding_window=0)


def test_degenerate_inputs():
    """One token, an all-padding row next to a real one: finite outputs, no NaN rows."""
    model = _model(n_kv_heads=1, sliding_window=2)
    with torch.no_grad():
        assert torch.isfinite(model(torch.tensor([[5]]))).all()
        valid = torch.tensor([[False] * 4, [True] * 4])
        out = model(torch.randint(0, 97, (2, 4), generator=_gen(12)), valid=valid)
    assert torch.isfinite(out).all()


# ---- Hugging Face export --------------------------------------------------------------------


def test_hf_llama_gqa_parity_and_round_trip(tmp_path):
    pytest.importorskip("safetensors")
    from model.inference.export import export_llama, import_llama

    model = _model(n_kv_heads=2)
    out = export_llama(model, model.cfg, tmp_path / "hf")
    assert json.loads((out / "config.json").read_text())["num_key_value_heads"] == 2
    cfg, state = import_llama(out)
    assert cfg == model.cfg
    back = TransformerLM(cfg).eval()
    back.load_state_dict(state)
    ids = torch.randint(0, 97, (2, 24), generator=_gen(13))
    with torch.no_grad():
        expected = model(ids)
        assert torch.equal(back(ids), expected)
    transformers = pytest.importorskip("transformers")
    hf = transformers.LlamaForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    with torch.no_grad():
        torch.testing.assert_close(hf(input_ids=ids).logits, expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("field, overrides", [("sliding_window", dict(sliding_window=8)),
                                              ("n_experts", dict(n_experts=4))])
def test_export_rejects_window_and_moe(tmp_path, field, overrides):
    pytest.importorskip("safetensors")
    from model.inference.export import export_llama

    model = _model()  # dense weights; the config alone is checked first
    with pytest.raises(ValueError, match=field):
        export_llama(model, model.cfg.replace(**overrides), tmp_path / "hf")
    assert not (tmp_path / "hf").exists()
