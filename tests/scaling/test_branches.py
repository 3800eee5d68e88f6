"""WSD cooldown branches (scaling/sweep.py ``branches``): every run of one shape leaves one constant-LR trunk at its
decay start and cools down from there. A branch must equal a run trained straight with its schedule, the ledger
must charge the shared trunk once, and a lost branch must be re-made from the trunk's checkpoint."""

from __future__ import annotations

import dataclasses
import shutil

import pytest
import yaml

from model.train import train
from model.training.optim import wsd_schedule
from scaling.sweep import SweepConfig, main, plan_runs
from tests.scaling.test_sweep import TRAIN, params_file, read_rows, shards  # noqa: F401 (fixture)

WSD = TRAIN | {"schedule": "wsd", "decay_fraction": 0.2, "decay_shape": "1-sqrt", "deterministic": True}
BUDGETS = [4e7, 8e7, 1.6e8]  # the d16 model: 18, 35 and 70 steps of 64 tokens


def branch_params(tmp_path, shards, **changes):  # noqa: F811
    return params_file(tmp_path, shards, budgets=BUDGETS, shapes=[[16, 1, 2]], branches=True, train=WSD, **changes)


def test_one_sqrt_cooldown_by_hand():
    # warmup 2, 10 steps, decay over the last 2: lr = max - (max - min) * sqrt(progress)
    lr = [wsd_schedule(t, 1.0, 0.1, 2, 10, 0.2, "1-sqrt") for t in range(11)]
    assert lr[:8] == [0.0, 0.5, 1, 1, 1, 1, 1, 1]
    assert lr[8] == 1.0 and lr[9] == pytest.approx(1 - 0.9 * 0.5 ** 0.5) and lr[10] == 0.1


def test_each_branch_equals_a_straight_run_of_its_schedule(tmp_path, shards):  # noqa: F811
    params = branch_params(tmp_path, shards)
    assert main(["--params", str(params)]) == 0
    rows = {r["run_id"]: r for r in read_rows(tmp_path / "results.csv")}
    cfg = SweepConfig.from_dict(yaml.safe_load(params.read_text())["sweep"])
    runs, _ = plan_runs(cfg)
    assert len(rows) == len(runs) == 3
    assert {r.trunk for r in runs} == {str(tmp_path / "runs" / "trunk_d16_L1_H2_seed0")}
    for run in runs:
        # the reference: a plain run of the branch's own schedule (warmup, stable, 1-sqrt cooldown), no trunk
        straight = train(dataclasses.replace(run.train, out_dir=str(tmp_path / "straight" / run.run_id)))
        assert float(rows[run.run_id]["val_loss"]) == pytest.approx(straight["val_loss"], rel=1e-6, abs=0)
        assert float(rows[run.run_id]["train_loss"]) == pytest.approx(straight["train_loss"], rel=1e-6, abs=0)
        assert int(rows[run.run_id]["steps"]) == straight["steps"]


def test_the_ledger_charges_the_shared_trunk_once(tmp_path, shards):  # noqa: F811
    assert main(["--params", str(branch_params(tmp_path, shards))]) == 0
    rows = sorted(read_rows(tmp_path / "results.csv"), key=lambda r: int(r["steps"]))
    per_step = 6 * int(rows[0]["params"]) * 64  # 6N FLOPs per token, 64 tokens per step
    starts = [int(r["branch_step"]) for r in rows]
    steps = [int(r["steps"]) for r in rows]
    assert starts == [s - round(0.2 * s) for s in steps]  # each leaves the trunk at its own decay start
    trunk_then_cooldowns = max(starts) + sum(t - s for t, s in zip(steps, starts, strict=True))
    assert sum(float(r["flops_charged"]) for r in rows) == pytest.approx(per_step * trunk_then_cooldowns)
    for r in rows:  # the model itself saw all its steps
        assert float(r["flops_actual"]) == pytest.approx(per_step * int(r["steps"]))
        assert r["trunk"] == "trunk_d16_L1_H2_seed0"


def test_a_lost_branch_is_remade_from_the_trunk(tmp_path, shards):  # noqa: F811
    params = branch_params(tmp_path, shards)
    assert main(["--params", str(params)]) == 0
    before = read_rows(tmp_path / "results.csv")
    middle = sorted(before, key=lambda r: int(r["steps"]))[1]
    shutil.rmtree(tmp_path / "runs" / middle["run_id"])
    (tmp_path / "results.csv").unlink()  # every row lost: finished branches come back from summary.json
    assert main(["--params", str(params)]) == 0
    after = {r["run_id"]: r for r in read_rows(tmp_path / "results.csv")}
    for r in before:
        assert float(after[r["run_id"]]["val_loss"]) == pytest.approx(float(r["val_loss"]), rel=1e-6, abs=0)


def test_branches_need_a_wsd_schedule(tmp_path, shards, capsys):  # noqa: F811
    params = params_file(tmp_path, shards, branches=True)
    assert main(["--params", str(params)]) == 2
    assert "branches needs train.schedule: wsd" in capsys.readouterr().err
