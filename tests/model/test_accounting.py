"""model.costs.accounting against the papers' worked numbers and formulas written out by hand: ZeRO
(Rajbhandari et al. 2020) Fig. 1, Korthikanti et al. 2022 Table 2 per-layer activations for the GPT-3
175B shape, ring-collective volumes, and parameter counts taken from ModelConfig."""

import random

import pytest

from model.core.config import ModelConfig
from model.costs.accounting import compute_seconds, dp_comm_bytes, main, scale_out_table, step_estimate, tp_comm_bytes
from model.costs.memory import Layout, activation_bytes, zero_model_state_bytes
from model.costs.napkin import largest_model, memory_split, state_bytes_per_param, training_flops, training_seconds
from model.costs.roofline import Matmul, block_matmuls, decode_batch_for_ridge, ridge_point, roofline_row
from workbench.hardware import HARDWARE, Hardware, get_hardware

GB = 1e9


def test_zero_paper_figure1_7_5B_on_64_gpus():
    """ZeRO Fig. 1: Ψ = 7.5B, N_d = 64, K = 12 → 120 GB, 31.4 GB, 16.6 GB, 1.9 GB per device."""
    expected = {0: 120.0, 1: 31.4, 2: 16.6, 3: 1.9}
    for stage, gb in expected.items():
        assert round(zero_model_state_bytes(7.5e9, 64, stage)["total"] / GB, 1) == gb


def test_zero_identities_for_random_sizes():
    rng = random.Random(0)
    for _ in range(50):
        psi, n = rng.uniform(1e6, 1e12), rng.randint(1, 4096)
        totals = [zero_model_state_bytes(psi, n, stage)["total"] for stage in range(4)]
        hand = [16 * psi, 4 * psi + 12 * psi / n, 2 * psi + 14 * psi / n, 16 * psi / n]
        assert totals == pytest.approx(hand, rel=1e-12)
        s1 = zero_model_state_bytes(psi, n, 1)
        assert (s1["params"], s1["grads"], s1["optimizer"]) == pytest.approx((2 * psi, 2 * psi, 12 * psi / n))


def test_zero_fp32_variant():
    psi, n = 1e9, 8
    assert zero_model_state_bytes(psi, n, 0, precision="fp32")["total"] == pytest.approx(16 * psi)
    s2 = zero_model_state_bytes(psi, n, 2, precision="fp32")
    assert (s2["params"], s2["grads"], s2["optimizer"]) == pytest.approx((4 * psi, 4 * psi / n, 8 * psi / n))


# GPT-3 175B as in Korthikanti et al. Table 3: a = 96, h = 12288, s = 2048, L = 96, t = 8; b = 1.
GPT3 = ModelConfig(vocab_size=51200, context_length=2048, d_model=12288, n_layers=96, n_heads=96)


def test_activations_match_korthikanti_table2_by_hand():
    # s·b·h = 2048·12288 = 25,165,824; 5·a·s/h = 5·96·2048/12288 = 80
    sbh = 25_165_824
    no_par = activation_bytes(GPT3, 2048, 1, flash_attention=False)
    assert no_par["layers"] == 96 * sbh * (34 + 80) == 96 * 2_868_903_936
    tp_sp = activation_bytes(GPT3, 2048, 1, tp=8, flash_attention=False)
    assert tp_sp["layers"] == 96 * 358_612_992  # sbh/8·114
    tp_only = activation_bytes(GPT3, 2048, 1, tp=8, sequence_parallel=False, flash_attention=False)
    assert tp_only["layers"] == pytest.approx(96 * sbh * (10 + 24 / 8 + 80 / 8))  # = 96·sbh·23
    flash = activation_bytes(GPT3, 2048, 1, tp=8)
    assert flash["layers"] == 96 * sbh * 34 / 8  # no s×s scores stored
    # full recomputation: layer inputs 2·s·b·h/t per layer + one layer rebuilt during its backward
    full = activation_bytes(GPT3, 2048, 1, tp=8, recompute="full", flash_attention=False)
    assert full["layers"] == 96 * 2 * sbh / 8 + 358_612_992
    # fp32 logits 4·s·b·V/t
    assert full["logits"] == 4 * 2048 * 51200 / 8
    # linear in the micro-batch
    assert activation_bytes(GPT3, 2048, 3)["total"] == pytest.approx(3 * activation_bytes(GPT3, 2048, 1)["total"])


def test_comm_is_zero_on_one_gpu():
    for stage in range(4):
        assert dp_comm_bytes(2.7e9, 1, stage, micro_steps=4) == 0
    assert tp_comm_bytes(GPT3, 2048, 2, 1) == 0


def test_dp_comm_matches_ring_volumes():
    psi, n = 1000, 4  # one reduce-scatter or all-gather: (4−1)/4·1000·2 bytes = 1500
    assert dp_comm_bytes(psi, n, 0) == dp_comm_bytes(psi, n, 1) == dp_comm_bytes(psi, n, 2) == 3000
    assert dp_comm_bytes(psi, n, 3) == 4500
    # gradient accumulation: stages 0-1 once per step, stage 2 reduce-scatters every micro-batch
    assert dp_comm_bytes(psi, n, 1, micro_steps=5) == 3000
    assert dp_comm_bytes(psi, n, 2, micro_steps=5) == 6 * 1500
    assert dp_comm_bytes(psi, n, 3, micro_steps=5) == 15 * 1500
    assert dp_comm_bytes(psi, n, 0, bytes_per_value=4) == 6000


def test_tp_comm_equals_hand_formula():
    cfg = ModelConfig(vocab_size=100, context_length=16, d_model=64, n_layers=2, n_heads=4)
    # 2 micro-steps × 2 layers × 4 all-reduces × 2·(4−1)/4 × (b=3 · s=16 · h=64 · 2 bytes = 6144)
    assert tp_comm_bytes(cfg, 16, 3, 4, micro_steps=2) == 2 * 2 * 4 * 1.5 * 6144 == 147_456
    assert tp_comm_bytes(cfg, 16, 3, 4, micro_steps=2, recompute="full") == 2 * 2 * 6 * 1.5 * 6144


def test_hardware_table():
    h100 = HARDWARE["h100"]
    assert (h100.peak_flops, h100.hbm_bytes, h100.hbm_bandwidth, h100.intra_node_bandwidth,
            h100.inter_node_bandwidth, h100.gpus_per_node) == (989e12, 80e9, 3.35e12, 450e9, 50e9, 8)
    assert (HARDWARE["h200"].hbm_bytes, HARDWARE["h200"].hbm_bandwidth) == (141e9, 4.8e12)
    assert (HARDWARE["a100"].peak_flops, HARDWARE["a100"].intra_node_bandwidth) == (312e12, 300e9)
    assert (HARDWARE["b200"].peak_flops, HARDWARE["b200"].intra_node_bandwidth) == (2.25e15, 900e9)
    assert get_hardware("H100") is h100
    assert h100.link_bandwidth(8) == 450e9 and h100.link_bandwidth(16) == 50e9


def test_table_rows_use_model_config_and_hand_formulas():
    rows = scale_out_table("2.7B", [8, 64], "h100", global_batch_tokens=2**20, seq_len=1024, micro_batch=1)
    cfg = ModelConfig.from_preset("2.7B", vocab_size=50257, context_length=1024)
    psi = cfg.param_count()
    by = {(r["strategy"], r["gpus"]): r for r in rows}
    assert len(rows) == 10 and all(r["params"] == psi for r in rows)
    ddp8, zero3_64, tp8_64 = by["ddp", 8], by["zero3", 64], by["tp8", 64]
    assert (ddp8["mem_params"], ddp8["mem_grads"], ddp8["mem_optimizer"]) == (2 * psi, 2 * psi, 12 * psi)
    assert zero3_64["mem_params"] + zero3_64["mem_grads"] + zero3_64["mem_optimizer"] == pytest.approx(16 * psi / 64)
    # 2^20 tokens / (1024 tokens × 8 ranks) = 128 micro-steps of 1 sequence
    assert (ddp8["micro_batch"], ddp8["micro_steps"], ddp8["tokens_per_step"]) == (1, 128, 2**20)
    # DDP inside one node: one all-reduce of bf16 grads over NVLink; across nodes over InfiniBand
    assert ddp8["comm_s"] == pytest.approx(2 * 7 / 8 * psi * 2 / 450e9)
    assert by["ddp", 64]["comm_s"] == pytest.approx(2 * 63 / 64 * psi * 2 / 50e9)
    # compute: tokens × 6N-style FLOPs/token at MFU 0.5 over all GPUs
    assert ddp8["compute_s"] == pytest.approx(2**20 * cfg.flops_per_token(1024) / (8 * 989e12 * 0.5))
    assert ddp8["compute_s"] == pytest.approx(compute_seconds(cfg, 2**20, 8, "h100", seq_len=1024))
    # tp8 on 64 GPUs: params sharded 8 ways, ZeRO-1 over dp = 8; TP on NVLink, DP on InfiniBand
    assert tp8_64["dp"] == 8 and tp8_64["mem_params"] == pytest.approx(2 * psi / 8)
    assert tp8_64["mem_optimizer"] == pytest.approx(12 * psi / 64)
    tp_bytes = 128 * cfg.n_layers * 4 * 2 * 7 / 8 * (1 * 1024 * 2560 * 2)  # 2^20/(1024·8) = 128 micro-steps
    dp_bytes = 2 * 7 / 8 * psi / 8 * 2
    assert tp8_64["comm_bytes"] == pytest.approx(tp_bytes + dp_bytes)
    assert tp8_64["comm_s"] == pytest.approx(tp_bytes / 450e9 + dp_bytes / 50e9)


def test_auto_micro_batch_is_largest_that_fits():
    cfg = ModelConfig.from_preset("2.7B", vocab_size=50257, context_length=2048)
    row = step_estimate(cfg, Layout(gpus=8), "h100", global_batch_tokens=2**22, seq_len=2048)
    assert row["fits"] and row["micro_batch"] * row["micro_steps"] == 2**22 // (2048 * 8)
    bigger = step_estimate(cfg, Layout(gpus=8), "h100", global_batch_tokens=2**22, seq_len=2048,
                           micro_batch=2 * row["micro_batch"])
    assert not bigger["fits"]
    small = step_estimate(cfg, Layout(gpus=1024), "h100", global_batch_tokens=2**20, seq_len=2048)
    assert small["tokens_per_step"] == 1024 * 2048 and "batch raised" in small["note"]
    # 2^22 / (2048 · 8) = 256 sequences per rank: a micro-batch of 6 is lowered to 4 (divides 256)
    lowered = step_estimate(cfg, Layout(gpus=8, zero_stage=3), "h100", global_batch_tokens=2**22, seq_len=2048,
                            micro_batch=6)
    assert (lowered["micro_batch"], lowered["micro_steps"]) == (4, 64) and "6 -> 4" in lowered["note"]


def test_cli_prints_markdown_tables(capsys):
    assert main(["--scale-out", "--presets", "xl", "--gpus", "8", "64", "--seq-len", "1024",
                 "--global-batch-tokens", "1048576"]) == 0
    out = capsys.readouterr().out
    assert "### xl" in out and "| strategy | GPUs |" in out
    assert "| zero3 | 64 |" in out and "| tp8 | 8 |" in out and "H100" in out
    assert main([]) == 2
    assert main(["--scale-out", "--hardware", "tpu"]) == 2
    assert "tpu" in capsys.readouterr().err


@pytest.mark.parametrize("call, word", [
    (lambda: zero_model_state_bytes(1e9, 0, 1), "world"),
    (lambda: zero_model_state_bytes(1e9, 8, 4), "stage"),
    (lambda: zero_model_state_bytes(1e9, 8, 1, precision="fp8"), "fp8"),
    (lambda: zero_model_state_bytes(0, 8, 1), "n_params"),
    (lambda: dp_comm_bytes(1e9, 0, 0), "world"),
    (lambda: dp_comm_bytes(1e9, 8, 7), "stage"),
    (lambda: get_hardware("tpu"), "tpu"),
    (lambda: scale_out_table("2.7B", [8], "tpu"), "tpu"),
    (lambda: scale_out_table("9B", [8]), "9B"),
    (lambda: scale_out_table("xl", [8], strategies=["pp"]), "pp"),
    (lambda: Layout(gpus=0), "gpus"),
    (lambda: Layout(gpus=12, tp=8), "tp"),
    (lambda: Layout(gpus=8, zero_stage=5), "stage"),
    (lambda: Layout(gpus=8, recompute="some"), "recompute"),
    (lambda: activation_bytes(GPT3, 0, 1), "seq_len"),
    (lambda: compute_seconds(GPT3, 1e6, 8, "h100", seq_len=2048, mfu=1.5), "mfu"),
])
def test_bad_input_raises_value_error_naming_it(call, word):
    with pytest.raises(ValueError, match=word):
        call()


# ---- napkin report (model/costs/napkin.py) and roofline (model/costs/roofline.py) --------------------------------


def test_napkin_70b_on_15t_tokens_on_1024_h100_at_mfu_half(capsys):
    """CS336 lecture 2: total_flops = 6·70e9·15e12; days = total_flops / (peak·0.5·1024·86400)."""
    total = training_flops(15e12, n_params=70e9)
    assert total == pytest.approx(6.3e24, rel=1e-12)
    secs = training_seconds(total, 1024, "h100", 0.5)
    assert secs == pytest.approx(6.3e24 / (1024 * 989e12 * 0.5), rel=1e-12)  # 12,441,466 s
    assert round(secs / 86400, 2) == 144.00
    # the lecture's h100_flop_per_sec = 1979e12 / 2 = 989.5e12 gives 143.93 days
    lecture = Hardware("H100 (lecture)", 1979e12 / 2, 80e9, 3.35e12, 450e9, 50e9)
    assert round(training_seconds(total, 1024, lecture, 0.5) / 86400, 2) == 143.93
    assert main(["--params", "70e9", "--tokens", "15e12", "--hardware", "h100", "--gpus", "1024",
                 "--mfu", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "6·N·D = 6.300e+24 FLOPs" in out and "= 144.00 days" in out
    assert "attention FLOPs OMITTED" in out and "== assumptions ==" in out
    # 16 bytes/param · 70e9 = 1120 GB of model states under DDP; ZeRO-3 needs ceil(1120/80) = 14 GPUs
    assert "model states 1120.00" in out and ">= 14 GPUs" in out


def test_napkin_largest_adamw_model_on_8_h100(capsys):
    """CS336 lecture 2: 8 H100s × 80 GB / 16 bytes per param = 40e9 parameters (decimal GB)."""
    assert largest_model("h100", Layout(gpus=8, zero_stage=3))["layout"] == pytest.approx(8 * 80e9 / 16)
    ddp = largest_model("h100", Layout(gpus=8))
    assert ddp["layout"] == pytest.approx(80e9 / 16) and ddp["fully_sharded"] == pytest.approx(40e9)
    # ZeRO-1 over 8: 4 + 12/8 = 5.5 bytes per param per GPU; TP 2 halves it; 12 bytes/param scales it
    assert state_bytes_per_param(Layout(gpus=8, zero_stage=1)) == pytest.approx(5.5)
    assert state_bytes_per_param(Layout(gpus=8, tp=2, zero_stage=1)) == pytest.approx((4 + 12 / 4) / 2)
    assert state_bytes_per_param(Layout(gpus=8, zero_stage=3), 12) == pytest.approx(12 / 8)
    assert largest_model("h100", Layout(gpus=8), reserved_bytes=30e9)["layout"] == pytest.approx(50e9 / 16)
    assert main(["--fit", "--hardware", "h100", "--gpus", "8", "--zero-stage", "3"]) == 0
    out = capsys.readouterr().out
    assert "ZeRO-3 over 8): 4e+10 params" in out and "8 × 80 GB / 16 B = 4e+10 params" in out


def test_memory_split_calls_the_zero_and_activation_formulas():
    cfg = ModelConfig.from_preset("2.7B", vocab_size=50257, context_length=2048)
    psi = cfg.param_count()
    layout = Layout(gpus=16, tp=2, zero_stage=2)
    split = memory_split(layout, n_params=psi, cfg=cfg, seq_len=2048, micro_batch=3)
    states = zero_model_state_bytes(psi / 2, 8, 2)
    assert (split["params"], split["grads"], split["optimizer"], split["states"]) == (
        states["params"], states["grads"], states["optimizer"], states["total"])
    assert (split["params"], split["grads"], split["optimizer"]) == pytest.approx((psi, psi / 8, 12 * psi / 2 / 8))
    for recompute in ("none", "full"):
        act = activation_bytes(cfg, 2048, 3, tp=2, recompute=recompute)["total"]
        assert split[f"activations_{recompute}"] == act
    # no shape: activations unknown
    bare = memory_split(Layout(gpus=8), n_params=1e9)
    assert bare["states"] == 16e9 and bare["activations_none"] is None


def test_training_seconds_with_a_shape_matches_compute_seconds():
    cfg = ModelConfig.from_preset("xl", vocab_size=50257, context_length=1024)
    flops = training_flops(1e9, cfg=cfg, seq_len=1024)
    assert flops == pytest.approx(1e9 * (6 * cfg.matmul_params() + 12 * 48 * 1600 * 1024))
    assert training_seconds(flops, 8, "h100", 0.4) == pytest.approx(
        compute_seconds(cfg, 1e9, 8, "h100", seq_len=1024, mfu=0.4))


def test_square_matmul_intensity_is_m_over_3():
    for m in (1, 64, 1000, 4096):
        mm = Matmul("sq", m, m, m)
        assert mm.flops == 2 * m**3 and mm.bytes == 2 * 3 * m * m
        assert mm.intensity == pytest.approx(2 * m**3 / (2 * (3 * m * m))) and mm.intensity == pytest.approx(m / 3)
    rect = Matmul("r", 8, 4096, 11008)
    assert rect.intensity == pytest.approx(2 * 8 * 4096 * 11008 / (2 * (8 * 4096 + 4096 * 11008 + 8 * 11008)))
    assert rect.intensity == pytest.approx(8, rel=0.01)  # decode: ≈ b when b ≪ k, n


def test_roofline_ridge_bound_and_decode_batch():
    ridge = ridge_point(989e12, 3.35e12)
    assert ridge == pytest.approx(295.22, abs=0.01)
    b = decode_batch_for_ridge(2560, 6848, ridge)
    assert Matmul("x", b, 2560, 6848).intensity == pytest.approx(ridge)
    assert roofline_row(Matmul("x", 0.99 * b, 2560, 6848), 989e12, 3.35e12)["bound"] == "memory"
    row = roofline_row(Matmul("x", 1.01 * b, 2560, 6848), 989e12, 3.35e12)
    assert row["bound"] == "compute" and row["time_s"] == pytest.approx(row["flops"] / 989e12)
    assert decode_batch_for_ridge(100, 100, ridge) == float("inf")  # a 100×100 weight never reaches 295


def test_block_matmuls_add_up_to_model_config_counts():
    cfg = ModelConfig.from_preset("small", vocab_size=50257, context_length=1024, n_kv_heads=4)
    mms = {mm.name: mm for mm in block_matmuls(cfg, 4096)}
    block = sum(mm.flops for name, mm in mms.items() if name != "LM head")
    assert block == 2 * 4096 * (cfg.attention_params() + cfg.ffn_params())
    assert mms["QKV"].n == 768 + 2 * 4 * 64 and mms["LM head"].flops == 2 * 4096 * 768 * 50257
    tp4 = block_matmuls(cfg.replace(vocab_size=50304), 4096, tp=4)  # 50304 = 4·12576: even shards
    assert sum(mm.flops for mm in tp4) * 4 == sum(mm.flops for mm in block_matmuls(cfg.replace(vocab_size=50304), 4096))
    assert block_matmuls(cfg, 4096, tp=4)[-1].n == 12565  # ceil(50257 / 4): the largest vocabulary shard
    moe = ModelConfig(vocab_size=100, context_length=64, d_model=64, n_layers=2, n_heads=4, d_ff=128,
                      n_experts=8, moe_top_k=2)
    ffn = [mm for mm in block_matmuls(moe, 512) if mm.name.startswith("FFN")]
    assert ffn[0].m == 512 * 2 / 8 and ffn[0].count == 16  # each expert sees m·top_k/E tokens
    assert sum(mm.flops for mm in ffn) == 2 * 512 * (moe.ffn_params(active=True) - 64 * 8)  # router apart


def test_cli_report_for_a_preset_and_moe(capsys):
    assert main(["--preset", "2.7B", "--tokens", "55e9", "--gpus", "8", "--zero-stage", "1",
                 "--micro-batch", "4"]) == 0
    out = capsys.readouterr().out
    for section in ("== parameters ==", "== FLOPs per token", "== training ==", "== memory per GPU",
                    "== largest model", "== roofline: training", "== roofline: decode"):
        assert section in out
    cfg = ModelConfig.from_preset("2.7B", vocab_size=50257, context_length=2048)
    assert f"total: {cfg.param_count():,}" in out and f"non-embedding: {cfg.param_count(False):,}" in out
    assert main(["--preset", "nano", "--n-experts", "4", "--moe-top-k", "1", "--gpus", "1"]) == 0
    moe = ModelConfig.from_preset("nano", vocab_size=50257, context_length=2048, n_experts=4, moe_top_k=1)
    assert f"active per token (top-1 of 4): {moe.param_count(active=True):,}" in capsys.readouterr().out


@pytest.mark.parametrize("argv, word", [
    (["--params", "0", "--gpus", "8"], "n_params"),
    (["--params", "nan"], "n_params"),
    (["--params", "1e9", "--tokens", "-5"], "tokens"),
    (["--params", "1e9", "--mfu", "0"], "mfu"),
    (["--params", "1e9", "--gpus", "8", "64"], "one --gpus"),
    (["--params", "1e9", "--preset", "xl"], "not both"),
    (["--params", "1e9", "--gpus", "8", "--tp", "3"], "tp"),
    (["--d-model", "64"], "--n-layers"),
    (["--preset", "9B"], "9B"),
    (["--config", "/nonexistent/\udcff.json"], "nonexistent"),
    (["--params", "1e9", "--hardware", "tpu"], "tpu"),
])
def test_cli_bad_input_exits_2_naming_it(argv, word, capsys):
    assert main(argv) == 2
    assert word in capsys.readouterr().err


def test_measure_activations_needs_cuda(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA present: the refusal path is for CPU machines")
    assert main(["--measure-activations"]) == 2
    assert "needs CUDA" in capsys.readouterr().err
