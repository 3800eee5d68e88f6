"""DPO's model-running side: summed log-probs of preference pairs, held-out preference accuracy, and CS336's
per-instance DPO loss. The loss math itself (``dpo_loss``) stays in ``alignment.core.losses``, which runs no model.
"""

from __future__ import annotations

import torch
from torch import Tensor

from alignment.core.losses import dpo_loss
from alignment.core.policy import (
    ALPACA_TEMPLATE,
    TokenizerAdapter,
    get_response_log_probs,
    model_device,
    sequence_log_probs,
    split_template,
    tokenize_prompt_and_output,
)


def pair_log_probs(model, tokenizer, pairs: list[dict], context: int | None = None) -> tuple[Tensor, Tensor]:
    """Summed log-probs (B,), (B,) of each pair's chosen and rejected response + EOS given its prompt, from ONE
    forward pass over the 2B stacked sequences (chosen first). Sequences are cut at ``context`` tokens like
    ``alignment.sft`` cuts them (the end of a too-long response is lost)."""
    prompts = [p["prompt"] for p in pairs] * 2
    responses = [p["chosen"] for p in pairs] + [p["rejected"] for p in pairs]
    batch = tokenize_prompt_and_output(prompts, responses, tokenizer, add_bos=True, append_eos=True)
    if context is not None:
        batch = {k: v[:, :context] for k, v in batch.items()}
    device = model_device(model)
    batch = {k: v.to(device) for k, v in batch.items()}
    log_probs = get_response_log_probs(model, batch["input_ids"], batch["labels"])["log_probs"]  # (2B, T)
    summed = (log_probs * batch["response_mask"]).sum(dim=-1)  # (2B,)
    return summed[: len(pairs)], summed[len(pairs):]


def preference_eval(model, reference, tokenizer, pairs: list[dict], beta: float, batch_size: int,
                    context: int | None = None) -> dict:
    """Held-out ``{"pref_accuracy", "margin", "pref_n"}``: the fraction of pairs whose implicit reward margin
    β[(log π - log π_ref)(chosen) - (log π - log π_ref)(rejected)] is > 0 (TRL's rewards/accuracies), its mean."""
    if not pairs:
        return {"pref_accuracy": None, "margin": None, "pref_n": 0}
    was_training = model.training
    model.eval()
    margins = []
    with torch.no_grad():
        for i in range(0, len(pairs), batch_size):
            chunk = pairs[i: i + batch_size]
            pc, pr = pair_log_probs(model, tokenizer, chunk, context)
            rc, rr = pair_log_probs(reference, tokenizer, chunk, context)
            margins.append(beta * ((pc - rc.to(pc.device)) - (pr - rr.to(pr.device))))
    model.train(was_training)
    m = torch.cat(margins)
    return {"pref_accuracy": float((m > 0).float().mean()), "margin": float(m.mean()), "pref_n": len(pairs)}


def per_instance_dpo_loss(policy, reference, tokenizer, beta: float, prompt: str, chosen: str, rejected: str,
                          template: str | None = None) -> Tensor:
    """DPO loss of one preference pair (Rafailov et al. 2023; CS336 A5 ``per_instance_dpo_loss``).

    Prompt and responses are laid out with ``template`` (default: CS336's Alpaca template); each
    response (plus any template text after ``{response}``) ends with EOS. Log-probs are summed
    over those response tokens only; the reference runs without gradients on its own device."""
    tok = TokenizerAdapter(tokenizer)
    prefix, suffix = split_template(ALPACA_TEMPLATE if template is None else template, prompt)
    prompts, responses = [prefix, prefix], [chosen + suffix, rejected + suffix]
    policy_logps = sequence_log_probs(policy, tok, prompts, responses, append_eos=True)
    with torch.no_grad():
        ref_logps = sequence_log_probs(reference, tok, prompts, responses, append_eos=True)
    ref_logps = ref_logps.to(model_device(policy))
    loss, _ = dpo_loss(policy_logps[:1], policy_logps[1:], ref_logps[:1], ref_logps[1:], beta)
    return loss
