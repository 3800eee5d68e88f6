"""`python -m bench.benchmarks.model_train --variants` runs end to end at toy scale and prints every table."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bench.benchmarks.model_train import main as bench_main
from model.train import main as train_main


def test_variants_bench_runs_every_part(tmp_path, capsys):
    rng = np.random.default_rng(0)
    pattern = rng.integers(0, 64, size=23)
    for split, n in (("train", 6000), ("val", 2000)):
        np.resize(pattern, n).astype(np.uint16).tofile(tmp_path / f"{split}.bin")
    (tmp_path / "meta.json").write_text(json.dumps({"dtype": "uint16", "vocab_size": 64, "eot_id": 0}))
    target = tmp_path / "target"
    assert train_main(["--params", "none", "--data", str(tmp_path), "--out-dir", str(target),
                       "--preset", "nano", "--model.context-length", "64", "--batch-size", "4", "--max-steps", "3",
                       "--warmup-steps", "1", "--device", "cpu"]) == 0
    code = bench_main(["--variants", "--device", "cpu", "--data", str(tmp_path), "--target", str(target),
                       "--preset", "nano", "--context", "16", "--batch", "4", "--train-steps", "2", "--rounds", "1",
                       "--gen-batch", "2", "--gen-tokens", "4", "--draft-steps", "2", "--spec-prompts", "1",
                       "--spec-tokens", "4", "--ppl-batches", "1", "--no-record"])
    out = capsys.readouterr().out
    assert code == 0
    for title in ("(a) dense vs MoE", "(b) KV cache", "(c) activation checkpointing", "(d) speculative decoding",
                  "(e) weight-only int8"):
        assert title in out, title
    assert "MQA (n_kv_heads=1)" in out and "MoE 4 experts top-2" in out
    assert "NO" not in out.split("(d) speculative decoding")[1].split("(e)")[0]  # greedy outputs identical


def test_variants_bench_needs_data(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        bench_main(["--variants", "--only", "int8", "--data", str(tmp_path / "missing")])
    assert exit_.value.code == 2 and "meta.json not found" in capsys.readouterr().err
