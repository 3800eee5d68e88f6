"""`python -m bench.benchmarks.model_train --distributed` on 2 tiny gloo ranks: every mode reported, ZeRO-1's optimizer
state is the Adam moments of the parameters rank 0 owns (≈ half of DDP's), and DDP all-reduces exactly
4Ψ bytes per step. References: ModelConfig.param_count (shapes, not the module) and AdamW's state layout
(two fp32 moments per element plus one fp32 step counter per tensor)."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

import bench.benchmarks.model_train as bench
from bench.benchmarks.distributed import MEMORY_MODES, TIME_MODES, DistributedBench, main, ring_fraction

TINY = ["--world", "2", "--preset", "nano", "--vocab", "64", "--depth", "2", "--width", "16",
        "--time-vocab", "32", "--context", "8", "--batch", "2", "--steps", "1", "--warmup", "0", "--no-record"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "results.json"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = bench.main(["--distributed", *TINY, "--json", str(out)])  # through the delegating flag
    return code, buf.getvalue(), json.loads(out.read_text())


def _table_rows(text: str, title: str) -> list[str]:
    """First column of the table printed after the line starting with ``title``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    rows = []
    for line in lines[start + 3:]:  # title, header, dashes
        if not line.strip():
            break
        rows.append(line.split()[0])
    return rows


def test_tables_list_every_mode(tiny_run):
    code, text, _ = tiny_run
    assert code == 0
    assert text.splitlines()[0].startswith("device: CPU") and "world 2 (gloo)" in text.splitlines()[0]
    assert _table_rows(text, "(1)") == list(MEMORY_MODES)
    assert _table_rows(text, "(2)") == list(TIME_MODES)
    assert "goal: bucketed >= 1.3x faster than naive" in text


def test_zero1_optimizer_state_is_adam_moments_of_owned_params(tiny_run):
    _, _, results = tiny_run
    cfg = DistributedBench(preset="nano", vocab=64, context=8).memory_model()
    n, tensors = cfg.param_count(), 2 + 9 * cfg.n_layers + 1  # embeddings + head, 9 per block, final norm
    for r in results:
        ddp = r["memory"]["ddp"]
        assert ddp["optimizer"] == 8 * n + 4 * tensors  # exp_avg + exp_avg_sq + step
        assert ddp["params"] == ddp["grads"] == 4 * n
    zero1 = [r["memory"]["zero1"] for r in results]
    assert sum(z["owned_numel"] for z in zero1) == n  # a partition
    rank0 = zero1[0]
    assert rank0["optimizer"] == 8 * rank0["owned_numel"] + 4 * rank0["owned_tensors"]
    assert rank0["optimizer"] / results[0]["memory"]["ddp"]["optimizer"] == pytest.approx(0.5, abs=0.05)
    zero2, fsdp = results[0]["memory"]["zero2"], results[0]["memory"]["fsdp"]
    assert zero2["grads"] == pytest.approx(2 * n, rel=0.05)  # only the owned half of the gradients
    assert fsdp["params"] == pytest.approx(2 * n, rel=0.05)  # one shard of every parameter


def test_ddp_payload_is_4_bytes_per_parameter_per_step(tiny_run):
    _, _, results = tiny_run
    n = DistributedBench(depth=2, width=16, time_vocab=32, context=8).time_model().param_count()
    tensors = 2 + 9 * 2 + 1
    for r in results:
        t = r["time"]
        for mode in ("naive", "per_param", "bucketed"):
            assert t[mode]["payload"] == 4 * n, mode
            assert t[mode]["ring"] == pytest.approx(4 * n)  # 2(N-1)/N = 1 for N = 2
        assert t["naive"]["calls"] == {"all_reduce": tensors}
        assert t["per_param"]["calls"] == {"all_reduce": tensors}
        assert t["bucketed"]["calls"] == {"all_reduce": 1}  # the whole model fits one 25 MB bucket
        assert t["local"]["calls"] == {} and t["local"]["payload"] == 0
        assert t["zero1"]["payload"] == 8 * n  # all-reduce of grads + broadcast of parameters
        assert t["zero2"]["calls"]["reduce"] == tensors
        assert t["fsdp"]["calls"] == {"all_gather": 2 * 3, "reduce_scatter": 3}  # 2 blocks + root


def test_ring_fraction_matches_hand_values():
    # ring all-reduce = reduce-scatter + all-gather: each sends (N-1)/N of the tensor (ZeRO §7)
    assert ring_fraction("all_reduce", 4) == 1.5
    assert ring_fraction("reduce_scatter", 4) == ring_fraction("all_gather", 4) == 0.75
    assert ring_fraction("broadcast", 2) == ring_fraction("reduce", 2) == 0.5


@pytest.mark.parametrize("argv", [["--world", "1"], ["--preset", "nope"], ["--bucket-mb", "0"],
                                  ["--steps", "0"], ["--width", "12"], ["--device", "tpu"]])
def test_bad_input_exits_2(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:")
