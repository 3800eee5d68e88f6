"""bench.tools.alignment_engines_rows on a hand-made report (no model runs): every value, spread and ratio is checked
against numbers worked out by hand from the fake timings."""

import pytest

from bench.tools import report as bench_report
from bench.tools.alignment_engines_rows import results_rows
from bench.tools.results import read_rows, record


def fake_report(with_trl: bool = True) -> dict:
    grpo = {"settings": {"rollout_batch": 16, "group": 4, "grpo_tokens": 32, "grad_accum": 2},
            "ours": {"step_seconds": [1.0, 3.0, 2.0], "rollout_step_seconds": [0.5, 0.7, 0.6],
                     "train_step_seconds": [0.4, 0.2, 0.3], "response_tokens": [90.0, 96.0, 93.0],
                     "peak_rss_mb": 800.0},
            "ours-hf": {"error": "Traceback ..."}}
    if with_trl:
        grpo["trl"] = {"step_seconds": [4.0, 6.0, 5.0], "response_tokens": [32.0, 31.0, 32.0], "peak_rss_mb": 1000.0}
    return {"device": "CPU (1 threads)", "torch": "2.9", "transformers": "4.57", "trl": "0.24",
            "argv": ["--threads", "1"],
            "model": {"model": "preset micro (random init, seed 0)", "params_m": 1.25, "d_model": 64, "n_layers": 2,
                      "vocab": 8192},
            # 2 prompts x 5 new tokens = 10 tokens a batch
            "rollout": {"prompts": 2, "prompt_len": 3, "new_tokens": 5, "dtype": "fp32", "greedy_match": "3/4",
                        "ours_seconds": [1.0, 0.5, 2.0], "hf_seconds": [2.0, 1.5, 2.0]},
            "grpo": grpo}


def by_key(rows):
    return {(r.name, r.metric): r for r in rows}


def test_rollout_rows_rates_spread_and_ratio_by_hand():
    rows = by_key(results_rows(fake_report()))
    ours = rows["rollout/ours", "new_tokens_per_s"]  # 10 tokens / [1, 0.5, 2] s = [10, 20, 5] tok/s
    assert (ours.value, ours.min, ours.max, ours.repeats) == (10.0, 5.0, 20.0, 3)
    hf = rows["rollout/hf_generate", "new_tokens_per_s"]  # 10 / [2, 1.5, 2] = [5, 6.67, 5]
    assert (hf.value, hf.min, hf.max, hf.baseline) == (5.0, 5.0, pytest.approx(20 / 3), None)
    assert (ours.baseline, ours.baseline_value, ours.ratio) == ("HF generate", 5.0, 2.0)
    pair = rows["rollout/ours", "pair_speedup"]  # HF s / ours s per pair: [2, 3, 1]
    assert (pair.value, pair.min, pair.max) == (2.0, 1.0, 3.0)
    greedy = rows["rollout/ours", "greedy_match"]
    assert greedy.value == 3 and "of 4 prompts" in greedy.unit
    assert "2 prompts x (3+5) tok, fp32" in ours.unit
    assert rows["model/micro", "params_m"].value == 1.25


def test_grpo_rows_against_trl_and_memory_as_its_own_metric():
    rows = by_key(results_rows(fake_report()))
    step = rows["grpo/ours", "s_per_step"]
    assert (step.value, step.min, step.max, step.repeats) == (2.0, 1.0, 3.0, 3)
    assert (step.baseline, step.baseline_value, step.ratio) == ("TRL GRPOTrainer", 5.0, 2.5)  # TRL / ours
    assert "16 rollouts (4 x group 4), 32 tok" in step.unit
    assert rows["grpo/ours", "rollout_s_per_step"].value == pytest.approx(0.6)
    assert rows["grpo/ours", "train_s_per_step"].value == pytest.approx(0.3)
    mem = rows["grpo/ours", "peak_rss_mib"]
    assert (mem.value, mem.baseline_value, mem.ratio) == (800.0, 1000.0, 0.8)  # ours / TRL
    tokens = rows["grpo/ours", "response_tokens"]  # the work behind a step: median 93 vs TRL's 32
    assert (tokens.value, tokens.min, tokens.max, tokens.baseline_value) == (93.0, 90.0, 96.0, 32.0)
    assert tokens.ratio == pytest.approx(93 / 32)
    trl = rows["grpo/trl", "s_per_step"]
    assert (trl.value, trl.baseline, trl.ratio) == (5.0, None, None)
    assert not [k for k in rows if k[0] == "grpo/ours-hf"]  # a failed engine gives no rows
    assert all(" " not in r.name for r in rows.values())  # a marker's names= is space-separated


def test_without_trl_our_rows_have_no_baseline():
    rows = by_key(results_rows(fake_report(with_trl=False)))
    assert rows["grpo/ours", "s_per_step"].baseline is None and rows["grpo/ours", "s_per_step"].ratio is None
    assert rows["grpo/ours", "peak_rss_mib"].ratio is None


def test_rows_render_through_bench_report(tmp_path):
    record("alignment_engines", results_rows(fake_report()), "python -m bench.benchmarks.alignment_engines", tmp_path)
    table = bench_report.render({"area": "alignment_engines", "names": ["grpo/ours"], "metrics": ["s_per_step"]},
                                read_rows(tmp_path))
    assert "| grpo/ours | s_per_step | 2 | s/step, 16 rollouts (4 x group 4), 32 tok | TRL GRPOTrainer | 5 | 2.5 | " \
           "3 (1–3) |" in table
