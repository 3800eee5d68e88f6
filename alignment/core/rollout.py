"""Rollouts: prompts (text) -> completions (text) for our TransformerLM and Hugging Face causal LMs.

Mirrors the sampling step of CS336 assignment 5 (vLLM ``generate`` with ``stop=["</answer>"]`` and
``include_stop_str_in_output=True``): each completion stops at the end-of-text token (not included) and
is cut right after the first stop string (the stop string kept). Our models generate through
``model.inference.generate.generate`` (left-padded batches, KV cache); HF models through their ``generate``
(left padding, greedy when ``temperature == 0``). Tokenization goes through
``alignment.core.policy.TokenizerAdapter`` so both tokenizer kinds look the same.

Prompts that do not fit the context are cut from the left (their end, the part the model continues,
is kept); an empty prompt is replaced by the end-of-text token, so no input ever raises.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from alignment.core.policy import Policy, TokenizerAdapter, clean_text, is_ours, model_device
from model.inference.generate import generate

DEFAULT_STOP = ("</answer>",)


def cut_at_stop(text: str, stop: Sequence[str] | None) -> str:
    """``text`` up to and including the earliest occurrence of any stop string (unchanged if none occurs)."""
    ends = [i + len(s) for s in stop or () if s and (i := text.find(s)) >= 0]
    return text[:min(ends)] if ends else text


def _decode(tok: TokenizerAdapter, ids: list[int]) -> str:
    try:
        return tok.decode(ids)
    except (KeyError, IndexError, ValueError, TypeError):  # ids past the tokenizer (a padded model vocab)
        vocab = getattr(tok.tokenizer, "vocab", None)
        if isinstance(vocab, dict):
            return b"".join(vocab.get(i, "\ufffd".encode()) for i in ids).decode("utf-8", errors="replace")
        return "".join(tok.decode([i]) if i < tok.vocab_size else "\ufffd" for i in ids)


def _prompt_ids(tok: TokenizerAdapter, prompts: Sequence[str], room: int | None) -> list[list[int]]:
    """Token ids of each prompt (BOS first when the tokenizer adds one), left-cut to ``room`` tokens."""
    out = []
    for p in prompts:
        ids = ([tok.bos_id] if tok.bos_id is not None else []) + tok.encode(clean_text(p))
        if not ids:
            ids = [tok.eos_id if tok.eos_id is not None else 0]
        if room is not None and len(ids) > room:
            ids = ids[len(ids) - room:]
        out.append(ids)
    return out


def _generate_ours(model, tok, prompts, max_new_tokens, temperature, top_p, seed) -> list[list[int]]:
    ctx = model.cfg.context_length
    max_new = max(0, min(max_new_tokens, ctx - 1))
    ids = _prompt_ids(tok, prompts, ctx - max_new)
    vocab = model.cfg.vocab_size
    ids = [[t if 0 <= t < vocab else (tok.eos_id or 0) for t in row] for row in ids]
    eos = tok.eos_id if tok.eos_id is not None and tok.eos_id < vocab else None
    return generate(model, ids, max_new, temperature=temperature, top_p=top_p, eos_id=eos, seed=seed)


@torch.inference_mode()
def _generate_hf(model, tok, prompts, max_new_tokens, temperature, top_p, seed) -> list[list[int]]:
    ctx = context_length(model)
    room = None if ctx is None else max(1, ctx - max_new_tokens)
    ids = _prompt_ids(tok, prompts, room)
    width = max(map(len, ids))
    device = model_device(model)
    input_ids = torch.full((len(ids), width), tok.pad_id, dtype=torch.long)
    attention = torch.zeros((len(ids), width), dtype=torch.long)
    for i, row in enumerate(ids):  # left padding: every prompt ends in the last column
        input_ids[i, width - len(row):] = torch.tensor(row, dtype=torch.long)
        attention[i, width - len(row):] = 1
    if seed is not None:
        torch.manual_seed(seed)
    kwargs = {"do_sample": temperature > 0}
    if temperature > 0:
        kwargs.update(temperature=temperature, top_p=top_p if top_p is not None else 1.0, top_k=0)
    else:
        kwargs.update(temperature=None, top_p=None, top_k=None)
    out = model.generate(input_ids=input_ids.to(device), attention_mask=attention.to(device),
                         max_new_tokens=max_new_tokens, pad_token_id=tok.pad_id, eos_token_id=tok.eos_id, **kwargs)
    rows = out[:, width:].tolist()
    if tok.eos_id is not None:
        rows = [row[:row.index(tok.eos_id)] if tok.eos_id in row else row for row in rows]
    return rows


def context_length(model) -> int | None:
    """The longest sequence ``model`` takes (prompt and response together); None when it does not say."""
    if is_ours(model):
        return model.cfg.context_length
    return getattr(getattr(model, "config", None), "max_position_embeddings", None)


def check_fits(model, tokenizer, prompts: Sequence[str], max_new_tokens: int) -> None:
    """A ValueError (one line) when the longest of ``prompts`` plus ``max_new_tokens`` exceeds the model's context:
    generation would cut the prompt from the left to make room, and score what the model wrote about nothing."""
    context = context_length(model)
    if context is None or not prompts:
        return
    longest = max(map(len, _prompt_ids(TokenizerAdapter(tokenizer), sorted(set(prompts)), None)))
    if longest + max_new_tokens > context:
        raise ValueError(f"max_new_tokens {max_new_tokens} + the longest prompt ({longest} tokens) exceeds the "
                         f"model's context of {context} tokens: give --max-new-tokens {max(context - longest, 0)} "
                         "or less")


def rollout(policy_or_model, tokenizer, prompts: Sequence[str], max_new_tokens: int, temperature: float = 1.0,
            top_p: float | None = None, stop: Sequence[str] | None = DEFAULT_STOP, seed: int | None = None,
            batch_size: int = 64, return_eos: bool = False) -> list[str] | tuple[list[str], list[bool]]:
    """Completions (text) of ``prompts``, one per prompt, in order.

    ``policy_or_model``: an ``alignment.core.policy.Policy`` (then ``tokenizer`` may be None) or a model (our
    ``TransformerLM`` or a HF causal LM). ``temperature == 0`` is greedy. Generation runs in batches of
    ``batch_size`` prompts; ``seed`` seeds the sampler (batch k uses ``seed + k``). With ``return_eos``
    also returns, per completion, whether it ended by sampling the end-of-text token (not by a stop
    string or the token limit): training on such a rollout must include that token."""
    if isinstance(policy_or_model, Policy):
        model, tokenizer = policy_or_model.model, tokenizer or policy_or_model.tokenizer
    else:
        model = policy_or_model
    if tokenizer is None:
        raise ValueError("rollout needs a tokenizer (or a Policy that holds one)")
    if not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an int >= 0, got {max_new_tokens!r}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature!r}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    if isinstance(stop, str):
        stop = (stop,)
    tok = TokenizerAdapter(tokenizer)
    prompts = [clean_text(p) for p in prompts]
    gen = _generate_ours if is_ours(model) else _generate_hf
    was_training = getattr(model, "training", False)
    if was_training:
        model.eval()
    try:
        out: list[str] = []
        eos: list[bool] = []
        limit = min(max_new_tokens, model.cfg.context_length - 1) if is_ours(model) else max_new_tokens
        for k, start in enumerate(range(0, len(prompts), batch_size)):
            batch = prompts[start: start + batch_size]
            ids = gen(model, tok, batch, max_new_tokens, temperature, top_p, None if seed is None else seed + k)
            for row in ids:
                full = _decode(tok, row)
                text = cut_at_stop(full, stop)
                out.append(text)
                eos.append(len(row) < limit and text == full)
        return (out, eos) if return_eos else out
    finally:
        if was_training:
            model.train()
