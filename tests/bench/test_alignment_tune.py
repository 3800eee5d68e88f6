"""bench.experiments.alignment_tune: the grid, reading a run's last validation accuracy, and the choice by mean over
seeds."""

import pytest

from bench.experiments.alignment_tune import choose, last_validation, parse_grid, point_name


def test_grid_is_every_combination_in_order(capsys):
    assert parse_grid(["steps=800,1600", "lr=2e-3"]) == [{"steps": "800", "lr": "2e-3"},
                                                          {"steps": "1600", "lr": "2e-3"}]
    assert parse_grid([]) == [{}]
    with pytest.raises(SystemExit) as exit_:
        parse_grid(["steps"])
    assert exit_.value.code == 2 and "NAME=V1" in capsys.readouterr().err


def test_point_name_leaves_out_fixed_flags():
    assert point_name({"steps": "800", "device": "cuda"}, {"steps"}) == "steps=800"
    assert point_name({"device": "cuda"}, set()) == "defaults"


@pytest.mark.parametrize("column", ["step", "round"])
def test_last_validation_reads_the_last_evaluated_row(tmp_path, column):
    (tmp_path / "metrics.csv").write_text(f"{column},loss,val_accuracy\n1,2.0,\n10,1.0,0.5\n15,0.9,\n20,0.8,0.75\n")
    assert last_validation(tmp_path) == (20, 0.75)
    assert last_validation(tmp_path / "missing") is None


def test_choose_takes_the_best_mean_over_seeds():
    points = [{"lr": "1"}, {"lr": "2"}]
    # lr=2 wins one seed by a lot but loses on the mean: (0.9 + 0.1) / 2 < (0.6 + 0.6) / 2
    found = {("lr=1", 0): (5, 0.6), ("lr=1", 1): (5, 0.6), ("lr=2", 0): (5, 0.9), ("lr=2", 1): (5, 0.1)}
    best, rows = choose(points, [0, 1], found)
    assert best == "lr=1"
    means = {r.name: r.value for r in rows if r.metric == "val_accuracy_mean"}
    assert means == pytest.approx({"lr=1": 0.6, "lr=2": 0.5})
