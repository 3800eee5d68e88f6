"""Data-parallel benchmark: model-state memory per rank and step time / traffic per mode.

(1) Memory: for DDP, ZeRO-1, ZeRO-2 and FSDP (ZeRO-3) on one model, the bytes of parameters,
    gradients (what a rank still holds after synchronization, when the optimizer steps) and
    optimizer state each rank measures (fp32), beside the formulas of Rajbhandari et al. 2020,
    "ZeRO", §3 / Fig. 1 (``model.costs.accounting.zero_model_state_bytes``): fp32 (4Ψ + 4Ψ + 8Ψ, the
    same precision as the measurement) and mixed precision (16Ψ; 4Ψ+12Ψ/N; 2Ψ+14Ψ/N; 16Ψ/N).
(2) Step time (forward, backward, gradient sync, optimizer step; no clipping) for naive DDP,
    per-parameter overlapped all-reduce, bucketed all-reduce (Li et al. 2020, "PyTorch
    Distributed", §3.2), ZeRO-1/2 and FSDP on a deep, narrow model (many small parameters, where
    per-call latency dominates), and ``local`` (no communication: the compute floor).
    Collectives are *counted*, not computed: while a timed step runs, ``torch.distributed``'s
    collective functions are wrapped and each call's payload recorded.
    "Ring bytes" is what one rank sends per step under bandwidth-optimal ring algorithms
    (Patarasuk & Yuan 2009; ZeRO §7): all-reduce 2(N−1)/N × payload; reduce-scatter,
    all-gather, broadcast and reduce (N−1)/N × the full tensor — a model of the cost, not a trace
    of what gloo's own algorithms send.

Ranks are spawned with ``torch.multiprocessing`` on one machine: gloo on CPU (one thread per
rank), NCCL with ``--device cuda`` when ``--world`` GPUs exist. The timed steps are medians
after warmup, each started after a barrier, the modes taking turns step by step; rank 0 reports.

    python -m bench.benchmarks.model_train --distributed                 # 2 gloo ranks on CPU
    python -m bench.benchmarks.model_train --distributed --world 4 --depth 24 --width 64 --bucket-mb 1
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from bench.tools.results import BenchSettings, Result, finish, parse_bench
from bench.tools.timing import format_table
from model.core.config import ModelConfig
from model.core.loss import cross_entropy
from model.core.transformer import TransformerLM
from model.costs.memory import zero_model_state_bytes
from model.parallelism.distributed import DDP, NaiveDDP, apply_fsdp, broadcast_module, unique_parameters
from model.parallelism.zero import ShardedOptimizer
from model.training.optim import AdamW
from workbench.params import Checked, setting

MEMORY_MODES = ("ddp", "zero1", "zero2", "fsdp")  # ZeRO stage 0, 1, 2, 3
TIME_MODES = ("local", "naive", "per_param", "bucketed", "zero1", "zero2", "fsdp")  # local: no communication
OPT = dict(lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
GOAL = 1.3  # bucketed should beat naive by at least this factor on the many-small-parameters model


# ---- counting collectives --------------------------------------------------------------------

def ring_fraction(kind: str, world: int) -> float:
    """Share of a collective's payload one rank sends with a bandwidth-optimal ring algorithm."""
    return (2 if kind == "all_reduce" else 1) * (world - 1) / world


_COLLECTIVES = {  # torch.distributed name -> (kind, position and keyword of the payload-sized tensor)
    "all_reduce": ("all_reduce", 0, "tensor"), "reduce": ("reduce", 0, "tensor"),
    "broadcast": ("broadcast", 0, "tensor"),
    "all_gather_single": ("all_gather", 0, "output_tensor"),  # payload: the gathered (full) tensor
    "all_gather_into_tensor": ("all_gather", 0, "output_tensor"),
    "reduce_scatter_single": ("reduce_scatter", 1, "input"),  # payload: the full input
    "reduce_scatter_tensor": ("reduce_scatter", 1, "input"),
}


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class CommCounter:
    """Wraps ``torch.distributed``'s collectives (looked up by name at call time by our wrappers
    and FSDP2) while active; counts calls, payload bytes and modelled ring bytes per kind."""

    def __init__(self, world: int):
        self.world = world
        self.calls: dict[str, int] = {}
        self.payload = 0
        self.ring = 0.0
        self._depth = threading.local()

    def _record(self, kind: str, nbytes: int) -> None:
        self.calls[kind] = self.calls.get(kind, 0) + 1
        self.payload += nbytes
        self.ring += ring_fraction(kind, self.world) * nbytes

    @contextlib.contextmanager
    def active(self):
        originals = {name: getattr(dist, name) for name in _COLLECTIVES if hasattr(dist, name)}

        def wrap(name, fn):
            kind, index, key = _COLLECTIVES[name]

            def counted(*args, **kwargs):
                depth = getattr(self._depth, "n", 0)
                if depth == 0:  # outermost call only (one public collective may call another)
                    tensor = args[index] if len(args) > index else kwargs[key]
                    self._record(kind, _nbytes(tensor))
                self._depth.n = depth + 1
                try:
                    return fn(*args, **kwargs)
                finally:
                    self._depth.n = depth
            return counted

        for name, fn in originals.items():
            setattr(dist, name, wrap(name, fn))
        try:
            yield self
        finally:
            for name, fn in originals.items():
                setattr(dist, name, fn)


# ---- one rank ----------------------------------------------------------------------------------

def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t  # FSDP2 DTensor -> this rank's shard


def _build(mode: str, cfg: ModelConfig, device: torch.device, bucket_mb: float):
    """(model to call, object that finishes gradient sync or None, optimizer, all parameters)."""
    torch.manual_seed(0)
    model = TransformerLM(cfg).to(device)
    params = unique_parameters(model)
    if mode == "local":  # the compute-only floor: every rank steps its own model, nothing is sent
        return model, None, AdamW(params, **OPT), params
    if mode == "fsdp":
        broadcast_module(model)
        apply_fsdp(model)
        params = unique_parameters(model)  # now DTensors
        return model, None, AdamW(params, **OPT), params
    if mode == "zero2":
        broadcast_module(model)
        opt = ShardedOptimizer(params, AdamW, stage=2, **OPT)
        return model, opt, opt, params
    wrapped = {"naive": lambda: NaiveDDP(model), "per_param": lambda: DDP(model, bucket_size_mb=0)}.get(
        mode, lambda: DDP(model, bucket_size_mb=bucket_mb))()
    opt = ShardedOptimizer(params, AdamW, stage=1, **OPT) if mode == "zero1" else AdamW(params, **OPT)
    return wrapped, wrapped, opt, params


def _train_step(fwd, syncer, opt, x, y) -> None:
    cross_entropy(fwd(x), y).backward()
    if syncer is not None:
        syncer.finish_gradient_synchronization()
    opt.step()
    opt.zero_grad(set_to_none=True)


def _state_bytes(opt) -> int:
    if hasattr(opt, "state_bytes"):
        return opt.state_bytes()
    return sum(_nbytes(_local(v)) for s in opt.state.values() for v in s.values() if torch.is_tensor(v))


def _batch(cfg: ModelConfig, bench: DistributedBench, rank: int, step: int, device):
    g = torch.Generator().manual_seed(1000 * step + rank)
    data = torch.randint(cfg.vocab_size, (bench.batch, cfg.context_length + 1), generator=g).to(device)
    return data[:, :-1], data[:, 1:]


def measure_memory(mode: str, bench: DistributedBench, rank: int, device) -> dict:
    cfg = bench.memory_model()
    fwd, syncer, opt, params = _build(mode, cfg, device, bench.bucket_mb)
    x, y = _batch(cfg, bench, rank, 0, device)
    cross_entropy(fwd(x), y).backward()
    if syncer is not None:
        syncer.finish_gradient_synchronization()
    out = {"params": sum(_nbytes(_local(p)) for p in params),
           "grads": sum(_nbytes(_local(p.grad)) for p in params if p.grad is not None)}
    opt.step()
    out["optimizer"] = _state_bytes(opt)
    if mode == "zero1":  # for the test's independent check: the Adam moments of what this rank owns
        out["owned_numel"] = sum(p.numel() for p in opt.owned())
        out["owned_tensors"] = len(opt.owned())
    out["n_params"] = cfg.param_count()
    return out


def measure_time(bench: DistributedBench, rank: int, device) -> dict[str, dict]:
    """Every mode's step time and traffic. The modes take turns step by step (round robin), so a
    change in machine load between them shifts all modes alike instead of favouring one."""
    cfg = bench.time_model()
    built = {mode: _build(mode, cfg, device, bench.bucket_mb) for mode in TIME_MODES}
    counters = {mode: CommCounter(dist.get_world_size()) for mode in TIME_MODES}
    times: dict[str, list[float]] = {mode: [] for mode in TIME_MODES}
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for step in range(bench.warmup + bench.steps):
        x, y = _batch(cfg, bench, rank, step, device)
        for mode, (fwd, syncer, opt, _) in built.items():
            dist.barrier()
            sync()
            start = time.perf_counter()
            with counters[mode].active() if step >= bench.warmup else contextlib.nullcontext():
                _train_step(fwd, syncer, opt, x, y)
                sync()
            if step >= bench.warmup:
                times[mode].append(time.perf_counter() - start)
    n = bench.steps
    return {mode: {"ms": 1000 * statistics.median(times[mode]), "ms_all": [1000 * t for t in times[mode]],
                   "calls": {k: v / n for k, v in c.calls.items()}, "payload": c.payload / n, "ring": c.ring / n,
                   "n_params": cfg.param_count(), "n_tensors": len(list(built[mode][0].parameters()))}
            for mode, c in counters.items()}


def _worker(rank: int, world: int, port: int, bench: DistributedBench, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    cuda = bench.device == "cuda"
    if cuda:
        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
    else:
        torch.set_num_threads(1)
        device = torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=300))
    try:
        result = {"memory": {m: measure_memory(m, bench, rank, device) for m in MEMORY_MODES},
                  "time": measure_time(bench, rank, device)}
        (Path(out_dir) / f"rank{rank}.json").write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()


def run(bench: DistributedBench) -> list[dict]:
    """Spawn ``bench.world`` ranks; return each rank's results."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_worker, args=(bench.world, port, bench, tmp), nprocs=bench.world, join=True)
        return [json.loads((Path(tmp) / f"rank{r}.json").read_text()) for r in range(bench.world)]


# ---- report -------------------------------------------------------------------------------------

def _fmt_bytes(n: float) -> str:
    for unit, scale in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} B"


PAPER = {0: "16Ψ", 1: "4Ψ+12Ψ/N", 2: "2Ψ+14Ψ/N", 3: "16Ψ/N"}


def memory_table(results: list[dict], world: int) -> tuple[str, int]:
    rows = []
    n = results[0]["memory"]["ddp"]["n_params"]
    ddp_opt = results[0]["memory"]["ddp"]["optimizer"]
    for stage, mode in enumerate(MEMORY_MODES):
        r0 = results[0]["memory"][mode]
        total0 = r0["params"] + r0["grads"] + r0["optimizer"]
        worst = max(r["memory"][mode]["params"] + r["memory"][mode]["grads"] + r["memory"][mode]["optimizer"]
                    for r in results)
        f32 = zero_model_state_bytes(n, world, stage, precision="fp32")
        mixed = zero_model_state_bytes(n, world, stage, precision="mixed")
        rows.append([mode, _fmt_bytes(r0["params"]), _fmt_bytes(r0["grads"]), _fmt_bytes(r0["optimizer"]),
                     _fmt_bytes(total0), _fmt_bytes(worst),
                     f"{_fmt_bytes(f32['params'])} / {_fmt_bytes(f32['grads'])} / {_fmt_bytes(f32['optimizer'])}",
                     _fmt_bytes(f32["total"]), f"{total0 / f32['total']:.3f}",
                     f"{PAPER[stage]} = {_fmt_bytes(mixed['total'])}", f"{r0['optimizer'] / ddp_opt:.3f}"])
    headers = ["mode", "params", "grads", "optimizer", "total r0", "max rank", "fp32 formula p / g / o",
               "fp32 total", "meas/formula", "paper mixed 16Ψ", "optim vs ddp"]
    return format_table(headers, rows), n


def time_table(results: list[dict]) -> tuple[str, float]:
    t0 = results[0]["time"]
    naive = t0["naive"]["ms"]
    rows = []
    for mode in TIME_MODES:
        r = t0[mode]
        worst = max(res["time"][mode]["ms"] for res in results)
        calls = " + ".join(f"{v:g} {k}" for k, v in sorted(r["calls"].items()))
        rows.append([mode, f"{r['ms']:.1f}", f"{worst:.1f}", f"{naive / r['ms']:.2f}x",
                     f"{r['calls'].get('all_reduce', 0):g}", calls or "-", _fmt_bytes(r["payload"]),
                     f"{r['payload'] / (4 * r['n_params']):.2f}", _fmt_bytes(r["ring"])])
    headers = ["mode", "ms/step r0", "max rank", "vs naive", "all-reduces", "collectives/step", "payload/step",
               "payload/4Ψ", "ring sent/rank"]
    return format_table(headers, rows), naive / t0["bucketed"]["ms"]


def results_rows(results: list[dict], world: int) -> list[Result]:
    """Rank 0's model-state MiB per mode against the fp32 ZeRO formula, and each mode's ms/step (median, min-max of
    its interleaved steps) with ratio = naive's median / this one's (> 1: faster than naive)."""
    rows = []
    n = results[0]["memory"]["ddp"]["n_params"]
    for stage, mode in enumerate(MEMORY_MODES):
        r0 = results[0]["memory"][mode]
        f32 = zero_model_state_bytes(n, world, stage, precision="fp32")
        for part in ("params", "grads", "optimizer"):
            rows.append(Result(mode, f"{part}_mib", r0[part] / 2**20, "MiB per rank", "fp32 formula",
                               f32[part] / 2**20))
        rows.append(Result(mode, "model_state_mib", (r0["params"] + r0["grads"] + r0["optimizer"]) / 2**20,
                           "MiB per rank", "fp32 formula", f32["total"] / 2**20))
    t0 = results[0]["time"]
    naive = t0["naive"]["ms"]
    for mode in TIME_MODES:
        r = t0[mode]
        rows.append(Result(mode, "ms_per_step", r["ms"], "ms (ratio: naive / this)", "naive", naive, naive / r["ms"],
                           len(r["ms_all"]), min(r["ms_all"]), r["ms"], max(r["ms_all"])))
        rows.append(Result(mode, "payload_mib", r["payload"] / 2**20, "MiB per step per rank"))
        rows.append(Result(mode, "ring_sent_mib", r["ring"] / 2**20, "MiB per step per rank (modelled)"))
        rows.append(Result(mode, "collectives", sum(r["calls"].values()), "calls per step"))
    return rows


@dataclass(frozen=True)
class DistributedBench(BenchSettings, Checked):
    world: int = setting(2, "ranks to spawn", at_least=2)
    device: str = setting("cpu", "cpu (gloo) or cuda (NCCL, needs --world GPUs)", choices=("cpu", "cuda"))
    preset: str = setting("micro", "memory model preset")
    vocab: int = setting(8192, "memory model vocabulary", at_least=1)
    depth: int = setting(16, "timing model n_layers", at_least=1)  # deep and narrow: ~9 small parameters per block
    width: int = setting(64, "timing model d_model (a multiple of 8: 4 heads of even size)", at_least=1)
    time_vocab: int = setting(512, "timing model vocabulary", at_least=1)
    context: int = setting(64, "sequence length", at_least=1)
    batch: int = setting(4, "sequences per rank per step", at_least=1)
    steps: int = setting(20, "timed steps per mode", at_least=1)
    warmup: int = setting(3, "untimed steps per mode", at_least=0)
    bucket_mb: float = setting(25.0, "DDP bucket size in MB for 'bucketed' and zero1 (per_param is the 0 case)",
                               above=0)
    json: Path | None = setting(None, "also write every rank's raw results to this JSON file")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.device == "cuda" and torch.cuda.device_count() < self.world:  # the machine, and rules across settings
            raise ValueError(f"--device cuda with --world {self.world} needs {self.world} GPUs, "
                             f"found {torch.cuda.device_count()}")
        if self.width % 4 or (self.width // 4) % 2:
            raise ValueError(f"--width must be a multiple of 8 (4 heads of even size), got {self.width}")
        self.memory_model()  # validates the preset

    def memory_model(self) -> ModelConfig:
        return ModelConfig.from_preset(self.preset, vocab_size=self.vocab, context_length=self.context)

    def time_model(self) -> ModelConfig:
        return ModelConfig(vocab_size=self.time_vocab, context_length=self.context, d_model=self.width,
                           n_layers=self.depth, n_heads=4)


def main(argv: list[str] | None = None) -> int:
    bench = parse_bench(DistributedBench, argv)
    cuda = bench.device == "cuda"
    name = torch.cuda.get_device_name(0) if cuda else "CPU, 1 thread per rank"
    print(f"device: {name}; torch {torch.__version__}; world {bench.world} ({'nccl' if cuda else 'gloo'}); fp32")
    results = run(bench)
    if bench.json:
        bench.json.write_text(json.dumps(results, indent=1))
    mem, n = memory_table(results, bench.world)
    mcfg = bench.memory_model()
    print(f"\n(1) model-state memory per rank after one step: preset {bench.preset} (d_model={mcfg.d_model}, "
          f"n_layers={mcfg.n_layers}), vocab {bench.vocab}, Ψ = {n:,} params, N = {bench.world}; "
          f"measured fp32 on rank 0 (grads = what the rank holds when the optimizer steps)")
    print(mem)
    tcfg = bench.time_model()
    table, speedup = time_table(results)
    n_tensors = results[0]["time"]["naive"]["n_tensors"]
    print(f"\n(2) step time (fwd + bwd + sync + AdamW step), timing model d_model={tcfg.d_model}, "
          f"n_layers={tcfg.n_layers}, vocab {tcfg.vocab_size}: Ψ = {tcfg.param_count():,} params in {n_tensors} "
          f"tensors; {bench.batch} x {bench.context} tokens per rank; bucket {bench.bucket_mb:g} MB; median of "
          f"{bench.steps} after {bench.warmup} warmup; collectives counted per step, ring = modelled bytes sent")
    print(table)
    verdict = "met" if speedup >= GOAL else "NOT met"
    print(f"\ngoal: bucketed >= {GOAL}x faster than naive: {verdict} ({speedup:.2f}x)")
    command = "python -m bench.benchmarks.model_train --distributed" + (" " + " ".join(argv) if argv else "")
    return finish("distributed", results_rows(results, bench.world), bench, command)


if __name__ == "__main__":
    sys.exit(main())
