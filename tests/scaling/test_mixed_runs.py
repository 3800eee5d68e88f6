"""Runs of one (N, D, C) that differ in a text column (a dataset, a loss split) are different experiments: an error
naming the column, unless ``--where`` picks one; repeats of one experiment (seeds) are still averaged."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from scaling.data import load_many, mixed_columns, parse_where
from scaling.fit import main

PORIAN = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "scaling" / "porian2024_runs.csv"


def two_datasets(tmp_path: Path) -> Path:
    rows = [{"run_id": f"r{i}{name}", "dataset": name, "params": n, "tokens": 20 * n, "loss": loss + offset,
             "seed": seed}
            for name, offset in (("c4", 0.0), ("web", 0.3)) for i, (n, loss) in
            enumerate([(1e6, 4.0), (2e6, 3.7), (4e6, 3.5), (8e6, 3.3)]) for seed in (0, 1)]
    path = tmp_path / "runs.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_mixed_experiments_are_an_error_naming_the_column(tmp_path):
    path = two_datasets(tmp_path)
    with pytest.raises(ValueError, match=r"differ in 'dataset' \(c4, web\).*--where dataset=c4"):
        load_many([path])


def test_where_picks_one_experiment_and_its_seeds_are_still_averaged(tmp_path):
    frame = load_many([two_datasets(tmp_path)], where={"dataset": "web"})
    assert len(frame) == 4 and set(frame["dataset"]) == {"web"}
    assert frame["loss"].tolist() == pytest.approx([4.3, 4.0, 3.8, 3.6])
    assert frame["repeats"].tolist() == [2, 2, 2, 2]
    assert "averaged 8 runs into 4 points" in frame.attrs["notes"][0]
    assert len(load_many([two_datasets(tmp_path)], where={"seed": "1", "dataset": "c4"})) == 4  # numbers compare


def test_identifiers_and_hyperparameters_do_not_count_as_mixed():
    frame = pd.DataFrame({"params": [1.0, 1.0], "tokens": [2.0, 2.0], "flops": [12.0, 12.0], "loss": [3.0, 3.1],
                          "run_id": ["a", "b"], "schedule": ["cosine", "wsd"]})
    assert mixed_columns(frame, ["params", "tokens", "flops"]) == {}


@pytest.mark.parametrize("where,message", [(["nosuch=1"], "--where nosuch=1: no such column"),
                                           (["dataset=books"], "--where dataset=books: no run left (the column holds "
                                                               "c4, web)")])
def test_where_errors_name_the_column(tmp_path, capsys, where, message):
    assert main([str(two_datasets(tmp_path)), "--where", *where, "--out-dir", str(tmp_path / "fit")]) == 2
    assert message in capsys.readouterr().err


def test_a_bad_where_spec_is_an_error():
    with pytest.raises(ValueError, match="expected COLUMN=VALUE"):
        parse_where(["dataset"])


@pytest.mark.skipif(not PORIAN.is_file(), reason="shared data not present")
def test_the_published_porian_csv_names_its_datasets_and_fits_one_with_where(tmp_path, capsys):
    assert main([str(PORIAN), "--bootstrap", "0", "--no-plots", "--out-dir", str(tmp_path / "all")]) == 2
    assert "differ in 'dataset' (owt2, rw)" in capsys.readouterr().err
    assert main([str(PORIAN), "--bootstrap", "0", "--no-plots", "--where", "dataset=rw", "loss_split=val",
                 "--out-dir", str(tmp_path / "rw")]) == 0
    assert "fit: 134 runs" in capsys.readouterr().out


def test_by_fits_each_experiment_into_its_own_folder(tmp_path, capsys):
    out = tmp_path / "fit"
    assert main([str(two_datasets(tmp_path)), "--by", "dataset", "--bootstrap", "0", "--no-plots",
                 "--out-dir", str(out), "--method", "parametric", "--allow-no-valid"]) == 0
    printed = capsys.readouterr().out
    assert "== dataset=c4 ==" in printed and "== dataset=web ==" in printed
    assert (out / "c4" / "fit.json").is_file() and (out / "web" / "predictions.csv").is_file()


@pytest.mark.skipif(not PORIAN.is_file(), reason="shared data not present")
def test_the_porian_csv_fits_each_dataset_with_by(tmp_path, capsys):
    assert main([str(PORIAN), "--by", "dataset", "--bootstrap", "0", "--no-plots",
                 "--out-dir", str(tmp_path / "by")]) == 0  # within a dataset the splits sit at different (N, D)
    assert "'loss_split' (train, val): one fit mixes them" in capsys.readouterr().out
    assert main([str(PORIAN), "--by", "dataset", "--where", "loss_split=val", "--bootstrap", "0", "--no-plots",
                 "--out-dir", str(tmp_path / "by")]) == 0
    printed = capsys.readouterr().out
    assert "== dataset=owt2 ==" in printed and "== dataset=rw ==" in printed and "fit: 134 runs" in printed
