"""End-to-end section of ``python -m bench.kernel_ops``: training-step throughput and MFU with and
without our kernels.

Rows per (preset, context, batch), bf16 autocast, torch.compile, fused torch AdamW, a full step
(forward, backward, optimizer):
- reference: the plain PyTorch GPT of bench.model_train (nn.Linear, nn.RMSNorm, SDPA), the anchor the
  issue quotes (39.9% MFU for small at context 1024 on an H100);
- ours, no kernels: TransformerLM with attention='sdpa' and the PyTorch norm/FFN/loss;
- ours, kernels: attention='triton', norm='triton', ffn='triton', loss='fused'.
MFU = tokens/s · flops_per_token / the device's peak bf16 FLOP/s (workbench.hardware.PEAK_FLOPS).

``bench.kernel_ops`` runs it as its section (5); the kernels themselves import nothing of ours.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F

from bench.model_train import RefGPT
from bench.timing import table, timed
from model.config import ModelConfig
from model.train import peak_flops
from model.transformer import TransformerLM

KERNEL_SWITCHES = dict(attention="triton", norm="triton", ffn="triton", loss="fused")
BASELINE_SWITCHES = dict(attention="sdpa", norm="torch", ffn="torch", loss="torch")


def _step_fn(model, compiled, x, y, optimizer, autocast, loss_in_model: bool):
    def step():
        with autocast():
            if loss_in_model:
                loss = compiled(x, targets=y)
            else:
                loss = F.cross_entropy(compiled(x).flatten(0, 1).float(), y.flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step


def bench_end_to_end(args, device: torch.device, vocab: int = 32768, steps: int = 10, warmup: int = 3) -> list[list]:
    cuda = device.type == "cuda"
    vocab = vocab if cuda else 300
    steps, warmup = (steps, warmup) if cuda else (1, 1)
    peak = peak_flops(str(device), None)
    rows = []
    for preset, context, batch in args.e2e:
        cfg = ModelConfig.from_preset(preset, vocab_size=vocab, context_length=context)
        flops = cfg.flops_per_token()
        gen = torch.Generator().manual_seed(0)
        data = torch.randint(vocab, (batch, context + 1), generator=gen).to(device)
        x, y = data[:, :-1], data[:, 1:]
        variants = [("reference GPT (nn.*, SDPA)", lambda cfg=cfg: RefGPT(cfg), False),
                    ("ours, no kernels", lambda cfg=cfg: TransformerLM(cfg.replace(**BASELINE_SWITCHES)), True),
                    ("ours, Triton kernels", lambda cfg=cfg: TransformerLM(cfg.replace(**KERNEL_SWITCHES)), True)]
        base_tps = None
        for name, build, loss_in_model in variants:
            torch.manual_seed(0)
            model = build().to(device).train()
            compiled = model if args.no_compile else torch.compile(model)
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), fused=cuda)
            autocast = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if cuda else contextlib.nullcontext
            seconds = timed(_step_fn(model, compiled, x, y, optimizer, autocast, loss_in_model), warmup, steps, device)
            tps = x.numel() / seconds
            base_tps = base_tps or tps
            rows.append([f"{preset} ctx{context} B{batch}", name, f"{1000 * seconds:.1f}", f"{tps:,.0f}",
                         f"{100 * tps * flops / peak:.1f}%" if peak else "-", f"{tps / base_tps:.2f}x"])
            del model, compiled, optimizer
            if cuda:
                torch.cuda.empty_cache()
    print(table(f"(5) training step (forward, backward, fused AdamW), vocab {vocab}, "
                f"{'bf16 autocast' if cuda else 'fp32'}{'' if args.no_compile else ', torch.compile'}",
                ["shape", "model", "ms/step", "tokens/s", "MFU", "vs reference"], rows))
    return rows
