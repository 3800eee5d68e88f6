"""Training-step throughput and MFU with and without our kernels: the end-to-end test of the kernels.

    python -m bench.benchmarks.kernel_e2e [--shape small:1024:16 ...] [--variants reference,none,all,auto]
                               [--cuda-graphs] [--steps 20] [--profile DIR] [--no-record]

Rows per (preset, context, batch), bf16 autocast, torch.compile, fused torch AdamW, a full step (forward,
backward, optimizer), timed with CUDA events: 5 warmup steps, then the median of --steps (p20/p80):
- reference: the plain PyTorch GPT of bench.benchmarks.model_train (nn.Linear, nn.RMSNorm, SDPA);
- none: TransformerLM with `kernels: none` (SDPA attention, PyTorch norm/FFN/loss, all compiled by Inductor);
- all: every Triton kernel (`kernels: all`);
- auto: per op the winner in lmw_kernels/selection.json for this GPU (`kernels: auto`, bench.benchmarks.kernel_select);
- with --cuda-graphs, none and auto again under torch.compile(mode="reduce-overhead") (CUDA graphs).
MFU = tokens/s · flops_per_token / the device's peak bf16 FLOP/s (workbench.hardware.PEAK_FLOPS).
`--profile DIR` writes each variant's top CUDA kernels by time (torch.profiler, 3 steps) to DIR.

``bench.benchmarks.kernel_ops`` runs it as its section (5).
"""

from __future__ import annotations

import contextlib
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from bench.benchmarks.model_train import RefGPT
from bench.tools.results import BenchSettings, Result, finish, parse_bench
from bench.tools.timing import event_times_ms, percentiles, table, timed
from model.core.config import ModelConfig
from model.core.transformer import TransformerLM
from model.train import peak_flops
from workbench.params import setting, usage_error

VARIANTS = ("reference", "none", "all", "auto")


def _step_fn(compiled, x, y, optimizer, autocast, loss_in_model: bool):
    def step():
        with autocast():
            if loss_in_model:
                loss = compiled(x, targets=y)
            else:
                loss = F.cross_entropy(compiled(x).flatten(0, 1).float(), y.flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss
    return step


def build(variant: str, cfg: ModelConfig, device) -> tuple[torch.nn.Module, bool, str]:
    """(model, loss computed inside the model, the switches it runs)."""
    if variant == "reference":
        return RefGPT(cfg), False, "nn.* + SDPA"
    model = TransformerLM(cfg.replace(kernels=variant), device=device)
    c = model.cfg
    return model, True, f"attention={c.attention} norm={c.norm} ffn={c.ffn} loss={c.loss}"


def profile_table(step, path: Path, rows: int = 20) -> None:
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            step()
        torch.cuda.synchronize()
    path.write_text(prof.key_averages().table(sort_by="cuda_time_total", row_limit=rows), encoding="utf-8")


def run_shape(args, preset: str, context: int, batch: int, device, variants) -> list[dict]:
    cuda = device.type == "cuda"
    vocab = args.vocab if cuda else 300
    cfg = ModelConfig.from_preset(preset, vocab_size=vocab, context_length=context)
    flops = cfg.flops_per_token()
    peak = peak_flops(str(device), None)
    gen = torch.Generator().manual_seed(0)
    data = torch.randint(vocab, (batch, context + 1), generator=gen).to(device)
    x, y = data[:, :-1], data[:, 1:]
    autocast = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if cuda else contextlib.nullcontext
    out = []
    for variant, mode in variants:
        torch.manual_seed(0)
        model, loss_in_model, switches = build(variant, cfg, device)
        model = model.to(device).train()
        compiled = torch.compile(model, mode=mode) if args.compile else model
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), fused=cuda)
        step = _step_fn(compiled, x, y, optimizer, autocast, loss_in_model)
        if cuda:
            times = [t / 1000 for t in event_times_ms(step, 5, args.steps)]
        else:
            times = [timed(step, 1, 1, device)]
        p20, med, p80 = percentiles(times)
        name = variant + (" + CUDA graphs" if mode else "")
        if args.profile and cuda:
            args.profile.mkdir(parents=True, exist_ok=True)
            profile_table(step, args.profile / f"e2e_{preset}_{context}_{batch}_{name.replace(' ', '')}.txt")
        tps = x.numel() / med
        out.append({"shape": f"{preset} ctx{context} B{batch}", "variant": name, "switches": switches,
                    "ms": 1000 * med, "p20_ms": 1000 * p20, "p80_ms": 1000 * p80, "tokens_per_s": tps,
                    "mfu": tps * flops / peak if peak else None, "steps": len(times)})
        print(f"  {out[-1]['shape']} {name}: {1000 * med:.1f} ms/step, {tps:,.0f} tokens/s"
              + (f", MFU {100 * out[-1]['mfu']:.1f}%" if peak else "") + f" [{switches}]", flush=True)
        del model, compiled, optimizer, step
        if cuda:
            torch.cuda.empty_cache()
    return out


def bench_end_to_end(args: KernelE2EBench, device: torch.device) -> list[dict]:
    """Each variant of ``args`` at each of its shapes, and their table (bench.benchmarks.kernel_ops makes a
    KernelE2EBench of its shapes for its section (5))."""
    variants = [(v, None) for v in variant_names(args.variants)]
    if args.cuda_graphs:
        variants += [(v, "reduce-overhead") for v in ("none", "auto")]
    results = []
    for preset, context, batch in args.shape:
        results += run_shape(args, preset, context, batch, device, variants)
    rows = []
    for r in results:
        base = next(b for b in results if b["shape"] == r["shape"] and b["variant"] == results[0]["variant"])
        none = next((b for b in results if b["shape"] == r["shape"] and b["variant"] == "none"), None)
        rows.append([r["shape"], r["variant"], f"{r['ms']:.1f}", f"{r['p20_ms']:.1f}-{r['p80_ms']:.1f}",
                     f"{r['tokens_per_s']:,.0f}", "-" if r["mfu"] is None else f"{100 * r['mfu']:.1f}%",
                     f"{r['tokens_per_s'] / base['tokens_per_s']:.2f}x",
                     "-" if none is None else f"{r['tokens_per_s'] / none['tokens_per_s']:.2f}x"])
    cuda = device.type == "cuda"
    print(table(f"(5) training step (forward, backward, fused AdamW), vocab {args.vocab if cuda else 300}, "
                f"{'bf16 autocast' if cuda else 'fp32'}{', torch.compile' if args.compile else ''}",
                ["shape", "model", "ms/step", "p20-p80", "tokens/s", "MFU", f"vs {results[0]['variant']}",
                 "vs none"], rows))
    return results


def _shape(text: str) -> tuple[str, int, int]:
    preset, context, batch = text.split(":")
    return preset, int(context), int(batch)


def variant_names(text: str) -> list[str]:
    return [v.strip() for v in text.split(",") if v.strip()]


@dataclass(frozen=True)
class KernelE2EBench(BenchSettings):
    shape: tuple[tuple[str, int, int], ...] = setting((("small", 1024, 16),), "preset:context:batch, repeatable "
                                                      "(default: small:1024:16)", repeatable=True, parse=_shape)
    variants: str = setting(",".join(VARIANTS), "comma-separated from " + ", ".join(VARIANTS))
    cuda_graphs: bool = setting(False, "also none and auto under mode=reduce-overhead")
    steps: int = setting(20, "timed steps per variant (median, p20/p80)", at_least=10)
    vocab: int = setting(32768, "vocabulary size", at_least=1)
    compile: bool = setting(True, "torch.compile the models (--no-compile: run them eagerly)")
    profile: Path | None = setting(None, "folder for each variant's top-kernels table")


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(KernelE2EBench, argv)
    unknown = sorted(set(variant_names(args.variants)) - set(VARIANTS))
    if unknown or not variant_names(args.variants):
        usage_error(f"--variants {args.variants!r}: expected a comma-separated list from {', '.join(VARIANTS)}")
    if not torch.cuda.is_available():
        print("error: bench.benchmarks.kernel_e2e needs a CUDA GPU", file=sys.stderr)
        return 2
    results = bench_end_to_end(args, torch.device("cuda"))
    rows = []
    for r in results:
        none = next((b for b in results if b["shape"] == r["shape"] and b["variant"] == "none"), None)
        rows.append(Result(f"{r['shape']}/{r['variant']}", "tokens_per_s", r["tokens_per_s"], "tokens/s",
                           "none" if none else None, none["tokens_per_s"] if none else None,
                           repeats=r["steps"], extra={"mfu": r["mfu"], "ms": r["ms"], "p20_ms": r["p20_ms"],
                                                      "p80_ms": r["p80_ms"], "switches": r["switches"]}))
        if r["mfu"] is not None:
            rows.append(Result(f"{r['shape']}/{r['variant']}", "mfu", 100 * r["mfu"], "%", repeats=r["steps"]))
    finish("gpu_kernel_e2e", rows, args)
    # the summary last: bench.tools.gpu_check keeps a part's last line
    print(f"median step times: {statistics.median(r['ms'] for r in results):.1f} ms over {len(results)} variants")
    return 0


if __name__ == "__main__":
    sys.exit(main())
