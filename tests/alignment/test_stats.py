"""alignment.evaluation.stats against hand computations: SE, the bootstrap interval, mean ± sd and the pass@k
estimator."""

from __future__ import annotations

import math

import pytest

from alignment.evaluation.stats import bootstrap_ci, mean_sd, pass_at_k, standard_error, summarize


def test_standard_error_by_hand():
    # [1, 0, 1, 1]: mean 0.75, sample sd sqrt((3 * 0.25**2 + 0.75**2) / 3) = 0.5, SE 0.5 / 2
    assert standard_error([1, 0, 1, 1]) == pytest.approx(0.25)
    assert standard_error([1.0]) == 0.0


def test_bootstrap_ci_by_hand():
    assert bootstrap_ci([1.0] * 10) == (1.0, 1.0)
    # two problems, right and wrong: resampled means are 0, 0.5, 1 with chances 1/4, 1/2, 1/4, so the 2.5 % and
    # 97.5 % percentiles of 2,000 resamples are 0 and 1
    assert bootstrap_ci([1.0, 0.0]) == (0.0, 1.0)
    # many problems: the percentile interval is close to mean ± 1.96 SE (normal approximation)
    scores = [1.0] * 300 + [0.0] * 100
    se = math.sqrt(0.75 * 0.25 / 399)
    low, high = bootstrap_ci(scores)
    assert low == pytest.approx(0.75 - 1.96 * se, abs=0.01) and high == pytest.approx(0.75 + 1.96 * se, abs=0.01)
    assert summarize(scores)["n_problems"] == 400 and summarize(scores)["se"] == pytest.approx(se)


def test_mean_sd_by_hand():
    assert mean_sd([0.5, 0.7, 0.9]) == pytest.approx((0.7, 0.2))
    assert mean_sd([0.4]) == (0.4, 0.0)


def test_pass_at_k_by_hand():
    # 5 samples, 2 right, k = 2: 1 - C(3, 2) / C(5, 2) = 1 - 3 / 10
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)  # pass@1 is c / n
    assert pass_at_k(8, 0, 8) == 0.0 and pass_at_k(8, 1, 8) == 1.0
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)
