"""`kernels: auto | all | none`: the model's kernel switches set at once.

- none: PyTorch and SDPA everywhere, separate projection GEMMs (the baseline the kernels must beat);
- all: every Triton kernel (attention='triton', norm='triton', ffn='triton', loss='fused') and the fused
  projection GEMMs, for ablations;
- auto: per op, whichever of ours / Inductor / SDPA `make gpu-check` measured fastest on this GPU at this
  model's shapes (lmw_kernels/selection.py reads the table); on a CPU, or for what the table lacks, the PyTorch path.

Attention stays on SDPA where our kernel cannot run it (grouped K/V heads, a sliding window).
"""

from __future__ import annotations

import warnings

import torch

from model.core.config import ModelConfig


def _device_name(device) -> str | None:
    device = torch.device(device) if device is not None else None
    if device is None and torch.cuda.is_available():
        device = torch.device("cuda")
    if device is None or device.type != "cuda":
        return None
    return torch.cuda.get_device_name(device)


def resolve_kernels(cfg: ModelConfig, device=None, table=None) -> ModelConfig:
    """cfg with `kernels` turned into the switches (and `kernels` cleared); unchanged when it is None."""
    if cfg.kernels is None:
        return cfg
    from lmw_kernels import selection

    if cfg.kernels == "none":
        chosen = dict(selection.NONE)
    elif cfg.kernels == "all":
        chosen = dict(selection.OURS)
    else:
        name = _device_name(device)
        if name is None:
            chosen = dict(selection.NONE)
        else:
            keys = selection.shape_keys(cfg.d_model, cfg.n_heads, cfg.d_ff, cfg.vocab_size, cfg.context_length,
                                        cfg.n_kv_heads * cfg.d_head)
            chosen, notes = selection.switches(name, keys, table)
            for note in notes:
                warnings.warn(f"kernels: auto: {note}", stacklevel=2)
    if chosen["attention"] == "triton" and (cfg.n_kv_heads != cfg.n_heads or cfg.sliding_window is not None):
        chosen["attention"] = "sdpa"
    return cfg.replace(kernels=None, **{selection.FIELDS[op]: value for op, value in chosen.items()})
