"""The reliability harness: run a job, break it, run the same command again, and compare with an uninterrupted run.

A *workspace* is a folder holding a small ``params.yaml`` and every job's inputs and outputs, built once by running
the jobs in order, uninterrupted (``build_workspace``): those outputs are the reference. A *trial* copies the
workspace, removes one job's outputs, breaks the job with one *fault*, runs the same command again without it and
compares: data outputs by SHA-256 of every file, a training run by its final weights (``torch.equal``). The faults:

- ``kill early`` / ``kill mid-task``: SIGKILL to the job's process group just after its first atomic write, or after
  a seeded share (a third to two thirds) of its metrics rows (training) or atomic writes (data);
- ``kill while writing``: SIGKILL at a seeded atomic write, the temporary file complete and not yet renamed
  (``workbench.failpoints``);
- ``disk full`` / ``read-only``: from a seeded atomic write on, every write raises ENOSPC / EROFS; the run must end
  in one ``error:`` line naming the path, exit 2;
- ``truncated shard`` (jobs reading token shards): train.bin cut short by a whole number of tokens; the run must
  refuse it in one ``error:`` line, exit 2, and, the shard put back, the rerun give the reference;
- ``corrupt checkpoint`` (training jobs): a kill mid-task once two checkpoints exist, then the newest one truncated:
  the rerun must name it and go on from the one before.

Each trial records whether the rerun's outputs are identical, the work redone (training: steps between the
checkpoint it went on from and the step the killed run had reached; data: the rerun's atomic writes over the
uninterrupted run's) and the temporary files left anywhere in the workspace.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 600
RESUMED = re.compile(r"from ckpt-(\d+)\.pt|resumed from \S+ \(step (\d+)\)")


@dataclass(frozen=True)
class Job:
    """One long CLI: ``python -m <argv>`` run in the workspace, what it writes and how its result is compared."""

    name: str
    argv: tuple[str, ...]
    outputs: tuple[str, ...]  # folders or files it writes (removed before a trial), compared byte for byte
    weights: str | None = None  # a run folder: compared by its final weights instead of bytes
    interval: int | None = None  # the run folder's checkpoint interval: the most a resumed run may redo
    ignore: tuple[str, ...] = ()  # glob patterns (relative) of outputs that legitimately differ (timings)


@dataclass
class Trial:
    job: str
    fault: str
    fault_rc: int | None
    rerun_rc: int | None
    identical: bool
    redone: float  # steps (training) or atomic writes (data) the rerun did again
    redone_of: int  # the checkpoint interval (training) or the uninterrupted run's atomic writes (data)
    redone_unit: str  # "steps" or "writes"
    temps_left: int
    error_lines: int  # ``error:`` lines of the faulted run (the disk faults must give exactly one)
    note: str = ""
    seconds: float = 0.0

    def row(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass
class Reference:
    """What the uninterrupted run of a job took: its wall time, its atomic writes and its metrics rows."""

    seconds: float
    writes: int
    rows: int = 0


def env(**extra: str) -> dict:
    base = {k: v for k, v in os.environ.items() if not k.startswith("LMW_FAULT")}
    base.pop("LMW_FAILPOINT_COUNTER", None)
    path = os.pathsep.join(p for p in (str(ROOT), base.get("PYTHONPATH", "")) if p)
    return {**base, "PYTHONPATH": path, "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1", **extra}


def run(job: Job, workspace: Path, extra_env: dict | None = None,
        kill_when: Callable[[], bool] | None = None) -> tuple[int, str, float]:
    """Run the job in ``workspace`` (a session of its own, so a kill takes its workers too); (exit code, stderr,
    seconds). ``kill_when``: polled every 10 ms; true, the session is SIGKILLed (exit code -9)."""
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as err_file:
        proc = subprocess.Popen([sys.executable, "-m", *job.argv], cwd=workspace,
                                env=env(**(extra_env or {})), stdout=subprocess.DEVNULL, stderr=err_file,
                                text=True, start_new_session=True)
        while proc.poll() is None:
            if time.perf_counter() - started > TIMEOUT_S:
                os.killpg(proc.pid, signal.SIGKILL)
                raise RuntimeError(f"{job.name}: still running after {TIMEOUT_S} s")
            if kill_when is not None and kill_when():
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                break
            time.sleep(0.01)
        _reap(proc.pid)
        err_file.seek(0)
        return proc.returncode, err_file.read(), time.perf_counter() - started


def _reap(pgid: int) -> None:
    """A killed job's workers may outlive it for a moment: none may be left writing into the workspace."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return
    time.sleep(0.05)


def counted(job: Job, workspace: Path) -> tuple[Reference, str]:
    """The uninterrupted run, counting its atomic writes; (reference, stderr). A failure is a RuntimeError."""
    counter = workspace / f".writes-{job.name}"
    counter.unlink(missing_ok=True)
    rc, err, seconds = run(job, workspace, {"LMW_FAILPOINT_COUNTER": str(counter)})
    writes = counter.stat().st_size if counter.exists() else 0
    counter.unlink(missing_ok=True)
    if rc != 0:
        raise RuntimeError(f"{job.name} failed uninterrupted (exit {rc}): {err.strip().splitlines()[-1:]}")
    rows = rows_written(workspace / job.weights / "metrics.csv") if job.weights else 0
    return Reference(seconds, writes, rows), err


def digest(workspace: Path, job: Job) -> dict[str, str]:
    """SHA-256 of every file of the job's outputs (``job.ignore`` left out)."""
    out = {}
    for name in job.outputs:
        root = workspace / name
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []
        for path in files:
            rel = path.relative_to(workspace).as_posix()
            if not any(Path(rel).match(pattern) for pattern in job.ignore):
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def final_weights(run_dir: Path) -> dict:
    from model.training.checkpoint import load_latest

    return load_latest(run_dir)[1]["model"]


def same_result(job: Job, reference: Path, trial: Path) -> tuple[bool, str]:
    if job.weights:
        import torch

        want, got = final_weights(reference / job.weights), final_weights(trial / job.weights)
        differ = [k for k in want if k not in got or not torch.equal(want[k], got[k])]
        return not differ and want.keys() == got.keys(), f"{len(differ)} tensors differ" if differ else ""
    want, got = digest(reference, job), digest(trial, job)
    differ = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
    return not differ, (f"{len(differ)} files differ, e.g. {differ[0]}" if differ else "")


def temps(workspace: Path) -> list[str]:
    """Temporary files (``.<name>.<random>.tmp``) and work folders left anywhere in the workspace."""
    left = [p for p in workspace.rglob(".*.tmp")] + [p for p in workspace.rglob("_work") if p.is_dir()]
    return sorted(p.relative_to(workspace).as_posix() for p in left)


def fresh_copy(workspace: Path, job: Job, dest: Path) -> Path:
    """``workspace`` copied to ``dest`` without the job's outputs: the job about to run for the first time."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(workspace, dest, symlinks=True)
    for name in job.outputs:
        target = dest / name
        shutil.rmtree(target, ignore_errors=True) if target.is_dir() else target.unlink(missing_ok=True)
    return dest


def rows_written(metrics_csv: Path) -> int:
    try:
        return sum(1 for line in metrics_csv.read_text(encoding="utf-8").splitlines()[1:] if line.strip())
    except OSError:
        return 0


def writes_done(counter: Path) -> int:
    return counter.stat().st_size if counter.exists() else 0


def last_step(metrics_csv: Path) -> int | None:
    """The step (or round) of the last row a run wrote to its metrics.csv."""
    try:
        rows = [line for line in metrics_csv.read_text(encoding="utf-8").splitlines()[1:] if line.strip()]
    except OSError:
        return None
    try:
        return int(float(rows[-1].split(",")[0])) if rows else None
    except ValueError:
        return None


def redone(job: Job, reached: int | None, rerun_err: str, ref: Reference, rewrites: int) -> tuple[int, int, str]:
    """(redone, out of, unit). Training: the steps between the checkpoint the rerun went on from (0: none) and the
    step the killed run reached, out of the checkpoint interval.
    Data: the rerun's atomic writes (each an output file or a record of finished work) over the uninterrupted
    run's: the share of the outputs made again (its metrics, two writes, always are)."""
    if job.weights:
        found = RESUMED.search(rerun_err)
        start = int(next(g for g in found.groups() if g)) if found else 0
        return max(0, (reached or 0) - start), job.interval or 0, "steps"
    return rewrites, ref.writes, "writes"


def breaking(job: Job, folder: Path, fault: str, ref: Reference, rng: random.Random
             ) -> tuple[dict, Callable[[], bool] | None]:
    """(environment, kill condition) that break ``job`` with ``fault``, its instant drawn from ``rng``: early, after
    the job's first atomic write; mid-task, after a seeded share of its metrics rows (training) or atomic writes
    (data), between two of them; while writing and the disk faults, at a seeded write (``workbench.failpoints``);
    a corrupt checkpoint, a kill mid-task once two checkpoints exist."""
    counter = folder / ".writes"
    counting = {"LMW_FAILPOINT_COUNTER": str(counter)}
    metrics_csv = folder / job.weights / "metrics.csv" if job.weights else None
    if fault == "kill early":
        return counting, lambda: writes_done(counter) >= 1
    if fault in ("kill mid-task", "corrupt checkpoint"):
        if metrics_csv is not None and ref.rows >= 3:
            target = rng.randint(max(2, ref.rows // 3), max(2, 2 * ref.rows // 3))
            enough = (lambda: len(list(metrics_csv.parent.glob("ckpt-*.pt"))) >= 2) if fault != "kill mid-task" \
                else (lambda: True)
            return counting, lambda: rows_written(metrics_csv) >= target and enough()
        target = rng.randint(max(1, ref.writes // 3), max(1, 2 * ref.writes // 3))
        return counting, lambda: writes_done(counter) >= target
    if fault == "truncated shard":
        return {}, None
    kind = {"kill while writing": "kill", "disk full": "enospc", "read-only": "erofs"}[fault]
    return {**counting, "LMW_FAULT": f"{kind}@{rng.randint(1, max(1, ref.writes))}"}, None


def trial(job: Job, workspace: Path, scratch: Path, fault: str, ref: Reference, rng: random.Random) -> Trial:
    """Break ``job`` with ``fault``, run it again unbroken, compare with the workspace's outputs."""
    folder = fresh_copy(workspace, job, scratch / f"{job.name}-{fault.replace(' ', '-')}")
    extra, kill_when = breaking(job, folder, fault, ref, rng)
    started = time.perf_counter()
    shard = folder / "shards" / "train.bin"
    whole = shard.read_bytes() if fault == "truncated shard" else b""
    if whole:  # a copy cut short by a whole number of tokens: only meta.json's count can tell
        shard.write_bytes(whole[: len(whole) // 2 * 2 - 200])
    fault_rc, fault_err, _ = run(job, folder, extra, kill_when)
    if whole:
        shard.write_bytes(whole)
    (folder / ".writes").unlink(missing_ok=True)
    reached = last_step(folder / job.weights / "metrics.csv") if job.weights else None
    note = _truncate_newest(folder / job.weights) if fault == "corrupt checkpoint" else ""
    counter = folder / ".writes"
    counter.unlink(missing_ok=True)
    rerun_rc, rerun_err, _ = run(job, folder, {"LMW_FAILPOINT_COUNTER": str(counter)})
    rewrites = writes_done(counter)
    counter.unlink(missing_ok=True)
    identical, why = same_result(job, workspace, folder) if rerun_rc == 0 else (False, rerun_err.strip()[-200:])
    if fault == "corrupt checkpoint" and note and note not in rerun_err:
        identical, why = False, f"the rerun did not name {note}"
    left = temps(folder)
    work, of, unit = redone(job, reached, rerun_err, ref, rewrites)
    errors = sum(line.startswith("error") for line in fault_err.splitlines())
    note = "; ".join(x for x in (why, f"left {left[0]}" if left else "", note and f"truncated {note}") if x)
    result = Trial(job.name, fault, fault_rc, rerun_rc, identical, work, of, unit, len(left), errors, note,
                   round(time.perf_counter() - started, 2))
    shutil.rmtree(folder, ignore_errors=True)
    return result


def _truncate_newest(run_dir: Path) -> str:
    """Cut the run's newest checkpoint in half; its name ("" when the kill came before the first one)."""
    checkpoints = sorted(run_dir.glob("ckpt-*.pt"))
    if not checkpoints:
        return ""
    data = checkpoints[-1].read_bytes()
    checkpoints[-1].write_bytes(data[: len(data) // 2])
    return checkpoints[-1].name


def write_params(workspace: Path, params: dict) -> None:
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
