"""Memory of the fused LM head + cross-entropy against eager, counting only what each implementation allocates.

Two measures over one forward + backward, per dtype: the bytes saved for backward (``saved_tensors_hooks``) and the
peak of live storages created inside the call (a ``TorchDispatchMode``, the CPU stand-in for the CUDA allocator's
peak). The inputs (hidden, weight, targets) are the caller's, whoever saves them. On CPU run it under the Triton
interpreter so that the fused side is the Triton path, not the torch fallback:

    TRITON_INTERPRET=1 python -m bench.benchmarks.ce_memory [--tokens 256 --d-model 64 --vocab 32768]

tests/lmw_kernels/test_cross_entropy.py asserts the goal (both ratios >= 3) with ``memory_bytes``.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import torch
from torch.autograd.graph import saved_tensors_hooks
from torch.utils._python_dispatch import TorchDispatchMode

from bench.tools.results import BenchSettings, Result, finish, parse_bench
from lmw_kernels.cross_entropy import fused_linear_cross_entropy, linear_cross_entropy_torch
from lmw_kernels.runtime import INTERPRET
from workbench.params import setting, usage_error

DTYPES = {"fp32": torch.float32, "fp16": torch.float16}


class LiveBytes(TorchDispatchMode):
    """Peak bytes of tensor storages created inside the mode and still alive (CPU allocator stand-in)."""

    def __init__(self):
        super().__init__()
        self.live, self.count, self.peak, self.seen = {}, {}, 0, set()

    def _drop(self, key, ident):
        self.seen.discard(ident)
        self.count[key] -= 1
        if self.count[key] == 0:
            del self.count[key], self.live[key]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for o in out if isinstance(out, tuple | list) else (out,):
            if isinstance(o, torch.Tensor) and id(o) not in self.seen:
                key = o.untyped_storage().data_ptr()
                self.seen.add(id(o))
                self.live.setdefault(key, o.untyped_storage().nbytes())
                self.count[key] = self.count.get(key, 0) + 1
                weakref.finalize(o, self._drop, key, id(o))
        self.peak = max(self.peak, sum(self.live.values()))
        return out


def memory_bytes(fn, h, w, t, **kw) -> tuple[int, int]:
    """(bytes saved for backward, peak live intermediate bytes over forward + backward) of ``fn(h, w, t)``,
    counting only storage the implementation allocates."""
    h = h.detach().clone().requires_grad_()
    w = w.detach().clone().requires_grad_()
    inputs = {x.untyped_storage().data_ptr() for x in (h, w, t)}
    saved = {}

    def pack(x):
        if x.untyped_storage().data_ptr() not in inputs:
            saved[x.untyped_storage().data_ptr()] = x.untyped_storage().nbytes()
        return x

    with LiveBytes() as mode:
        with saved_tensors_hooks(pack, lambda x: x):
            loss = fn(h, w, t, **kw)
        loss.backward()
        del loss
    return sum(saved.values()), mode.peak


def inputs(n: int, d: int, v: int, dtype, device: str, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(n, d, generator=g)
    w = torch.randn(v, d, generator=g) * d ** -0.5 * 2.0
    t = torch.randint(0, v, (n,), generator=g)
    return h.to(device, dtype), w.to(device, dtype), t.to(device)


def cuda_peak_bytes(fn, h, w, t) -> int:
    """The CUDA caching allocator's peak over forward + backward, above what was allocated before the call (the
    inputs); includes the gradients dh and dw, which both implementations allocate alike."""
    h = h.detach().clone().requires_grad_()
    w = w.detach().clone().requires_grad_()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    loss = fn(h, w, t)
    loss.backward()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before


DEFAULT_SHAPE = (256, 64, 32768)


def measure(n: int, d: int, v: int, device: str) -> list[Result]:
    rows = []
    shape = "" if (n, d, v) == DEFAULT_SHAPE else f"@N{n}_d{d}_V{v}"  # one row name per shape
    for label, dtype in DTYPES.items():
        h, w, t = inputs(n, d, v, dtype, device)
        eager = memory_bytes(linear_cross_entropy_torch, h, w, t)
        fused = memory_bytes(fused_linear_cross_entropy, h, w, t)
        metrics = ["saved_mib", "peak_mib"]
        if device == "cuda":
            eager += (cuda_peak_bytes(linear_cross_entropy_torch, h, w, t),)
            fused += (cuda_peak_bytes(fused_linear_cross_entropy, h, w, t),)
            metrics.append("cuda_peak_mib")
        for i, metric in enumerate(metrics):
            rows.append(Result(f"fused/{label}{shape}", metric, fused[i] / 2**20, "MiB (ratio: eager / fused)",
                               f"eager/{label}{shape}", eager[i] / 2**20, eager[i] / max(fused[i], 1),
                               extra={"tokens": n, "d_model": d, "vocab": v}))
    return rows


@dataclass(frozen=True)
class CeMemoryBench(BenchSettings):
    tokens: int = setting(256, "N, rows of hidden states", at_least=1)
    d_model: int = setting(64, "d, the hidden size", at_least=1)
    vocab: int = setting(32768, "V, the vocabulary", at_least=1)
    area: str | None = setting(None, "results file (default ce_memory on CPU, gpu_ce_memory on CUDA)")


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(CeMemoryBench, argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and not INTERPRET:
        usage_error("on CPU set TRITON_INTERPRET=1, or the fused side would not run the Triton kernel")
    rows = measure(args.tokens, args.d_model, args.vocab, device)
    command = ("TRITON_INTERPRET=1 python -m bench.benchmarks.ce_memory" if device == "cpu"
               else "python -m bench.benchmarks.ce_memory")
    if (args.tokens, args.d_model, args.vocab) != DEFAULT_SHAPE:
        command += f" --tokens {args.tokens} --d-model {args.d_model} --vocab {args.vocab}"
    area = args.area or ("ce_memory" if device == "cpu" else "gpu_ce_memory")
    return finish(area, rows, args, command)


if __name__ == "__main__":
    raise SystemExit(main())
