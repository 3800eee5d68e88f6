"""model.accounting against the papers' worked numbers and formulas written out by hand: ZeRO
(Rajbhandari et al. 2020) Fig. 1, Korthikanti et al. 2022 Table 2 per-layer activations for the GPT-3
175B shape, ring-collective volumes, and parameter counts taken from ModelConfig."""

import random

import pytest

from model.accounting import (
    HARDWARE,
    Layout,
    activation_bytes,
    compute_seconds,
    dp_comm_bytes,
    get_hardware,
    main,
    scale_out_table,
    step_estimate,
    tp_comm_bytes,
    zero_model_state_bytes,
)
from model.config import ModelConfig

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
