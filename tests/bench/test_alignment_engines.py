"""bench.benchmarks.alignment_engines smoke test at --quick sizes: the rollout part's sanity check (our greedy
generation equals HF ``LlamaForCausalLM.generate`` on the exported weights: the independent reference) and the GRPO part
running our loop and TRL's GRPOTrainer, each in its own subprocess; bad usage exits 2."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")
pytest.importorskip("trl")

from bench.benchmarks.alignment_engines import main, upto_eos  # noqa: E402
from bench.tools.results import read_rows  # noqa: E402


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("bench")


@pytest.fixture(scope="module")
def report(run_dir):
    out = run_dir / "bench.json"
    # a missing tokenizer folder: the byte tokenizer (vocab 257) keeps the model and the test small
    code = main(["--quick", "--device", "cpu", "--tokenizer", str(out.parent / "none"), "--vocab", "257",
                 "--engines", "ours,trl", "--threads", "1", "--out", str(out), "--results-dir", str(out.parent)])
    assert code == 0
    return json.loads(out.read_text())


def test_rollout_greedy_matches_hf_generate_and_reports_rates(report):
    rollout = report["rollout"]
    assert rollout["greedy_match"] == "4/4"
    assert rollout["ours_tokens_per_s"] > 0 and rollout["hf_tokens_per_s"] > 0
    assert rollout["ratio_ours_over_hf"] == pytest.approx(rollout["ours_tokens_per_s"] / rollout["hf_tokens_per_s"])
    assert report["model"]["vocab"] == 257 and report["model"]["eos_id"] == 256


def test_grpo_runs_ours_and_trl_in_subprocesses(report):
    grpo = report["grpo"]
    for engine in ("ours", "trl"):
        assert "error" not in grpo[engine], grpo[engine]
        assert grpo[engine]["seconds_per_step"] > 0
        assert grpo[engine]["peak_rss_mb"] > 50  # torch alone is more: a real per-process peak
        assert grpo[engine]["response_tokens"]
    assert all(0 < n <= 8 for n in grpo["trl"]["response_tokens"])  # TRL trains on at most max_completion_length ids
    assert grpo["ours"]["ratio_trl_over_ours"] == pytest.approx(
        grpo["trl"]["seconds_per_step"] / grpo["ours"]["seconds_per_step"])
    assert grpo["settings"]["rollout_batch"] % grpo["settings"]["group"] == 0


def test_run_records_rows_per_part_and_engine(report, run_dir):
    rows = read_rows(run_dir)
    assert {r["area"] for r in rows} == {"alignment_engines"}
    keys = {(r["name"], r["metric"]) for r in rows}
    assert {("rollout/ours", "new_tokens_per_s"), ("grpo/ours", "s_per_step"), ("grpo/trl", "peak_rss_mib")} <= keys
    ours = next(r for r in rows if (r["name"], r["metric"]) == ("grpo/ours", "s_per_step"))
    assert ours["ratio"] == pytest.approx(report["grpo"]["ours"]["ratio_trl_over_ours"])
    assert "python -m bench.benchmarks.alignment_engines --quick" in ours["command"]


def test_greedy_check_compares_up_to_the_first_eos():
    # HF's min_new_tokens masks EOS, ours with eos_id=None may pick it: what follows an EOS is not compared
    assert upto_eos([5, 9, 256, 7, 7], 256) == [5, 9, 256]
    assert upto_eos([5, 9, 7], 256) == [5, 9, 7]


@pytest.mark.parametrize("argv", [["--parts", "nope"], ["--engines", "vllm"],
                                  ["--quick", "--rollout-batch", "3", "--group", "2"]])
def test_bad_usage_exits_2(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert capsys.readouterr().err.startswith("error: ")
