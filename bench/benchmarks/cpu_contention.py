"""Training on a busy machine: tokens/s of the default ``train`` run with 1 thread, 2 threads and the default thread
policy (``model.training.threads``), quiet and with another process keeping one core busy.

Each configuration trains the ``train`` section of ``--params`` (the default run: micro at d_model 64, context 128,
batch 16) in a fresh process for ``--seconds`` of wall time, ``--repeats`` times, the configurations in turns so
drift hits them all; the busy core is a Python loop started before the run and stopped after it. The ratio of a
configuration's quiet tokens/s to its busy tokens/s is its slowdown; torch's own choice (one thread per core) is the
baseline.

    python -m bench.benchmarks.cpu_contention [--seconds 25] [--repeats 2] [--threads 1 2 auto]

Rows go to benchmarks/results/cpu_contention.jsonl (``--no-record``: print only); docs/benchmarks/model.md shows them.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench.tools.results import ROOT, BenchSettings, Result, finish, parse_bench
from workbench.params import setting, usage_error

BUSY_LOOP = "while True: pass"


@contextlib.contextmanager
def busy_core(busy: bool):
    """Another process keeping one core busy for the duration (nothing when not ``busy``)."""
    if not busy:
        yield
        return
    proc = subprocess.Popen([sys.executable, "-c", BUSY_LOOP])
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


def train_tokens_per_s(params: Path, threads: str, seconds: float, busy: bool) -> float:
    """tokens/s of the params file's ``train`` run, ``seconds`` long, in a fresh process (``threads``: a count or
    ``auto``, the default policy)."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "model.train", "--params", str(params), "--out-dir", f"{tmp}/run",
               "--metrics", "none", "--time-budget-s", str(seconds), "--eval-interval", "100000",
               "--eval-batches", "1", "--ckpt-interval", "100000", "--device", "cpu"]
        if threads != "auto":
            cmd += ["--threads", threads]
        with busy_core(busy):
            done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)})
        if done.returncode:
            raise SystemExit(f"error: {' '.join(cmd)} failed: {done.stderr.strip().splitlines()[-1:]}")
        return json.loads(Path(tmp, "run", "summary.json").read_text())["tokens_per_s"]


def label(threads: str) -> str:
    return "default policy (auto)" if threads == "auto" else f"{threads} thread{'s' if threads != '1' else ''}"


def measure(params: Path, threads: list[str], seconds: float, repeats: int) -> dict:
    """{(threads, busy): [tokens/s per repeat]}, the configurations in turns."""
    runs = {(t, busy): [] for t in threads for busy in (False, True)}
    for i in range(repeats):
        for (t, busy), values in runs.items():
            values.append(train_tokens_per_s(params, t, seconds, busy))
            print(f"  repeat {i + 1}: {label(t):>22} {'busy' if busy else 'quiet'}: {values[-1]:,.0f} tokens/s",
                  flush=True)
    return runs


def results(runs: dict, torch_default: str) -> list[Result]:
    rows = []
    for (t, busy), values in runs.items():
        med = statistics.median(values)
        rows.append(Result(f"{label(t)}, {'one core busy' if busy else 'quiet'}", "tokens_per_s", round(med),
                           "tokens/s", repeats=len(values), min=min(values), median=med, max=max(values)))
    for t in sorted({t for t, _ in runs}):
        quiet, busy = (statistics.median(runs[t, b]) for b in (False, True))
        base_quiet, base_busy = (statistics.median(runs[torch_default, b]) for b in (False, True))
        rows.append(Result(label(t), "slowdown_one_core_busy", round(quiet / busy, 2), "x",
                           f"torch's choice ({label(torch_default)})", round(base_quiet / base_busy, 2),
                           ratio=round((base_quiet / base_busy) / (quiet / busy), 2), repeats=len(runs[t, True])))
    return rows


@dataclass(frozen=True)
class CpuContentionBench(BenchSettings):
    params: Path = setting(ROOT / "params.yaml", "params file whose train run is timed", exists=True)
    seconds: float = setting(25.0, "wall time of each training run", above=0)
    repeats: int = setting(2, "runs of each configuration", at_least=1)
    threads: tuple[str, ...] = setting(("1", str(os.cpu_count() or 1), "auto"),
                                       "thread settings to time: counts, and auto (the default policy)")


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(CpuContentionBench, argv)
    torch_default = str(os.cpu_count() or 1)  # torch's intra-op pool: one thread per core
    if torch_default not in args.threads:
        usage_error(f"--threads must include {torch_default}, torch's own choice on this machine (the baseline)")
    runs = measure(args.params, args.threads, args.seconds, args.repeats)
    rows = results(runs, torch_default)
    command = f"python -m bench.benchmarks.cpu_contention --seconds {args.seconds:g} --repeats {args.repeats}"
    return finish("cpu_contention", rows, args, command)


if __name__ == "__main__":
    raise SystemExit(main())
