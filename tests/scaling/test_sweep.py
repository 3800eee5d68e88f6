"""Budgeted sweeps (scaling/sweep.py) on a tiny random-token corpus: the CS336 budgeted-API rules (the cap is
checked before anything runs), FLOPs accounting within one step of each budget, and idempotent, resumable reruns."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from scaling.sweep import COLUMNS, SweepConfig, budget_label, main, plan_runs, sweep_section

VOCAB = 64
TRAIN = {"model": {"context_length": 16}, "batch_size": 4, "lr": 3e-3, "min_lr": 3e-4, "warmup_steps": 5,
         "eval_batches": 2, "device": "cpu", "threads": 1, "seed": 0, "log_interval": 1000}
BUDGETS = [4e7, 8e7]  # the d16 model gets ~17/34 steps of 64 tokens, the d32 model ~7/14
SHAPES = [[16, 1, 2], [32, 1, 2]]


@pytest.fixture
def shards(tmp_path: Path) -> Path:
    d = tmp_path / "shards"
    d.mkdir()
    rng = np.random.default_rng(0)
    rng.integers(0, VOCAB, 4096, dtype=np.uint16).tofile(d / "train.bin")
    rng.integers(0, VOCAB, 1024, dtype=np.uint16).tofile(d / "val.bin")
    (d / "meta.json").write_text(json.dumps({"dtype": "uint16", "vocab_size": VOCAB}))
    return d


def params_file(tmp_path: Path, shards: Path, **changes) -> Path:
    section = {"data": str(shards), "out_dir": str(tmp_path / "runs"), "results": str(tmp_path / "results.csv"),
               "budgets": BUDGETS, "shapes": SHAPES, "flops_per_token": "6N", "total_flops": 1e9, "train": TRAIN}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"sweep": section | changes}))
    return path


def read_rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_sweep_trains_every_budget_and_shape_once_then_resumes(tmp_path, shards, capsys):
    params = params_file(tmp_path, shards)
    results = tmp_path / "results.csv"
    assert main(["--params", str(params)]) == 0
    out = capsys.readouterr().out
    assert "spent" in out and "left" in out and f"python -m scaling.fit {results}" in out

    rows = read_rows(results)
    assert len(rows) == 4
    assert tuple(rows[0]) == COLUMNS
    assert {r["run_id"] for r in rows} == {f"C{budget_label(c)}_d{d}_L1_H2" for c in BUDGETS for d in (16, 32)}
    for r in rows:
        budget, per_token = float(r["flops"]), 6 * int(r["params"])
        assert budget in BUDGETS and r["loss"] == r["val_loss"]
        # max_tokens = floor(C / 6N) rounded up to whole steps of 4·16 tokens: within one step of the budget
        assert budget - per_token <= float(r["flops_actual"]) < budget + 64 * per_token
        assert int(r["tokens"]) == int(r["steps"]) * 64 and float(r["flops_actual"]) == int(r["tokens"]) * per_token
        assert (tmp_path / "runs" / r["run_id"] / "summary.json").is_file()

    # a rerun trains nothing and leaves every file alone
    stamps = {p: p.stat().st_mtime_ns for p in [results, *(tmp_path / "runs").rglob("*")]}
    assert main(["--params", str(params)]) == 0
    assert "4 done, 0 to run" in capsys.readouterr().out
    assert stamps == {p: p.stat().st_mtime_ns for p in [results, *(tmp_path / "runs").rglob("*")]}

    # run folders with no row (killed before the row was written) are recovered from summary.json, or resumed
    # from their last checkpoint (killed before summary.json): neither trains again, so the losses are unchanged
    recovered, resumed = rows[1], rows[2]
    (tmp_path / "runs" / resumed["run_id"] / "summary.json").unlink()
    with open(results, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(r for r in rows if r not in (recovered, resumed))
    assert main(["--params", str(params)]) == 0
    out = capsys.readouterr().out
    plan = out.split("plan:")[0].splitlines()[1:]  # the plan table: run_id … status
    status = {line.split()[0]: line.split()[-1] for line in plan}
    assert "2 done, 2 to run" in out and status[resumed["run_id"]] == status[recovered["run_id"]] == "resume"
    again = {r["run_id"]: r for r in read_rows(results)}
    assert len(again) == 4
    assert again[recovered["run_id"]] == recovered
    assert float(again[resumed["run_id"]]["val_loss"]) == pytest.approx(float(resumed["val_loss"]), abs=1e-6)
    assert again[resumed["run_id"]]["steps"] == resumed["steps"]


def test_sweep_refuses_a_plan_over_total_flops(tmp_path, shards, capsys):
    params = params_file(tmp_path, shards)
    assert main(["--params", str(params), "--total-flops", "1e8"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "total_flops" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "results.csv").exists() and not (tmp_path / "runs").exists()


def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path, shards, capsys):
    params = params_file(tmp_path, shards)
    assert main(["--params", str(params), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "C4e7_d16_L1_H2" in out and "0 done, 4 to run" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml", "shards"]


def test_run_under_one_step_is_skipped(tmp_path, shards, capsys):
    params = params_file(tmp_path, shards, budgets=[1e5, 4e7])  # 1e5 FLOPs buys < 64 tokens of either model
    assert main(["--params", str(params), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "C1e5_d16_L1_H2: D = C/6N" in out and "2 skipped" in out


def test_extra_seeds_train_every_run_again_and_the_fit_averages_them(tmp_path, shards, capsys):
    """seeds: [1] adds each run once more under train.seed 1 (id suffix _s1; the first seed's ids unchanged); the
    seed-1 runs equal a separate sweep with train.seed 1, and scaling.fit reads the table as one point per run with
    the mean loss of its two seeds (computed here from the rows)."""
    params = params_file(tmp_path, shards, seeds=[1], total_flops=2e9)
    assert main(["--params", str(params)]) == 0
    rows = read_rows(tmp_path / "results.csv")
    first = {r["run_id"]: r for r in rows if not r["run_id"].endswith("_s1")}
    second = {r["run_id"].removesuffix("_s1"): r for r in rows if r["run_id"].endswith("_s1")}
    assert set(first) == set(second) == {f"C{budget_label(c)}_d{d}_L1_H2" for c in BUDGETS for d in (16, 32)}
    alone = tmp_path / "alone"
    alone.mkdir()
    assert main(["--params", str(params_file(alone, shards, train=TRAIN | {"seed": 1}))]) == 0
    for row in read_rows(alone / "results.csv"):
        assert float(second[row["run_id"]]["val_loss"]) == pytest.approx(float(row["val_loss"]), rel=1e-6)
    assert any(float(first[k]["val_loss"]) != float(second[k]["val_loss"]) for k in first)  # another draw
    from scaling.data import average_repeats, load_results
    points = average_repeats(load_results(tmp_path / "results.csv"))
    assert len(points) == 4 and set(points["repeats"]) == {2}
    for _, point in points.iterrows():
        pair = (float(first[point["run_id"]]["val_loss"]), float(second[point["run_id"]]["val_loss"]))
        assert point["loss"] == pytest.approx(sum(pair) / 2)


@pytest.mark.parametrize("change, named", [
    ({"shapes": [[30, 1, 4]]}, "n_heads"),
    ({"shapes": [[16, 1]]}, "shapes[0]"),
    ({"budgets": []}, "budgets"),
    ({"budgets": ["1e12", "x"]}, "budgets"),
    ({"flops_per_token": "7N"}, "flops_per_token"),
    ({"train": {"max_steps": 3}}, "set by the sweep"),
    ({"train": {"model": {"d_model": 8}}}, "set by the sweep: ['model.d_model']"),
    ({"train": {"model": {"d_modle": 8}}}, "model.d_modle"),
    ({"train": {"batch_sise": 3}}, "batch_sise"),
    ({"train": {"batch_size": 0}}, "batch_size"),
    ({"total_flops": -1}, "total_flops"),
    ({"seeds": [0]}, "sweep.seeds"),
    ({"seeds": [1, 1]}, "sweep.seeds"),
    ({"seeds": 1}, "sweep.seeds"),
])
def test_bad_config_exits_2_naming_the_field(tmp_path, shards, capsys, change, named):
    assert main(["--params", str(params_file(tmp_path, shards, **change))]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and named in err and len(err.strip().splitlines()) == 1


def test_config_reads_yaml_style_numbers_and_exact_flops():
    cfg = SweepConfig.from_dict({"budgets": ["1e12", 3e12], "shapes": [[64, 2, 2]], "total_flops": "1e13",
                                 "flops_per_token": "exact", "train": {"lr": 1e-3}})
    assert cfg.budgets == (1e12, 3e12) and cfg.total_flops == 1e13 and cfg.shapes == ((64, 2, 2),)
    assert cfg.train == {"lr": 1e-3}  # no built-in second set of train settings: the runs' come from params
    assert [budget_label(c) for c in (1e12, 2.5e11, 1e5, 3e-4)] == ["1e12", "2.5e11", "1e5", "3e-4"]


def test_sweep_runs_inherit_the_train_section_and_its_learning_rate(tmp_path, shards):
    """Issue 37: the sweep's runs take the `train` section's settings (less what the sweep sets per run), its own
    `train` mapping over them, and `inverse_width` anchors the rate at the train run's width: nothing typed twice."""
    held_out = TRAIN | {"model": {"d_model": 32, "n_layers": 1, "n_heads": 2, "context_length": 16}, "lr": 4e-3,
                        "min_lr": 4e-4, "max_steps": 999, "out_dir": "data/runs/x", "eval_interval": 7,
                        "schedule": "wsd"}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"train": held_out, "sweep": {
        "data": str(shards), "budgets": BUDGETS, "shapes": SHAPES, "lr_rule": "inverse_width",
        "train": {"threads": 2, "model": {"attention": "sdpa"}}}}))
    section = sweep_section(path)
    assert section["lr_base_width"] == 32
    train = section["train"]
    assert train["schedule"] == "wsd" and train["threads"] == 2
    assert train["model"] == {"context_length": 16, "attention": "sdpa"}  # merged key by key; the shape is the sweep's
    assert not {"max_steps", "out_dir", "eval_interval"} & set(train)
    runs, _ = plan_runs(SweepConfig.from_dict(section))
    for run in runs:  # the rule at the train run's width gives its own rate: 4e-3 x 32 / d_model
        assert run.train.lr == pytest.approx(4e-3 * 32 / run.train.model.d_model)
        assert run.train.min_lr == pytest.approx(4e-4 * 32 / run.train.model.d_model)
        assert run.train.model.attention == "sdpa"
    assert {r.train.model.d_model: r.train.lr for r in runs}[32] == pytest.approx(held_out["lr"])


def test_a_sweep_without_a_design_is_a_one_line_error(tmp_path, capsys):
    assert main(["--params", "none", "--dry-run"]) == 2
    assert "no budgets or shapes" in capsys.readouterr().err


def test_unknown_sweep_key_names_key_section_and_file(tmp_path, shards, capsys):
    params = params_file(tmp_path, shards, budget=[1e8])
    assert main(["--params", str(params), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "budget" in err and "'sweep'" in err and str(params) in err


def test_help_shows_the_params_values(tmp_path, shards, capsys):
    with pytest.raises(SystemExit):
        main(["--params", str(params_file(tmp_path, shards, total_flops=2.5e9)), "--help"])
    assert "(default: 2500000000.0)" in " ".join(capsys.readouterr().out.split())


def test_two_workers_train_the_same_runs_as_one(tmp_path, shards):
    """Runs are independent and seeded: a pool of two processes must reproduce the sequential losses, rows in plan
    order."""
    serial, pooled = tmp_path / "serial", tmp_path / "pooled"
    for folder, workers in ((serial, 1), (pooled, 2)):
        folder.mkdir()
        params = params_file(folder, shards, workers=workers)
        assert main(["--params", str(params)]) == 0
    one, two = read_rows(serial / "results.csv"), read_rows(pooled / "results.csv")
    assert [r["run_id"] for r in two] == [r["run_id"] for r in one]
    assert [float(r["val_loss"]) for r in two] == pytest.approx([float(r["val_loss"]) for r in one], rel=1e-6)


def test_bad_workers_exit_2(tmp_path, shards, capsys):
    assert main(["--params", str(params_file(tmp_path, shards, workers=0))]) == 2
    assert "sweep.workers must be >= 1, got 0" in capsys.readouterr().err


def test_inverse_width_lr_rule_scales_each_shapes_rates(tmp_path, shards):
    from scaling.sweep import plan_runs
    cfg = SweepConfig.from_dict({"data": str(shards), "budgets": BUDGETS, "shapes": SHAPES, "train": TRAIN,
                                 "lr_rule": "inverse_width", "lr_base_width": 32})
    runs, _ = plan_runs(cfg)
    by_width = {r.train.model.d_model: (r.train.lr, r.train.min_lr) for r in runs}
    assert by_width[16] == pytest.approx((2 * 3e-3, 2 * 3e-4))  # half the base width: twice the rates
    assert by_width[32] == pytest.approx((3e-3, 3e-4))
    constant, _ = plan_runs(dataclasses.replace(cfg, lr_rule="constant"))
    assert {r.train.lr for r in constant} == {3e-3}


def test_runs_outside_the_step_window_are_skipped_and_named(tmp_path, shards):
    from scaling.sweep import plan_runs
    base = {"data": str(shards), "budgets": BUDGETS, "shapes": SHAPES, "train": TRAIN}
    every, _ = plan_runs(SweepConfig.from_dict(base))
    steps = {r.run_id: r.steps for r in every}
    low, high = sorted(steps.values())[1], sorted(steps.values())[-2]
    kept, skipped = plan_runs(SweepConfig.from_dict(base | {"min_run_steps": low, "max_run_steps": high}))
    assert {r.run_id for r in kept} == {k for k, v in steps.items() if low <= v <= high}
    assert len(skipped) == 2 and all("outside [min_run_steps, max_run_steps]" in m for m in skipped)
