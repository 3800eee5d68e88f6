"""bench.benchmarks.kernel_select, bench.benchmarks.kernel_convergence and the CUDA-event timing helpers, on the CPU."""

import time

import numpy as np
import pytest
import torch

from bench.benchmarks import kernel_convergence, kernel_select
from bench.tools.timing import percentiles
from model.core.config import ModelConfig


def test_percentiles_match_numpy():
    values = [5.0, 1.0, 4.0, 2.0, 3.0, 10.0, 7.5]
    assert percentiles(values) == pytest.approx(tuple(np.percentile(values, [20, 50, 80])))
    assert percentiles([2.0]) == (2.0, 2.0, 2.0)


def test_convergence_stream_is_learnable_and_seeded():
    a, b = kernel_convergence.token_stream(50, 5000, seed=3), kernel_convergence.token_stream(50, 5000, seed=3)
    assert torch.equal(a, b) and int(a.max()) < 50
    repeats = (a[997:] == a[:-997]).float().mean()  # the 997-token pattern survives 10 % noise at both ends
    assert 0.75 < repeats < 0.9
    lrs = [kernel_convergence.lr_at(s, 200) for s in range(200)]
    assert lrs[0] == pytest.approx(6e-4 / 20) and max(lrs) == pytest.approx(6e-4) and lrs[-1] >= 6e-5


@pytest.mark.slow
def test_measure_ops_runs_every_case_and_chooses(monkeypatch):
    """Every op's case on the nano preset under the interpreter, with a host timer in place of CUDA events:
    each op gets one entry whose choice is a valid switch value, and the FFN is measured in the projections'
    form."""
    def host_times(fn, warmup, iters):
        for _ in range(warmup):
            fn()
        out = []
        for _ in range(iters):
            start = time.perf_counter()
            fn()
            out.append(1000 * (time.perf_counter() - start))
        return out

    monkeypatch.setattr(kernel_select, "event_times_ms", host_times)
    monkeypatch.setattr(kernel_select, "ITERS", 2)
    monkeypatch.setattr(kernel_select, "WARMUP", 1)
    monkeypatch.setattr(kernel_select, "peak_memory_mb", lambda fn, device: 0.0)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    cfg = ModelConfig.from_preset("nano", vocab_size=300, context_length=32)
    entries, rows = kernel_select.measure_ops(cfg, 2, torch.device("cpu"))
    assert set(entries) == set(kernel_select.CASES)
    for op, by_shape in entries.items():
        (entry,) = by_shape.values()
        assert entry["choice"] in (kernel_select.selection.OURS[op], kernel_select.selection.NONE[op])
        assert entry["speedup_vs_best_alternative"] > 0
    (ffn,) = entries["ffn"].values()
    (projections,) = entries["projections"].values()
    assert ffn["form"].startswith("packed") == projections["choice"]
    assert len(rows) >= 4 * len(entries)
