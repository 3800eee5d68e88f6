"""Our Triton kernels against the strongest PyTorch baselines, in one run, with ratios.

    PYTHONPATH=. python -m bench.benchmarks.kernel_ops            # the full GPU run (docs/benchmarks/kernels.md)
    PYTHONPATH=. python -m bench.benchmarks.kernel_ops --quick    # a subset, < 5 minutes on an H100
    TRITON_INTERPRET=1 python -m bench.benchmarks.kernel_ops --smoke   # tiny shapes on CPU: checks the code paths only

(1) FlashAttention-2, bf16, causal, batch 1, 16 heads, d_head 64/128, seq 1k…16k: forward and
    forward+backward vs SDPA (flash backend) and naive PyTorch. FLOPs: 4·B·H·S²·d forward, halved
    when causal; backward 2.5x forward.
(2) RMSNorm forward+backward at 4096 × 1k…8k, bf16, vs eager and torch.compile'd PyTorch: GB/s of
    the bytes a fused kernel must move (x, y, dy, x again, dx) and the share of HBM bandwidth.
(3) SwiGLU activation forward+backward vs eager and compiled (bytes: a, b, c; dc, a, b, da, db).
(4) LM head + cross-entropy forward+backward, fused/chunked vs eager: ms and peak memory.
(5) End to end (bench/benchmarks/kernel_e2e.py): training-step tokens/s and MFU of the small/medium presets.
GPU times are medians of triton.testing.do_bench (CUDA events, L2 flushed between runs).
"""

from __future__ import annotations

import functools
import math
import statistics
import sys
import time
from dataclasses import dataclass
from types import SimpleNamespace

import torch
import torch.nn.functional as F
import triton
import triton.testing
from torch.nn.attention import SDPBackend, sdpa_kernel

from bench.benchmarks.kernel_e2e import KernelE2EBench, bench_end_to_end
from bench.tools.timing import cuda_graph_ms, peak_memory_mb, table
from lmw_kernels.cross_entropy import fused_linear_cross_entropy
from lmw_kernels.flash_attention import flash_attention, naive_attention
from lmw_kernels.rmsnorm import rms_norm, rms_norm_torch
from lmw_kernels.swiglu import swiglu
from workbench.params import parse_flags, setting, usage_error

HBM_BYTES_PER_S = {"H200": 4.8e12, "H100 PCIe": 2.0e12, "H100": 3.35e12, "A100": 2.0e12}  # first match wins


def bench_ms(fn, device: torch.device, grad_to_none=None, rep_ms: int = 100) -> float:
    """Median milliseconds of ``fn()``; gradients of ``grad_to_none`` reset between calls."""
    if device.type == "cuda":
        return triton.testing.do_bench(fn, warmup=25, rep=rep_ms, grad_to_none=grad_to_none, return_mode="median")
    fn()
    times = []
    for _ in range(3):
        for t in grad_to_none or ():
            t.grad = None
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def _try(fn):
    """fn() or None when it runs out of memory (naive attention at long sequences)."""
    try:
        return fn()
    except torch.OutOfMemoryError:
        torch.cuda.empty_cache()
        return None


def _fmt(value, spec: str = ".2f", none: str = "OOM") -> str:
    return none if value is None else format(value, spec)


def _ratio(numerator, denominator, spec: str = ".2f") -> str:
    return "-" if not numerator or not denominator else f"{numerator / denominator:{spec}}x"


# ---- (1) attention -------------------------------------------------------------------------------

def bench_attention(args, device, dtype) -> list[list]:
    def sdpa_flash(q, k, v, causal):
        backend = SDPBackend.FLASH_ATTENTION if device.type == "cuda" else SDPBackend.MATH
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    impls = {"triton": flash_attention, "sdpa-flash": sdpa_flash, "naive": naive_attention}
    rows = []
    for d in args.attn_dims:
        for seq in args.attn_seqs:
            shape = (1, args.attn_heads, seq, d)
            q, k, v = (torch.randn(shape, device=device, dtype=dtype, requires_grad=True) for _ in range(3))
            grad_out = torch.randn(shape, device=device, dtype=dtype)
            flops = 4 * shape[0] * shape[1] * seq * seq * d / 2  # causal forward
            times = {}
            for name, fn in impls.items():
                if name == "naive" and seq > args.naive_max_seq:
                    times[name] = (None, None)
                    continue

                def forward(fn=fn, q=q, k=k, v=v):
                    with torch.no_grad():
                        fn(q, k, v, True)

                def forward_backward(fn=fn, q=q, k=k, v=v, grad_out=grad_out):
                    fn(q, k, v, True).backward(grad_out)

                times[name] = (_try(lambda forward=forward: bench_ms(forward, device)),
                               _try(lambda step=forward_backward, qkv=(q, k, v): bench_ms(step, device,
                                                                                          grad_to_none=list(qkv))))
            sf, sfb = times["sdpa-flash"]
            for name, (fwd, fwd_bwd) in times.items():
                rows.append([f"d{d} S{seq}", name, _fmt(fwd), _fmt(fwd and flops / fwd / 1e9, ".0f"),
                             _fmt(fwd_bwd), _fmt(fwd_bwd and 3.5 * flops / fwd_bwd / 1e9, ".0f"),
                             _ratio(sf, fwd), _ratio(sfb, fwd_bwd)])
    print(table(f"(1) FlashAttention-2, {dtype}, causal, batch 1, {args.attn_heads} heads "
                "(ratios: SDPA-flash time / this time)",
                ["shape", "impl", "fwd ms", "fwd TFLOP/s", "fwd+bwd ms", "fwd+bwd TFLOP/s", "fwd vs sdpa",
                 "fwd+bwd vs sdpa"], rows))
    return rows


# ---- (2) RMSNorm, (3) SwiGLU: memory-bound, reported in GB/s ------------------------------------

def _hbm(device) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((bw for key, bw in HBM_BYTES_PER_S.items() if key in name), None)


def _bandwidth_rows(label: str, impls: dict, make_inputs, bytes_moved: int, device, hbm) -> list[list]:
    """ms, GB/s and share of HBM per implementation, from launches as they come (do_bench) and replayed from a
    CUDA graph (the kernels alone: at small sizes the launches, not the bytes, set the pace)."""
    inputs, grad_out = make_inputs()
    leaves = [t for t in inputs if torch.is_tensor(t) and t.requires_grad]
    rows, eager_ms = [], None
    for name, fn in impls.items():
        ms = bench_ms(lambda fn=fn: fn(*inputs).backward(grad_out), device, grad_to_none=leaves)
        graph_ms = cuda_graph_ms(lambda fn=fn: torch.autograd.grad(fn(*inputs), leaves, grad_out)) \
            if device.type == "cuda" else None
        eager_ms = ms if name == "eager" else eager_ms
        gbs = bytes_moved / ms / 1e6
        best = min(ms, graph_ms or ms)
        rows.append([label, name, f"{ms:.3f}", _fmt(graph_ms, ".3f", "-"), f"{gbs:,.0f}",
                     f"{100 * bytes_moved / best / 1e6 * 1e9 / hbm:.0f}%" if hbm else "-", ms])
    for row in rows:
        row[-1] = f"{eager_ms / row[-1]:.2f}x"
    return rows


def _bandwidth_section(title: str, eager, fused, cases: list, args, device) -> list[list]:
    """Rows for every (label, make_inputs, bytes moved) case: fused vs eager vs compiled eager."""
    impls = {"triton": fused, "eager": eager}
    if args.compile:
        impls["compiled"] = torch.compile(eager)
    rows, hbm = [], _hbm(device)
    for label, make_inputs, bytes_moved in cases:
        rows += _bandwidth_rows(label, impls, make_inputs, bytes_moved, device, hbm)
    print(table(f"{title} (HBM {_fmt(hbm and hbm / 1e12, '.2f', '?')} TB/s)",
                ["shape", "impl", "ms", "graph ms", "GB/s", "of HBM (best)", "vs eager"], rows))
    return rows


def bench_rmsnorm(args, device, dtype) -> list[list]:
    def make_inputs(hidden):
        x = torch.randn(args.norm_rows, hidden, device=device, dtype=dtype, requires_grad=True)
        w = (1 + 0.1 * torch.randn(hidden, device=device, dtype=dtype)).requires_grad_()
        return (x, w, 1e-5), torch.randn_like(x)

    elt, rows = torch.finfo(dtype).bits // 8, args.norm_rows
    cases = [(f"{rows}x{h}", lambda h=h: make_inputs(h), 5 * rows * h * elt) for h in args.norm_hidden]
    return _bandwidth_section(f"(2) RMSNorm forward+backward, {dtype}", rms_norm_torch, rms_norm, cases, args, device)


def bench_swiglu(args, device, dtype) -> list[list]:
    def eager(a, b):
        return F.silu(a) * b

    def make_inputs(width):
        a, b = (torch.randn(args.swiglu_rows, width, device=device, dtype=dtype, requires_grad=True)
                for _ in range(2))
        return (a, b), torch.randn_like(a)

    elt, rows = torch.finfo(dtype).bits // 8, args.swiglu_rows
    cases = [(f"{rows}x{w}", lambda w=w: make_inputs(w), 8 * rows * w * elt) for w in args.swiglu_width]
    return _bandwidth_section(f"(3) SwiGLU activation silu(a)·b forward+backward, {dtype}", eager, swiglu, cases,
                              args, device)


# ---- (4) LM head + cross-entropy ----------------------------------------------------------------

def bench_cross_entropy(args, device, dtype) -> list[list]:
    def eager(h, w, y):
        return F.cross_entropy((h @ w.T).float(), y)

    rows = []
    for d_model, vocab in args.ce_shapes:
        h = torch.randn(args.ce_tokens, d_model, device=device, dtype=dtype, requires_grad=True)
        w = (torch.randn(vocab, d_model, device=device, dtype=dtype) / math.sqrt(d_model)).requires_grad_()
        y = torch.randint(0, vocab, (args.ce_tokens,), device=device)
        result = {}
        fused = functools.partial(fused_linear_cross_entropy, backend="triton")
        for name, fn in (("fused", fused), ("eager", eager)):
            def run(fn=fn, h=h, w=w, y=y):
                fn(h, w, y).backward()
            ms = _try(lambda run=run, h=h, w=w: bench_ms(run, device, grad_to_none=[h, w]))
            h.grad = w.grad = None
            result[name] = (ms, _try(lambda run=run: peak_memory_mb(run, device)))
            h.grad = w.grad = None
        ems, emem = result["eager"]
        for name, (ms, mem) in result.items():
            rows.append([f"{args.ce_tokens}x{d_model}, V={vocab}", name, _fmt(ms), _fmt(mem, ",.0f", "-"),
                         _ratio(ems, ms), _ratio(emem, mem, ".1f")])
    print(table(f"(4) LM head + cross-entropy forward+backward, {dtype} (memory: peak above the inputs)",
                ["shape", "impl", "ms", "peak MiB", "speed vs eager", "memory saved"], rows))
    return rows


# ---- CLI -----------------------------------------------------------------------------------------

SECTIONS = ("attention", "rmsnorm", "swiglu", "ce", "e2e")


def configure(args: KernelOpsBench) -> SimpleNamespace:
    """Shapes per mode: full (the issue's grid), quick (its corners), smoke (CPU interpreter)."""
    run = SimpleNamespace(compile=args.compile)
    run.attn_heads, run.attn_dims, run.naive_max_seq = 16, (64, 128), 8192
    run.attn_seqs = (1024, 2048, 4096, 8192, 16384)
    run.norm_rows, run.norm_hidden = 4096, (1024, 2048, 4096, 8192)
    run.swiglu_rows, run.swiglu_width = 16384, (2048, 4096)
    run.ce_tokens, run.ce_shapes = 8192, ((768, 32768), (1024, 50304))
    run.e2e = (("small", 1024, 16), ("small", 2048, 8), ("medium", 1024, 16), ("medium", 2048, 8))
    if args.quick:
        # the acceptance shapes: S1k (the model's) and S16k at d64; the norm at 1k and 8k hidden
        run.attn_seqs, run.attn_dims = (1024, 16384), (64,)
        run.norm_hidden, run.swiglu_width = (1024, 8192), (4096,)
        run.ce_shapes, run.e2e = ((768, 32768),), (("small", 1024, 16),)
    if args.smoke:
        run.attn_heads, run.attn_dims, run.attn_seqs, run.naive_max_seq = 2, (16,), (40,), 64
        run.norm_rows, run.norm_hidden, run.swiglu_rows, run.swiglu_width = 8, (48,), 8, (40,)
        run.ce_tokens, run.ce_shapes, run.e2e = 16, ((16, 300),), (("nano", 32, 2),)
        run.compile = False
    return run


@dataclass(frozen=True)
class KernelOpsBench:
    quick: bool = setting(False, "a subset of shapes: < 5 minutes on an H100")
    smoke: bool = setting(False, "tiny shapes on CPU (TRITON_INTERPRET=1): code paths only")
    only: str = setting(",".join(SECTIONS), f"comma-separated sections of {SECTIONS}")
    compile: bool = setting(True, "the torch.compile baselines and compiled e2e (--no-compile: skip them)")


def main(argv: list[str] | None = None) -> int:
    args = parse_flags(KernelOpsBench, argv, prog="python -m bench.benchmarks.kernel_ops",
                       description=__doc__.split("\n\n")[0])
    sections = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        usage_error(f"--only: unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    cuda = torch.cuda.is_available()
    if not cuda and not args.smoke:
        print("error: the kernel benchmark needs a CUDA GPU (use --smoke with TRITON_INTERPRET=1 to check the "
              "code paths on CPU)", file=sys.stderr)
        return 2
    run = configure(args)
    device = torch.device("cuda" if cuda else "cpu")
    dtype = torch.bfloat16 if cuda else torch.float32  # the interpreter computes bf16 wrongly
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
    name = torch.cuda.get_device_name(device) if cuda else "CPU (Triton interpreter)"
    print(f"device: {name}; torch {torch.__version__}; triton {triton.__version__}; {dtype}")
    start = time.time()
    benches = {"attention": bench_attention, "rmsnorm": bench_rmsnorm, "swiglu": bench_swiglu,
               "ce": bench_cross_entropy}
    for section in sections:
        if section == "e2e":
            bench_end_to_end(KernelE2EBench(shape=run.e2e, compile=run.compile), device)
        else:
            benches[section](run, device, dtype)
        sys.stdout.flush()
    print(f"\ntotal {time.time() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
