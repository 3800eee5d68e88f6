"""DDP (naive, per-parameter, bucketed), ZeRO-1/2 and FSDP2 on 2 gloo ranks, against one process.

The reference for every mode is single-process training on the concatenated batch (the same
global batch, one backward per step); the parallel runs differ from it only by float summation
order. End-to-end, ``torchrun -m model.train --parallel X`` on 2 ranks must end with the weights
of ``model.train`` on one process with twice the gradient accumulation.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from model.training.checkpoint import load_latest, read_latest
from tests.model import dist_workers as W

ROOT = Path(__file__).resolve().parents[2]
TOL = dict(rtol=1e-5, atol=2e-6)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(fn, *args, world: int = 2) -> None:
    mp.spawn(fn, args=(world, free_port(), *args), nprocs=world, join=True)


@pytest.fixture(scope="module")
def reference() -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    return W.reference_training()


@pytest.mark.parametrize("mode", ["naive", "per_param", "bucketed", "zero1", "zero2", "fsdp"])
def test_parallel_training_equals_single_process(mode, reference, tmp_path):
    spawn(W.train_parallel, mode, str(tmp_path))
    for accum in W.ACCUMS:
        for rank in (0,) if mode == "fsdp" else (0, 1):
            got = torch.load(tmp_path / f"{mode}-accum{accum}-rank{rank}.pt", weights_only=True)
            assert got.keys() == reference.keys()
            for name, expected in reference.items():
                torch.testing.assert_close(got[name], expected, **TOL, msg=f"{mode} accum={accum} rank={rank} {name}")
    # the parallel runs must really have moved the weights (a no-op training would also "match" nothing)
    start = W.build_model(0).state_dict()
    assert any((reference[k] - start[k]).abs().max() > 1e-3 for k in start)


def test_fsdp_bf16_compute_keeps_fp32_master_weights(reference, tmp_path):
    """bf16 all-gather and compute (asserted inside the ranks), fp32 sharded weights and Adam state:
    the result tracks fp32 training to bf16 precision."""
    spawn(W.train_parallel, "fsdp_bf16", str(tmp_path))
    start = W.build_model(0).state_dict()
    for accum in W.ACCUMS:
        got = torch.load(tmp_path / f"fsdp_bf16-accum{accum}-rank0.pt", weights_only=True)
        assert all(v.dtype == torch.float32 for v in got.values())
        error = torch.cat([(got[k] - reference[k]).flatten() for k in reference]).norm()
        moved = torch.cat([(reference[k] - start[k]).flatten() for k in reference]).norm()
        assert error < 0.1 * moved, f"accum={accum}: |bf16 - fp32| = {error:.4f} vs training moved {moved:.4f}"


def test_tied_shared_and_unused_parameters(tmp_path):
    spawn(W.tied_unused_grads, str(tmp_path))
    # reference: average over the two ranks' batches of rank 0's initial model (which DDP broadcast)
    expected = {}
    for rank in (0, 1):
        torch.manual_seed(0)
        model = W.TiedUnused()
        model(W.tied_unused_batch(rank), use_sometimes=rank == 0).backward()
        for name, p in model.named_parameters():
            g = torch.zeros_like(p) if p.grad is None else p.grad
            expected[name] = expected.get(name, 0) + g / 2
    for variant in ("naive", "per_param", "bucketed"):
        for rank in (0, 1):
            got = torch.load(tmp_path / f"{variant}-rank{rank}.pt", weights_only=True)
            for name in ("shared.weight", "sometimes.weight", "sometimes.bias", "out.weight", "out.bias"):
                torch.testing.assert_close(got[name], expected[name], **TOL, msg=f"{variant} rank {rank} {name}")
            assert got["never.weight"] is None and got["never.bias"] is None, variant


@pytest.mark.parametrize("optimizer", ["ours", "torch"])
def test_sharded_optimizer_state_round_trip_and_consolidation(optimizer, tmp_path):
    spawn(W.sharded_state, str(tmp_path), optimizer)
    # consolidated state == the state a plain optimizer has after the same two steps on one process
    model = W.build_model(0)
    opt_cls = {"ours": W.AdamW, "torch": torch.optim.AdamW}[optimizer]
    matrices = [p for p in model.parameters() if p.dim() >= 2]
    vectors = [p for p in model.parameters() if p.dim() < 2]
    plain = opt_cls([{"params": matrices}, {"params": vectors, "weight_decay": 0.0}], **W.OPT)
    for x, y in W.global_batches()[:2]:
        W.cross_entropy(model(x), y).backward()
        plain.step()
        plain.zero_grad()
    saved = torch.load(tmp_path / "after2.pt", weights_only=False)
    full, expected = saved["full"], plain.state_dict()
    assert [g["params"] for g in full["param_groups"]] == [g["params"] for g in expected["param_groups"]]
    assert full["state"].keys() == expected["state"].keys()
    for i, state in expected["state"].items():
        for key in ("exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(full["state"][i][key], state[key], **TOL)
    # and a plain optimizer accepts it
    opt_cls([{"params": matrices}, {"params": vectors, "weight_decay": 0.0}], **W.OPT).load_state_dict(full)

    shards = [torch.load(tmp_path / f"shard-rank{r}.pt", weights_only=False) for r in (0, 1)]
    total = sum(p.numel() for p in model.parameters())
    assert sum(s["owned_numel"] for s in shards) == total
    assert all(abs(s["owned_numel"] - total / 2) < 0.2 * total for s in shards), "shards are unbalanced"
    for s in shards:  # Adam keeps two fp32 moments per owned element (+ a step counter per tensor)
        assert 8 * s["owned_numel"] <= s["state_bytes"] <= 8 * s["owned_numel"] + 8 * 64
    for rank in (0, 1):
        results = torch.load(tmp_path / f"results-rank{rank}.pt", weights_only=False)
        for resumed in ("from_shard", "from_full"):
            for name, value in results["uninterrupted"].items():
                torch.testing.assert_close(results[resumed][name], value, rtol=0, atol=0, msg=f"{resumed} {name}")
        assert "cannot be loaded on rank" in results["mismatch_error"]


# ---- end to end: torchrun -m model.train ---------------------------------------------------------

def _train_args(shards: Path, out: Path, *extra: str) -> list[str]:
    return ["--params", "none", "--data", str(shards), "--out-dir", str(out),
            "--preset", "nano", "--model.context-length", "16", "--batch-size", "4", "--warmup-steps", "3",
            "--eval-interval", "6", "--eval-batches", "2", "--log-interval", "3", "--device", "cpu",
            "--max-steps", "12", "--ckpt-interval", "6", "--threads", "1", "--deterministic", *extra]


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


def torchrun(args: list[str], nproc: int = 2, timeout: float = 120, script: str | None = None):
    target = [script] if script else ["-m", "model.train"]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc),
           "--master_port", str(free_port()), *target, *args]
    return subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=timeout)


def single(args: list[str]):
    return subprocess.run([sys.executable, "-m", "model.train", *args], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def single_process_run(shards, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("single") / "run"
    result = single(_train_args(shards, out, "--grad-accum", "2"))
    assert result.returncode == 0, result.stderr[-2000:]
    return out


def _weights(run: Path) -> dict:
    return load_latest(run)[1]["model"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["ddp", "zero1", "zero2", "fsdp"])
def test_torchrun_train_matches_single_process(mode, shards, single_process_run, tmp_path):
    out = tmp_path / mode
    result = torchrun(_train_args(shards, out, "--parallel", mode))
    assert result.returncode == 0, result.stderr[-3000:]
    expected = _weights(single_process_run)
    got = _weights(out)
    for name, value in expected.items():
        torch.testing.assert_close(got[name], value, **TOL, msg=name)
    summary = __import__("json").loads((out / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["tokens"] == 12 * 2 * 4 * 16
    assert result.stdout.count("done: val loss") == 1, "only rank 0 reports"
    if mode == "fsdp":
        assert (out / "dcp" / "step-00000012" / "trainer.json").exists()
        assert load_latest(out)[1]["optimizer"] is None  # the final model-only export
        # a sharded folder exports on one process, without a process group, to a loadable file
        exported = subprocess.run([sys.executable, "-m", "model.parallelism.distributed", "export", str(out),
                                   "--step", "6"],
                                  cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=60)
        assert exported.returncode == 0, exported.stderr[-2000:]
        from model.training.checkpoint import load_model

        model = load_model(exported.stdout.strip())
        expected6 = torch.load(single_process_run / "ckpt-00000006.pt", weights_only=True)["model"]
        for name, value in expected6.items():
            torch.testing.assert_close(model.state_dict()[name], value, **TOL, msg=f"exported step 6 {name}")

    # resume from the step-6 checkpoint: the same final weights as the uninterrupted run
    final = out / "dcp" / "step-00000012" if mode == "fsdp" else out / read_latest(out)["file"]
    if mode == "fsdp":
        import json
        import shutil

        shutil.rmtree(final)
        (out / "dcp" / "latest").write_text(json.dumps({"dir": "step-00000006", "step": 6}))
        for f in out.glob("ckpt-*.pt"):
            f.unlink()
        (out / "latest").unlink()
        resumed = torchrun(_train_args(shards, out, "--parallel", mode, "--resume"))
    else:  # a ZeRO/DDP checkpoint is world-size independent: resume it on one process
        final.unlink()
        resumed = single(_train_args(shards, out, "--grad-accum", "2", "--resume"))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "step 6" in resumed.stderr + resumed.stdout
    got = _weights(out)
    for name, value in expected.items():
        torch.testing.assert_close(got[name], value, **TOL, msg=f"resumed {name}")


FAULTY = '''
import sys, time
import model.train as t
import model.core.transformer as lm

calls = 0
real = lm.cross_entropy

def faulty(logits, targets):
    global calls
    calls += 1
    import os
    if os.environ["RANK"] == "1" and calls == 3:
        if "{fault}" == "raise":
            raise RuntimeError("injected failure")
        time.sleep(3600)
    return real(logits, targets)

lm.cross_entropy = faulty
sys.exit(t.main(sys.argv[1:]))
'''


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["raise", "hang"])
def test_failing_rank_fails_the_whole_job(fault, shards, tmp_path):
    script = tmp_path / "faulty.py"
    script.write_text(FAULTY.replace("{fault}", fault))
    start = time.monotonic()
    result = torchrun(_train_args(shards, tmp_path / "run", "--parallel", "ddp", "--dist-timeout-s", "5",
                                  "--max-steps", "50"), script=str(script), timeout=90)
    took = time.monotonic() - start
    assert result.returncode != 0
    assert took < 60, f"job took {took:.0f}s to fail"
    if fault == "raise":
        assert "error: rank 1/2: RuntimeError: injected failure" in result.stderr
    else:  # rank 1 hangs: rank 0's collective times out and names the likely cause
        assert "error: rank 0/2:" in result.stderr and "another rank probably died or hung" in result.stderr


def test_parallel_mode_needs_torchrun(shards, tmp_path):
    result = single(_train_args(shards, tmp_path / "run", "--parallel", "ddp"))
    assert result.returncode == 2
    assert "torchrun" in result.stderr.strip().splitlines()[-1]


def test_config_rejects_unknown_parallel_mode(shards, tmp_path):
    result = single(_train_args(shards, tmp_path / "run", "--parallel", "tp"))
    assert result.returncode == 2 and "train.parallel must be one of" in result.stderr
