"""Do the kernels train the same model? 200 steps with and without them, same seed, same data, same order.

    python -m bench.benchmarks.kernel_convergence [--preset small --context 1024 --batch 16 --steps 200] [--kernels all]

Liger-Kernel's convergence test at our model's scale: `kernels: none` (PyTorch + SDPA) and `kernels: all`
(or --kernels auto), bf16 autocast, torch.compile, AdamW (lr 6e-4, 20 warmup steps, cosine to 10 %), on a
learnable token stream (a fixed 997-token pattern with 10 % of tokens replaced at random, drawn once from a
seeded generator). The final loss is the mean of the last 20 steps' training losses; the check passes when
the two differ by < 1 % (exit status 1 otherwise). Losses per step go to --out as JSON.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from bench.benchmarks.kernel_select import ShapeSettings
from bench.tools.results import BenchSettings, Result, finish, parse_bench
from model.core.config import ModelConfig
from model.core.transformer import TransformerLM
from workbench.params import setting

TOLERANCE = 0.01
LAST = 20  # steps averaged into the final loss


def token_stream(vocab: int, n: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    pattern = torch.randint(vocab, (997,), generator=g)
    tokens = pattern.repeat(n // 997 + 1)[:n].clone()
    noise = torch.rand(n, generator=g) < 0.1
    tokens[noise] = torch.randint(vocab, (int(noise.sum()),), generator=g)
    return tokens


def lr_at(step: int, steps: int, lr: float = 6e-4, warmup: int = 20) -> float:
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def train(kernels: str, args, device) -> list[float]:
    cfg = ModelConfig.from_preset(args.preset, vocab_size=args.vocab, context_length=args.context)
    torch.manual_seed(args.seed)
    model = TransformerLM(cfg.replace(kernels=kernels), device=device).train()
    compiled = torch.compile(model) if device.type == "cuda" else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1,
                                  fused=device.type == "cuda")
    tokens = token_stream(args.vocab, args.steps * args.batch * args.context + args.context + 1, args.seed)
    order = torch.randperm(len(tokens) - args.context - 1, generator=torch.Generator().manual_seed(args.seed))
    autocast = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if device.type == "cuda" \
        else contextlib.nullcontext
    losses = []
    for step in range(args.steps):
        starts = order[step * args.batch:(step + 1) * args.batch]
        window = torch.stack([tokens[s:s + args.context + 1] for s in starts.tolist()]).to(device)
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, args.steps)
        with autocast():
            loss = compiled(window[:, :-1], targets=window[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.detach())
    return [float(v) for v in torch.stack(losses).cpu()]


@dataclass(frozen=True)
class KernelConvergenceBench(ShapeSettings, BenchSettings):
    steps: int = setting(200, "training steps per run", above=LAST)
    seed: int = setting(0, "seed of the weights, the stream and its order (both runs)")
    kernels: str = setting("all", "the kernel set compared with none", choices=("all", "auto"))
    out: Path = setting(Path("data/gpu_check"), "folder for kernel_convergence.json")


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(KernelConvergenceBench, argv)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    curves = {name: train(name, args, device) for name in ("none", args.kernels)}
    final = {name: sum(c[-LAST:]) / LAST for name, c in curves.items()}
    rel = final[args.kernels] / final["none"] - 1
    ok = abs(rel) < TOLERANCE
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "kernel_convergence.json").write_text(json.dumps({"final": final, "relative_difference": rel,
                                                                  "curves": curves}, indent=1))
    rows = [Result(f"{args.preset} ctx{args.context} B{args.batch} {args.steps} steps", "final_loss",
                   final[args.kernels], "nats", "kernels: none", final["none"], repeats=LAST,
                   extra={"kernels": args.kernels, "relative_difference": rel})]
    finish("gpu_convergence", rows, args,
           "python -m bench.benchmarks.kernel_convergence " + " ".join(argv if argv is not None else sys.argv[1:]))
    # the verdict last: bench.tools.gpu_check keeps a part's last line
    print(f"final loss (mean of the last {LAST} of {args.steps} steps): none {final['none']:.4f}, "
          f"{args.kernels} {final[args.kernels]:.4f}, difference {100 * rel:+.2f}% "
          f"({'within' if ok else 'OUTSIDE'} {100 * TOLERANCE:.0f}%); first step {curves['none'][0]:.3f} / "
          f"{curves[args.kernels][0]:.3f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
