"""One command for a GPU machine: run every GPU-side check and summarise them in one JSON and one table.

    python -m bench.tools.gpu_check [--out DIR] [--only PART,...] [--skip PART,...] [--budget-s 480] [--dry-run]

Each part runs as a subprocess with its own timeout (capped by what is left of --budget-s), its output in
DIR/<part>.log:

  pytest       pytest tests/lmw_kernels on CUDA (the bf16 and torch.compile cases that skip on CPU)
  model_train  python -m bench.benchmarks.model_train --device cuda --compile --skip-generate (MFU of `small`,
               context 1024)
  ddp, fsdp    a 1-GPU torchrun smoke of python -m model.train --parallel ddp / fsdp on NCCL, on tiny token
               shards this command writes itself (DIR/shards)
  train        the train section of params-gpu.yaml (small, context 1024, bf16, torch.compile, kernels: auto),
               shortened: a few dozen steps on the same shards
  kernel_select  python -m bench.benchmarks.kernel_select --attention-sweep: each op ours vs Inductor / SDPA at the
               model's shapes, winners into lmw_kernels/selection.json (what `kernels: auto` reads)
  e2e          python -m bench.benchmarks.kernel_e2e --variants none,auto,all --cuda-graphs: small, context 1024,
               batch 16:
               tokens/s and MFU with kernels none / auto / all, none and auto again with CUDA graphs
  convergence  python -m bench.benchmarks.kernel_convergence: 200 steps with and without the kernels, final loss
               within 1 %
  kernel_ops   python -m bench.benchmarks.kernel_ops --quick --only attention,rmsnorm,ce (FlashAttention at S1k and
               S16k d64,
               RMSNorm at 4096 x 1k / 8k, the fused cross-entropy, each vs PyTorch, with CUDA-graph replays)

DIR/summary.json and DIR/summary.md get status, seconds and the key numbers parsed from each output.
Needs only torch, triton, numpy and pytest beyond the repository (params-gpu.yaml is read without PyYAML
when it is missing; model.train gets --params none and explicit flags). `--dry-run` prints the commands
and runs nothing (also on a machine without CUDA). Exit status 0 when every part that ran passed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import triton

from workbench.params import parse_flags, setting, usage_error

try:  # optional: the GPU image may lack PyYAML; params-gpu.yaml's train section is parsed by hand then
    import yaml
except ImportError:  # pragma: no cover - depends on the machine
    yaml = None

ROOT = Path(__file__).resolve().parents[2]
PARAMS_GPU = ROOT / "params-gpu.yaml"
SHARD_VOCAB = 8192
# the shortened params-gpu.yaml stage: everything else (preset, context, batch, dtype, compile, kernels) as written
TRAIN_OVERRIDES = {"max_steps": 40, "warmup_steps": 10, "eval_interval": 20, "eval_batches": 4, "log_interval": 10,
                   "ckpt_interval": 40, "time_budget_s": 100.0}
SMOKE_FLAGS = ["--preset", "micro", "--model.context-length", "256", "--batch-size", "8", "--max-steps", "20",
               "--warmup-steps", "2", "--eval-interval", "10", "--eval-batches", "2", "--log-interval", "5",
               "--ckpt-interval", "20", "--device", "cuda", "--dtype", "bf16"]


@dataclass
class Part:
    name: str
    command: list[str]
    timeout_s: float
    parse: object = None  # (log text, Part, out dir) -> dict of key numbers
    result: dict = field(default_factory=dict)


# ---- parsing the outputs -------------------------------------------------------------------------------


def parse_pytest(text: str, part: Part, out: Path) -> dict:
    tail = text.strip().splitlines()[-1:] or [""]
    numbers = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)", tail[0])}
    return {**numbers, "summary": tail[0].strip("= ")}


def _percentages(lines: list[str]) -> list[float]:
    return [float(x) for line in lines for x in re.findall(r"(\d+(?:\.\d+)?)\s*%", line)]


def parse_model_train(text: str, part: Part, out: Path) -> dict:
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("(a) training step")), None)
    numbers = {}
    device = next((line for line in lines if line.startswith("device:")), None)
    if device:
        numbers["device"] = device.split(":", 1)[1].split(";")[0].strip()
    if start is not None:
        table = []
        for line in lines[start + 1:]:
            if not line.strip():
                break
            table.append(line)
        if _percentages(table):
            numbers["max_mfu_pct"] = max(_percentages(table))
        numbers["table"] = table
    return numbers


def parse_kernel_ops(text: str, part: Part, out: Path) -> dict:
    numbers = {}
    total = re.search(r"^total (\d+) s", text, re.M)
    if total:
        numbers["bench_total_s"] = int(total.group(1))
    numbers["sections"] = [line.strip() for line in text.splitlines() if re.match(r"\(\d\) ", line.strip())]
    return numbers


def parse_tail(text: str, part: Part, out: Path) -> dict:
    """The last non-empty line (each of these benches ends with its verdict or summary)."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return {"last": lines[-1][:200] if lines else ""}


def parse_train(text: str, part: Part, out: Path) -> dict:
    numbers = {}
    done = re.search(r"done: val loss ([\d.]+).* (\d+) steps in (\d+)s", text)
    if done:
        numbers.update(val_loss=float(done.group(1)), steps=int(done.group(2)), train_s=int(done.group(3)))
    metrics = out / f"{part.name}_metrics.json"
    if metrics.is_file():
        headline = json.loads(metrics.read_text())
        numbers.update({k: headline[k] for k in ("tokens_per_s", "mfu", "loss") if k in headline})
    return numbers


# ---- the parts -----------------------------------------------------------------------------------------


def read_train_section(path: Path) -> dict:
    """The `train:` mapping of a params file, a profile merged onto its `base:` (workbench.params.read_params);
    without PyYAML each file's section of scalars (and its one nested `model:` mapping) is parsed by hand and
    merged the same way."""
    if yaml is not None:
        from workbench.params import read_params
        return read_params(path).get("train") or {}
    base, section = _train_section_by_hand(path.read_text(encoding="utf-8"))
    if base is None:
        return section
    return _overlay(read_train_section(path.parent / base), section)


def _overlay(base: dict, changes: dict) -> dict:
    """workbench.params.overlay, which needs no PyYAML either but is kept apart so this file runs on its own."""
    merged = dict(base)
    for key, value in changes.items():
        if value is None:
            merged.pop(key, None)  # a profile's null drops the key
        elif isinstance(value, dict):
            merged[key] = _overlay(merged.get(key) or {}, value)
        else:
            merged[key] = value
    return merged


def _train_section_by_hand(text: str) -> tuple[str | None, dict]:
    base, section, inside, indent, nested = None, {}, False, None, None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line[0].isspace():
            key, _, value = line.split("#")[0].partition(":")
            base = value.strip() if key.strip() == "base" else base
            inside = line.split("#")[0].strip() == "train:"
            continue
        if inside:
            depth = len(line) - len(line.lstrip())
            indent = depth if indent is None else indent
            key, _, value = line.strip().partition(":")
            value = value.split(" #")[0].strip()
            if depth > indent and nested is not None:
                nested[key.strip()] = _scalar(value)
            elif value:
                section[key.strip()], nested = _scalar(value), None
            else:  # `model:` alone: its mapping follows, indented
                section[key.strip()] = nested = {}
    return base, section


def _scalar(value: str):
    lowered = value.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "~", ""):
        return None
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value.strip("'\"")


def config_flags(section: dict, prefix: str = "") -> list[str]:
    """model.train flags for a train section: --key-name value (a nested mapping's --model.key-name value),
    booleans as --key / --no-key, None left out."""
    flags = []
    for key, value in section.items():
        name = prefix + key.replace("_", "-")
        if isinstance(value, dict):
            flags += config_flags(value, name + ".")
        elif isinstance(value, bool):
            flags.append(f"--{name}" if value else f"--no-{name}")
        elif value is not None:
            flags += [f"--{name}", str(value)]
    return flags


def build_parts(out: Path, python: str = sys.executable) -> list[Part]:
    shards = out / "shards"
    train = {**read_train_section(PARAMS_GPU), **TRAIN_OVERRIDES, "data": str(shards),
             "out_dir": str(out / "runs" / "train"), "metrics": str(out / "train_metrics.json")}
    torchrun = [python, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "1"]

    def smoke(mode: str) -> list[str]:
        return [*torchrun, "-m", "model.train", "--params", "none", "--parallel", mode, "--data", str(shards),
                "--out-dir", str(out / "runs" / mode), "--metrics", str(out / f"{mode}_metrics.json"), *SMOKE_FLAGS]

    # most evidence first: correctness, then the kernel and MFU goals, then the launches; a part that would
    # start with under 30 s of the budget left is skipped, so the budget caps the whole command
    return [
        # compile_check's own tests compile for sm_90/sm_80 on the CPU: CI runs them, the GPU need not
        Part("pytest", [python, "-m", "pytest", "tests/lmw_kernels", "-q", "-p", "no:cacheprovider",
                        "--ignore", "tests/lmw_kernels/test_compile_check.py", *xdist_flags()], 120, parse_pytest),
        # the per-op winners at the model's shapes -> lmw_kernels/selection.json, which `kernels: auto` (next) reads;
        # --part-args "kernel_select=--attention-sweep" adds the FlashAttention config sweep (~45 s)
        Part("kernel_select", [python, "-m", "bench.benchmarks.kernel_select", "--out", str(out)], 90, parse_tail),
        # the acceptance variants (the reference GPT and per-variant profiles: --part-args)
        Part("e2e", [python, "-m", "bench.benchmarks.kernel_e2e", "--variants", "none,auto,all", "--cuda-graphs"], 240,
             parse_tail),
        Part("convergence", [python, "-m", "bench.benchmarks.kernel_convergence", "--out", str(out)], 150, parse_tail),
        Part("kernel_ops", [python, "-m", "bench.benchmarks.kernel_ops", "--quick", "--only", "attention,rmsnorm,ce"],
             120, parse_kernel_ops),
        # MFU only: the generation section (uncompiled, token by token) ran out the part's time on the H200
        Part("model_train", [python, "-m", "bench.benchmarks.model_train", "--device", "cuda", "--compile",
                             "--skip-generate"], 150, parse_model_train),
        Part("ddp", smoke("ddp"), 60, parse_train),
        Part("fsdp", smoke("fsdp"), 60, parse_train),
        Part("train", [python, "-m", "model.train", "--params", "none", *config_flags(train)], 150, parse_train),
    ]


def xdist_flags() -> list[str]:
    """Compiling Triton kernels is CPU-bound: spread the kernel tests over processes when pytest-xdist exists."""
    if importlib.util.find_spec("xdist") is None:
        return []
    return ["-n", str(max(1, min(8, (os.cpu_count() or 2) // 2)))]


def write_shards(folder: Path, vocab: int = SHARD_VOCAB, train_tokens: int = 1_000_000) -> Path:
    """Tiny learnable token shards (a repeating pattern with 10 % noise), as model.train reads them."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    pattern = rng.integers(0, vocab, size=997)
    for split, n in (("train", train_tokens), ("val", train_tokens // 10)):
        tokens = np.resize(pattern, n)
        noise = rng.random(n) < 0.1
        tokens[noise] = rng.integers(0, vocab, size=int(noise.sum()))
        tokens.astype(np.uint16).tofile(folder / f"{split}.bin")
    (folder / "meta.json").write_text(json.dumps({"dtype": "uint16", "vocab_size": vocab, "eot_id": 0}))
    return folder


# ---- running -------------------------------------------------------------------------------------------


def child_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # the real GPU path only
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_part(part: Part, out: Path, timeout: float) -> dict:
    """Run one part in its own process group (torchrun's workers die with it on a timeout)."""
    log_path = out / f"{part.name}.log"
    start = time.perf_counter()
    with open(log_path, "w", encoding="utf-8") as log:
        log.write(f"$ {shlex.join(part.command)}\n")
        log.flush()
        proc = subprocess.Popen(part.command, cwd=ROOT, env=child_env(), stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout)
            status = "ok" if rc == 0 else "failed"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            rc = proc.wait()
            status = "timeout"
    seconds = round(time.perf_counter() - start, 1)
    text = log_path.read_text(encoding="utf-8", errors="replace")
    try:
        numbers = part.parse(text, part, out) if part.parse else {}
    except Exception as e:  # noqa: BLE001 - a parser surprise must not lose the run's status
        numbers = {"parse_error": f"{type(e).__name__}: {e}"}
    if status != "ok":
        numbers["last_lines"] = text.strip().splitlines()[-5:]
    return {"part": part.name, "status": status, "rc": rc, "seconds": seconds, "timeout_s": round(timeout),
            "command": shlex.join(part.command), "log": str(log_path), "numbers": numbers}


def _short(numbers: dict) -> str:
    keep = {k: v for k, v in numbers.items() if not isinstance(v, (list, dict))}
    return ", ".join(f"{k}={v}" for k, v in keep.items()).replace("|", "/")


def markdown(summary: dict) -> str:
    lines = [f"GPU check on {summary['device']} (torch {summary['torch']}, triton {summary['triton']}, "
             f"Python {summary['python']}): {summary['total_s']:.0f} s", "",
             "| part | status | seconds | key numbers |", "|---|---|---|---|"]
    for r in summary["parts"]:
        lines.append(f"| {r['part']} | {r['status']} | {r['seconds']:.0f} | {_short(r['numbers'])} |")
    return "\n".join(lines) + "\n"


def environment() -> dict:
    cuda = torch.cuda.is_available()
    return {"device": torch.cuda.get_device_name(0) if cuda else "no CUDA device", "cuda": cuda,
            "torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version()}


def select(parts: list[Part], only: str, skip: str) -> list[Part]:
    """The parts named by --only, in that order (default: all, in the built order), less those in --skip."""
    by_name = {p.name: p for p in parts}
    wanted = [s.strip() for s in only.split(",") if s.strip()] or list(by_name)
    dropped = {s.strip() for s in skip.split(",") if s.strip()}
    unknown = sorted((set(wanted) | dropped) - set(by_name))
    if unknown:
        raise ValueError(f"unknown part(s) {', '.join(unknown)}; choose from {', '.join(by_name)}")
    return [by_name[name] for name in dict.fromkeys(wanted) if name not in dropped]


def add_part_args(parts: list[Part], specs: tuple[str, ...]) -> None:
    by_name = {p.name: p for p in parts}
    for spec in specs:
        name, sep, extra = spec.partition("=")
        if not sep or name not in by_name:
            raise ValueError(f"--part-args {spec!r}: expected PART=ARGS with PART one of {', '.join(by_name)}")
        by_name[name].command += shlex.split(extra)


@dataclass(frozen=True)
class GpuCheckSettings:
    out: Path = setting(Path("data/gpu_check"), "folder for logs, shards and the summary")
    only: str = setting("", "comma-separated parts to run, in this order (default: all)")
    skip: str = setting("", "comma-separated parts to leave out")
    budget_s: float = setting(480.0, "total time; each part's timeout is capped by what is left", above=0)
    part_args: tuple[str, ...] = setting((), "extra arguments for one part, PART=ARGS, e.g. pytest=\"-k flash\"; "
                                             "repeatable (default: none)", repeatable=True)
    dry_run: bool = setting(False, "print the commands and timeouts; run nothing")


def main(argv: list[str] | None = None) -> int:
    args = parse_flags(GpuCheckSettings, argv, prog="python -m bench.tools.gpu_check",
                       description=__doc__.splitlines()[0])
    out = args.out.resolve()
    try:
        parts = select(build_parts(out), args.only, args.skip)
        add_part_args(parts, args.part_args)
    except ValueError as exc:
        usage_error(str(exc))
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.dry_run:
        print(f"# would write tiny shards to {out / 'shards'} and logs + summary.json/summary.md to {out}")
        for p in parts:
            print(f"# {p.name} (timeout {p.timeout_s:.0f} s)\n{shlex.join(p.command)}")
        return 0
    env = environment()
    if not env["cuda"]:
        print("error: bench.tools.gpu_check needs a CUDA GPU (--dry-run lists the commands)", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    write_shards(out / "shards")
    start, results = time.perf_counter(), []
    for p in parts:
        left = args.budget_s - (time.perf_counter() - start)
        if left < 30:
            results.append({"part": p.name, "status": "skipped", "rc": None, "seconds": 0.0, "timeout_s": 0,
                            "command": shlex.join(p.command), "log": None, "numbers": {"why": "time budget spent"}})
        else:
            print(f"[gpu_check] {p.name}: {shlex.join(p.command)}", flush=True)
            results.append(run_part(p, out, min(p.timeout_s, left)))
        r = results[-1]
        print(f"[gpu_check] {p.name}: {r['status']} in {r['seconds']:.0f} s {_short(r['numbers'])}", flush=True)
    summary = {**env, "total_s": round(time.perf_counter() - start, 1), "parts": results}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    (out / "summary.md").write_text(markdown(summary))
    print(markdown(summary))
    return 0 if all(r["status"] == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
