"""Speculative decoding: a small draft model proposes, the target model verifies in one forward.

Leviathan, Kalman & Matias 2023 ("Fast Inference from Transformers via Speculative Decoding",
Algorithm 1) and Chen et al. 2023 ("Accelerating LLM Decoding with Speculative Sampling"). Each
round the draft samples ``gamma`` tokens x_1..x_γ from its distributions q_i (one cached
forward each); the target scores the pending token plus all drafts in ONE cached forward, giving
p_1..p_{γ+1}. Token x_i is accepted with probability min(1, p_i(x_i)/q_i(x_i)); at the first
rejection a token is drawn from norm(max(0, p_i − q_i)) and the round ends; if every draft is
accepted a bonus token is drawn from p_{γ+1}. The emitted tokens are distributed exactly as if
they were sampled from the target alone (Leviathan et al., Theorem 3.5). With temperature 0 the
rule reduces to "accept while the draft's argmax equals the target's, then take the target's
argmax", so the output is identical to plain greedy decoding.

p and q are the processed distributions (temperature, then top-k, then top-p) of
``model.inference.generate.processed_probs``, the very function ``sample_next`` draws from.

KV caches: each model's cache holds every token of the sequence but the last (the "pending"
token, fed at the start of the next round). After a rejection the caches are rolled back by
resetting ``KVCache.length``; stale slots past it are overwritten by the next forward.

Batch size 1 only (one prompt): the number of accepted tokens differs per sequence, so batching
needs ragged caches, which this reference implementation does not attempt.
"""

from __future__ import annotations

import operator
import time

import torch
from torch import Tensor

from model.inference.generate import generate, processed_probs


def _draw(probs: Tensor, generator: torch.Generator | None) -> int:
    return int(torch.multinomial(probs, 1, generator=generator))


def verify(p: Tensor, q: Tensor, drafts: list[int], generator: torch.Generator | None = None,
           greedy: bool = False) -> tuple[int, int]:
    """The acceptance rule for one round: (number of drafts accepted, the token emitted after them).

    p: (k+1, V) target distributions at the k draft positions and one past them; q: (k, V) the
    draft distributions the k ``drafts`` were sampled from. ``greedy`` compares argmaxes only."""
    k = len(drafts)
    if p.shape[0] != k + 1 or q.shape[0] != k:
        raise ValueError(f"verify needs p with k+1={k + 1} rows and q with k={k} rows, "
                         f"got {p.shape[0]} and {q.shape[0]}")
    for i, x in enumerate(drafts):
        if greedy:
            target = int(p[i].argmax())
            if x != target:
                return i, target
            continue
        ratio = float(p[i, x]) / float(q[i, x])  # q[i, x] > 0: x was drawn from q[i]
        u = float(torch.rand((), generator=generator, device=p.device))
        if u >= ratio:  # rejected with probability 1 - min(1, p/q)
            residual = (p[i] - q[i]).clamp(min=0)
            if float(residual.sum()) <= 0:  # p == q up to rounding: rejection had probability ~0
                residual = p[i]
            return i, _draw(residual / residual.sum(), generator)
    return k, int(p[k].argmax()) if greedy else _draw(p[k], generator)


def _as_ids(prompt) -> list[int]:
    """The prompt as a list of Python ints (numpy / torch integers accepted), else ValueError."""
    try:
        ids = [operator.index(t) for t in prompt]
    except TypeError:
        ids = []
    if not ids:
        raise ValueError(f"prompt must be a non-empty list of token ids (batch size 1), got {prompt!r:.80}")
    return ids


def _check(target, draft, prompt: list[int], max_new_tokens: int, gamma: int) -> None:
    tv, dv = target.cfg.vocab_size, draft.cfg.vocab_size
    if tv != dv:
        raise ValueError(f"draft vocab_size={dv} differs from target vocab_size={tv}: "
                         "speculative decoding needs one shared tokenizer")
    if gamma < 1:
        raise ValueError(f"gamma must be >= 1, got {gamma}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    bad = [t for t in prompt if not 0 <= t < tv]
    if bad:
        raise ValueError(f"prompt holds token id {bad[0]} outside the vocab (size {tv})")
    for name, model in (("target", target), ("draft", draft)):
        if len(prompt) + max_new_tokens > model.cfg.context_length:
            raise ValueError(f"prompt has {len(prompt)} tokens + max_new_tokens={max_new_tokens} > the {name}'s "
                             f"context_length={model.cfg.context_length}")


@torch.inference_mode()
def speculative_generate(target, draft, prompt: list[int], max_new_tokens: int, gamma: int = 4,
                         temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
                         eos_id: int | None = None, seed: int | None = None,
                         generator: torch.Generator | None = None) -> tuple[list[int], dict]:
    """Continue one ``prompt`` by up to ``max_new_tokens`` tokens, distributed exactly as
    ``generate(target, [prompt], ...)``'s (the same distribution, not the same draws for a seed;
    identical tokens when temperature is 0, up to float ties between a 1-token and a k-token forward).

    Returns (new tokens, stopped before ``eos_id`` which is excluded, stats): stats holds
    ``proposed`` and ``accepted`` draft tokens, ``acceptance_rate``, ``target_forwards``,
    ``draft_forwards``, ``emitted`` (tokens produced, eos included) and
    ``tokens_per_target_forward`` (emitted / target forwards: 1.0 is plain decoding)."""
    prompt = _as_ids(prompt)
    _check(target, draft, prompt, max_new_tokens, gamma)
    processed_probs(torch.zeros(1), temperature, top_k, top_p)  # validates the sampling settings
    greedy = temperature == 0
    device = next(target.parameters()).device
    if generator is None and seed is not None:
        generator = torch.Generator(device=device).manual_seed(seed)

    def dist(logits: Tensor) -> Tensor:
        return processed_probs(logits, temperature, top_k, top_p)

    stats = {"proposed": 0, "accepted": 0, "target_forwards": 0, "draft_forwards": 0, "emitted": 0}
    seq = list(prompt)
    out: list[int] = []
    max_len = len(prompt) + max_new_tokens + gamma
    t_cache, d_cache = target.new_cache(1, max_len), draft.new_cache(1, max_len)
    while len(out) < max_new_tokens:
        k = min(gamma, max_new_tokens - len(out) - 1)  # a round emits up to k + 1 tokens
        drafts: list[int] = []
        q_rows: list[Tensor] = []
        if k > 0:
            d_cache.length = min(d_cache.length, len(seq) - 1)  # roll back to the accepted prefix
            feed = seq[d_cache.length:]  # the pending token (two after a fully accepted round)
            for _ in range(k):
                ids = torch.tensor([feed], dtype=torch.long, device=device)
                q = dist(draft(ids, cache=d_cache)[0, -1])
                stats["draft_forwards"] += 1
                x = int(q.argmax()) if greedy else _draw(q, generator)
                drafts.append(x)
                q_rows.append(q)
                feed = [x]
        t_cache.length = min(t_cache.length, len(seq) - 1)  # roll back to the accepted prefix
        # the pending token and the drafts (the whole prompt in the first round: prefill and verify at once)
        ids = torch.tensor([seq[t_cache.length:] + drafts], dtype=torch.long, device=device)
        logits = target(ids, cache=t_cache)[0, -(k + 1):]  # (k+1, V): p_1..p_{k+1}
        stats["target_forwards"] += 1
        p = dist(logits)
        q = torch.stack(q_rows) if q_rows else p.new_zeros(0, p.shape[-1])
        n, nxt = verify(p, q, drafts, generator, greedy)
        stats["proposed"] += k
        stats["accepted"] += n
        new = drafts[:n] + [nxt]
        seq += new
        stats["emitted"] += len(new)
        if eos_id is not None and eos_id in new:
            out += new[:new.index(eos_id)]
            break
        out += new
    stats["acceptance_rate"] = stats["accepted"] / stats["proposed"] if stats["proposed"] else float("nan")
    stats["tokens_per_target_forward"] = (stats["emitted"] / stats["target_forwards"]
                                          if stats["target_forwards"] else float("nan"))
    return out, stats


def measure_speedup(target, draft, prompts: list[list[int]], max_new_tokens: int, gamma: int = 4,
                    temperature: float = 0.0, seed: int = 0, repeats: int = 1) -> dict:
    """Wall-clock of plain cached ``generate`` vs speculative decoding, one prompt at a time.

    Returns plain_s, speculative_s (best of ``repeats``), speedup (plain / speculative),
    acceptance_rate, tokens_per_target_forward and, for greedy runs, ``identical`` (the two
    outputs agree, as they must)."""
    if not prompts:
        raise ValueError("prompts must hold at least one prompt")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")

    def plain():
        return [generate(target, [p], max_new_tokens, temperature=temperature, seed=seed + i)[0]
                for i, p in enumerate(prompts)]

    def spec():
        return [speculative_generate(target, draft, p, max_new_tokens, gamma, temperature=temperature,
                                     seed=seed + i) for i, p in enumerate(prompts)]

    def best(fn):
        times, result = [], None
        for _ in range(repeats):
            start = time.perf_counter()
            result = fn()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        return min(times), result

    plain_s, plain_out = best(plain)
    spec_s, spec_runs = best(spec)
    proposed = sum(s["proposed"] for _, s in spec_runs)
    accepted = sum(s["accepted"] for _, s in spec_runs)
    emitted = sum(s["emitted"] for _, s in spec_runs)
    forwards = sum(s["target_forwards"] for _, s in spec_runs)
    result = {"plain_s": plain_s, "speculative_s": spec_s, "speedup": plain_s / spec_s if spec_s else float("nan"),
              "acceptance_rate": accepted / proposed if proposed else float("nan"),
              "tokens_per_target_forward": emitted / forwards if forwards else float("nan"),
              "gamma": gamma, "prompts": len(prompts), "max_new_tokens": max_new_tokens}
    if temperature == 0:
        result["identical"] = plain_out == [toks for toks, _ in spec_runs]
    return result
