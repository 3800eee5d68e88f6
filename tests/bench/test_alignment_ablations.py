"""bench.experiments.alignment_ablations: the paired SE against a computation written here, each variant's flags, and
a run's budget read from its files."""

from __future__ import annotations

import json
import math
import statistics

import pytest

from alignment.grpo import GRPOConfig
from bench.experiments.alignment_ablations import _BASE, GRPO_VARIANTS, budget, paired_z


def test_paired_z_is_the_mean_difference_over_its_standard_error():
    a = [1, 1, 0, 1, 1, 0, 1, 1, 1, 0]
    b = [0, 1, 0, 0, 1, 0, 1, 0, 1, 0]
    diff = [1, 0, 0, 1, 0, 0, 0, 1, 0, 0]  # by hand
    se = statistics.stdev(diff) / math.sqrt(len(diff))
    assert paired_z(a, b) == pytest.approx(0.3 / se)
    assert paired_z(b, a) == pytest.approx(-0.3 / se)
    assert paired_z(a, a) == 0.0
    assert paired_z([1, 1], [0, 0]) == math.inf  # always better, no spread


def test_every_variant_sets_real_grpo_settings():
    fields = {f.replace("_", "-") for f in GRPOConfig.__dataclass_fields__}
    for name, flags in GRPO_VARIANTS.items():
        for flag in {**_BASE, **flags}:
            assert flag.removeprefix("--") in fields, (name, flag)
    assert GRPO_VARIANTS["dr_grpo"] == {"--normalize-by-std": "false", "--length-normalization": "constant"}


def test_budget_sums_sampled_and_trained_tokens(tmp_path):
    (tmp_path / "metrics.csv").write_text("step,loss,sampled_tokens,trained_fraction\n"
                                          "1,0.5,100,0.5\n2,0.4,300,1.0\n3,,,\n", encoding="utf-8")
    (tmp_path / "summary.json").write_text(json.dumps({"seconds": 12.5}), encoding="utf-8")
    got = budget(tmp_path, epochs=2)
    assert got == {"sampled_tokens": 400, "trained_response_tokens": round((100 * 0.5 + 300) * 2), "seconds": 12.5}
