"""bench.tools.repro_times: stage_times.csv -> rows with the issues' goals; a repro with skipped stages is refused."""

import pytest

from bench.tools.repro_times import read_times, rows_of


def _csv(tmp_path, rows):
    path = tmp_path / "stage_times.csv"
    path.write_text("stage,status,seconds\n" + "".join(f"{s},{st},{sec}\n" for s, st, sec in rows))
    return path


def test_groups_sum_their_stages(tmp_path):
    times = read_times(_csv(tmp_path, [("train", "ran", 90), ("sweep", "ran", 200), ("fit", "ran", 10),
                                       ("sft", "ran", 100), ("dpo", "ran", 10), ("grpo", "ran", 20),
                                       ("rft", "ran", 15), ("evaluate", "ran", 5)]))
    got = {r.name: (r.value, r.baseline_value) for r in rows_of(times, wall_s=600)}
    assert got["alignment_stages"] == (150, 360)
    assert got["sweep+fit"] == (210, 300)
    assert got["all_stages"] == (450, 720)
    assert got["clone_to_finish"] == (600, 720)


def test_skipped_stage_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="train did not run"):
        read_times(_csv(tmp_path, [("train", "skipped", 0.1)]))
