"""bench.experiments.scaling_blind: the shape flag, and the order it enforces (predict before the run exists, measure
after)."""

import pytest

from bench.experiments import scaling_blind
from bench.tools.results import Result, record


def test_shape_flag():
    assert scaling_blind.shape_of("48,4,2") == (48, 4, 2)
    with pytest.raises(SystemExit, match="D_MODEL,N_LAYERS,N_HEADS"):
        scaling_blind.shape_of("48,4")


class FakeRun:
    run_id = "C1e13_d48_L4_H2"

    class train:  # noqa: N801 - stands in for a TrainConfig
        out_dir = "/nonexistent"


def _args(tmp_path, step):
    return scaling_blind.BlindSettings(step=step, shape="48,4,2", flops=1e13, params="params.yaml",
                                       results=tmp_path / "r.csv", results_dir=tmp_path, record=False)


def test_predict_refuses_a_run_already_measured(tmp_path, monkeypatch):
    monkeypatch.setattr(scaling_blind, "planned_run", lambda *a: (FakeRun, None))
    monkeypatch.setattr(scaling_blind, "measured_loss", lambda run: 2.0)
    with pytest.raises(SystemExit, match="would not be blind"):
        scaling_blind.predict(_args(tmp_path, "predict"))


def test_measure_needs_a_recorded_prediction(tmp_path, monkeypatch):
    monkeypatch.setattr(scaling_blind, "planned_run", lambda *a: (FakeRun, None))
    monkeypatch.setattr(scaling_blind, "run_one", lambda run: pytest.fail("trained without a prediction"))
    with pytest.raises(SystemExit, match="no recorded prediction"):
        scaling_blind.measure(_args(tmp_path, "measure"))
    # another run's prediction does not count
    record(scaling_blind.AREA, [Result("C2e13_d64_L4_H2", "predicted_loss_isoflop", 2.0)], "test", tmp_path)
    with pytest.raises(SystemExit, match="no recorded prediction"):
        scaling_blind.measure(_args(tmp_path, "measure"))


def test_measure_scores_every_recorded_prediction(tmp_path, monkeypatch):
    monkeypatch.setattr(scaling_blind, "planned_run", lambda *a: (FakeRun, None))
    monkeypatch.setattr(scaling_blind, "run_one", lambda run: {"val_loss": 2.0, "steps": 10, "seconds": 1.0})
    monkeypatch.setattr(scaling_blind, "result_row", lambda run, summary: {})
    monkeypatch.setattr(scaling_blind, "write_results", lambda path, rows: None)
    record(scaling_blind.AREA, [Result(FakeRun.run_id, "predicted_loss_isoflop", 2.1),
                                Result(FakeRun.run_id, "predicted_loss_parametric", 1.9)], "test", tmp_path)
    rows = {r.metric: r for r in scaling_blind.measure(_args(tmp_path, "measure"))}
    assert rows["measured_loss"].value == 2.0
    assert rows["rel_error_isoflop"].value == pytest.approx(0.05)  # 2.1 / 2.0 - 1
    assert rows["rel_error_isoflop"].ratio == pytest.approx(1.05)  # predicted / measured
    assert rows["rel_error_parametric"].value == pytest.approx(-0.05)
