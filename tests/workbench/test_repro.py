"""workbench.repro times DVC stages from its output lines (a fake clock: no DVC needed)."""

import csv

import yaml

from workbench.repro import format_table, stage_times, write_csv

LINES = ["Running stage 'sample':\n", "> python -m pipeline.sample\n", "Stage 'extract' didn't change, skipping\n",
         "Running stage 'filter':\n", "some output\n", "Use `dvc push` to send your updates to remote storage.\n"]


def test_each_stage_runs_until_the_next_starts(capsys):
    ticks = iter([0.0, 1.0, 4.0, 5.5, 9.0])  # start, sample starts, extract skipped, filter starts, end
    rows, total = stage_times(LINES, clock=lambda: next(ticks))
    assert rows == [{"stage": "sample", "status": "ran", "seconds": 3.0},
                    {"stage": "extract", "status": "up to date", "seconds": 0.0},
                    {"stage": "filter", "status": "ran", "seconds": 3.5}]
    assert total == 9.0
    assert capsys.readouterr().out == "".join(LINES)  # DVC's output is passed through unchanged


def test_table_and_csv(tmp_path):
    rows = [{"stage": "train", "status": "ran", "seconds": 12.25}, {"stage": "fit", "status": "up to date",
                                                                       "seconds": 0.0}]
    table = format_table(rows, 13.0)
    assert table.splitlines()[2].split() == ["train", "ran", "12.2"] and table.splitlines()[-1].split() == ["total",
                                                                                                            "13.0"]
    write_csv(rows, tmp_path / "times.csv")
    with open(tmp_path / "times.csv", encoding="utf-8") as handle:
        assert list(csv.DictReader(handle)) == [{"stage": "train", "status": "ran", "seconds": "12.25"},
                                                {"stage": "fit", "status": "up to date", "seconds": "0.0"}]


def test_params_profile_stands_in_and_the_original_comes_back(tmp_path):
    from workbench.repro import params_profile

    params, profile = tmp_path / "params.yaml", tmp_path / "params-gpu.yaml"
    params.write_text("train: {device: cpu, lr: 0.1, threads: 2}\n")
    profile.write_text("base: params.yaml\ntrain: {device: cuda, threads: null}\n")  # only what differs
    try:
        with params_profile(profile, params):  # DVC sees the profile merged onto its base
            assert yaml.safe_load(params.read_text()) == {"train": {"device": "cuda", "lr": 0.1}}
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert params.read_text() == "train: {device: cpu, lr: 0.1, threads: 2}\n"
    assert not (tmp_path / ".params.yaml.orig").exists()

    (tmp_path / ".params.yaml.orig").write_text("train: {device: cpu}\n")  # left by a run killed outright
    params.write_text("train: {device: cuda}\n")
    with params_profile(params, params):
        assert params.read_text() == "train: {device: cpu}\n"
