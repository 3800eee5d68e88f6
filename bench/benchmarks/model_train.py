"""Throughput benchmarks for the from-scratch TransformerLM, in one run and one config.

(a) Training tokens/s (forward + ``loss.backward()``, no optimizer) of TransformerLM with
    attention='naive' and 'sdpa' against ``RefGPT``: the same Llama-layout shapes written with
    plain PyTorch modules (nn.Linear, nn.Embedding, nn.RMSNorm, F.scaled_dot_product_attention).
    On CUDA: bf16 autocast, optional torch.compile, and MFU = tokens/s · flops_per_token / peak.
(b) Generation tokens/s with and without the KV cache (greedy, 32-token random prompts,
    batch 1 and 8) and the speedup of the cache.

Each number is the median over timed iterations after warmup iterations.

    python -m bench.benchmarks.model_train                        # CPU: preset micro, context 256, batch 8
    python -m bench.benchmarks.model_train --device cuda --compile  # CUDA: preset small, context 1024, bf16
    python -m bench.benchmarks.model_train --distributed          # DDP/ZeRO/FSDP memory and step time
                                                                  # (bench.benchmarks.distributed)
    python -m bench.benchmarks.model_train --variants             # MoE, GQA, checkpointing, speculative, int8
                                                                  # (bench.benchmarks.variants)
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import time
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from bench.benchmarks.distributed import main as distributed_main
from bench.benchmarks.variants import main as variants_main
from bench.tools.results import BenchSettings, Result, finish, parse_bench
from bench.tools.timing import format_table
from model.core.config import ModelConfig
from model.core.transformer import TransformerLM
from model.inference.generate import generate
from model.train import peak_flops
from workbench.params import invoked_as, setting, usage_error

# ---- the plain-PyTorch reference ----------------------------------------------------------------

def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate consecutive pairs (x[2i], x[2i+1]); cos/sin (T, d_head/2)."""
    x1, x2 = x[..., 0::2].float(), x[..., 1::2].float()
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2).to(x.dtype)


class RefBlock(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        d, self.n_heads = cfg.d_model, cfg.n_heads
        self.ln1, self.ln2 = nn.RMSNorm(d, eps=cfg.norm_eps), nn.RMSNorm(d, eps=cfg.norm_eps)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.w1, self.w3 = nn.Linear(d, cfg.d_ff, bias=False), nn.Linear(d, cfg.d_ff, bias=False)
        self.w2 = nn.Linear(cfg.d_ff, d, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        h = self.ln1(x)
        q, k, v = (proj(h).view(B, T, self.n_heads, -1).transpose(1, 2) for proj in (self.q, self.k, self.v))
        att = F.scaled_dot_product_attention(rope(q, cos, sin), rope(k, cos, sin), v, is_causal=True)
        x = x + self.o(att.transpose(1, 2).reshape(B, T, d))
        h = self.ln2(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class RefGPT(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(RefBlock(cfg) for _ in range(cfg.n_layers))
        self.norm = nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        inv_freq = cfg.rope_theta ** (-torch.arange(0, cfg.d_head, 2, dtype=torch.float64) / cfg.d_head)
        angles = torch.arange(cfg.context_length, dtype=torch.float64)[:, None] * inv_freq
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        T = idx.shape[1]
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x, self.cos[:T], self.sin[:T])
        return self.head(self.norm(x))


def _interleaved_steps(steps: list, warmup: int, iters: int, device: torch.device) -> list[list[float]]:
    """Seconds per call of each of ``steps``, taking turns (one call each per round) so host drift hits all alike."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _ in range(warmup):
        for step in steps:
            step()
    times = [[] for _ in steps]
    for _ in range(iters):
        for step, out in zip(steps, times, strict=True):
            sync()
            start = time.perf_counter()
            step()
            sync()
            out.append(time.perf_counter() - start)
    return times


def _rate(name: str, metric: str, amount: float, times: list[float], base_name=None, base_times=None) -> Result:
    """``amount`` per second: median over ``times``, its min-max, and the ratio to the baseline's median."""
    rates = [amount / t for t in times]
    base = statistics.median(amount / t for t in base_times) if base_times else None
    return Result(name, metric, statistics.median(rates), metric.replace("_per_s", "/s"), base_name, base,
                  repeats=len(rates), min=min(rates), median=statistics.median(rates), max=max(rates))


def bench_train(cfg: ModelConfig, args, device: torch.device) -> list[Result]:
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else contextlib.nullcontext()
    gen = torch.Generator().manual_seed(0)
    data = torch.randint(cfg.vocab_size, (args.batch, cfg.context_length + 1), generator=gen).to(device)
    x, y = data[:, :-1], data[:, 1:]
    tokens = x.numel()
    flops = cfg.flops_per_token()
    peak = peak_flops(str(device), None)
    variants = [("reference (nn.*, F.sdpa)", lambda: RefGPT(cfg)),
                ("TransformerLM naive", lambda: TransformerLM(cfg.replace(attention="naive"))),
                ("TransformerLM sdpa", lambda: TransformerLM(cfg.replace(attention="sdpa")))]
    steps = []
    for _, build in variants:
        torch.manual_seed(0)
        model = build().to(device).train()
        fwd = torch.compile(model) if args.compile else model

        def step(model=model, fwd=fwd):
            with amp:
                logits = fwd(x)
            loss = F.cross_entropy(logits.flatten(0, 1).float(), y.flatten())
            loss.backward()
            model.zero_grad(set_to_none=True)

        steps.append(step)
    times = _interleaved_steps(steps, args.warmup, args.steps, device)
    rows, results = [], []
    for (name, _), t in zip(variants, times, strict=True):
        seconds = statistics.median(t)
        tps, ref_tps = tokens / seconds, tokens / statistics.median(times[0])
        mfu = f"{100 * tps * flops / peak:.1f}%" if peak else "-"
        rows.append([name, f"{1000 * seconds:.1f}", f"{tps:,.0f}", f"{tps / ref_tps:.2f}x",
                     f"{tps * flops / 1e12:.2f}", mfu])
        ref = None if t is times[0] else (variants[0][0], times[0])
        results.append(_rate(name, "tokens_per_s", tokens, t, *(ref or (None, None))))
    print(f"\n(a) training step (forward + backward), {args.batch} x {cfg.context_length} tokens, "
          f"median of {args.steps} after {args.warmup} warmup, the models taking turns"
          f"{', compiled' if args.compile else ''}")
    print(format_table(["model", "ms/step", "tokens/s", "vs ref", "TFLOP/s", "MFU"], rows))
    return results


def bench_generate(cfg: ModelConfig, args, device: torch.device) -> list[Result]:
    prompt_len = 32
    cfg = cfg.replace(attention="sdpa", context_length=max(cfg.context_length, prompt_len + args.gen_tokens))
    torch.manual_seed(0)
    model = TransformerLM(cfg).to(device).eval()
    bf16 = device.type == "cuda"
    rows, results = [], []
    for batch in (1, 8):
        prompts = torch.randint(cfg.vocab_size, (batch, prompt_len)).tolist()
        runs = [lambda n=args.gen_tokens, prompts=prompts, c=use_cache: generate(
            model, prompts, n, temperature=0, use_cache=c, bf16=bf16) for use_cache in (True, False)]
        for run in runs:
            run(4)  # warmup
        cached, uncached = _interleaved_steps(runs, args.gen_warmup, args.gen_iters, device)
        new_tokens = batch * args.gen_tokens
        rate, base = (new_tokens / statistics.median(t) for t in (cached, uncached))
        rows.append([str(batch), f"{rate:,.0f}", f"{base:,.0f}", f"{rate / base:.1f}x"])
        results.append(_rate(f"kv_cache/batch{batch}", "new_tokens_per_s", new_tokens, cached,
                             f"no_cache/batch{batch}", uncached))
    print(f"\n(b) greedy generation, prompt {prompt_len} + {args.gen_tokens} new tokens, attention=sdpa"
          f"{', bf16' if bf16 else ''}, median of {args.gen_iters}, with and without the cache taking turns")
    print(format_table(["batch", "KV cache tok/s", "no cache tok/s", "speedup"], rows))
    return results


@dataclass(frozen=True)
class ModelTrainBench(BenchSettings):
    device: str = setting("auto", "cpu, cuda or auto (cuda when available)")
    preset: str | None = setting(None, "model preset (default: micro on CPU, small on CUDA)")
    context: int | None = setting(None, "context length (default: 256 CPU, 1024 CUDA)", at_least=1)
    batch: int = setting(8, "training batch size in sequences", at_least=1)
    vocab: int = setting(8192, "vocabulary size", at_least=1)
    steps: int | None = setting(None, "timed training steps (default: 5 CPU, 20 CUDA)", at_least=1)
    warmup: int | None = setting(None, "untimed warmup steps (default: 2 CPU, 5 CUDA)", at_least=0)
    compile: bool = setting(False, "torch.compile the models for the training benchmark")
    gen_tokens: int = setting(256, "new tokens per generation", at_least=1)
    gen_iters: int = setting(3, "timed generations per row, interleaved", at_least=1)
    gen_warmup: int = setting(0, "untimed full-length generations per row", at_least=0)
    threads: int | None = setting(None, "CPU threads for torch (default: torch's choice)", at_least=1)
    skip_train: bool = setting(False, "skip the training benchmark (a)")
    skip_generate: bool = setting(False, "skip the generation benchmark (b)")
    variants: bool = setting(False, "run the architecture-variant benchmark instead (MoE, GQA, checkpointing, "
                                    "speculative decoding, int8; its own flags: python -m bench.benchmarks.model_train "
                                    "--variants --help)")
    distributed: bool = setting(False, "run the data-parallel benchmark instead (DDP/ZeRO/FSDP memory and step time; "
                                       "its own flags: python -m bench.benchmarks.model_train --distributed --help)")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    for flag, delegate in (("--distributed", distributed_main), ("--variants", variants_main)):
        if flag in argv:  # the other benchmark's own flags; its usage names the command as typed
            token = invoked_as.set(f"python -m bench.benchmarks.model_train {flag}")
            try:
                return delegate([a for a in argv if a != flag])
            finally:
                invoked_as.reset(token)
    args = parse_bench(ModelTrainBench, argv)
    auto = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(auto if args.device == "auto" else args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        usage_error("--device cuda but CUDA is not available")
    cuda = device.type == "cuda"
    if args.threads:
        torch.set_num_threads(args.threads)
    args = replace(args, preset=args.preset or ("small" if cuda else "micro"),
                   context=args.context or (1024 if cuda else 256), steps=args.steps or (20 if cuda else 5),
                   warmup=(5 if cuda else 2) if args.warmup is None else args.warmup)
    try:
        cfg = ModelConfig.from_preset(args.preset, vocab_size=args.vocab, context_length=args.context)
    except ValueError as exc:
        usage_error(str(exc))
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
    name = torch.cuda.get_device_name(device) if cuda else f"CPU ({torch.get_num_threads()} threads)"
    peak = peak_flops(str(device), None)
    print(f"device: {name}; torch {torch.__version__}; {'bf16 autocast' if cuda else 'fp32'}"
          f"{f'; peak {peak / 1e12:.0f} TFLOP/s' if peak else ''}")
    print(f"model: preset {args.preset} (d_model={cfg.d_model}, n_layers={cfg.n_layers}, n_heads={cfg.n_heads}, "
          f"d_ff={cfg.d_ff}), vocab {cfg.vocab_size}, context {cfg.context_length}, "
          f"{cfg.param_count() / 1e6:.1f}M params, {cfg.flops_per_token() / 1e6:.1f} MFLOP/training token")
    results = []
    if not args.skip_train:
        results += bench_train(cfg, args, device)
    if not args.skip_generate:
        results += bench_generate(cfg, args, device)
    return finish("model_train", results, args, show=False) if results else 0


if __name__ == "__main__":
    sys.exit(main())
