"""AOT-compile every Triton kernel of lmw_kernels/ for Hopper and Ampere on a CPU-only machine.

    python -m lmw_kernels.compile_check [--quick] [--jobs N] [--cache-dir DIR | --no-cache] [--json FILE]

The Triton wheel ships `ptxas`, so `triton.compile(ASTSource(fn, signature, constexprs), target=GPUTarget(...))`
produces a cubin without a GPU. This compiles every entry kernel (every `@triton.jit` function of lmw_kernels/ that
is launched, not a helper called from another kernel) for every candidate config (FlashAttention: the candidates
its sweep times; the others: the settings their launchers pick), for the I/O dtypes the launchers accept
(fp16, bf16, fp32) and representative head dims / block sizes, for GPUTarget("cuda", 90, 32) (H100) and
("cuda", 80, 32) (A100). One table row per (kernel, config, case, dtype, target): shared memory (compiled
metadata), registers and spill bytes (`ptxas -v`, via TRITON_DUMP_PTXAS_LOG), compile seconds.

Exit status 1 on any compile error, on shared memory above the target's per-block limit (227 KB on sm_90,
163 KB on sm_80), or on a kernel of lmw_kernels/ with no compile spec here. Spilling configs are listed in a
column and a summary line, with the reason from SPILL_NOTES where one is recorded.

Results are cached per compile (key: the Triton source hash of the kernel and everything it calls, the
signature, constexprs, options, target and Triton version) under ~/.cache/lm-workbench/compile_check, so a
rerun only compiles what changed. `--quick` (for CI) compiles one dtype (bf16) and the largest head dim.
`--spec-module FILE` adds the SPECS of a Python file (the tests plant broken kernels this way).
TRITON_INTERPRET=1 must not be set (kernels then import their interpreter configs): the command re-runs
itself without it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import hashlib
import importlib.util
import io
import json
import os
import re
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.runtime.jit import JITFunction

from lmw_kernels import cross_entropy, flash_attention, rmsnorm, swiglu
from workbench.params import add_config_flags, config_from_args, setting

TARGETS = {90: 227 * 1024, 80: 163 * 1024}  # compute capability -> max shared memory per block (opt-in)
DTYPES = ("fp16", "bf16", "fp32")
QUICK_DTYPE = "bf16"
KERNEL_MODULES = (flash_attention, rmsnorm, swiglu, cross_entropy)
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lm-workbench" / "compile_check"

TORCH_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "i64": torch.int64,
                "i32": torch.int32}

# Why spilling configs stay. Per kernel: the fp32 values live per thread (the accumulators and the score tile
# of one step) as a function of the meta-parameters, and the reason the config is kept. The live count is a
# lower bound (operand tiles held in registers come on top); above ~200 of the 255 registers ptxas spills.
_AUTOTUNED = ("kept: a candidate of bench.benchmarks.kernel_select's sweep, which times every config per "
              "(head dim, sequence) "
              "and writes the fastest into flash_attention.TUNED, so a spilling config is only chosen where it "
              "still wins; the same config is spill-free elsewhere")
SPILL_NOTES = {
    "_fwd_kernel": (lambda k, d, t: k["BLOCK_M"] * (d + k["BLOCK_N"]) / t,
                    "O accumulator BLOCK_M x d + scores BLOCK_M x BLOCK_N", _AUTOTUNED),
    "_bwd_dq_kernel": (lambda k, d, t: k["BLOCK_M"] * (d + 2 * k["BLOCK_N"]) / t,
                       "dQ accumulator BLOCK_M x d + P and dP BLOCK_M x BLOCK_N", _AUTOTUNED),
    "_bwd_dkdv_kernel": (lambda k, d, t: 2 * k["BLOCK_N"] * (d + k["BLOCK_M"]) / t,
                         "dK, dV accumulators 2 x BLOCK_N x d + P^T and dP^T BLOCK_N x BLOCK_M", _AUTOTUNED),
    "_rms_norm_fwd": (lambda k, d, t: 2 * k["BLOCK"] / t, "x and w rows (2 x BLOCK)",
                      "only hidden > 32768 (BLOCK 65536, 32 warps, at most 64 registers per thread) spills; no "
                      "preset comes near (the largest hidden is 2560); a two-pass row loop would fix it"),
    "_rms_norm_bwd": (lambda k, d, t: 4 * k["BLOCK"] * k["BLOCK_ROWS"] / t, "w, dw, dy and x tiles (4 x tile)",
                      "hidden > 32768 (BLOCK 65536, 32 warps, at most 64 registers per thread) spills, and the "
                      "short-row tile with ds_next a few bytes on sm_90; no preset comes near the first (the largest "
                      "hidden is 2560)"),
}


@dataclasses.dataclass(frozen=True)
class Spec:
    """How to compile one entry kernel.

    kernel: the module-level Autotuner or JITFunction. pointers: pointer argument -> element type, "io" for
    the launcher's I/O dtype. floats: fp32 scalar arguments (every other runtime argument is i32).
    configs: for kernels that are not autotuned, the (meta-parameters, warps, stages) their launchers use;
    autotuned kernels use the Autotuner's own `.configs`. cases: the other constexpr values, labelled;
    quick_case: the one case --quick keeps. dtypes: the I/O dtypes compiled.
    """

    name: str
    kernel: object
    pointers: dict
    floats: tuple = ()
    configs: tuple = ()
    cases: tuple = (("", {}),)
    quick_case: int = -1
    dtypes: tuple = DTYPES
    prune: object = None  # for fixed-config kernels: an `early_config_prune`-style filter of `configs`

    @property
    def fn(self) -> JITFunction:
        return jit_function(self.kernel)

    def all_configs(self) -> list:
        return list(getattr(self.kernel, "configs", None) or self.configs)


def _head_dim_cases(causal: bool = True) -> tuple:
    """d_head 64 (every preset up to xl) and 128 (BLOCK_D for d_head 65..128, e.g. 2.7B's 80)."""
    return tuple((f"d{d}{' causal' if causal else ''}", {"HEAD_DIM": d, "BLOCK_D": d, "IS_CAUSAL": causal})
                 for d in (64, 128))


def _rmsnorm_configs() -> tuple:
    """The launcher's (BLOCK, BLOCK_ROWS, warps) for hidden 768 (small), 2560 (2.7B), 8192 and MAX_HIDDEN."""
    out = []
    for hidden in (768, 2560, 8192, rmsnorm.MAX_HIDDEN):
        cfg = rmsnorm.settings(hidden)
        out.append(triton.Config({"BLOCK": cfg["BLOCK"], "BLOCK_ROWS": cfg["BLOCK_ROWS"]}, num_warps=cfg["num_warps"]))
    return tuple(out)


def _packed_config() -> triton.Config:
    """The packed SwiGLU launch of the `small` preset's FFN (d_ff 2048) at a training batch."""
    cfg = swiglu.packed_settings(16384, 2048, cuda=True)
    return triton.Config({"BLOCK_R": cfg["BLOCK_R"], "BLOCK_F": cfg["BLOCK_F"]}, num_warps=cfg["num_warps"])


def _residual_cases(flag: str) -> tuple:
    return (("", {flag: False}), (flag.lower(), {flag: True}))


def _specs() -> list[Spec]:
    fa, io_ = flash_attention, "io"
    heads = _head_dim_cases()
    ce_block = cross_entropy._CUDA_BLOCK_V
    return [
        Spec("flash_attention._fwd_kernel", fa._fwd_kernel,
             {"Q": io_, "K": io_, "V": io_, "OUT": io_, "LSE": "fp32"}, ("sm_scale",), configs=tuple(fa.FWD_CONFIGS),
             cases=heads, prune=fa._prune_fp32_wide),
        Spec("flash_attention._bwd_delta_kernel", fa._bwd_delta_kernel, {"OUT": io_, "DO": io_, "DELTA": "fp32"},
             configs=(triton.Config({"BLOCK_M": 64}),),
             cases=tuple((label, {k: v for k, v in c.items() if k != "IS_CAUSAL"}) for label, c in
                         _head_dim_cases(causal=False))),
        Spec("flash_attention._bwd_dkdv_kernel", fa._bwd_dkdv_kernel,
             {"Q": io_, "K": io_, "V": io_, "DO": io_, "LSE": "fp32", "DELTA": "fp32", "DK": io_, "DV": io_},
             ("sm_scale",), configs=tuple(fa.DKDV_CONFIGS), cases=heads, prune=fa._prune_fp32_wide),
        Spec("flash_attention._bwd_dq_kernel", fa._bwd_dq_kernel,
             {"Q": io_, "K": io_, "V": io_, "DO": io_, "LSE": "fp32", "DELTA": "fp32", "DQ": io_},
             ("sm_scale",), configs=tuple(fa.DQ_CONFIGS), cases=heads, prune=fa._prune_fp32_wide),
        # the model's RMSNorm weight is an fp32 parameter under bf16 autocast
        Spec("rmsnorm._rms_norm_fwd", rmsnorm._rms_norm_fwd,
             {"X": io_, "R": io_, "S": io_, "W": "fp32", "Y": io_, "RSTD": "fp32"},
             ("eps",), configs=_rmsnorm_configs(), cases=_residual_cases("HAS_RESIDUAL")),
        Spec("rmsnorm._rms_norm_bwd", rmsnorm._rms_norm_bwd,
             {"DY": io_, "DS_NEXT": io_, "S": io_, "W": "fp32", "RSTD": "fp32", "DX": io_, "DW": "fp32"},
             configs=_rmsnorm_configs(), cases=_residual_cases("HAS_DS_NEXT")),
        Spec("swiglu._swiglu_fwd", swiglu._swiglu_fwd, {"A": io_, "B": io_, "C": io_},
             configs=(triton.Config({"BLOCK": swiglu._CUDA_BLOCK}, num_warps=swiglu._CUDA_WARPS),)),
        Spec("swiglu._swiglu_bwd", swiglu._swiglu_bwd, {"DC": io_, "A": io_, "B": io_, "DA": io_, "DB": io_},
             configs=(triton.Config({"BLOCK": swiglu._CUDA_BLOCK}, num_warps=swiglu._CUDA_WARPS),)),
        Spec("swiglu._swiglu_packed_fwd", swiglu._swiglu_packed_fwd, {"H": io_, "C": io_},
             configs=(_packed_config(),)),
        Spec("swiglu._swiglu_packed_bwd", swiglu._swiglu_packed_bwd, {"DC": io_, "H": io_, "DH": io_},
             configs=(_packed_config(),)),
        Spec("cross_entropy._ce_loss_grad_rows", cross_entropy._ce_loss_grad_rows,
             {"LOGITS": io_, "TARGETS": "i64", "LOSS": "fp32", "N_VALID": "i64"},
             configs=(triton.Config({"BLOCK_V": ce_block}, num_warps=8 if ce_block >= 2048 else 4),)),
    ]


def _load_module(path: str):
    spec = importlib.util.spec_from_file_location(f"_compile_check_extra_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def registry(extra: tuple[str, ...] = ()) -> dict[str, Spec]:
    specs = _specs()
    for path in extra:
        specs.extend(_load_module(path).SPECS)
    return {s.name: s for s in specs}


def jit_function(obj) -> JITFunction | None:
    """The JITFunction under an Autotuner / Heuristics wrapper (each has `.fn`), or None."""
    for _ in range(4):
        if isinstance(obj, JITFunction):
            return obj
        obj = getattr(obj, "fn", None)
    return None


def uncovered_kernels(specs: dict[str, Spec]) -> list[str]:
    """Module-level jit functions of lmw_kernels/ that are neither in a spec nor called from another one."""
    covered = {id(s.fn) for s in specs.values()}
    missing = []
    for module in KERNEL_MODULES:
        jitted = {name: jit_function(obj) for name, obj in vars(module).items() if jit_function(obj) is not None}
        for name, fn in jitted.items():
            called = any(re.search(rf"\b{re.escape(name)}\s*\(", other.src) for o, other in jitted.items() if o != name)
            if id(fn) not in covered and not called:
                missing.append(f"{module.__name__.split('.')[-1]}.{name}")
    return missing


def config_label(cfg) -> str:
    meta = ",".join(f"{k}={v}" for k, v in cfg.kwargs.items())
    return f"{meta} w{cfg.num_warps} s{cfg.num_stages}"


def kept_configs(spec: Spec, case: dict, dtype: str) -> set[int]:
    """Indices of the configs the kernel's own `early_config_prune` keeps for this case and dtype (all of them
    without one). It is called as the Autotuner calls it: the positional arguments by name (empty meta tensors
    of the launch dtypes for the pointers) and the constexprs as keywords."""
    configs = spec.all_configs()
    prune = spec.prune or getattr(spec.kernel, "early_config_prune", None)
    if prune is None:
        return set(range(len(configs)))
    nargs = {}
    for param in spec.fn.params:
        name = param.name
        if param.is_constexpr:
            continue
        if name in spec.pointers:
            kind = spec.pointers[name]
            nargs[name] = torch.empty(0, dtype=TORCH_DTYPES[dtype if kind == "io" else kind], device="meta")
        else:
            nargs[name] = 1.0 if name in spec.floats else 1024
    kept = {id(c) for c in prune(configs, nargs, **case)}
    return {i for i, c in enumerate(configs) if id(c) in kept}


def jobs_for(specs: dict[str, Spec], quick: bool) -> tuple[list[tuple], list[dict]]:
    """(spec name, config index, case index, dtype, capability) for every compile, and a row for every config
    the kernel's early_config_prune drops (not compiled: it never launches)."""
    jobs, pruned = [], []
    for name, spec in specs.items():
        cases = [len(spec.cases) - 1 if spec.quick_case < 0 else spec.quick_case] if quick else range(len(spec.cases))
        dtypes = [QUICK_DTYPE if QUICK_DTYPE in spec.dtypes else spec.dtypes[0]] if quick else spec.dtypes
        configs = spec.all_configs()
        for case in cases:
            for dtype in dtypes:
                kept = kept_configs(spec, spec.cases[case][1], dtype)
                for ci, cfg in enumerate(configs):
                    for cap in TARGETS:
                        if ci in kept:
                            jobs.append((name, ci, case, dtype, cap))
                        else:
                            pruned.append({**empty_row(name, cfg, spec.cases[case][0], dtype, cap), "pruned": True})
    return jobs, pruned


def empty_row(name: str, cfg, case_label: str, dtype: str, cap: int) -> dict:
    return {"kernel": name, "config": config_label(cfg), "case": case_label, "dtype": dtype, "target": f"sm_{cap}",
            "shared": None, "regs": None, "spill_stores": None, "spill_loads": None, "stack": None,
            "seconds": 0.0, "cached": False, "pruned": False, "error": None}


def build_source(spec: Spec, cfg, case: dict, dtype: str) -> ASTSource:
    fn = spec.fn
    constexprs = {**case, **cfg.kwargs}
    signature, attrs = {}, {}
    for i, param in enumerate(fn.params):
        name = param.name
        if param.is_constexpr:
            signature[name] = "constexpr"
            if name not in constexprs:
                raise ValueError(f"{spec.name}: no value for constexpr {name}")
        elif name in spec.pointers:
            kind = spec.pointers[name]
            signature[name] = "*" + (dtype if kind == "io" else kind)
        else:
            signature[name] = "fp32" if name in spec.floats else "i32"
        # what the launcher sees for contiguous tensors: 16-byte aligned pointers, strides multiple of 16
        if signature[name].startswith("*") or name.startswith("stride"):
            attrs[(i,)] = [["tt.divisibility", 16]]
    return ASTSource(fn, signature, constexprs, attrs)


_PTXAS = {"regs": r"Used (\d+) registers", "spill_stores": r"(\d+) bytes spill stores",
          "spill_loads": r"(\d+) bytes spill loads", "stack": r"(\d+) bytes stack frame"}


def parse_ptxas(log: str) -> dict:
    out = {}
    for key, pattern in _PTXAS.items():
        m = re.search(pattern, log)
        out[key] = int(m.group(1)) if m else None
    return out


def _cache_key(src: ASTSource, options: dict, cap: int) -> str:
    key = json.dumps([src.hash(), sorted(options.items()), cap, triton.__version__])
    return hashlib.sha256(key.encode()).hexdigest()


def compile_job(job: tuple, extra: tuple[str, ...] = (), cache_dir: str | None = None) -> dict:
    """Compile one (kernel, config, case, dtype, target); returns its table row (error set on failure)."""
    name, ci, case_i, dtype, cap = job
    spec = registry(extra)[name]
    cfg = spec.all_configs()[ci]
    label, case = spec.cases[case_i]
    row = empty_row(name, cfg, label, dtype, cap)
    options = {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
    try:
        src = build_source(spec, cfg, case, dtype)
        cache_file = Path(cache_dir) / f"{_cache_key(src, options, cap)}.json" if cache_dir else None
    except Exception as e:  # noqa: BLE001 - a bad spec or kernel source is a row with an error
        row["error"] = f"{type(e).__name__}: {e}".splitlines()[0][:300]
        return row
    if cache_file is not None and cache_file.exists():
        return {**row, **json.loads(cache_file.read_text()), "cached": True}
    log = io.StringIO()
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(log):  # TRITON_DUMP_PTXAS_LOG prints `ptxas -v` here
            compiled = triton.compile(src, target=GPUTarget("cuda", cap, 32), options=options)
    except Exception as e:  # noqa: BLE001 - every compile failure becomes a row
        msg = str(e).strip().splitlines()
        row["error"] = f"{type(e).__name__}: {msg[0] if msg else ''}"[:300]
        row["seconds"] = round(time.perf_counter() - start, 2)
        return row
    result = {"shared": compiled.metadata.shared, **parse_ptxas(log.getvalue()),
              "seconds": round(time.perf_counter() - start, 2)}
    if cache_file is not None:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache_file.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(result))
        tmp.replace(cache_file)
    return {**row, **result}


def _compile_star(args: tuple) -> dict:
    return compile_job(*args)


def run_jobs(jobs: list[tuple], extra: tuple[str, ...], cache_dir: str | None, workers: int) -> list[dict]:
    args = [(job, extra, cache_dir) for job in jobs]
    if workers <= 1:
        return [compile_job(*a) for a in args]
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        return list(pool.map(_compile_star, args, chunksize=1))


def spills(row: dict) -> int:
    return (row["spill_stores"] or 0) + (row["spill_loads"] or 0)


def over_limit(row: dict) -> bool:
    return row["shared"] is not None and row["shared"] > TARGETS[int(row["target"][3:])]


def spill_note(row: dict) -> str:
    """Why a spilling row stays (SPILL_NOTES), with its live fp32 values per thread."""
    note = SPILL_NOTES.get(row["kernel"].split(".")[-1])
    if note is None:
        return "no note recorded"
    live, what, why = note
    meta = dict(re.findall(r"(\w+)=(\d+)", row["config"]))
    meta = {k: int(v) for k, v in meta.items()}
    threads = 32 * int(re.search(r"\bw(\d+)", row["config"]).group(1))
    head = re.match(r"d(\d+)", row["case"])
    return f"{what} = {live(meta, int(head.group(1)) if head else 0, threads):.0f} fp32 values/thread; {why}"


def status(row: dict) -> str:
    if row["pruned"]:
        return "pruned"
    if row["error"]:
        return "ERROR"
    if over_limit(row):
        return "SMEM>LIMIT"
    return "spills" if spills(row) else "ok"


def format_table(rows: list[dict]) -> str:
    head = ["kernel", "config", "case", "dtype", "target", "smem KB", "regs", "spill B", "s", "status"]
    body = []
    for r in rows:
        smem = "-" if r["shared"] is None else f"{r['shared'] / 1024:.1f}"
        body.append([r["kernel"], r["config"], r["case"], r["dtype"], r["target"], smem,
                     "-" if r["regs"] is None else str(r["regs"]),
                     f"{r['spill_stores'] or 0}/{r['spill_loads'] or 0}", f"{r['seconds']:.1f}" + ("c" * r["cached"]),
                     status(r)])
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    fmt = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()  # noqa: E731
    return "\n".join([fmt(head), fmt(["-" * w for w in widths]), *(fmt(b) for b in body)])


def summarize(rows: list[dict], missing: list[str], wall: float) -> tuple[str, bool]:
    """The summary lines and whether the check passed."""
    errors = [r for r in rows if r["error"]]
    over = [r for r in rows if over_limit(r)]
    spilled = [r for r in rows if not r["error"] and spills(r)]
    built = [r for r in rows if not r["pruned"]]
    lines = [f"{len(built)} compiles ({sum(r['cached'] for r in built)} cached) in {wall:.1f} s wall, "
             f"{len(rows) - len(built)} configs pruned by the kernels' early_config_prune: "
             f"{len(errors)} errors, {len(over)} over the shared-memory limit, {len(spilled)} spilling"]
    peak: dict[tuple[str, str], int] = {}
    for r in rows:
        if r["shared"] is not None:
            key = (r["kernel"], r["target"])
            peak[key] = max(peak.get(key, 0), r["shared"])
    lines.append("max shared memory per kernel: " + "; ".join(
        f"{k} {t} {v / 1024:.0f} KB" for (k, t), v in sorted(peak.items())))
    for r in errors:
        lines.append(f"ERROR {r['kernel']} [{r['config']}] {r['case']} {r['dtype']} {r['target']}: {r['error']}")
    for r in over:
        lines.append(f"SMEM>LIMIT {r['kernel']} [{r['config']}] {r['case']} {r['dtype']} {r['target']}: "
                     f"{r['shared'] / 1024:.0f} KB > {TARGETS[int(r['target'][3:])] / 1024:.0f} KB")
    for r in spilled:
        lines.append(f"spills {r['kernel']} [{r['config']}] {r['case']} {r['dtype']} {r['target']}: "
                     f"{r['spill_stores']}/{r['spill_loads']} B stores/loads, {r['regs']} regs - {spill_note(r)}")
    for name in missing:
        lines.append(f"NO SPEC {name}: a kernel of lmw_kernels/ that compile_check does not compile (add a Spec)")
    return "\n".join(lines), not (errors or over or missing)


@dataclasses.dataclass(frozen=True)
class CompileCheckSettings:
    quick: bool = setting(False, f"one dtype ({QUICK_DTYPE}) and the largest head dim")
    jobs: int = setting(os.cpu_count() or 1, "parallel compiles (all cores)")
    cache_dir: str = setting(str(DEFAULT_CACHE), "per-compile result cache")
    cache: bool = setting(True, "keep a per-compile result cache (--no-cache: compile everything, store nothing)")
    kernel: tuple[str, ...] = setting((), "only kernels whose name contains this (repeatable)", repeatable=True)
    spec_module: tuple[str, ...] = setting((), "a Python file whose SPECS are added (repeatable)", repeatable=True)
    json: str | None = setting(None, "also write the rows and the summary to this JSON file")


def parse_args(argv: list[str] | None = None) -> CompileCheckSettings:
    p = argparse.ArgumentParser(prog="python -m lmw_kernels.compile_check", description=__doc__.splitlines()[0])
    add_config_flags(p, CompileCheckSettings, bool_switches=True)
    return config_from_args(CompileCheckSettings, p.parse_args(argv))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if os.environ.get("TRITON_INTERPRET") == "1":  # kernels imported their interpreter configs: start over
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        argv = sys.argv[1:] if argv is None else argv
        os.execve(sys.executable, [sys.executable, "-m", "lmw_kernels.compile_check", *argv], env)
    # always run ptxas (its -v log gives registers and spills) and keep Triton's own cache out of the way
    os.environ["TRITON_ALWAYS_COMPILE"] = "1"
    os.environ["TRITON_DUMP_PTXAS_LOG"] = "1"
    extra = tuple(str(Path(p).resolve()) for p in args.spec_module)
    specs = registry(extra)
    missing = uncovered_kernels(specs) if not args.kernel else []
    if args.kernel:
        specs = {k: s for k, s in specs.items() if any(f in k for f in args.kernel)}
    jobs, pruned = jobs_for(specs, args.quick)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="compile_check_triton_") as triton_cache:
        os.environ["TRITON_CACHE_DIR"] = triton_cache
        rows = run_jobs(jobs, extra, args.cache_dir if args.cache else None, args.jobs)
    wall = time.perf_counter() - start
    rows = sorted(rows + pruned, key=lambda r: (list(specs).index(r["kernel"]), r["case"], r["dtype"]))
    summary, ok = summarize(rows, missing, wall)
    print(format_table(rows))
    print()
    print(summary)
    print("compile_check: " + ("PASS" if ok else "FAIL"))
    if args.json:
        Path(args.json).write_text(json.dumps({"ok": ok, "triton": triton.__version__, "wall_s": round(wall, 1),
                                               "rows": rows, "summary": summary.splitlines()}, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
