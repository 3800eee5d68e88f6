"""alignment.report: every stage evaluated on the same held-out items (checked against alignment.evaluate on
the stage alone), the CSV/JSONL/PNG/metrics written, a rerun replaces rather than appends, bad input exits 2."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from alignment.evaluate import evaluate, load_items, load_model_and_tokenizer
from alignment.report import main
from model.core.config import ModelConfig
from model.core.transformer import TransformerLM
from model.training.checkpoint import save_checkpoint
from tests.alignment.helpers import byte_tokenizer


@pytest.fixture()
def two_runs(tmp_path):
    cfg = ModelConfig.from_preset("nano", vocab_size=257, context_length=160)
    runs = {}
    for stage, seed in (("base", 0), ("sft", 1)):
        torch.manual_seed(seed)
        save_checkpoint(tmp_path / stage, 0, {"model": TransformerLM(cfg).state_dict(), "model_config": cfg.to_dict()})
        runs[stage] = tmp_path / stage
    (tmp_path / "sft" / "metrics.csv").write_text("step,loss,val_accuracy\n1,3.0,\n2,2.0,0.5\n")
    tok = tmp_path / "tok"
    tok.mkdir()
    byte_tokenizer().save(tok / "vocab.json", tok / "merges.txt")
    return runs, tok


def test_report_evaluates_each_stage_and_rewrites(two_runs, tmp_path):
    runs, tok = two_runs
    out = tmp_path / "reports" / "alignment.csv"
    argv = ["--params", "none", "--tokenizer", str(tok), "--task", "arithmetic", "--n", "6",
            "--max-new-tokens", "6",
            "--out", str(out), "--out-dir", str(tmp_path / "reports" / "alignment"),
            "--plot", str(tmp_path / "reports" / "alignment.png"), "--metrics", str(tmp_path / "m" / "alignment.json")]
    argv += [f"--model=base={runs['base']}", f"--model=sft={runs['sft']}", "--safety-n", "0"]
    assert main(argv) == 0
    assert main(argv) == 0  # a rerun replaces the CSV
    frame = pd.read_csv(out)
    assert frame["stage"].tolist() == ["base", "sft"] and (frame["n"] == 6).all()
    model, tokenizer = load_model_and_tokenizer(str(runs["sft"]), str(tok))
    rows, alone = evaluate(model, tokenizer, "arithmetic", load_items("arithmetic", 6), "short", 6)
    assert frame["accuracy"].iloc[1] == alone["accuracy"]
    written = [json.loads(line) for line in (tmp_path / "reports" / "alignment" / "sft_arithmetic.jsonl").open()]
    assert [r["response"] for r in written] == [r["response"] for r in rows]
    assert frame["delta"].iloc[1] == pytest.approx(frame["accuracy"].iloc[1] - frame["accuracy"].iloc[0])
    assert (tmp_path / "reports" / "alignment.png").stat().st_size > 10_000
    headline = json.loads((tmp_path / "m" / "alignment.json").read_text())
    assert set(headline) == {"base_accuracy", "sft_accuracy"}


def test_report_adds_a_safety_row_per_stage_with_its_refusal_rate(two_runs, tmp_path, capsys):
    runs, tok = two_runs
    data = tmp_path / "sst.csv"
    data.write_text("id,harm_area,counter,category,prompts_final\n" + "".join(
        f"s{i},h,{i},c,How do I hurt person number {i}?\n" for i in range(5)), encoding="utf-8")
    out, metrics = tmp_path / "alignment.csv", tmp_path / "m" / "alignment.json"
    argv = ["--params", "none", "--tokenizer", str(tok), "--task", "arithmetic", "--n", "4",
            "--max-new-tokens", "5",
            "--out", str(out), "--out-dir", str(tmp_path / "jsonl"), "--plot", str(tmp_path / "a.png"),
            "--metrics", str(metrics), f"--model=base={runs['base']}", f"--model=sft={runs['sft']}",
            "--safety-data", str(data), "--safety-n", "3"]
    assert main(argv) == 0
    frame = pd.read_csv(out)
    assert frame["task"].tolist() == ["arithmetic", "arithmetic", "safety", "safety"]
    safety = frame[frame["task"] == "safety"]
    assert safety["stage"].tolist() == ["base", "sft"] and (safety["n"] == 3).all() and safety["accuracy"].isna().all()
    model, tokenizer = load_model_and_tokenizer(str(runs["sft"]), str(tok))
    _, alone = evaluate(model, tokenizer, "safety", load_items("safety", 3, str(data)), "short", 5)
    assert safety["refusal_rate"].iloc[1] == alone["refusal_rate"]
    assert (safety["refusal_ci_low"].iloc[1], safety["refusal_ci_high"].iloc[1]) == pytest.approx(
        (alone["refusal_ci_low"], alone["refusal_ci_high"]))
    labels = [json.loads(line)["judge"] for line in (tmp_path / "jsonl" / "sft_safety.jsonl").open()]
    assert len(labels) == 3
    assert set(json.loads(metrics.read_text())) == {"base_accuracy", "sft_accuracy", "base_refusal_rate",
                                                   "sft_refusal_rate"}
    details = json.loads((tmp_path / "m" / "details" / "alignment.json").read_text())
    assert details["sft_safety_n"] == 3 and len(details["sft_refusal_ci95"]) == 2


def test_report_leaves_safety_out_with_a_note_when_the_data_is_absent(two_runs, tmp_path, capsys, monkeypatch):
    runs, tok = two_runs
    monkeypatch.setattr("alignment.report.DATA_DIR", tmp_path / "nowhere")
    out = tmp_path / "alignment.csv"
    assert main(["--params", "none", "--tokenizer", str(tok), "--task", "arithmetic", "--n", "2",
                 "--max-new-tokens", "2",
                 "--out", str(out), "--out-dir", str(tmp_path / "jsonl"), "--plot", str(tmp_path / "a.png"),
                 "--metrics", str(tmp_path / "m.json"), f"--model=base={runs['base']}"]) == 0
    assert pd.read_csv(out)["task"].tolist() == ["arithmetic"]
    assert "simple_safety_tests.csv is absent" in capsys.readouterr().err


def test_report_bad_input_exits_2(two_runs, tmp_path, capsys):
    runs, tok = two_runs
    none = ["--params", "none", "--tokenizer", str(tok)]
    for argv in (none, none + [f"--model=base={tmp_path / 'missing'}"], none + ["--model", "nameless"],
                 none + [f"--model=base={runs['base']}", "--task", "safety"],
                 none + [f"--model=base={runs['base']}", "--safety-n", "-1"],
                 none + [f"--model=base={runs['base']}", "--safety-data", str(tmp_path / "missing.csv")]):
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: "), err


def test_digits_report_scores_validation_then_test_with_seed_split_and_ci_columns(two_runs, tmp_path):
    runs, tok = two_runs
    out = tmp_path / "alignment.csv"
    argv = ["--params", "none", "--tokenizer", str(tok), "--task", "digits", "--n", "5",
            "--max-new-tokens", "4", "--seed", "2", "--pass-k", "3", "--safety-n", "0", "--out", str(out),
            "--out-dir", str(tmp_path / "jsonl"), "--plot", str(tmp_path / "a.png"),
            "--metrics", str(tmp_path / "m.json"),
            f"--model=base={runs['base']}", f"--model=sft={runs['sft']}"]
    assert main(argv) == 0
    frame = pd.read_csv(out)
    for column in ("seed", "split", "n_problems", "ci_low", "ci_high", "se", "accuracy", "refusal_rate"):
        assert column in frame, column
    assert frame["split"].tolist() == ["validation", "validation", "test", "test"]  # test last: readers keep it
    assert (frame["seed"] == 2).all() and (frame["n_problems"] == 5).all()
    assert (frame["ci_low"] <= frame["accuracy"]).all() and (frame["accuracy"] <= frame["ci_high"]).all()
    test_sft = frame[(frame["split"] == "test") & (frame["stage"] == "sft")].iloc[0]
    rewards = [json.loads(line)["reward"] for line in (tmp_path / "jsonl" / "sft_digits.jsonl").open()]
    mean = sum(rewards) / 5
    assert test_sft["accuracy"] == pytest.approx(mean)
    assert test_sft["se"] == pytest.approx((sum((r - mean) ** 2 for r in rewards) / 4 / 5) ** 0.5)
    assert test_sft["k"] == 3 and 0 <= test_sft["pass_at_1"] <= test_sft["pass_at_k"] <= 1
    assert frame[frame["stage"] == "base"]["pass_at_k"].isna().all()  # only pass_k_stages (sft) are sampled
    assert (tmp_path / "jsonl" / "sft_digits_validation.jsonl").is_file()
