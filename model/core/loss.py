"""Cross-entropy written from the definition: subtract the max, log-sum-exp, mean over positions."""

from __future__ import annotations

import torch
from torch import Tensor


def cross_entropy(logits: Tensor, targets: Tensor, ignore_index: int | None = None) -> Tensor:
    """Mean over positions of −log softmax(logits)[target]; logits (..., V), targets (...).

    Computed in fp32 whatever the logits' dtype; positions whose target is ``ignore_index`` are
    left out of the mean."""
    logits = logits.float()
    # The shift cancels in the loss, so it needs no gradient (amax's backward is costly).
    shifted = logits - logits.amax(dim=-1, keepdim=True).detach()
    log_normalizer = shifted.exp().sum(dim=-1).log()  # log Σ exp(x − max)
    if ignore_index is not None:
        keep = targets != ignore_index
        targets = targets.masked_fill(~keep, 0)
    target_logit = shifted.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    losses = log_normalizer - target_logit
    if ignore_index is None:
        return losses.mean()
    return (losses * keep).sum() / keep.sum().clamp(min=1)


def perplexity(loss: float) -> float:
    return float(torch.tensor(loss).exp())
