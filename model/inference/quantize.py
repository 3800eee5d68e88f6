"""Weight-only int8 quantization (per-output-channel absmax) for inference, plus memory and perplexity.

Each ``model.core.layers.Linear`` weight W (d_out, d_in) is stored as int8 ``W_q = round(W / s)`` with one
fp32 scale per output channel ``s = absmax(W[o, :]) / 127`` (the symmetric "absmax" scheme of
Dettmers et al. 2022, LLM.int8(), §3.1, applied row-wise as in its vector-wise quantization; the
same per-channel weight-only layout as GPTQ/AWQ checkpoints before their error correction).
Rounding to nearest bounds the per-element error by s/2. Activations stay in floating point:
forward is ``x @ (W_q · s[:, None])ᵀ``, dequantizing on the fly. This saves memory (1 byte per
weight instead of 4, plus 4 bytes per row) but NOT time on CPU, where the dequantized matrix is
rebuilt every call; the speed win needs a fused int8 kernel that reads W_q from memory directly.

Left in floating point: the token embedding (a row gather, not a matmul: it reads one row per
token, so int8 would save memory only, and LLM.int8() / bitsandbytes also leave it alone), the
norms, MoE expert stacks (parameters, not Linear modules) and MoE routers (tiny, and a rounding
error there flips discrete expert choices). With tied embeddings the one shared matrix is
quantized once and both the head and the embedding read it (:class:`Int8Embedding`): the head's
per-output-channel scale is exactly a per-row scale of the embedding table.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
from torch import Tensor, nn

from model.core.layers import Embedding, Linear
from model.core.loss import cross_entropy
from model.training.data import batch_rng, get_batch


def quantize_absmax(weight: Tensor) -> tuple[Tensor, Tensor]:
    """Per-row symmetric int8: (weight_int8 (d_out, d_in) int8, scale (d_out,) fp32 = absmax/127).

    An all-zero row gets scale 1 (any scale represents it exactly) so dequantizing never divides by 0."""
    w = weight.detach().float()
    absmax = w.abs().amax(dim=1)
    scale = torch.where(absmax > 0, absmax / 127.0, torch.ones_like(absmax))
    w_int8 = (w / scale[:, None]).round().clamp(-127, 127).to(torch.int8)
    return w_int8, scale


class Int8Linear(nn.Module):
    """Inference-only ``Linear`` with an int8 weight and one fp32 scale per output channel."""

    def __init__(self, d_in: int, d_out: int, device=None):
        super().__init__()
        self.register_buffer("weight_int8", torch.zeros(d_out, d_in, dtype=torch.int8, device=device))
        self.register_buffer("scale", torch.ones(d_out, dtype=torch.float32, device=device))

    @classmethod
    def from_linear(cls, linear: Linear) -> Int8Linear:
        d_out, d_in = linear.weight.shape
        layer = cls(d_in, d_out, device=linear.weight.device)
        layer.weight_int8, layer.scale = quantize_absmax(linear.weight)
        return layer

    def dequantized(self, dtype: torch.dtype = torch.float32) -> Tensor:
        """The weight the layer computes with, (d_out, d_in)."""
        return self.weight_int8.to(dtype) * self.scale[:, None].to(dtype)

    @property
    def weight(self) -> Tensor:
        """Dequantized fp32 weight, for code that reads ``.weight`` (device/dtype, ``new_cache``)."""
        return self.dequantized()

    def forward(self, x: Tensor) -> Tensor:
        return x @ self.dequantized(x.dtype).T

    def extra_repr(self) -> str:
        d_out, d_in = self.weight_int8.shape
        return f"d_in={d_in}, d_out={d_out}, int8 per-channel absmax"


class Int8Embedding(nn.Module):
    """Embedding reading rows of the tied LM head's int8 table with its per-row scales.

    The head is held outside the module tree, so its buffers are stored, saved and moved once."""

    def __init__(self, head: Int8Linear):
        super().__init__()
        self._head = (head,)  # a tuple: not registered as a submodule

    @property
    def weight(self) -> Tensor:
        return self._head[0].weight

    def forward(self, token_ids: Tensor) -> Tensor:
        head = self._head[0]
        return head.weight_int8[token_ids].float() * head.scale[token_ids][..., None]  # (..., d)


def quantize_int8(model: nn.Module, inplace: bool = False, skip: tuple[str, ...] = ("router",)) -> nn.Module:
    """Replace every ``model.core.layers.Linear`` (LM head included) by an :class:`Int8Linear`.

    Returns a quantized deep copy (the fp32 model is untouched) unless ``inplace``. Modules whose
    attribute name is in ``skip`` stay fp32 (default: MoE routers). With tied embeddings the shared
    matrix is quantized once and the embedding becomes an :class:`Int8Embedding` on it. The result
    is for inference: its int8 buffers take no gradients. Load a saved quantized state dict into
    ``quantize_int8(TransformerLM(cfg), inplace=True)``."""
    if not inplace:
        model = copy.deepcopy(model)
    head = getattr(model, "lm_head", None)
    embeddings = getattr(model, "token_embeddings", None)
    tied = isinstance(head, Linear) and isinstance(embeddings, Embedding) and head.weight is embeddings.weight
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, Linear) and name not in skip:
                setattr(parent, name, Int8Linear.from_linear(child))
    if tied:
        model.token_embeddings = Int8Embedding(model.lm_head)
    return model


def model_bytes(model: nn.Module) -> int:
    """Bytes of all parameters and buffers, each distinct storage counted once (tied weights,
    a RoPE table shared by every layer)."""
    seen: dict[tuple, int] = {}
    for tensor in [*model.parameters(), *model.buffers()]:
        if tensor.numel() == 0:
            continue
        key = (tensor.device, tensor.untyped_storage().data_ptr())
        seen[key] = max(seen.get(key, 0), tensor.untyped_storage().nbytes())
    return sum(seen.values())


@torch.inference_mode()
def perplexity(model: nn.Module, tokens: np.ndarray, context_length: int, batches: int = 8, batch_size: int = 8,
               seed: int = 0) -> float:
    """exp(mean next-token cross-entropy) over ``batches`` fixed windows of ``context_length + 1``
    tokens, drawn with ``model.training.data.batch_rng(seed, i, split="val")`` (the training loop's
    validation windows): fp32 and int8 models given the same seed see the same tokens."""
    if batches < 1:
        raise ValueError(f"batches must be >= 1, got {batches}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if not 1 <= context_length <= model.cfg.context_length:
        raise ValueError(f"context_length must be in [1, {model.cfg.context_length}] (the model's), "
                         f"got {context_length}")
    device = next(iter(model.state_dict().values())).device
    total = 0.0
    for i in range(batches):
        x, y = get_batch(tokens, batch_size, context_length, device, rng=batch_rng(seed, i, split="val"))
        total += float(cross_entropy(model(x), y))
    return math.exp(total / batches)
