"""Resource accounting for distributed training: memory per GPU and communication per step.

Pure functions over a model shape (``ModelConfig``), a ``Hardware`` description and a ``Layout``
(GPUs × tensor-parallel degree × ZeRO stage), so every number in docs/scaling-out.md comes from code
(the memory half, ``Layout``, ``zero_model_state_bytes`` and ``activation_bytes``, lives in ``model.costs.memory``,
the hardware table in ``workbench.hardware``):

* Model states per GPU — ZeRO (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training
  Trillion Parameter Models", §3 and Fig. 1): mixed-precision Adam keeps 2Ψ bf16 params, 2Ψ bf16
  grads and K·Ψ = 12Ψ optimizer states (fp32 master params, m, v). Stage 0 (DDP) 16Ψ, stage 1
  4Ψ + 12Ψ/N, stage 2 2Ψ + 14Ψ/N, stage 3 16Ψ/N. ``precision="fp32"`` is our CPU path: 4Ψ params,
  4Ψ grads, 8Ψ for Adam's m and v.
* Activations per GPU — Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
  Transformer Models", eq. 1-2 and §4: s·b·h·(34 + 5·a·s/h) bytes per layer, s·b·h/t·(34 + 5·a·s/h)
  with tensor + sequence parallelism, s·b·h·(10 + 24/t + 5·a·s/(h·t)) with tensor parallelism
  alone, 2·s·b·h per layer (the layer inputs) with full recomputation. The 34 is for the GPT block
  (GeLU MLP 4h: 19, with dropout masks). Our block has no dropout (−2) and its SwiGLU MLP (d_ff ≈
  8h/3) stores its input plus w1·x, w3·x and their product, 2 + 3·2·d_ff/h ≈ 18 s·b·h, or ≈ 23 when
  eager autograd also keeps silu(w1·x): 31-36 s·b·h in all, so 34 is kept, within ±10 %.
  FlashAttention (our sdpa/triton paths) stores no s×s scores: the 5·a·s/h term goes.
* Communication per GPU per step — ring collectives: an all-reduce sends 2·(N−1)/N of the buffer,
  a reduce-scatter or an all-gather (N−1)/N. DDP / ZeRO-1 / ZeRO-2: 2·(N−1)/N·Ψ·bytes;
  ZeRO-3 / FSDP: 3·(N−1)/N·Ψ·bytes (ZeRO paper §7). Tensor parallelism (Shoeybi et al. 2019,
  "Megatron-LM", §3): 4 all-reduces of b·s·h activations per layer per micro-batch (2 forward,
  2 backward); sequence parallelism swaps each for a reduce-scatter + all-gather of the same volume.
  Time = bytes / bandwidth: NVLink when the group fits in a node, else the per-GPU InfiniBand
  link (hierarchical and in-network (NVLS/SHARP) collectives ignored: a pessimistic bound).
* Compute per step — ``ModelConfig.flops_per_token`` (PaLM app. B) at a stated MFU.

    python -m model.costs.accounting --scale-out                 # the tables in docs/scaling-out.md
    python -m model.costs.accounting --scale-out --hardware b200 --seq-len 4096
    python -m model.costs.accounting --params 70e9 --tokens 15e12 --gpus 1024   # one run: see model/costs/napkin.py
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from model.core.config import PRESETS, ModelConfig
from model.costs.memory import (
    GB,
    PRECISIONS,
    RECOMPUTE,
    Layout,
    activation_bytes,
    check_int,
    check_stage,
    zero_model_state_bytes,
)
from model.costs.napkin import NapkinSettings, add_report_flags, run, wants_report
from workbench.hardware import HARDWARE, Hardware, get_hardware
from workbench.params import Parser, add_config_flags, config_from_args, setting

STRATEGIES: dict[str, dict] = {  # name -> Layout fields (gpus comes from the table)
    "ddp": dict(zero_stage=0),
    "zero1": dict(zero_stage=1),
    "zero2": dict(zero_stage=2),
    "zero3": dict(zero_stage=3),
    "tp8": dict(tp=8, zero_stage=1),  # TP=8 inside a node × DP across nodes, ZeRO-1 on the DP axis
}


# ---- communication --------------------------------------------------------------------------------


def dp_comm_bytes(n_params: float, world: int, stage: int, *, bytes_per_value: int = 2,
                  micro_steps: int = 1) -> float:
    """Bytes each GPU sends per optimizer step for data parallelism over ``world`` ranks (ring).

    Stages 0-1 accumulate full gradients locally and all-reduce (or reduce-scatter + all-gather the
    params) once: 2·(N−1)/N·Ψ·bytes. Stage 2 keeps only its gradient shard, so it reduce-scatters after
    every micro-batch's backward and all-gathers the params once; stage 3 also all-gathers the params
    in every micro-batch's forward and backward: 3·(N−1)/N·Ψ·bytes per micro-batch (DeepSpeed's and
    FSDP's defaults). With ``micro_steps=1`` these are the ZeRO paper's 2Ψ, 2Ψ, 2Ψ, 3Ψ (§7)."""
    if not n_params > 0:
        raise ValueError(f"n_params must be > 0, got {n_params!r}")
    check_int("world", world, 1)
    check_stage(stage)
    check_int("micro_steps", micro_steps, 1)
    one = (world - 1) / world * n_params * bytes_per_value  # a reduce-scatter or an all-gather
    if stage <= 1:
        return 2 * one
    if stage == 2:
        return (micro_steps + 1) * one
    return 3 * micro_steps * one


def tp_comm_bytes(cfg: ModelConfig, seq_len: int, micro_batch: int, tp: int, *, micro_steps: int = 1,
                  bytes_per_value: int = 2, recompute: str = "none") -> float:
    """Bytes each GPU sends per step for Megatron tensor parallelism over ``tp`` ranks: per layer and
    micro-batch 4 all-reduces (2 forward, 2 backward; 6 when full recomputation repeats the forward)
    of the b·s·h activations, each 2·(t−1)/t of the buffer on a ring."""
    check_int("tp", tp, 1)
    check_int("micro_steps", micro_steps, 1)
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute={recompute!r}: expected one of {RECOMPUTE}")
    all_reduces = 6 if recompute == "full" else 4
    buffer = micro_batch * seq_len * cfg.d_model * bytes_per_value
    return micro_steps * cfg.n_layers * all_reduces * 2 * (tp - 1) / tp * buffer


def compute_seconds(cfg: ModelConfig, tokens: float, gpus: int, hardware: Hardware | str, *,
                    seq_len: int, mfu: float = 0.5, recompute: str = "none") -> float:
    """Seconds per step to train on ``tokens`` spread over ``gpus`` at model FLOPs utilisation ``mfu``;
    full recomputation runs the forward twice (4/3 of the model FLOPs)."""
    hw = get_hardware(hardware)
    if not 0 < mfu <= 1:
        raise ValueError(f"mfu must be in (0, 1], got {mfu!r}")
    extra = 4 / 3 if recompute == "full" else 1.0
    return tokens * cfg.flops_per_token(seq_len) * extra / (gpus * hw.peak_flops * mfu)


# ---- one estimate, and the table ------------------------------------------------------------------


def step_estimate(cfg: ModelConfig, layout: Layout, hardware: Hardware | str, *, global_batch_tokens: int,
                  seq_len: int, micro_batch: int | None = None, mfu: float = 0.5,
                  flash_attention: bool = True) -> dict:
    """Memory per GPU and time per optimizer step for one layout. ``micro_batch=None`` picks the
    largest number of sequences per micro-batch that divides the rank's share and fits in HBM; a
    given one that does not divide the share is lowered to the largest divisor below it (noted)."""
    hw = get_hardware(hardware)
    check_int("global_batch_tokens", global_batch_tokens, 1)
    check_int("seq_len", seq_len, 1)
    notes = []
    n_params = cfg.param_count()
    seqs = global_batch_tokens // (seq_len * layout.dp)  # sequences per data-parallel rank per step
    if seqs < 1:
        notes.append(f"batch raised to {layout.dp * seq_len:,} tokens (1 seq per DP rank)")
        seqs = 1
    if layout.tp > 1 and cfg.n_heads % layout.tp:
        notes.append(f"n_heads={cfg.n_heads} not divisible by tp={layout.tp}")
    states = zero_model_state_bytes(n_params / layout.tp, layout.dp, layout.zero_stage, layout.precision)

    def activations(b: int) -> dict[str, float]:
        return activation_bytes(cfg, seq_len, b, tp=layout.tp, sequence_parallel=layout.sequence_parallel,
                                recompute=layout.recompute, flash_attention=flash_attention)

    if micro_batch is None:
        divisors = [b for b in range(seqs, 0, -1) if seqs % b == 0]
        micro_batch = next((b for b in divisors if states["total"] + activations(b)["total"] <= hw.hbm_bytes), 1)
    else:
        check_int("micro_batch", micro_batch, 1)
        if seqs % micro_batch:
            asked, micro_batch = micro_batch, max(b for b in range(1, min(micro_batch, seqs) + 1) if seqs % b == 0)
            notes.append(f"micro_batch {asked} -> {micro_batch} to divide {seqs} seqs per DP rank")
    micro_steps = max(1, seqs // micro_batch)
    tokens = seqs * seq_len * layout.dp
    act = activations(micro_batch)["total"]
    value_bytes = PRECISIONS[layout.precision][1]
    dp_bytes = dp_comm_bytes(n_params / layout.tp, layout.dp, layout.zero_stage, bytes_per_value=value_bytes,
                             micro_steps=micro_steps)
    tp_bytes = tp_comm_bytes(cfg, seq_len, micro_batch, layout.tp, micro_steps=micro_steps,
                             bytes_per_value=value_bytes, recompute=layout.recompute)
    # TP groups are the GPUs of one node; DP groups span nodes as soon as gpus > one node.
    dp_span = layout.dp if layout.tp == 1 else layout.gpus
    comm_s = dp_bytes / hw.link_bandwidth(dp_span) + tp_bytes / hw.link_bandwidth(layout.tp)
    comp_s = compute_seconds(cfg, tokens, layout.gpus, hw, seq_len=seq_len, mfu=mfu, recompute=layout.recompute)
    total = states["total"] + act
    return {
        "params": n_params, "gpus": layout.gpus, "tp": layout.tp, "dp": layout.dp, "zero_stage": layout.zero_stage,
        "tokens_per_step": tokens, "micro_batch": micro_batch, "micro_steps": micro_steps,
        "mem_params": states["params"], "mem_grads": states["grads"], "mem_optimizer": states["optimizer"],
        "mem_activations": act, "mem_total": total, "fits": total <= hw.hbm_bytes,
        "comm_bytes": dp_bytes + tp_bytes, "comm_s": comm_s, "compute_s": comp_s, "comm_compute": comm_s / comp_s,
        "note": "; ".join(notes),
    }


def scale_out_table(preset: str, gpus_list=(8, 64, 256, 1024), hardware: Hardware | str = "h100", *,
                    global_batch_tokens: int = 2**22, seq_len: int = 2048, micro_batch: int | None = None,
                    strategies=tuple(STRATEGIES), vocab_size: int = 50257, mfu: float = 0.5,
                    recompute: str = "none", flash_attention: bool = True) -> list[dict]:
    """One row per (strategy, gpus) for a ``model.core.config`` preset: memory split, fit, comm, compute."""
    hw = get_hardware(hardware)
    cfg = ModelConfig.from_preset(preset, vocab_size=vocab_size, context_length=seq_len)
    rows = []
    for strategy in strategies:
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r}; choose from {', '.join(STRATEGIES)}")
        for gpus in gpus_list:
            layout = Layout(gpus=gpus, recompute=recompute, **STRATEGIES[strategy])
            row = step_estimate(cfg, layout, hw, global_batch_tokens=global_batch_tokens, seq_len=seq_len,
                                micro_batch=micro_batch, mfu=mfu, flash_attention=flash_attention)
            rows.append({"preset": preset, "strategy": strategy, "hardware": hw.name, **row})
    return rows


def format_markdown(rows: list[dict]) -> str:
    header = ["strategy", "GPUs", "mb×acc", "params GB", "grads GB", "optim GB", "activ GB", "total GB", "fits",
              "comm GB", "comm s", "compute s", "comm/compute", "note"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        cells = [r["strategy"], str(r["gpus"]), f"{r['micro_batch']}×{r['micro_steps']}",
                 *(f"{r[k] / GB:.1f}" for k in ("mem_params", "mem_grads", "mem_optimizer", "mem_activations",
                                               "mem_total")),
                 "yes" if r["fits"] else "**no**", f"{r['comm_bytes'] / GB:.1f}", f"{r['comm_s']:.3f}",
                 f"{r['compute_s']:.3f}", f"{r['comm_compute']:.2f}", r["note"]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ---- CLI ------------------------------------------------------------------------------------------

ASSUMPTIONS = """assumptions: bf16 mixed-precision Adam (ZeRO K=12: 16 bytes/param of model states); \
activations from Korthikanti et al. 2022 (34·s·b·h bytes per layer, FlashAttention so no s×s scores, \
tensor parallelism with sequence parallelism) plus fp32 logits; ring collectives at the NVLink \
bandwidth inside a node and at the per-GPU InfiniBand bandwidth across nodes, no hierarchical \
collectives, no overlap inefficiency, no pipeline parallelism; compute at the given MFU of dense bf16 \
peak; micro-batch = the largest divisor of the per-rank sequences that fits; GB = 1e9 bytes."""


@dataclass(frozen=True)
class ScaleOutSettings:
    scale_out: bool = setting(False, "print memory/communication tables per strategy (ddp, zero1-3, tp8) and GPU count")
    presets: tuple[str, ...] = setting(("xl", "2.7B"), "model presets", choices=tuple(PRESETS))
    gpus: tuple[int, ...] | None = setting(None, "GPU counts (none: 8 64 256 1024 for --scale-out, 1 for the report)")
    hardware: str = setting("h100", f"one of {', '.join(HARDWARE)}")
    global_batch_tokens: int = setting(2**22, "tokens per optimizer step across all GPUs (2^22)")
    seq_len: int | None = setting(None, "sequence length (none: 2048; 1024 for --measure-activations)")
    micro_batch: int | None = setting(None, "sequences per micro-batch per rank (none: for --scale-out the largest "
                                            "that divides the rank's share and fits; 1 for the report)")
    vocab: int = setting(50257, "vocabulary size (GPT-2's)")
    mfu: float = setting(0.5, "model FLOPs utilisation for compute time")
    recompute: str = setting("none", "activation checkpointing", choices=RECOMPUTE)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m model.costs.accounting", description=__doc__.split("\n\n")[0],
               epilog="--scale-out " + ASSUMPTIONS)
    add_config_flags(p, ScaleOutSettings, bool_switches=True)
    add_report_flags(p)  # the single-run report's flags (model/costs/napkin.py)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:  # the settings' own checks (choices)
        config_from_args(ScaleOutSettings, args)
        config_from_args(NapkinSettings, args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not args.scale_out and wants_report(args):
        args.gpus = [1] if args.gpus is None else args.gpus
        return run(args)
    if not args.scale_out:
        parser.print_help()
        return 2
    args.gpus = [8, 64, 256, 1024] if args.gpus is None else args.gpus
    args.seq_len = 2048 if args.seq_len is None else args.seq_len
    try:
        hw = get_hardware(args.hardware)
        tables = [scale_out_table(preset, args.gpus, hw, global_batch_tokens=args.global_batch_tokens,
                                  seq_len=args.seq_len, micro_batch=args.micro_batch, vocab_size=args.vocab,
                                  mfu=args.mfu, recompute=args.recompute) for preset in args.presets]
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"hardware: {hw.name}: {hw.peak_flops / 1e12:.0f} TFLOP/s bf16 dense, {hw.hbm_bytes / GB:.0f} GB HBM, "
          f"NVLink {hw.intra_node_bandwidth / GB:.0f} GB/s, IB {hw.inter_node_bandwidth / GB:.0f} GB/s per GPU, "
          f"{hw.gpus_per_node} GPUs/node")
    print(f"global batch {args.global_batch_tokens:,} tokens, seq_len {args.seq_len}, vocab {args.vocab}, "
          f"MFU {args.mfu}, recompute {args.recompute}")
    for preset, rows in zip(args.presets, tables, strict=False):
        cfg = ModelConfig.from_preset(preset, vocab_size=args.vocab, context_length=args.seq_len)
        print(f"\n### {preset}: d_model={cfg.d_model}, n_layers={cfg.n_layers}, n_heads={cfg.n_heads}, "
              f"d_ff={cfg.d_ff}, Ψ = {cfg.param_count() / 1e9:.2f}B params\n")
        print(format_markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
