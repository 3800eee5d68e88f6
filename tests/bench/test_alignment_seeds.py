"""bench.experiments.alignment_seeds: GRPO's gain over SFT in paired standard errors (by hand) and the rows it
records."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from bench.experiments.alignment_seeds import STAGES, paired_gain_in_se, results, task_rows


def _write(folder, name, rewards):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}_digits.jsonl").write_text("".join(json.dumps({"reward": r}) + "\n" for r in rewards))


def test_paired_gain_by_hand(tmp_path):
    _write(tmp_path / "outputs", "grpo", [1, 1, 1, 0])
    _write(tmp_path / "outputs", "sft", [0, 1, 0, 0])
    # differences 1, 0, 1, 0: mean 0.5, sd sqrt(1/3), SE sqrt(1/3) / 2
    assert paired_gain_in_se(tmp_path, "digits", "grpo") == pytest.approx(0.5 / ((1 / 3) ** 0.5 / 2))


def test_results_rows_per_seed_and_over_seeds():
    def frame(accs):
        rows = [{"stage": s, "split": split, "accuracy": accs[s] - (0.01 if split == "validation" else 0),
                 "n_problems": 200, "se": 0.03, "ci_low": 0.1, "ci_high": 0.9, "pass_at_1": 0.6 if s == "sft" else None,
                 "pass_at_k": 0.9 if s == "sft" else None, "k": 8 if s == "sft" else None}
                for split in ("validation", "test") for s in STAGES]
        return pd.DataFrame(rows)

    frames = {0: frame({"sft": 0.7, "dpo": 0.7, "rft": 0.75, "grpo": 0.8}),
              1: frame({"sft": 0.6, "dpo": 0.65, "rft": 0.7, "grpo": 0.9})}
    gains = {0: {"dpo": 0.0, "rft": 2.0, "grpo": 4.0}, 1: {"dpo": 1.0, "rft": 3.0, "grpo": 8.0}}
    rows = {(r.name, r.metric): r for r in results(frames, gains)}
    grpo1 = rows[("grpo/seed1", "test_accuracy")]
    assert (grpo1.value, grpo1.baseline_value, grpo1.ratio, grpo1.repeats) == (0.9, 0.6, 8.0, 200)
    assert rows[("sft/seed0", "test_accuracy")].ratio is None
    assert rows[("sft/seed1", "test_pass_at_8")].value == 0.9
    assert rows[("grpo", "test_accuracy_mean")].value == pytest.approx(0.85)
    assert rows[("grpo", "test_accuracy_sd")].value == pytest.approx((2 * 0.05**2) ** 0.5)
    assert ("grpo/seed0", "validation_accuracy") in rows


@pytest.mark.parametrize("slip", [0.0, 0.5])
def test_task_rows(tmp_path, slip):
    params = tmp_path / "params.yaml"
    params.write_text(f"sft:\n  task: digits\n  digits: 2\n  n_train: 300\n  n_test: 50\n  teacher_slip: {slip}\n")
    got = {r.metric: r.value for r in task_rows(str(params))}
    # 2-digit operands 10..99: a sum and its commuted pair are one problem (90 x 91 / 2 unordered pairs), and a
    # difference a - b is asked only for a >= b (the same count)
    assert got["problem_keys"] == 2 * (90 * 91 // 2)
    assert (got["validation_problems"], got["test_problems"], got["sft_demonstrations"]) == (50, 50, 300)
    if slip == 0.0:  # a teacher that never slips is always right
        assert got["teacher_accuracy_validation"] == got["teacher_accuracy_test"] == 1.0
    else:
        assert 0.0 < got["teacher_accuracy_test"] < 1.0
