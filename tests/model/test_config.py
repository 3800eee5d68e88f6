"""ModelConfig: presets, validation, and parameter / FLOP accounting checked against instantiated
models, hand-written formulas and torch.utils.flop_counter."""

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from model.core.config import ModelConfig
from model.core.transformer import TransformerLM

# CS336 assignment 1 size table: d_model, n_layers, n_heads
CS336_SHAPES = {
    "small": (768, 12, 12),
    "medium": (1024, 24, 16),
    "large": (1280, 36, 20),
    "xl": (1600, 48, 25),
    "2.7B": (2560, 32, 32),
}
# d_ff = 8/3·d rounded to the nearest multiple of 64, worked out by hand
CS336_D_FF = {"small": 2048, "medium": 2752, "large": 3392, "xl": 4288, "2.7B": 6848}


@pytest.mark.parametrize("name", list(CS336_SHAPES))
def test_cs336_presets(name):
    cfg = ModelConfig.from_preset(name, vocab_size=50257, context_length=1024)
    d, L, H = CS336_SHAPES[name]
    assert (cfg.d_model, cfg.n_layers, cfg.n_heads) == (d, L, H)
    assert cfg.d_ff == CS336_D_FF[name] == round(8 * d / 3 / 64) * 64
    assert cfg.d_head == d // H
    assert (cfg.vocab_size, cfg.context_length) == (50257, 1024)


def test_preset_overrides_and_explicit_d_ff():
    cfg = ModelConfig.from_preset("small", vocab_size=100, context_length=64, n_layers=2, d_ff=None)
    assert (cfg.d_model, cfg.n_layers, cfg.d_ff) == (768, 2, 2048)
    assert ModelConfig.from_preset("tinystories", vocab_size=10000, context_length=256).d_ff == 1344


def _hand_param_count(V, d, L, f, dh=0, *, tied=False, qk_norm=False, embeddings=True):
    per_block = 4 * d * d + 3 * d * f + 2 * d + (2 * dh if qk_norm else 0)
    body = L * per_block + d
    if not embeddings:
        return body
    return body + V * d * (1 if tied else 2)


def test_param_count_big_presets_hand_formula():
    # GPT-2-small-like (Llama layout, untied head): 12·(4·768² + 3·768·2048 + 2·768) + 768 + 2·50257·768
    cfg = ModelConfig.from_preset("small", vocab_size=50257, context_length=1024)
    assert cfg.param_count() == 12 * (4 * 768**2 + 3 * 768 * 2048 + 2 * 768) + 768 + 2 * 50257 * 768 == 162_148_608
    assert cfg.param_count(include_embeddings=False) == 84_953_856
    for name, (d, L, H) in CS336_SHAPES.items():
        f = CS336_D_FF[name]
        for tied in (False, True):
            for qk in (False, True):
                c = ModelConfig.from_preset(name, vocab_size=10000, context_length=256, tie_embeddings=tied,
                                            qk_norm=qk)
                assert c.param_count() == _hand_param_count(10000, d, L, f, d // H, tied=tied, qk_norm=qk)
                assert c.param_count(include_embeddings=False) == _hand_param_count(
                    10000, d, L, f, d // H, qk_norm=qk, embeddings=False)
    # sanity: the 2.7B preset is about 2.7B with a GPT-2 vocabulary
    big = ModelConfig.from_preset("2.7B", vocab_size=50257, context_length=1024)
    assert 2.5e9 < big.param_count() < 3.0e9


def _actual_counts(model: TransformerLM) -> tuple[int, int]:
    unique = {id(p): p for p in model.parameters()}
    total = sum(p.numel() for p in unique.values())
    emb = {id(model.token_embeddings.weight): model.token_embeddings.weight,
           id(model.lm_head.weight): model.lm_head.weight}
    return total, total - sum(p.numel() for p in emb.values())


@pytest.mark.parametrize("preset", ["nano", "micro"])
@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("qk_norm", [False, True])
def test_param_count_matches_instantiated_model(preset, tied, qk_norm):
    cfg = ModelConfig.from_preset(preset, vocab_size=211, context_length=16, tie_embeddings=tied, qk_norm=qk_norm)
    model = TransformerLM(cfg)
    total, non_embedding = _actual_counts(model)
    assert cfg.param_count() == total
    assert cfg.param_count(include_embeddings=False) == non_embedding
    assert model.num_parameters() == total
    assert model.num_parameters(include_embeddings=False) == non_embedding


def test_param_count_odd_shape_instantiated():
    cfg = ModelConfig(vocab_size=50, context_length=8, d_model=24, n_layers=3, n_heads=3, d_ff=40, qk_norm=True)
    model = TransformerLM(cfg)
    total, non_embedding = _actual_counts(model)
    assert (cfg.param_count(), cfg.param_count(include_embeddings=False)) == (total, non_embedding)


def _hand_matmul_params(model: TransformerLM) -> int:
    """Every 2-D weight used in a matmul: all block linears plus the LM head (tied or not)."""
    n = sum(p.numel() for name, p in model.named_parameters() if p.dim() == 2 and name.startswith("layers."))
    return n + model.lm_head.weight.numel()


@pytest.mark.parametrize("tied", [False, True])
def test_flops_per_token_palm_formula(tied):
    cfg = ModelConfig.from_preset("micro", vocab_size=300, context_length=64, tie_embeddings=tied)
    model = TransformerLM(cfg)
    N = _hand_matmul_params(model)
    assert cfg.matmul_params() == N
    L, d = 4, 128
    for T in (None, 16, 64):
        t = 64 if T is None else T
        train = 6 * N + 12 * L * d * t
        assert cfg.flops_per_token(T) == train
        assert cfg.flops_per_token(T, training=False) == pytest.approx(train / 3)
    # a big preset by hand: 6·N_matmul + 12·L·d·T with N_matmul = L·(4d² + 3d·d_ff) + V·d
    small = ModelConfig.from_preset("small", vocab_size=50257, context_length=1024)
    n_small = 12 * (4 * 768**2 + 3 * 768 * 2048) + 50257 * 768
    assert small.flops_per_token() == 6 * n_small + 12 * 12 * 768 * 1024


def test_forward_flops_match_flop_counter():
    """One forward pass of a tiny naive-attention model under FlopCounterMode: the weight matmuls
    give 2·N_matmul per token and the (full T×T) QKᵀ and AV products 4·L·d·T per token."""
    cfg = ModelConfig(vocab_size=128, context_length=32, d_model=64, n_layers=2, n_heads=4, attention="naive")
    torch.manual_seed(0)
    model = TransformerLM(cfg)
    B, T = 2, 32
    ids = torch.randint(0, 128, (B, T), generator=torch.Generator().manual_seed(1))
    N = _hand_matmul_params(model)
    L, d = cfg.n_layers, cfg.d_model
    expected_forward = B * T * (2 * N + 4 * L * d * T)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(ids)
    measured = counter.get_total_flops()
    assert measured == pytest.approx(expected_forward, rel=0.03)
    assert measured == pytest.approx(B * T * cfg.flops_per_token(T, training=False), rel=0.03)

    # forward + backward ≈ 3× forward (the PaLM training convention)
    with FlopCounterMode(display=False) as counter:
        logits = model(ids)
        F.cross_entropy(logits.flatten(0, 1), ids.flatten()).backward()
    assert counter.get_total_flops() == pytest.approx(B * T * cfg.flops_per_token(T), rel=0.03)


@pytest.mark.parametrize("changes, field", [
    (dict(d_model=30, n_heads=4), "d_model"),
    (dict(vocab_size=-5), "vocab_size"),
    (dict(vocab_size=0), "vocab_size"),
    (dict(context_length=0), "context_length"),
    (dict(n_layers=-1), "n_layers"),
    (dict(d_ff=-3), "d_ff"),
    (dict(d_model=24, n_heads=8), "d_head"),  # d_head = 3 is odd: RoPE needs pairs
    (dict(attention="flash9000"), "attention"),
    (dict(norm="layernorm"), "norm"),
    (dict(rope_theta=0.0), "rope_theta"),
    (dict(norm_eps=0.0), "norm_eps"),
])
def test_bad_configs_raise_naming_the_field(changes, field):
    base = dict(vocab_size=100, context_length=16, d_model=32, n_layers=2, n_heads=4)
    base.update(changes)
    with pytest.raises(ValueError, match=field):
        ModelConfig(**base)


def test_d_model_not_divisible_message_names_both():
    with pytest.raises(ValueError, match=r"d_model=30.*n_heads=4"):
        ModelConfig(vocab_size=100, context_length=16, d_model=30, n_layers=2, n_heads=4)


def test_unknown_preset_raises():
    with pytest.raises(ValueError, match="preset 'huge'"):
        ModelConfig.from_preset("huge", vocab_size=100, context_length=16)


def test_dict_round_trip_and_unknown_field(tmp_path):
    cfg = ModelConfig.from_preset("nano", vocab_size=100, context_length=16, qk_norm=True)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    path = tmp_path / "cfg.json"
    import json

    path.write_text(json.dumps({"model": cfg.to_dict()}))
    assert ModelConfig.from_json(path) == cfg
    with pytest.raises(ValueError, match="n_head"):
        ModelConfig.from_dict({**cfg.to_dict(), "n_head": 3})


def test_a_partial_config_checks_what_it_has_and_derives_nothing():
    """TrainConfig's `model`: shape fields left None (the preset's and the shards' to fill), nothing derived yet."""
    partial = ModelConfig(d_model=64, attention="sdpa")
    assert not partial.is_complete and (partial.d_ff, partial.n_kv_heads) == (None, None)
    with pytest.raises(ValueError, match="n_heads"):
        ModelConfig(d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="attention"):
        ModelConfig(attention="flash9000")
    with pytest.raises(ValueError, match="complete ModelConfig"):
        TransformerLM(partial)
    full = ModelConfig.from_preset("micro", **partial.to_dict() | {"vocab_size": 100})
    assert full.is_complete and (full.d_model, full.n_layers, full.d_ff, full.n_kv_heads) == (64, 4, 192, 4)


def test_from_preset_keeps_none_for_fields_a_preset_does_not_set():
    cfg = ModelConfig.from_preset("nano", vocab_size=100, context_length=16, d_model=None, moe_capacity_factor=None)
    assert cfg.d_model == 64 and cfg.moe_capacity_factor is None  # None: no capacity limit, not the default
    no_limit = ModelConfig.from_preset("nano", vocab_size=100, context_length=16, moe_capacity_factor=0)
    assert no_limit.moe_capacity_factor is None  # 0 is the other spelling of no limit (a profile's null drops the key)
