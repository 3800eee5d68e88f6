"""The from-scratch Transformer LM, in sub-packages by role: core (the model's math), training (what the loop in
``model.train`` is made of), parallelism (DDP, ZeRO, FSDP), inference (generate, speculative, quantize, export) and
costs (napkin math). ``python -m model.train`` trains.

The CS336 assignment 1 names and the most used ones, importable from here: ``Linear``, ``Embedding``, ``RMSNorm``,
``SwiGLU``, ``RotaryEmbedding``, ``silu``, ``softmax``, ``scaled_dot_product_attention``, ``CausalSelfAttention``,
``TransformerBlock``, ``TransformerLM``, ``ModelConfig``, ``cross_entropy``, ``AdamW``, ``cosine_schedule``,
``clip_grad_norm``, ``get_batch``, ``save_checkpoint`` and ``load_model``.
"""

from model.core.config import ModelConfig
from model.core.layers import (
    CausalSelfAttention,
    Embedding,
    Linear,
    RMSNorm,
    RotaryEmbedding,
    SwiGLU,
    scaled_dot_product_attention,
    silu,
    softmax,
)
from model.core.loss import cross_entropy
from model.core.transformer import TransformerBlock, TransformerLM
from model.training.checkpoint import load_model, save_checkpoint
from model.training.data import get_batch
from model.training.optim import AdamW, clip_grad_norm, cosine_schedule

__all__ = ["AdamW", "CausalSelfAttention", "Embedding", "Linear", "ModelConfig", "RMSNorm", "RotaryEmbedding", "SwiGLU",
           "TransformerBlock", "TransformerLM", "clip_grad_norm", "cosine_schedule", "cross_entropy", "get_batch",
           "load_model", "save_checkpoint", "scaled_dot_product_attention", "silu", "softmax"]
