"""``python -m bench.benchmarks.model_train --variants``: what each architecture switch and inference trick costs.

(a) Dense vs mixture of experts at equal active parameters, same token budget, on the embedded
    corpus (``data/shards``): validation loss, total and active parameters, tokens/s.
(b) Grouped-query vs multi-head attention: KV-cache bytes and greedy decode tokens/s.
(c) Activation checkpointing (none, every 2nd block, every block): activation memory (bytes saved
    for backward on CPU; peak allocated on CUDA) vs step time.
(d) Speculative decoding: a small draft model trained here for a few steps proposes tokens for
    the trained target (``data/runs/default``): acceptance rate and speedup over plain greedy
    decoding with the KV cache (outputs identical).
(e) Weight-only int8: validation perplexity and model bytes vs fp32.

Every row is measured in this run; ratios are against the first row of its table.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from bench.tools.results import BenchSettings, Result, finish, parse_bench
from bench.tools.timing import format_table
from model.core.config import ModelConfig
from model.core.loss import cross_entropy
from model.core.transformer import TransformerLM
from model.inference.generate import generate
from model.inference.quantize import model_bytes, perplexity, quantize_int8
from model.inference.speculative import measure_speedup
from model.train import train
from model.training.checkpoint import load_model
from model.training.data import batch_rng, get_batch, load_tokens
from model.training.train_config import TrainConfig
from workbench.params import setting, usage_error


def interleaved_times(fns: dict, rounds: int, device: torch.device) -> dict[str, list[float]]:
    """Seconds of each function's calls, timed in turns (one call each per round, after one untimed
    round) so that a busy host slows every variant alike."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    times = {name: [] for name in fns}
    for r in range(rounds + 1):
        for name, fn in fns.items():
            sync()
            start = time.perf_counter()
            fn()
            sync()
            if r:
                times[name].append(time.perf_counter() - start)
    return times


def spread(name: str, metric: str, values: list[float], unit: str, baseline: str | None = None,
           baseline_values: list[float] | None = None) -> Result:
    """A Result for repeated values: the median, its min-max, and the median of the baseline's."""
    med = statistics.median(values)
    base = statistics.median(baseline_values) if baseline_values else None
    return Result(name, metric, med, unit, baseline, base, repeats=len(values), min=min(values), median=med,
                  max=max(values))


def _train_run(data: Path, out: Path, steps: int, model: dict, **overrides) -> dict:
    """A short run of TrainConfig ``overrides`` whose ``model`` holds the ModelConfig fields."""
    cfg = TrainConfig(data=str(data), out_dir=str(out), max_steps=steps, warmup_steps=max(1, steps // 10),
                      eval_interval=steps, eval_batches=8, log_interval=max(1, steps // 5), ckpt_interval=steps,
                      device="cpu" if not torch.cuda.is_available() else "cuda", model=model, **overrides)
    return train(cfg)


def bench_moe(args) -> None:
    """Dense SwiGLU of width F vs 4 experts of width F/2 with top-2 routing: equal active FFN params."""
    base = ModelConfig.from_preset(args.preset, vocab_size=8192, context_length=args.context)
    shared = dict(preset=args.preset, batch_size=args.batch, lr=3e-3, min_lr=3e-4, seed=0)
    variants = [("dense", dict(d_ff=base.d_ff)),
                (f"MoE 4 experts top-2, d_ff {base.d_ff // 2}", dict(d_ff=base.d_ff // 2, n_experts=4, moe_top_k=2)),
                (f"MoE 8 experts top-2, d_ff {base.d_ff // 2}", dict(d_ff=base.d_ff // 2, n_experts=8, moe_top_k=2))]
    rows, ref = [], None
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, extra) in enumerate(variants):
            summary = _train_run(args.data, Path(tmp) / f"run{i}", args.train_steps,
                                 {"context_length": args.context, "attention": "sdpa", **extra}, **shared)
            cfg = ModelConfig.from_json(Path(tmp) / f"run{i}" / "config.json")
            ref = ref or summary
            rows.append([name, f"{cfg.param_count():,}", f"{cfg.param_count(active=True):,}",
                         f"{summary['val_loss']:.4f}", f"{summary['val_loss'] - ref['val_loss']:+.4f}",
                         f"{summary['tokens_per_s']:,.0f}", f"{summary['tokens_per_s'] / ref['tokens_per_s']:.2f}x"])
    print(f"\n(a) dense vs MoE at equal active parameters: preset {args.preset}, {args.train_steps} steps of "
          f"{args.batch} x {args.context} tokens on {args.data} (same data order), capacity factor 1.25")
    print(format_table(["model", "params", "active params", "val loss", "vs dense", "tokens/s", "speed"], rows))


def bench_gqa(args, device: torch.device) -> list[Result]:
    base = ModelConfig.from_preset(args.preset, vocab_size=8192, context_length=32 + args.gen_tokens,
                                   attention="sdpa")
    prompts = torch.randint(base.vocab_size, (args.gen_batch, 32), generator=torch.Generator().manual_seed(0))
    models, caches = {}, {}
    for kv in sorted({base.n_heads, max(1, base.n_heads // 2), max(1, base.n_heads // 4), 1}, reverse=True):
        torch.manual_seed(0)
        models[kv] = TransformerLM(base.replace(n_kv_heads=kv)).to(device).eval()
        caches[kv] = models[kv].new_cache(args.gen_batch, base.context_length).nbytes
    times = interleaved_times(
        {kv: (lambda m=m: generate(m, prompts.tolist(), args.gen_tokens, temperature=0)) for kv, m in models.items()},
        args.rounds, device)
    seconds = {kv: statistics.median(t) for kv, t in times.items()}
    new_tokens = args.gen_batch * args.gen_tokens
    rates = {kv: [new_tokens / x for x in t] for kv, t in times.items()}
    rows, ref, results = [], None, []
    for kv, model in models.items():
        cfg, cache_bytes = model.cfg, caches[kv]
        tps = args.gen_batch * args.gen_tokens / seconds[kv]
        ref = ref or (cache_bytes, tps)
        name = "MHA" if kv == cfg.n_heads else ("MQA" if kv == 1 else f"GQA {cfg.n_heads // kv} q/kv")
        rows.append([f"{name} (n_kv_heads={kv})", f"{cfg.param_count():,}", f"{cache_bytes / 2**20:.2f} MiB",
                     f"{cache_bytes / ref[0]:.2f}", f"{tps:,.0f}", f"{tps / ref[1]:.2f}x"])
        label, mha = f"n_kv_heads={kv}", f"n_kv_heads={cfg.n_heads}"
        results += [Result(label, "kv_cache_mib", cache_bytes / 2**20, "MiB", mha, ref[0] / 2**20),
                    spread(label, "decode_tokens_per_s", rates[kv], "new tokens/s", mha, rates[cfg.n_heads])]
    print(f"\n(b) KV cache and greedy decoding: preset {args.preset}, batch {args.gen_batch}, prompt 32 + "
          f"{args.gen_tokens} new tokens, attention sdpa, random weights, median of {args.rounds} (in turns)")
    print(format_table(["attention", "params", "KV cache", "vs MHA", "decode tok/s", "speed"], rows))
    return results


def _activation_bytes(model: TransformerLM, x: torch.Tensor, y: torch.Tensor) -> int:
    saved = []

    def pack(t):
        saved.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = cross_entropy(model(x), y)
    loss.backward()
    model.zero_grad(set_to_none=True)
    return sum(saved)


def bench_checkpointing(args, device: torch.device) -> list[Result]:
    cuda = device.type == "cuda"
    base = ModelConfig.from_preset(args.preset, vocab_size=8192, context_length=args.context, attention="sdpa")
    data = torch.randint(base.vocab_size, (args.batch, args.context + 1), generator=torch.Generator().manual_seed(0))
    x, y = data[:, :-1].to(device), data[:, 1:].to(device)
    variants = {"none": 0, "every 2nd block": 2, "every block": 1}
    steps, memory = {}, {}
    for name, every in variants.items():
        torch.manual_seed(0)
        model = TransformerLM(base.replace(checkpoint_every=every)).to(device).train()

        def step(model=model):
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
                loss = cross_entropy(model(x), y)
            loss.backward()
            model.zero_grad(set_to_none=True)

        if cuda:
            step()
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
            step()
            memory[name] = torch.cuda.max_memory_allocated() - before
        else:
            memory[name] = _activation_bytes(model, x, y)
        steps[name] = step
    times = interleaved_times(steps, args.rounds, device)
    seconds = {name: statistics.median(t) for name, t in times.items()}
    rows = [[name, f"{memory[name] / 2**20:.1f} MiB", f"{memory[name] / memory['none']:.2f}",
             f"{1000 * seconds[name]:.1f}", f"{seconds[name] / seconds['none']:.2f}x"] for name in variants]
    what = "peak allocated during a step (bf16)" if cuda else "bytes saved for backward (fp32)"
    print(f"\n(c) activation checkpointing: preset {args.preset}, {args.batch} x {args.context} tokens, "
          f"median of {args.rounds} steps (in turns); memory = {what} (the LM head and loss are never recomputed)")
    print(format_table(["recompute", "activation memory", "vs none", "ms/step", "time vs none"], rows))
    results = []
    for name in variants:
        label = name.replace(" ", "_")
        results += [Result(label, "activation_mib", memory[name] / 2**20, "MiB " + ("peak" if cuda else "saved"),
                           "none", memory["none"] / 2**20),
                    spread(label, "ms_per_step", [1000 * t for t in times[name]], "ms", "none",
                           [1000 * t for t in times["none"]])]
    return results


def bench_speculative(args, device: torch.device) -> None:
    target = load_model(args.target, device=str(device)).eval()
    with tempfile.TemporaryDirectory() as tmp:
        _train_run(args.data, Path(tmp) / "draft", args.draft_steps, {"context_length": 128, "attention": "sdpa"},
                   preset="nano", batch_size=32, lr=3e-3, min_lr=3e-4, seed=0)
        draft = load_model(Path(tmp) / "draft", device=str(device)).eval()
    val = load_tokens(args.data, "val")
    prompts = get_batch(val, args.spec_prompts, 32, "cpu", batch_rng(1, 0, 0, split="val"))[0].tolist()
    rows = []
    for gamma in (2, 4, 6):
        result = measure_speedup(target, draft, prompts, args.spec_tokens, gamma, repeats=args.rounds)
        tokens = len(prompts) * args.spec_tokens
        rows.append([str(gamma), f"{result['acceptance_rate']:.2f}", f"{result['tokens_per_target_forward']:.2f}",
                     f"{tokens / result['plain_s']:,.0f}", f"{tokens / result['speculative_s']:,.0f}",
                     f"{result['speedup']:.2f}x", "yes" if result["identical"] else "NO"])
    print(f"\n(d) speculative decoding (greedy): target {args.target} "
          f"({target.cfg.param_count():,} params), draft preset nano trained {args.draft_steps} steps "
          f"({draft.cfg.param_count():,} params); {len(prompts)} val prompts of 32 tokens, "
          f"{args.spec_tokens} new tokens each, batch 1")
    print(format_table(["gamma", "acceptance", "tokens/target fwd", "plain tok/s", "speculative tok/s", "speedup",
                        "identical"], rows))


def bench_int8(args, device: torch.device) -> list[Result]:
    val = load_tokens(args.data, "val")
    model = load_model(args.target, device=str(device)).eval()
    ctx = model.cfg.context_length
    fp32_ppl, fp32_bytes = perplexity(model, val, ctx, args.ppl_batches, 16, seed=0), model_bytes(model)
    model = quantize_int8(model)
    int8_ppl, int8_bytes = perplexity(model, val, ctx, args.ppl_batches, 16, seed=0), model_bytes(model)
    rows = [["fp32", f"{fp32_bytes / 2**20:.2f} MiB", "1.00", f"{fp32_ppl:.3f}", "-"],
            ["int8 weights (per-channel absmax)", f"{int8_bytes / 2**20:.2f} MiB", f"{int8_bytes / fp32_bytes:.2f}",
             f"{int8_ppl:.3f}", f"{int8_ppl - fp32_ppl:+.3f} ({100 * (int8_ppl / fp32_ppl - 1):+.2f}%)"]]
    print(f"\n(e) weight-only int8: {args.target}, validation perplexity over {args.ppl_batches} x 16 windows "
          f"of {ctx} tokens of {args.data}/val.bin")
    print(format_table(["weights", "model bytes", "vs fp32", "val perplexity", "change"], rows))
    return [Result("fp32", "model_mib", fp32_bytes / 2**20, "MiB"), Result("fp32", "val_perplexity", fp32_ppl),
            Result("int8", "model_mib", int8_bytes / 2**20, "MiB", "fp32", fp32_bytes / 2**20),
            Result("int8", "val_perplexity", int8_ppl, "", "fp32", fp32_ppl)]


PARTS = ("moe", "gqa", "checkpointing", "speculative", "int8")


@dataclass(frozen=True)
class VariantsBench(BenchSettings):
    only: tuple[str, ...] = setting(PARTS, "which parts to run", choices=PARTS, nonempty=True)
    device: str = setting("auto", "cpu, cuda or auto")
    data: Path = setting(Path("data/shards"), "token shards (make repro's default)")
    target: Path = setting(Path("data/runs/default"), "trained run for (d) and (e)")
    preset: str = setting("micro", "model preset for (a)-(c)")
    context: int = setting(128, "context length for (a) and (c)", at_least=1)
    batch: int = setting(16, "sequences per step for (a) and (c)", at_least=1)
    train_steps: int = setting(100, "training steps per model in (a)", at_least=1)
    rounds: int = setting(5, "timed rounds in (b) and (c), the variants taking turns", at_least=1)
    gen_batch: int = setting(8, "decode batch in (b)", at_least=1)
    gen_tokens: int = setting(128, "new tokens in (b)", at_least=1)
    draft_steps: int = setting(150, "training steps of the draft model in (d)", at_least=1)
    spec_prompts: int = setting(4, "prompts in (d)", at_least=1)
    spec_tokens: int = setting(64, "new tokens per prompt in (d)", at_least=1)
    ppl_batches: int = setting(8, "validation batches of 16 windows in (e)", at_least=1)
    threads: int | None = setting(None, "torch CPU threads", at_least=1)


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(VariantsBench, argv)
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if args.device == "auto" else args.device))
    if device.type == "cuda" and not torch.cuda.is_available():
        usage_error("--device cuda but CUDA is not available")
    if args.threads:
        torch.set_num_threads(args.threads)
    needs_data = {"moe", "speculative", "int8"} & set(args.only)
    if needs_data and not (args.data / "meta.json").exists():
        usage_error(f"{args.data}/meta.json not found (run `make repro` or pass --data); needed by "
                    f"{', '.join(sorted(needs_data))}")
    if {"speculative", "int8"} & set(args.only) and not args.target.exists():
        usage_error(f"--target {args.target} not found (run `make repro` or pass a trained run)")
    print(f"device: {torch.cuda.get_device_name(device) if device.type == 'cuda' else 'CPU'} "
          f"({torch.get_num_threads()} threads); torch {torch.__version__}")
    started, results = time.perf_counter(), []
    for part in args.only:
        run = {"moe": lambda: bench_moe(args), "gqa": lambda: bench_gqa(args, device),
               "checkpointing": lambda: bench_checkpointing(args, device),
               "speculative": lambda: bench_speculative(args, device), "int8": lambda: bench_int8(args, device)}
        rows = run[part]()  # (a) and (d) print only: too slow to re-run for rows on a shared CPU (None)
        results += [dataclasses.replace(r, name=f"{part}/{r.name}") for r in rows or []]
    print(f"\n{time.perf_counter() - started:.0f} s in all")
    command = "python -m bench.benchmarks.model_train --variants" + (" " + " ".join(argv) if argv else "")
    return finish("variants", results, args, command, show=False) if results else 0


if __name__ == "__main__":
    sys.exit(main())
