"""Napkin math for one training run: parameters, FLOPs, wall-clock, memory per GPU, largest model.

The report behind ``python -m model.costs.accounting --preset … | --params …`` (CS336 lecture 2,
"resource accounting"): every number is a call into code that is tested elsewhere —
``ModelConfig.param_count`` / ``flops_per_token`` (PaLM app. B: 6 FLOPs per matmul weight per
training token + 12·L·d·T for attention), ``model.costs.accounting.zero_model_state_bytes`` (ZeRO §3:
mixed-precision AdamW keeps 16 bytes per parameter) and ``activation_bytes`` (Korthikanti et al.
2022), ``model.costs.roofline`` for the matmuls. The lecture's two examples:

    total_flops = 6 * 70e9 * 15e12; days = total_flops / (h100_flop_per_sec * 0.5 * 1024 * 86400)  # ≈ 144
    max_params = 8 * 80e9 / (4 + 4 + 4 + 4)                                                          # 40e9

    python -m model.costs.accounting --params 70e9 --tokens 15e12 --hardware h100 --gpus 1024 --mfu 0.5
    python -m model.costs.accounting --fit --hardware h100 --gpus 8 --zero-stage 3
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from model.core.config import ModelConfig
from model.core.transformer import TransformerLM
from model.costs.memory import GB, RECOMPUTE, Layout, activation_bytes, zero_model_state_bytes
from model.costs.roofline import block_matmuls, decode_batch_for_ridge, format_roofline, ridge_point, roofline_row
from workbench.hardware import Hardware, get_hardware
from workbench.params import add_config_flags, setting

DAY = 86400.0
CHINCHILLA_TOKENS_PER_PARAM = 20  # Hoffmann et al. 2022: D ≈ 20·N at the compute-optimal point


def training_flops(tokens: float, *, cfg: ModelConfig | None = None, n_params: float | None = None,
                   seq_len: int | None = None) -> float:
    """``tokens`` × FLOPs per training token: ``cfg.flops_per_token(seq_len)`` (6·N_matmul + attention)
    for a shape, else the bare 6·N (attention omitted)."""
    if not tokens > 0:
        raise ValueError(f"tokens must be > 0, got {tokens!r}")
    if cfg is not None:
        return tokens * cfg.flops_per_token(seq_len)
    if n_params is None or not n_params > 0:
        raise ValueError(f"n_params must be > 0 when no config is given, got {n_params!r}")
    return 6 * n_params * tokens


def training_seconds(total_flops: float, gpus: int, hardware: Hardware | str, mfu: float) -> float:
    """Wall-clock seconds: FLOPs / (GPUs × dense bf16 peak × MFU)."""
    hw = get_hardware(hardware)
    if not 0 < mfu <= 1:
        raise ValueError(f"mfu must be in (0, 1], got {mfu!r}")
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise ValueError(f"gpus must be an integer >= 1, got {gpus!r}")
    return total_flops / (gpus * hw.peak_flops * mfu)


def state_bytes_per_param(layout: Layout, bytes_per_param: float = 16) -> float:
    """Model-state bytes one GPU holds per model parameter under ``layout``: the ZeRO split of mixed
    precision (2 + 2 + 12 = 16 bytes) sharded over DP by the stage and over TP, scaled to
    ``bytes_per_param`` (each part in proportion)."""
    if not bytes_per_param > 0:
        raise ValueError(f"bytes_per_param must be > 0, got {bytes_per_param!r}")
    share = zero_model_state_bytes(1.0, layout.dp, layout.zero_stage, "mixed")["total"] / layout.tp
    return share * bytes_per_param / 16


def largest_model(hardware: Hardware | str, layout: Layout, bytes_per_param: float = 16,
                  reserved_bytes: float = 0.0) -> dict[str, float]:
    """Largest parameter count whose model states fit in HBM (minus ``reserved_bytes``, e.g.
    activations): ``layout`` as given, and with every state sharded over all GPUs (ZeRO-3 / FSDP),
    gpus·HBM / bytes_per_param — the lecture's 8·80e9/16 = 40e9 for 8 H100s."""
    hw = get_hardware(hardware)
    free = hw.hbm_bytes - reserved_bytes
    if free <= 0:
        return {"layout": 0.0, "fully_sharded": 0.0}
    return {"layout": free / state_bytes_per_param(layout, bytes_per_param),
            "fully_sharded": layout.gpus * free / bytes_per_param}


def memory_split(layout: Layout, *, n_params: float, cfg: ModelConfig | None = None, seq_len: int = 2048,
                 micro_batch: int = 1) -> dict[str, float | None]:
    """Bytes per GPU: params, grads, optimizer (``zero_model_state_bytes`` of n_params/tp over DP)
    and activations without and with full recomputation (``activation_bytes``; None without a shape)."""
    states = zero_model_state_bytes(n_params / layout.tp, layout.dp, layout.zero_stage, layout.precision)
    split: dict[str, float | None] = {k: states[k] for k in ("params", "grads", "optimizer")}
    split["states"] = states["total"]
    for recompute in RECOMPUTE:
        split[f"activations_{recompute}"] = None if cfg is None else activation_bytes(
            cfg, seq_len, micro_batch, tp=layout.tp, sequence_parallel=layout.sequence_parallel,
            recompute=recompute)["total"]
    return split


def _days(seconds: float) -> str:
    days = seconds / DAY
    return f"{days:.2f}" if 0.01 <= days < 1e6 else f"{days:.3g}"


def _params(n: float) -> str:
    return f"{n:.4g} params ({n / 1e9:.1f}B)"


def _sci(x: float) -> str:
    return f"{x:.3g}" if x < 1e4 else f"{x:.3e}"


def assumptions(hw: Hardware, layout: Layout, *, mfu: float, seq_len: int, micro_batch: int, bytes_per_param: float,
                bare: bool, tokens_note: str, fit_only: bool = False) -> list[str]:
    """The report's assumptions, one line each (``fit_only``: hardware, layout, model states, fit)."""
    lines = [
        f"hardware: {hw.name}: {hw.peak_flops / 1e12:g} TFLOP/s dense bf16 (no sparsity), {hw.hbm_bytes / GB:g} GB "
        f"HBM at {hw.hbm_bandwidth / 1e12:g} TB/s; GB = 1e9 bytes, days = 86,400 s",
        f"layout: {layout.gpus} GPUs = TP {layout.tp} × DP {layout.dp}, ZeRO stage {layout.zero_stage} on DP, "
        f"sequence parallelism with TP; micro-batch {micro_batch} × seq_len {seq_len}",
        "FLOPs (PaLM app. B): 6 per matmul weight per token (2 forward + 4 backward) + 12·L·d·T for QKᵀ and AV "
        "(causal mask not discounted); embeddings lookups free; "
        + ("--params given: bare 6·N·D, attention FLOPs OMITTED (no shape)" if bare else "6·N·D printed beside it"),
        f"time = training FLOPs / (GPUs × peak × MFU), MFU {mfu}; full recomputation adds one forward (×4/3); "
        "no failures, restarts or evaluation",
        f"tokens: {tokens_note}",
        "model states: mixed-precision AdamW, 2 (bf16 params) + 2 (bf16 grads) + 12 (fp32 master, m, v) = 16 "
        "bytes/param, sharded by ZeRO (Rajbhandari et al. 2020); fp32 gradient accumulation buffers not counted",
        "activations (Korthikanti et al. 2022): 34·s·b·h bytes per layer, FlashAttention (no s×s scores), "
        "+ fp32 logits 4·s·b·V; full recompute keeps 2·s·b·h per layer + one layer rebuilt",
        f"largest model: HBM / model-state bytes per param per GPU ({bytes_per_param:g} B/param before sharding); "
        "activations, workspace, fragmentation and CUDA context ignored",
        "roofline: bf16 operands, each matmul reads weight + input and writes output once from HBM; "
        "ridge = peak / HBM bandwidth",
    ]
    return [line for line in lines if line.startswith(("hardware", "layout", "model states", "largest"))] \
        if fit_only else lines


def napkin_report(hardware: Hardware | str, layout: Layout, *, cfg: ModelConfig | None = None,
                  n_params: float | None = None, tokens: float | None = None, mfu: float = 0.5,
                  seq_len: int = 2048, micro_batch: int = 1, bytes_per_param: float = 16,
                  fit_only: bool = False) -> str:
    """The whole printed report (sections: assumptions, parameters, FLOPs/token, training, memory per
    GPU, largest model, roofline). ``fit_only``: assumptions and largest model only."""
    hw = get_hardware(hardware)
    n_total = cfg.param_count() if cfg is not None else n_params
    if not fit_only and (n_total is None or not 0 < n_total < math.inf):
        raise ValueError(f"need a model config or a finite n_params > 0, got n_params={n_params!r}")
    if tokens is not None and not 0 < tokens < math.inf:
        raise ValueError(f"tokens must be finite and > 0, got {tokens!r}")
    if isinstance(micro_batch, bool) or not isinstance(micro_batch, int) or micro_batch < 1:
        raise ValueError(f"micro_batch must be an integer >= 1, got {micro_batch!r}")
    tokens_note = "not needed" if fit_only else (
        f"{tokens:.4g} given" if tokens else
        f"none given: Chinchilla {CHINCHILLA_TOKENS_PER_PARAM}·N = {CHINCHILLA_TOKENS_PER_PARAM * n_total:.4g}")
    tokens = tokens or (0 if fit_only else CHINCHILLA_TOKENS_PER_PARAM * n_total)
    out = ["== assumptions =="] + ["- " + a for a in assumptions(
        hw, layout, mfu=mfu, seq_len=seq_len, micro_batch=micro_batch, bytes_per_param=bytes_per_param,
        bare=cfg is None, tokens_note=tokens_note, fit_only=fit_only)]
    if not fit_only:
        out += _model_sections(hw, layout, cfg, n_total, tokens, mfu, seq_len, micro_batch)
    big = largest_model(hw, layout, bytes_per_param)
    out += ["", "== largest model that fits (model states only) ==",
            f"bytes per param per GPU under this layout: {state_bytes_per_param(layout, bytes_per_param):.4g} "
            f"(of {bytes_per_param:g})",
            f"this layout (TP {layout.tp}, ZeRO-{layout.zero_stage} over {layout.dp}): {_params(big['layout'])}",
            f"fully sharded over {layout.gpus} GPUs: {layout.gpus} × {hw.hbm_bytes / GB:g} GB / {bytes_per_param:g} B"
            f" = {_params(big['fully_sharded'])}"]
    if cfg is not None and not fit_only:
        act = activation_bytes(cfg, seq_len, micro_batch, tp=layout.tp, recompute=layout.recompute)["total"]
        tight = largest_model(hw, layout, bytes_per_param, reserved_bytes=act)
        out.append(f"reserving this model's activations ({act / GB:.2f} GB, recompute {layout.recompute}): "
                   f"{_params(tight['layout'])} under this layout")
        out += _roofline_sections(hw, cfg, layout, seq_len, micro_batch)
    return "\n".join(out)


def _model_sections(hw, layout, cfg, n_total, tokens, mfu, seq_len, micro_batch) -> list[str]:
    out = ["", "== parameters =="]
    if cfg is None:
        out.append(f"total: {n_total:.4g} (bare count; no shape, so no split)")
    else:
        out += [f"shape: d_model={cfg.d_model}, n_layers={cfg.n_layers}, n_heads={cfg.n_heads}, "
                f"n_kv_heads={cfg.n_kv_heads}, d_ff={cfg.d_ff}, vocab={cfg.vocab_size}, n_experts={cfg.n_experts}",
                f"total: {n_total:,} ({n_total:.4g})",
                f"non-embedding: {cfg.param_count(include_embeddings=False):,}",
                f"embeddings + LM head: {n_total - cfg.param_count(include_embeddings=False):,}"]
        if cfg.is_moe:
            out.append(f"active per token (top-{cfg.moe_top_k} of {cfg.n_experts}): {cfg.param_count(active=True):,}")
    out += ["", "== FLOPs per token (training) =="]
    six_n = 6 * n_total
    if cfg is None:
        per_token = six_n
        out.append(f"6·N = {_sci(six_n)} (attention omitted: no shape)")
    else:
        per_token = cfg.flops_per_token(seq_len)
        attention = 12 * cfg.n_layers * cfg.d_model * (min(seq_len, cfg.sliding_window or seq_len))
        out += [f"6·N_matmul = 6 × {cfg.matmul_params():,} = {_sci(6 * cfg.matmul_params())}",
                f"attention 12·L·d·T (T={seq_len}) = {_sci(attention)}",
                f"total (ModelConfig.flops_per_token) = {_sci(per_token)}  (6·N_total = {_sci(six_n)})"]
    flops = training_flops(tokens, cfg=cfg, n_params=n_total, seq_len=seq_len)
    secs = training_seconds(flops, layout.gpus, hw, mfu)
    out += ["", "== training ==",
            f"tokens D = {tokens:.4g}",
            f"6·N·D = {_sci(6 * n_total * tokens)} FLOPs"]
    if cfg is not None:
        out.append(f"D × FLOPs/token (with attention) = {_sci(flops)} FLOPs")
    out += [f"wall-clock at MFU {mfu} on {layout.gpus} × {hw.name}: {secs:.4g} s = {_days(secs)} days",
            f"with full recomputation (×4/3): {_days(secs * 4 / 3)} days"]
    split = memory_split(layout, n_params=n_total, cfg=cfg, seq_len=seq_len, micro_batch=micro_batch)
    out += ["", f"== memory per GPU (GB; micro-batch {micro_batch} × {seq_len} tokens) ==",
            f"params {split['params'] / GB:.2f} + grads {split['grads'] / GB:.2f} + optimizer "
            f"{split['optimizer'] / GB:.2f} = model states {split['states'] / GB:.2f}"]
    for recompute in RECOMPUTE:
        act = split[f"activations_{recompute}"]
        if act is None:
            out.append(f"activations (recompute {recompute}): n/a (bare --params: no shape)")
            continue
        total = split["states"] + act
        mark = "  <- chosen" if recompute == layout.recompute else ""
        out.append(f"activations (recompute {recompute}): {act / GB:.2f}; total {total / GB:.2f} of "
                   f"{hw.hbm_bytes / GB:g}: {'fits' if total <= hw.hbm_bytes else 'DOES NOT FIT'}{mark}")
    if cfg is None:
        fits = split["states"] <= hw.hbm_bytes
        out.append(f"model states alone: {'fit' if fits else 'DO NOT FIT'} in {hw.hbm_bytes / GB:g} GB")
    need = math.ceil(zero_model_state_bytes(n_total, 1, 0)["total"] / hw.hbm_bytes)
    out.append(f"model states sharded over every GPU (ZeRO-3) need >= {need} GPUs (16·N / HBM)")
    return out


def _roofline_sections(hw, cfg, layout, seq_len, micro_batch) -> list[str]:
    tokens = seq_len * micro_batch
    mms = block_matmuls(cfg, tokens, tp=layout.tp)
    rows = [roofline_row(mm, hw.peak_flops, hw.hbm_bandwidth) for mm in mms]
    out = ["", format_roofline(rows, f"== roofline: training/prefill, {tokens:,} tokens per micro-batch "
                                     f"per GPU (TP {layout.tp}) ==")]
    ridge = ridge_point(hw.peak_flops, hw.hbm_bandwidth)
    decode = [roofline_row(mm, hw.peak_flops, hw.hbm_bandwidth) for mm in block_matmuls(cfg, micro_batch, tp=layout.tp)]
    out += ["", format_roofline(decode, f"== roofline: decode, batch b = {micro_batch} (one token per sequence): "
                                        "intensity ≈ b ==")]
    need = [decode_batch_for_ridge(mm.k, mm.n, ridge) for mm in mms if mm.name in ("QKV", "FFN down")]
    out.append(f"  decode turns compute-bound at b ≈ {need[0]:.0f} (QKV) / {need[1]:.0f} (FFN down) sequences; "
               f"ridge {ridge:.0f} FLOP/B = {hw.peak_flops / 1e12:g}e12 / {hw.hbm_bandwidth / 1e12:g}e12")
    return out


def measure_activations(preset: str = "small", *, seq_len: int = 1024, micro_batch: int = 4,
                        vocab_size: int = 50257, device: str = "cuda") -> list[dict]:
    """On CUDA: build ``TransformerLM`` for ``preset`` (fp32 weights, bf16 autocast, sdpa attention)
    and measure, around one forward + loss, ``max_memory_allocated`` minus the memory before (peak)
    and the memory still held when the forward ends (what backward keeps), against
    ``activation_bytes`` — without and with ``checkpoint_every=1``. Raises RuntimeError without CUDA."""
    if not torch.cuda.is_available():
        raise RuntimeError("--measure-activations needs CUDA")
    rows = []
    for every, recompute in ((0, "none"), (1, "full")):
        cfg = ModelConfig.from_preset(preset, vocab_size=vocab_size, context_length=seq_len, attention="sdpa",
                                      checkpoint_every=every)
        torch.manual_seed(0)
        model = TransformerLM(cfg, device=device).train()
        x = torch.randint(vocab_size, (micro_batch, seq_len), device=device)
        y = torch.randint(vocab_size, (micro_batch, seq_len), device=device)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        with torch.autocast(torch.device(device).type, dtype=torch.bfloat16):
            logits = model(x)  # (B, T, V)
        loss = F.cross_entropy(logits.float().view(-1, vocab_size), y.view(-1))
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - before
        kept = torch.cuda.memory_allocated() - before
        estimate = activation_bytes(cfg, seq_len, micro_batch, recompute=recompute)
        rows.append({"preset": preset, "recompute": recompute, "seq_len": seq_len, "micro_batch": micro_batch,
                     "estimate": estimate["total"], "estimate_logits": estimate["logits"], "peak": peak,
                     "kept": kept, "bf16_weight_copies": 2 * cfg.matmul_params(),
                     "ratio_peak": peak / estimate["total"], "ratio_kept": kept / estimate["total"],
                     "device": torch.cuda.get_device_name()})
        del model, x, y, logits, loss
    return rows


def format_measurement(rows: list[dict]) -> str:
    lines = [f"activation memory, {rows[0]['preset']} on {rows[0]['device']}: micro-batch {rows[0]['micro_batch']} × "
             f"seq {rows[0]['seq_len']}, bf16 autocast, sdpa (GB; estimate = model.costs.accounting.activation_bytes)",
             "| recompute | estimate | of which logits | forward peak | kept after forward | peak/estimate | "
             "kept/estimate | bf16 weight copies (in kept) |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['recompute']} | {r['estimate'] / GB:.3f} | {r['estimate_logits'] / GB:.3f} | "
                     f"{r['peak'] / GB:.3f} | {r['kept'] / GB:.3f} | {r['ratio_peak']:.2f} | {r['ratio_kept']:.2f} | "
                     f"{r['bf16_weight_copies'] / GB:.3f} |")
    return "\n".join(lines)


# ---- CLI (wired into ``python -m model.costs.accounting``) -----------------------------------------------


@dataclass(frozen=True)
class NapkinSettings:
    """One run's napkin report: the model (a preset, a config, a bare count or a shape) and how it is trained."""

    preset: str | None = setting(None, "model.core.config preset (nano … 2.7B); shape flags below override it")
    config: str | None = setting(None, "a ModelConfig JSON (e.g. a run's config.json)")
    params: float | None = setting(None, "a bare parameter count, e.g. 70e9 (attention FLOPs then omitted)")
    d_model: int | None = setting(None, "model width")
    n_layers: int | None = setting(None, "blocks")
    n_heads: int | None = setting(None, "attention heads")
    d_ff: int | None = setting(None, "FFN width (none: 8/3·d)")
    n_kv_heads: int | None = setting(None, "KV heads (GQA)")
    n_experts: int | None = setting(None, "MoE experts (0 dense)")
    moe_top_k: int | None = setting(None, "experts per token")
    tokens: float | None = setting(None, "training tokens D (none: 20·N, Chinchilla)")
    zero_stage: int = setting(0, "ZeRO stage over DP", choices=(0, 1, 2, 3))
    tp: int = setting(1, "tensor-parallel degree")
    bytes_per_param: float = setting(16, "model-state bytes per parameter for the largest model (mixed-precision "
                                         "AdamW)")
    fit: bool = setting(False, "print only the assumptions and the largest model that fits")
    measure_activations: bool = setting(False, "CUDA only: measure activation memory of --preset (none: small, seq "
                                               "1024, micro-batch 4) against the estimate, with and without "
                                               "checkpoint_every=1")


def add_report_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("napkin report (--preset / --config / --params / --d-model; or --fit)")
    add_config_flags(g, NapkinSettings, bool_switches=True)


def wants_report(args: argparse.Namespace) -> bool:
    given = (args.preset, args.config, args.params, args.d_model, args.n_layers, args.n_heads)
    return any(v is not None for v in given) or args.fit or args.measure_activations


def config_from_args(args: argparse.Namespace, seq_len: int) -> ModelConfig | None:
    shape = dict(d_model=args.d_model, n_layers=args.n_layers, n_heads=args.n_heads, d_ff=args.d_ff,
                 n_kv_heads=args.n_kv_heads, n_experts=args.n_experts, moe_top_k=args.moe_top_k)
    shape = {k: v for k, v in shape.items() if v is not None}
    if args.config:
        return ModelConfig.from_json(args.config).replace(context_length=seq_len, **shape)
    if args.preset:
        return ModelConfig.from_preset(args.preset, vocab_size=args.vocab, context_length=seq_len, **shape)
    if shape:
        missing = [f for f in ("d_model", "n_layers", "n_heads") if f not in shape]
        if missing:
            raise ValueError(f"without --preset, give --{' --'.join(m.replace('_', '-') for m in missing)}")
        return ModelConfig(vocab_size=args.vocab, context_length=seq_len, **shape)
    return None


def _default(value, default):
    return default if value is None else value


def run(args: argparse.Namespace) -> int:
    """The report (or the measurement) for parsed ``python -m model.costs.accounting`` arguments."""
    try:
        if args.measure_activations:
            rows = measure_activations(args.preset or "small", seq_len=_default(args.seq_len, 1024),
                                       micro_batch=_default(args.micro_batch, 4), vocab_size=args.vocab)
            print(format_measurement(rows))
            return 0
        if len(args.gpus) != 1:
            raise ValueError(f"the report takes one --gpus value, got {args.gpus}")
        seq_len = _default(args.seq_len, ModelConfig.from_json(args.config).context_length if args.config else 2048)
        cfg = config_from_args(args, seq_len)
        if cfg is not None and args.params is not None:
            raise ValueError("give either a shape (--preset/--config/--d-model) or --params, not both")
        layout = Layout(gpus=args.gpus[0], tp=args.tp, zero_stage=args.zero_stage, recompute=args.recompute)
        print(napkin_report(args.hardware, layout, cfg=cfg, n_params=args.params, tokens=args.tokens, mfu=args.mfu,
                            seq_len=seq_len, micro_batch=_default(args.micro_batch, 1),
                            bytes_per_param=args.bytes_per_param, fit_only=args.fit))
    except (ValueError, RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
