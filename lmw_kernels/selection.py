"""Which implementation of each model op is fastest on which GPU: the table behind `kernels: auto`.

`python -m bench.benchmarks.kernel_select` (a part of `make gpu-check`) times, at a model's shapes, our Triton kernel
against the alternatives a compiled model would otherwise run (Inductor's code for the PyTorch reference, or
SDPA for attention) and writes the winner per op into `lmw_kernels/selection.json`:

    {"NVIDIA H200": {"norm": {"hidden=768": {"choice": "torch", "winner": "inductor", "ms": {...}, ...}}, ...}}

`switches(device_name, shapes)` reads it back as the model's switches (attention, norm, ffn, loss and
fused_projections: Q/K/V and W1/W3 as one GEMM each). An op, shape or GPU the table
does not hold gets the PyTorch path (no kernel is used where it was never shown to win), and says so.
Plain JSON and no torch: the model reads it while building, the bench writes it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

TABLE = Path(__file__).with_name("selection.json")
# op -> the ModelConfig field it sets
FIELDS = {"attention": "attention", "norm": "norm", "ffn": "ffn", "loss": "loss", "projections": "fused_projections"}
OPS = tuple(FIELDS)
OURS = {"attention": "triton", "norm": "triton", "ffn": "triton", "loss": "fused", "projections": True}  # all
NONE = {"attention": "sdpa", "norm": "torch", "ffn": "torch", "loss": "torch", "projections": False}  # none


def shape_keys(d_model: int, n_heads: int, d_ff: int, vocab_size: int, context_length: int,
               kv_width: int | None = None) -> dict[str, str]:
    """The shape each op is looked up by (the batch is left out: the table is measured at a training batch)."""
    kv_width = d_model if kv_width is None else kv_width
    return {"attention": f"d_head={d_model // n_heads},seq={context_length}", "norm": f"hidden={d_model}",
            "ffn": f"d_ff={d_ff}", "loss": f"d={d_model},vocab={vocab_size}",
            "projections": f"d={d_model},kv={kv_width},d_ff={d_ff}"}


def read(path: str | Path | None = None) -> dict:
    path = Path(path or os.environ.get("LMW_KERNEL_TABLE") or TABLE)
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not a kernel selection table ({exc.msg} at line {exc.lineno})") from None


def switches(device_name: str, keys: dict[str, str], path: str | Path | None = None) -> tuple[dict, list[str]]:
    """({op: choice}, notes): the measured winner per op for this GPU and shape, else the PyTorch path."""
    by_device = read(path).get(device_name, {})
    chosen, notes = {}, []
    for op in OPS:
        entry = by_device.get(op, {}).get(keys[op])
        if entry is None:
            chosen[op] = NONE[op]
            notes.append(f"{op}: no measurement for {device_name!r} at {keys[op]}: {NONE[op]}")
        else:
            chosen[op] = entry["choice"]
    return chosen, notes


def update(device_name: str, entries: dict[str, dict[str, dict]], path: str | Path | None = None) -> Path:
    """Merge {op: {shape key: entry}} measured on `device_name` into the table (written atomically)."""
    path = Path(path or TABLE)
    table = read(path)
    for op, by_shape in entries.items():
        table.setdefault(device_name, {}).setdefault(op, {}).update(by_shape)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path
