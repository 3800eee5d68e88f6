"""Per op, at a model's shapes on this GPU: our Triton kernel against what the compiled model would run
otherwise; the winners go into lmw_kernels/selection.json, which `kernels: auto` reads.

    python -m bench.benchmarks.kernel_select [--preset small --context 1024 --batch 16 --vocab 32768]
                                  [--attention-sweep] [--table PATH] [--out DIR] [--no-record]

Each op forward + backward at the model's training shapes (batch x context rows), with the model's dtypes
under bf16 autocast (an fp32 residual stream with bf16 branch outputs; bf16 matmul inputs):

  norm       the block's residual add + RMSNorm: ours `add_rms_norm` vs `x + d; rms_norm_ref` eager and compiled
  ffn        SwiGLU's silu(a)·b: ours vs eager and compiled
  loss       LM head + cross-entropy: ours fused/chunked vs the model's `cross_entropy(h Wᵀ)` eager and compiled
             (peak memory too)
  projections  Q, K, V (to heads) and W1, W3 (to silu(a)·b) of one block: one GEMM per input (fused_projections)
             vs five, eager and compiled, the layout costs around the GEMMs included
  attention  causal: ours vs SDPA's default backend (named in the output) and SDPA on cuDNN and on flash

Timing: CUDA events around each call, 5 warmup calls, median of 20 with p20/p80 (bench.tools.timing); with
--cuda-graphs also the same call replayed from a CUDA graph where it can be captured. Ours is timed eager and
compiled (the launch as torch.compile sees it) and the better one counts. The choice is ours only where ours beats every
alternative's median. `--attention-sweep` also times every FlashAttention candidate config per pass
(lmw_kernels/flash_attention.CANDIDATES) at the training shape and at S16k d64, and writes attention_sweep.json
(the source of flash_attention.TUNED).
"""

from __future__ import annotations

import contextlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from bench.tools.results import BenchSettings, Result, finish, parse_bench
from bench.tools.timing import cuda_graph_ms, event_times_ms, format_table, peak_memory_mb, percentiles
from lmw_kernels import flash_attention as fa
from lmw_kernels import selection
from lmw_kernels.cross_entropy import fused_linear_cross_entropy
from lmw_kernels.rmsnorm import add_rms_norm
from lmw_kernels.swiglu import swiglu, swiglu_packed
from model.core.config import ModelConfig
from model.core.layers import fused_linear, rms_norm_ref, silu_mul
from model.core.loss import cross_entropy
from workbench.params import setting

WARMUP, ITERS = 5, 20


def _outputs(forward, inputs: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
    outs = forward(*inputs)
    return outs if isinstance(outs, tuple) else (outs,)


def _grad_fn(forward, inputs: list[torch.Tensor]):
    """A callable running forward + backward (torch.autograd.grad: fresh gradients, nothing accumulates), with
    upstream gradients drawn once."""
    grads = [torch.ones_like(o) if o.dim() == 0 else 1e-2 * torch.randn_like(o) for o in _outputs(forward, inputs)]

    def step():
        return torch.autograd.grad(_outputs(forward, inputs), inputs, grads)
    return step


def _time(fn, graphs: bool = False) -> dict:
    p20, p50, p80 = percentiles(event_times_ms(fn, WARMUP, ITERS))
    return {"ms": p50, "p20": p20, "p80": p80, "graph_ms": cuda_graph_ms(fn, WARMUP, ITERS) if graphs else None}


class Shapes:
    """The model's tensors at its training shapes (batch x context rows), drawn from one seeded generator."""

    def __init__(self, cfg: ModelConfig, batch: int, device):
        self.cfg, self.batch, self.device = cfg, batch, device
        self.n, self.d = batch * cfg.context_length, cfg.d_model
        self.g = torch.Generator(device=device).manual_seed(0)

    def rand(self, *shape, dtype=torch.bfloat16, scale=1.0) -> torch.Tensor:
        return (torch.randn(*shape, generator=self.g, device=self.device) * scale).to(dtype).requires_grad_()


def _heads(t: torch.Tensor, d_head: int) -> torch.Tensor:
    B, T, _ = t.shape
    return t.view(B, T, -1, d_head).transpose(1, 2)


def _projection_variants(d_head: int):
    """(separate, fused): the block's projections as the model runs them without and with fused_projections:
    Q, K, V split into heads and silu(a)·b; fused, one GEMM for Q, K, V and one for the packed [a, b]."""
    def separate(x, wq, wk, wv, w1, w3):
        return (*(_heads(x @ w.T, d_head) for w in (wq, wk, wv)), silu_mul(x @ w1.T, x @ w3.T))

    def fused(x, wq, wk, wv, w1, w3):
        q, k, v = fused_linear(x, wq, wk, wv).split([wq.shape[0], wk.shape[0], wv.shape[0]], dim=-1)
        return (*(_heads(t, d_head) for t in (q, k, v)), silu_mul(*fused_linear(x, w1, w3).chunk(2, dim=-1)))

    return separate, fused


def projections_case(sh: Shapes, packed_ffn: bool):
    """Both ways including what the layout costs around the GEMMs (the heads' views and, backward, the
    gradients' concatenation into the fused GEMM's layout): in the model that, not the GEMMs, decides."""
    kv = sh.cfg.n_kv_heads * sh.cfg.d_head
    weights = [sh.rand(width, sh.d, scale=sh.d ** -0.5) for width in (sh.d, kv, kv, sh.cfg.d_ff, sh.cfg.d_ff)]
    x = sh.rand(sh.batch, sh.cfg.context_length, sh.d)
    separate, fused = _projection_variants(sh.cfg.d_head)
    return fused, {"eager": separate, "inductor": torch.compile(separate)}, [x, *weights]


def _add_norm_ours(x, delta, w):
    return add_rms_norm(x, delta, w, 1e-5, torch.bfloat16)


def _add_norm_reference(x, delta, w):
    s = x + delta
    return s, rms_norm_ref(s, w).to(torch.bfloat16)


def norm_case(sh: Shapes, packed_ffn: bool):
    """An fp32 residual stream plus a bf16 branch output; the norm feeds a bf16 matmul (autocast)."""
    w = (1 + 0.1 * torch.randn(sh.d, generator=sh.g, device=sh.device)).requires_grad_()
    inputs = [sh.rand(sh.n, sh.d, dtype=torch.float32), sh.rand(sh.n, sh.d), w]
    return _add_norm_ours, {"eager": _add_norm_reference, "inductor": torch.compile(_add_norm_reference)}, inputs


def _packed_reference(h):
    return silu_mul(*h.chunk(2, dim=-1))


def ffn_case(sh: Shapes, packed_ffn: bool):
    """With fused projections the activation reads the fused GEMM's packed [a, b] output: measured in that form."""
    if packed_ffn:
        return (swiglu_packed, {"eager": _packed_reference, "inductor": torch.compile(_packed_reference)},
                [sh.rand(sh.n, 2 * sh.cfg.d_ff)])
    return swiglu, {"eager": silu_mul, "inductor": torch.compile(silu_mul)}, [sh.rand(sh.n, sh.cfg.d_ff) for _ in "ab"]


def loss_case(sh: Shapes, packed_ffn: bool):
    targets = torch.randint(sh.cfg.vocab_size, (sh.n,), generator=sh.g, device=sh.device)

    def reference(h, w):
        return cross_entropy(h @ w.T, targets)

    def ours(h, w):
        return fused_linear_cross_entropy(h, w, targets)

    inputs = [sh.rand(sh.n, sh.d), sh.rand(sh.cfg.vocab_size, sh.d, scale=0.02)]
    return ours, {"eager": reference, "inductor": torch.compile(reference)}, inputs


def _sdpa_on(backend):
    def attend(q, k, v):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return attend


def _sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def _flash(q, k, v):
    return fa.flash_attention(q, k, v, True)


def attention_case(sh: Shapes, packed_ffn: bool):
    qkv = [sh.rand(sh.batch, sh.cfg.n_heads, sh.cfg.context_length, sh.cfg.d_head) for _ in range(3)]
    return _flash, {"sdpa": _sdpa, "sdpa-cudnn": _sdpa_on(SDPBackend.CUDNN_ATTENTION),
                    "sdpa-flash": _sdpa_on(SDPBackend.FLASH_ATTENTION)}, qkv


# in the order they are measured: the projections' choice decides the form the FFN is measured in
CASES = {"projections": projections_case, "norm": norm_case, "ffn": ffn_case, "loss": loss_case,
         "attention": attention_case}


def sdpa_default_backend(q, k, v) -> str:
    try:
        return SDPBackend(torch._fused_sdp_choice(q, k, v, is_causal=True)).name
    except Exception as exc:  # noqa: BLE001 - private API: report, never fail on it
        return f"unknown ({type(exc).__name__})"


def measure_ops(cfg: ModelConfig, batch: int, device, graphs: bool = False) -> tuple[dict, list[list]]:
    keys = selection.shape_keys(cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.vocab_size, cfg.context_length,
                                cfg.n_kv_heads * cfg.d_head)
    entries, rows = {}, []
    shapes = Shapes(cfg, batch, device)
    for op, case in CASES.items():
        fused = entries.get("projections", {}).get(keys["projections"], {}).get("choice", False)
        ours, alternatives, inputs = case(shapes, fused)
        timings = {"ours": _time(_grad_fn(ours, inputs), graphs),
                   "ours-compiled": _time(_grad_fn(torch.compile(ours), inputs), graphs)}
        for name, fn in alternatives.items():
            try:
                timings[name] = _time(_grad_fn(fn, inputs), graphs)
            except RuntimeError as exc:  # e.g. a backend SDPA cannot run here
                print(f"  {op}/{name}: not run ({str(exc).splitlines()[0][:120]})")
        if op == "loss":
            for name, fn in (("ours", ours), ("eager", alternatives["eager"])):
                timings[name]["peak_mb"] = peak_memory_mb(_grad_fn(fn, inputs), device)
        ours_ms = min(timings["ours"]["ms"], timings["ours-compiled"]["ms"])
        alternative = min((t["ms"], name) for name, t in timings.items() if not name.startswith("ours"))
        winner = "ours" if ours_ms < alternative[0] else alternative[1]
        entry = {"choice": selection.OURS[op] if winner == "ours" else selection.NONE[op], "winner": winner,
                 "speedup_vs_best_alternative": alternative[0] / ours_ms, "best_alternative": alternative[1],
                 "batch": batch, "timings": timings}
        if op == "attention":
            entry["sdpa_default_backend"] = sdpa_default_backend(*inputs)
        if op == "ffn":
            entry["form"] = "packed [a, b] (fused projections)" if fused else "separate a, b"
        del inputs, alternatives
        torch.cuda.empty_cache()
        entries.setdefault(op, {})[keys[op]] = entry
        for name, t in timings.items():
            graph = "-" if t["graph_ms"] is None else f"{t['graph_ms']:.3f}"
            rows.append([f"{op} {keys[op]}", name, f"{t['ms']:.3f}", f"{t['p20']:.3f}-{t['p80']:.3f}", graph,
                         f"{t.get('peak_mb', float('nan')):.0f}" if "peak_mb" in t else "",
                         f"<- {entry['choice']}" if (name.startswith("ours") and winner == "ours")
                         or name == winner else ""])
    return entries, rows


def _pass_fn(pass_: str, cfg: dict, tensors: tuple):
    q, k, v, o, lse, do = tensors
    if pass_ == "fwd":
        return lambda: fa.flash_forward_triton(q, k, v, True, cfg)
    return lambda: fa.flash_backward_triton(q, k, v, o, lse, do, True, {pass_: cfg})


def attention_sweep(device) -> dict:
    """Median fwd and bwd ms of every candidate config per pass, at the training shape and at S16k."""
    shapes = [(16, 12, 1024, 64), (1, 16, 16384, 64)]
    out = {}
    for shape in shapes:
        q, k, v = (torch.randn(shape, device=device, dtype=torch.bfloat16) for _ in range(3))
        do = torch.randn(shape, device=device, dtype=torch.bfloat16)
        o, lse = fa.flash_forward_triton(q, k, v, True)
        label = "B{}_H{}_S{}_d{}".format(*shape)
        out[label] = {}
        for pass_, configs in fa.CANDIDATES.items():
            times = []
            for c in configs:
                cfg = {**c.kwargs, "num_warps": c.num_warps, "num_stages": c.num_stages}
                fn = _pass_fn(pass_, cfg, (q, k, v, o, lse, do))
                try:
                    ms = percentiles(event_times_ms(fn, 3, 10))[1]
                except Exception as exc:  # noqa: BLE001 - e.g. out of shared memory: the config is skipped
                    print(f"  {label} {pass_} {cfg}: {type(exc).__name__}")
                    continue
                times.append((ms, [cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["num_warps"], cfg["num_stages"]]))
            times.sort()
            out[label][pass_] = times
            print(f"  {label} {pass_}: best {times[0][1]} {times[0][0]:.3f} ms, worst {times[-1][0]:.3f} ms")
        out[label]["fwd_bwd_ms"] = _fwd_bwd_ms(out[label], (q, k, v, do))
        print(f"  {label} fwd+bwd: " + ", ".join(f"{n} {ms:.3f} ms" for n, ms in out[label]["fwd_bwd_ms"].items()))
    return out


def _fwd_bwd_ms(swept: dict, tensors: tuple) -> dict:
    """Forward + backward with the best config of each pass, against SDPA's default backend and its flash one."""
    q, k, v, do = (t.detach().requires_grad_(i < 3) for i, t in enumerate(tensors))
    best = {p: dict(zip(("BLOCK_M", "BLOCK_N", "num_warps", "num_stages"), swept[p][0][1], strict=True))
            for p in fa.CANDIDATES}

    def ours():
        out, lse = fa.flash_forward_triton(q, k, v, True, best["fwd"])
        return fa.flash_backward_triton(q, k, v, out, lse, do, True, {"dq": best["dq"], "dkdv": best["dkdv"]})

    def sdpa_with(backend):
        def run():
            ctx = sdpa_kernel(backend) if backend is not None else contextlib.nullcontext()
            with ctx:
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return torch.autograd.grad(out, (q, k, v), do)
        return run

    result = {"ours (best configs)": ours, "sdpa (default)": sdpa_with(None),
              "sdpa-flash": sdpa_with(SDPBackend.FLASH_ATTENTION)}
    return {name: percentiles(event_times_ms(fn, 3, 10))[1] for name, fn in result.items()}


@dataclass(frozen=True)
class ShapeSettings:
    """--preset, --context, --batch, --vocab: the training shape a kernel bench runs the model at."""

    preset: str = setting("small", "model preset (model.core.config.PRESETS)")
    context: int = setting(1024, "tokens per sequence", at_least=1)
    batch: int = setting(16, "sequences per step", at_least=1)
    vocab: int = setting(32768, "vocabulary size (the LM head)", at_least=1)


@dataclass(frozen=True)
class KernelSelectBench(ShapeSettings, BenchSettings):
    table: Path | None = setting(None, "selection table to update (default: lmw_kernels/selection.json)")
    out: Path = setting(Path("data/gpu_check"), "folder for kernel_select.json and attention_sweep.json")
    attention_sweep: bool = setting(False, "time every FlashAttention candidate config")
    cuda_graphs: bool = setting(False, "also time each call replayed from a CUDA graph")


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(KernelSelectBench, argv)
    if not torch.cuda.is_available():
        print("error: bench.benchmarks.kernel_select needs a CUDA GPU", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    name = torch.cuda.get_device_name(device)
    cfg = ModelConfig.from_preset(args.preset, vocab_size=args.vocab, context_length=args.context)
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"device: {name}; torch {torch.__version__}; {args.preset} context {args.context} batch {args.batch}")
    entries, rows = measure_ops(cfg, args.batch, device, args.cuda_graphs)
    print(format_table(["op", "impl", "median ms", "p20-p80", "CUDA graph ms", "peak MB", "choice"], rows))
    path = selection.update(name, entries, args.table)
    (args.out / "kernel_select.json").write_text(json.dumps({name: entries}, indent=1))
    results = []
    for op, by_shape in entries.items():
        for key, e in by_shape.items():
            best_ours = min(("ours", "ours-compiled"), key=lambda n: e["timings"][n]["ms"])
            t, alt = e["timings"][best_ours], e["timings"][e["best_alternative"]]
            results.append(Result(f"{op} {key} B{args.batch}", "fwd_bwd_ms", t["ms"], "ms",
                                  e["best_alternative"], alt["ms"], alt["ms"] / t["ms"], ITERS, t["p20"], t["ms"],
                                  t["p80"], extra={"choice": e["choice"], "ours": best_ours,
                                                   "graph_ms": t["graph_ms"]}))
    finish("gpu_kernel_select", results, args, show=False)  # its table is printed above
    print(f"selection table: {path}")  # the summary (or the sweep's) last: bench.tools.gpu_check keeps the last line
    if args.attention_sweep:
        (args.out / "attention_sweep.json").write_text(json.dumps(attention_sweep(device), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
