"""Statistics over problems: standard error, a bootstrap 95 % interval, mean ± sd over seeds, and pass@k.

Every held-out item of the ``digits`` task is a distinct problem, so a score per problem (1/0, or the share of
samples right) is the unit: the standard error is ``sd(scores) / sqrt(n)`` over problems and the interval is the
percentile bootstrap (Efron & Tibshirani, 1993, ch. 13) resampling problems with replacement. pass@k is the
unbiased estimator of Chen et al. (2021, "Evaluating Large Language Models Trained on Code", eq. 1):
``1 - C(n - c, k) / C(n, k)`` for ``c`` right out of ``n`` samples, averaged over problems.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence


def standard_error(scores: Sequence[float]) -> float:
    """Sample standard deviation / sqrt(n) (0.0 for fewer than two scores)."""
    n = len(scores)
    if n < 2:
        return 0.0
    mean = sum(scores) / n
    return math.sqrt(sum((s - mean) ** 2 for s in scores) / (n - 1) / n)


def bootstrap_ci(scores: Sequence[float], level: float = 0.95, resamples: int = 2000,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``scores`` (problems resampled with replacement)."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    if not scores:
        raise ValueError("bootstrap_ci needs at least one score")
    rng = random.Random(seed)
    n = len(scores)
    means = sorted(sum(scores[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    tail = (1 - level) / 2
    return means[int(math.floor(tail * (resamples - 1)))], means[int(math.ceil((1 - tail) * (resamples - 1)))]


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (sd 0.0 for one value) of per-seed results."""
    if not values:
        raise ValueError("mean_sd needs at least one value")
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
    return mean, sd


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chance that at least one of ``k`` samples drawn without replacement from ``n`` (``c`` right) is right."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def summarize(scores: Sequence[float], seed: int = 0) -> dict:
    """``{n_problems, accuracy, se, ci_low, ci_high}`` of per-problem scores."""
    low, high = bootstrap_ci(scores, seed=seed)
    return {"n_problems": len(scores), "accuracy": sum(scores) / len(scores), "se": standard_error(scores),
            "ci_low": low, "ci_high": high}
