"""leaderboard.report against a small hand-written pipeline tree: every expected value below is written out by hand
from the inputs (6·N·D, exp(val_loss), summed seconds), never taken from the module's own output."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pandas as pd
import pytest

from leaderboard.report import main

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PARAMS = """
filter:
  steps:
    langid: {languages: [en], min_score: 0.65}
    gopher: true
    c4: false
    quality: {threshold: 0.5}
dedup: {ngrams: 5, jaccard_threshold: 0.8, exact: true}
tokenizer: {vocab_size: 512}
leaderboard: {top: 2}
"""
RESULTS = """run_id,params,tokens,flops,flops_actual,val_loss,loss,d_model,n_layers,n_heads,seconds
C1e8_d16,100,50000,1.0e+08,3.0e+07,5.5,5.5,16,2,2,3.0
C1e8_d32,400,20000,1.0e+08,4.8e+07,5.0,5.0,32,2,2,4.0
"""
ALIGNMENT = """stage,task,model,n,accuracy,format_rate
base,arithmetic,data/runs/default,20,0.0,0.0
sft,arithmetic,data/alignment/sft,20,0.25,1.0
"""
FUNNEL = """stage,step,docs,dropped,kept_share,chars,tokens,tokens_est
extract,records,10,0,1.0,,,
dedup,minhash,7,3,0.7,700,,
"""
CURVES = """step,tokens,loss,val_loss,lr,grad_norm,tokens_per_s,mfu
1,1000,9.0,,0.1,1.0,100.0,
2,2000,7.0,6.5,0.1,1.0,100.0,
"""


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def write_json(path: Path, obj: dict) -> None:
    write(path, json.dumps(obj))


@pytest.fixture
def tree(tmp_path, monkeypatch) -> Path:
    """A pipeline tree in the working directory, laid out as params.yaml's defaults expect."""
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "params.yaml", PARAMS)
    write_json(tmp_path / "metrics/details/extract.json", {"seconds": 1.0, "docs_out": 10})
    write_json(tmp_path / "metrics/details/shards.json", {"seconds": 0.5, "vocab_size": 512, "train_tokens": 1000,
                                                          "val_tokens": 50, "tokenizer_sha256": "abcdef0123456789"})
    write_json(tmp_path / "metrics/details/train.json", {"seconds": 10.0, "val_loss": 3.0})
    write_json(tmp_path / "metrics/details/sft.json", {"seconds": 2.5, "accuracy": 0.25})
    # the fit's selected law (scaling.report.prediction_metrics): only a selected law headlines a predicted loss
    write_json(tmp_path / "metrics/details/fit.json", {
        "isoflop@1e+10": {"n_opt": 300.0, "d_opt": 5.0e6, "loss": 4.0, "valid": True, "selected": True},
        "isoflop@1e+12": {"n_opt": 900.0, "d_opt": 2.0e8, "loss": 3.5, "valid": True, "selected": True}})
    run = tmp_path / "data/runs/default"
    write_json(run / "summary.json", {"params": 1000, "tokens": 2000, "val_loss": 3.0, "val_perplexity": 20.0855,
                                      "seconds": 10.0, "device": "cpu", "hardware": "cpu: 2 threads (Test CPU)"})
    write_json(run / "config.json", {"model": {"d_model": 32, "n_layers": 2, "n_heads": 4},
                                     "train": {"preset": "nano"}})
    write(run / "metrics.csv", CURVES)
    write(tmp_path / "data/sweep/results.csv", RESULTS)
    write_json(tmp_path / "data/sweep/runs/C1e8_d16/summary.json", {"device": "cpu"})
    write(tmp_path / "reports/alignment.csv", ALIGNMENT)
    write(tmp_path / "reports/data_funnel.csv", FUNNEL)
    write(tmp_path / "reports/data_funnel.png", "not read, only linked")
    return tmp_path


def board(tree: Path) -> pd.DataFrame:
    return pd.read_csv(tree / "reports/leaderboard.csv", keep_default_na=False, na_values=[""])


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR", path
    return struct.unpack(">II", data[16:24])


def test_leaderboard_rows_match_inputs(tree):
    assert main([]) == 0
    frame = board(tree).set_index("run_id")
    assert list(frame["kind"]) == ["pretrain", "sweep", "sweep", "aligned", "aligned", "scaling_prediction",
                                   "scaling_prediction"]
    recipe = "filters: langid(en)+gopher+quality; dedup: exact+minhash(5-gram, J>=0.8); tokens kept 1,050"
    pre = frame.loc["default"]
    assert (pre["data_recipe"], pre["tokenizer"], pre["preset"]) == (recipe, "bpe-512 sha:abcdef01", "nano")
    assert (pre["d_model"], pre["n_layers"], pre["n_heads"]) == (32, 2, 4)
    assert (pre["params"], pre["tokens"], pre["flops"]) == (1000, 2000, 6 * 1000 * 2000)
    assert (pre["wall_clock_s"], pre["hardware"], pre["val_loss"]) == (10.0, "cpu: 2 threads (Test CPU)", 3.0)
    sweep = frame.loc["C1e8_d32"]
    assert (sweep["params"], sweep["tokens"], sweep["flops"]) == (400, 20000, 6 * 400 * 20000)
    assert (sweep["preset"], sweep["wall_clock_s"], sweep["val_loss"]) == ("d32-L2-H2", 4.0, 5.0)
    assert sweep["val_perplexity"] == pytest.approx(148.4131591)  # e^5
    assert frame.loc["C1e8_d16", "hardware"] == "cpu" and pd.isna(frame.loc["C1e8_d32", "hardware"])
    assert frame.loc["sft", "accuracy"] == 0.25 and frame.loc["sft", "task"] == "arithmetic"
    assert frame.loc["sft", "wall_clock_s"] == 2.5 and frame.loc["base", "accuracy"] == 0.0
    pred = frame.loc["isoflop@1e+12"]
    assert (pred["target_flops"], pred["n_opt"], pred["d_opt"], pred["predicted_loss"]) == (1e12, 900, 2e8, 3.5)
    assert pd.isna(pred["val_loss"]) and pd.isna(frame.loc["sft", "val_loss"])


def test_predictions_csv_is_preferred_to_fit_metrics(tree):
    write(tree / "data/sweep/fit/predictions.csv",
          "method,target_flops,n_opt,n_opt_lo,d_opt,loss\nparametric,2.5e+13,1000.0,1.0,4.0e9,2.25\n")
    assert main([]) == 0
    preds = board(tree).query("kind == 'scaling_prediction'")
    assert list(preds["run_id"]) == ["parametric@2.5e+13"]
    assert list(preds["predicted_loss"]) == [2.25] and list(preds["target_flops"]) == [2.5e13]


def test_summary_tables_and_links(tree):
    assert main([]) == 0
    text = (tree / "reports/summary.md").read_text()
    stages = text.split("## Stage wall-clock (s)")[1].split("##")[0]
    # pipeline order; sweep = 3 + 4 summed from results.csv; total = 1 + 0.5 + 10 + 7 + 2.5
    assert [line.split("|")[1].strip() for line in stages.strip().splitlines()[2:]] == [
        "extract", "shards", "train", "sweep", "sft", "**total**"]
    assert "| sweep | 7 |" in stages and "| **total** | 21 |" in stages
    assert "| dedup | minhash | 7 | 3 | 0.7 | 700 |  |  |" in text
    assert "| default | nano | 1,000 | 2,000 | 12,000,000 | 10 | cpu: 2 threads (Test CPU) | 3 | 20.09 |" in text
    assert "| isoflop | 1e+12 | 900 | 200,000,000 | 3.5 |" in text
    assert "| sft | arithmetic | 0.25 | 2.5 |" in text
    top = text.split("top 2 by val_loss")[1].split("##")[0]  # leaderboard.top: 2 from params.yaml
    rows = [line for line in top.splitlines() if line.startswith("| ")][1:]
    assert [line.split("|")[1].strip() for line in rows] == ["default", "C1e8_d32"]
    for link in ("(training_curves.png)", "(scaling.png)", "(data_funnel.png)"):
        assert link in text
    assert "alignment.png" not in text  # absent input, not linked


def test_summary_says_which_law_was_selected_and_why_the_others_were_left_out(tree):
    write_json(tree / "data/sweep/fit/fit.json", {
        "selection": {"method": "isoflop", "valid": True, "why": "smallest rolling-origin error"},
        "validity": {"isoflop": {"valid": True, "reasons": []},
                     "gadre": {"valid": False, "reasons": ["budget C=5e+10: the law's N_opt(C) lies outside"]}},
        "frontier": {"accelerating": True, "curvature": -0.03, "curvature_se": 0.005}})
    assert main([]) == 0
    scaling = (tree / "reports/summary.md").read_text().split("## Scaling-law predictions")[1].split("##")[0]
    assert "| isoflop | 1e+12 |" in scaling  # the table stays
    assert "- **selected: isoflop**: smallest rolling-origin error" in scaling
    assert "- left out: gadre: budget C=5e+10: the law's N_opt(C) lies outside" in scaling
    assert "still in a transient that no law here can follow" in scaling and "-0.0300 +- 0.0050" in scaling


def test_summary_says_in_one_line_why_the_sweep_extrapolates_poorly_with_the_train_runs_interval(tree):
    # the shards' train split is 1,000 tokens; the sweep's largest run saw 50,000 and the held-out run 2,000
    write_json(tree / "data/sweep/fit/fit.json", {
        "selection": {"method": "parametric", "valid": True, "why": "smallest rolling-origin error"},
        "validity": {"parametric": {"valid": True, "reasons": []}},
        "rolling_origin": {"distance": 4.0, "score": {"parametric": 0.1234}},
        "frontier": {"accelerating": True, "curvature": -0.03, "curvature_se": 0.005},
        "holdout": {"run_id": "default", "d": 2000.0, "predicted_loss": {"parametric": 2.5},
                    "interval": {"parametric": {"pi95": [2.0, 3.0]}}}})
    assert main([]) == 0
    text = (tree / "reports/summary.md").read_text()
    line = next(x for x in text.splitlines() if "This sweep extrapolates poorly" in x)
    assert "faster at the larger budgets" in line and "its largest runs 50.0 epochs" in line
    assert "the held-out run 2.0 epochs" in line and "by 12.3% on average" in line
    assert "95% prediction interval [2, 3] (half-width 20%)" in line  # (3 - 2) / 2 / 2.5


def test_summary_says_when_no_law_is_valid(tree):
    write_json(tree / "data/sweep/fit/fit.json", {
        "selection": {"method": None, "valid": False, "why": "no valid law (gadre: too few budgets)"},
        "validity": {"gadre": {"valid": False, "reasons": ["too few budgets"]}}})
    assert main([]) == 0
    assert "- **no valid law: nothing selected** (no valid law (gadre: too few budgets))" in \
        (tree / "reports/summary.md").read_text()


def test_pngs_are_valid_and_fit_pngs_are_linked_not_redrawn(tree):
    assert main([]) == 0
    for name in ("training_curves.png", "scaling.png"):
        width, height = png_size(tree / "reports" / name)
        assert width > 200 and height > 200
    fit = tree / "data/sweep/fit"
    write(fit / "isoflop_curves.png", "x")
    write(fit / "predictions.csv", "method,target_flops,n_opt,d_opt,loss\nisoflop,1e+12,900,2e8,3.5\n")
    assert main(["--out-dir", "out", "--metrics", "out/report.json"]) == 0
    assert not (tree / "out/scaling.png").exists()
    assert "(../data/sweep/fit/isoflop_curves.png)" in (tree / "out/summary.md").read_text()


def test_headline_metrics(tree):
    assert main([]) == 0
    head = json.loads((tree / "metrics/details/report.json").read_text())
    assert head == {"val_loss": 3.0, "val_perplexity": 20.0855, "best_sweep_loss": 5.0,
                    "predicted_loss": {"isoflop@1e+12": 3.5}, "accuracy": {"base": 0.0, "sft": 0.25},
                    "pipeline_seconds": 21.0}


def test_safety_rows_keep_their_refusal_rate_and_leave_the_task_accuracy(tree):
    write(tree / "reports/alignment.csv",
          "stage,task,model,n,accuracy,format_rate,refusal_rate\n"
          "base,arithmetic,data/runs/default,20,0.0,0.0,\n"
          "sft,arithmetic,data/alignment/sft,20,0.25,1.0,\n"
          "base,safety,data/runs/default,10,,,0.1\n"
          "sft,safety,data/alignment/sft,10,,,0.3\n")
    assert main([]) == 0
    stats = json.loads((tree / "metrics/details/report.json").read_text())
    assert stats["accuracy"] == {"base": 0.0, "sft": 0.25}  # the safety rows (no accuracy) blanked these before
    assert stats["refusal_rate"] == {"base": 0.1, "sft": 0.3}
    summary = (tree / "reports/summary.md").read_text()
    assert "refusal_rate" in summary and "| sft | safety |" in summary.replace("  ", " ")


def test_dvc_metrics_are_the_flat_headline(tree):
    # the headline files stages write beside their details are not read as stage statistics
    write_json(tree / "metrics/fit.json", {"flops": 1e12, "params": 900.0, "tokens": 2.0e8, "loss": 3.5})
    write_json(tree / "metrics/train.json", {"seconds": 99.0, "val_loss": 3.0})
    assert main([]) == 0
    head = json.loads((tree / "metrics/report.json").read_text())
    # predicted loss of isoflop (the only method) at C = 1e12; the best aligned accuracy; 1 + 0.5 + 10 + 7 + 2.5 s
    assert head == {"val_loss": 3.0, "best_sweep_loss": 5.0, "predicted_loss": 3.5, "accuracy": 0.25,
                    "pipeline_seconds": 21.0}


def test_missing_inputs_are_left_out_with_a_warning(tree, capsys):
    for path in ("data/sweep/results.csv", "reports/alignment.csv", "metrics/details/fit.json",
                 "reports/data_funnel.csv"):
        (tree / path).unlink()
    assert main([]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 4 and all(line.startswith("warning: ") for line in err)
    for name in ("results.csv", "alignment.csv", "predictions.csv", "data_funnel.csv"):
        assert any(name in line for line in err), name
    assert list(board(tree)["kind"]) == ["pretrain"]
    text = (tree / "reports/summary.md").read_text()
    assert "_no data_funnel.csv_" in text and "_no alignment results_" in text
    assert not (tree / "reports/scaling.png").exists()


@pytest.mark.parametrize("path", ["metrics/details/train.json", "data/runs/default/summary.json"])
def test_corrupt_json_is_one_error_line_and_exit_2(tree, capsys, path):
    write(tree / path, '{"seconds": 1.0,')
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and path in err


def test_bad_params_and_empty_tree_exit_2(tree, capsys):
    write(tree / "params.yaml", "leaderboard: {tops: 3}\n")
    assert main([]) == 2
    assert "unknown keys ['tops']" in capsys.readouterr().err
    write(tree / "params.yaml", "leaderboard: {top: 0}\n")
    assert main([]) == 2
    assert "leaderboard.top" in capsys.readouterr().err
    assert main(["--top", "3"]) == 0  # every field is also a flag, and the flag wins
    assert "top 3 by val_loss" in (tree / "reports/summary.md").read_text()
    assert main(["--params", "none", "--metrics-dir", "x", "--train-run", "x", "--sweep-results", "x",
                 "--alignment", "x", "--fit-dir", "x"]) == 2
    assert "nothing to report" in capsys.readouterr().err


def test_outputs_are_atomic_and_idempotent(tree):
    assert main([]) == 0
    first = {p: (tree / "reports" / p).read_bytes() for p in ("leaderboard.csv", "summary.md")}
    report = (tree / "metrics/report.json").read_bytes()
    assert main([]) == 0  # metrics/report.json is now in metrics/: it must not become a stage
    for name, data in first.items():
        assert (tree / "reports" / name).read_bytes() == data, name
    assert (tree / "metrics/report.json").read_bytes() == report
    leftovers = [p.name for d in ("reports", "metrics") for p in (tree / d).iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_unreadable_alignment_csv_names_the_column(tree, capsys):
    write(tree / "reports/alignment.csv", "stage,task\nsft,arithmetic\n")
    assert main([]) == 2
    err = capsys.readouterr().err
    assert "alignment.csv" in err and "accuracy" in err and err.count("\n") == 1


def test_predicted_loss_headline_is_the_selected_law_and_absent_without_one(tree):
    fit = tree / "data/sweep/fit/predictions.csv"
    write(fit, "method,target_flops,n_opt,d_opt,loss,valid,selected\n"
               "isoflop,1e+12,900,2e8,3.5,True,True\nparametric,1e+12,800,2.2e8,3.4,True,False\n")
    assert main([]) == 0
    assert json.loads((tree / "metrics/report.json").read_text())["predicted_loss"] == 3.5
    write(fit, "method,target_flops,n_opt,d_opt,loss,valid,selected\n"
               "isoflop,1e+12,900,2e8,3.5,True,False\nparametric,1e+12,800,2.2e8,3.4,True,False\n")
    assert main([]) == 0  # no law selected (none valid, or a fit without a selection): no headline prediction
    assert "predicted_loss" not in json.loads((tree / "metrics/report.json").read_text())


def test_help_shows_the_params_values(tree, capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "(default: 2)" in " ".join(capsys.readouterr().out.split())  # leaderboard.top from params.yaml


HOLDOUT_CSV = """run_id,N,D,C,loss,method,predicted_loss,rel_error
default,1000,2000,12000000,3.0,isoflop,2.7,-0.1
default,1000,2000,12000000,3.0,gadre,3.06,0.02
"""


def test_holdout_check_row_and_predicted_vs_actual_in_summary(tree):
    fit = tree / "data/sweep/fit"
    write(fit / "holdout.csv", HOLDOUT_CSV)
    write_json(fit / "fit.json", {"holdout": {"selected_method": "gadre"},
                                  "validity": {"isoflop": {"valid": False}, "gadre": {"valid": True}}})
    write(fit / "predictions.csv", "method,target_flops,n_opt,d_opt,loss,valid,selected\n"
                                   "isoflop,1e+12,900,2e8,3.5,False,False\ngadre,1e+12,800,2.2e8,3.4,True,True\n")
    assert main([]) == 0
    frame = board(tree).set_index("run_id")
    check = frame.loc["gadre@default"]
    assert check["kind"] == "holdout_check"
    assert (check["params"], check["tokens"], check["flops"]) == (1000, 2000, 12000000)
    assert (check["val_loss"], check["predicted_loss"], check["rel_error"]) == (3.0, 3.06, 0.02)
    # the invalid isoflop fit's prediction is left out of the leaderboard; the selected method headlines
    assert list(frame[frame["kind"] == "scaling_prediction"].index) == ["gadre@1e+12"]
    text = (tree / "reports/summary.md").read_text()
    held_out = text.split("## Held-out run: predicted vs actual loss")[1].split("##")[0]
    assert "| default | 1,000 | 2,000 | 12,000,000 | **gadre** (selected) | 3 | 3.06 | +2.00% | yes |" in held_out
    assert "| default | 1,000 | 2,000 | 12,000,000 | isoflop | 3 | 2.7 | -10.00% | no |" in held_out
    head = json.loads((tree / "metrics/report.json").read_text())
    assert head["holdout_rel_error"] == 0.02 and head["predicted_loss"] == 3.4


def test_holdout_and_validity_from_the_fit_metrics_when_the_fit_folder_is_missing(tree):
    write_json(tree / "metrics/details/fit.json", {
        "isoflop@1e+12": {"n_opt": 900.0, "d_opt": 2.0e8, "loss": 3.5, "valid": False, "selected": False},
        "parametric@1e+12": {"n_opt": 800.0, "d_opt": 2.2e8, "loss": 3.4, "valid": True, "selected": True},
        "holdout": {"run_id": "default", "selected_method": "parametric", "runs": [
            {"run_id": "default", "n": 1000.0, "d": 2000.0, "flops": 1.2e7, "actual_loss": 3.0,
             "predicted_loss": {"isoflop": 2.7, "parametric": 2.94}, "rel_error": {"isoflop": -0.1,
                                                                                 "parametric": -0.02}}]}})
    assert main([]) == 0
    frame = board(tree).set_index("run_id")
    assert list(frame[frame["kind"] == "scaling_prediction"].index) == ["parametric@1e+12"]
    assert frame.loc["parametric@default", "predicted_loss"] == 2.94
    assert "| **parametric** (selected) | 3 | 2.94 | -2.00% | yes |" in (tree / "reports/summary.md").read_text()


def test_no_holdout_is_a_placeholder_not_a_warning(tree, capsys):
    assert main([]) == 0
    assert "_no held-out run" in (tree / "reports/summary.md").read_text()
    assert "holdout" not in capsys.readouterr().err
