"""Autoregressive sampling from a TransformerLM: the rollout engine (greedy, temperature, top-k, top-p).

Batches of prompts of different lengths are LEFT-padded so every sequence's next token sits in the
last column. Padding is marked False in a ``valid`` mask (never attended to) and positions count
real tokens only (``cumsum(valid) - 1``), so each sequence sees exactly what it would see alone.
With ``use_cache`` the padded prompts are prefilled once into a KV cache and each later step feeds
one token per sequence; without it the whole sequence is recomputed every step (same mask, same
positions): the slow reference the cache is tested against.

Returned completions hold the new tokens only; a sequence stops at ``eos_id``, which is NOT
included. Finished sequences keep being fed a filler token whose output is ignored.

CLI: ``python -m model.inference.generate --checkpoint RUN --tokenizer TOK_DIR --prompt "Once upon a time"``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from model.training.checkpoint import CheckpointError, check_tokenizer, load_model
from workbench.files import tokenizer_identity
from workbench.params import REQUIRED, add_config_flags, config_from_args, setting


def processed_probs(logits: Tensor, temperature: float = 1.0, top_k: int | None = None,
                    top_p: float | None = None) -> Tensor:
    """The distribution (..., V), fp32, that ``sample_next`` draws from for these logits.

    temperature 0 gives the one-hot of the argmax. Otherwise logits are divided by the
    temperature, only the ``top_k`` largest are kept, then the smallest set of tokens whose
    cumulative probability reaches ``top_p`` (always at least the most likely one), and softmaxed.
    Speculative decoding compares exactly these distributions."""
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    logits = logits.float()
    if temperature == 0:
        return torch.zeros_like(logits).scatter_(-1, logits.argmax(dim=-1, keepdim=True), 1.0)
    logits = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        values, indices = logits.topk(top_k, dim=-1)  # exactly k kept, even with ties
        logits = torch.full_like(logits, float("-inf")).scatter(-1, indices, values)
    if top_p is not None and top_p < 1:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        probs = sorted_logits.softmax(dim=-1)
        mass_before = probs.cumsum(dim=-1) - probs  # probability of the strictly more likely tokens
        drop = mass_before >= top_p  # the first token has mass_before 0 < top_p: always kept
        logits = logits.scatter(-1, order, sorted_logits.masked_fill(drop, float("-inf")))
    return logits.softmax(dim=-1)


def sample_next(logits: Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
                generator: torch.Generator | None = None) -> Tensor:
    """Next token ids (B,) from logits (B, V): the argmax at temperature 0, else a draw with
    ``torch.multinomial`` from ``generator`` out of ``processed_probs``."""
    probs = processed_probs(logits, temperature, top_k, top_p)
    if temperature == 0:
        return logits.float().argmax(dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def _positions(valid: Tensor) -> Tensor:
    """Per-sequence positions: real tokens count from 0; left padding sits at position 0."""
    return (valid.long().cumsum(dim=1) - 1).clamp(min=0)


def _check_prompts(prompts: list[list[int]], max_new_tokens: int, cfg) -> None:
    """A clear ValueError for an empty prompt, one too long for the context, or a token outside the vocab."""
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    for i, prompt in enumerate(prompts):
        if len(prompt) == 0:
            raise ValueError(f"prompt {i} is empty: generation needs at least one prompt token")
        if len(prompt) + max_new_tokens > cfg.context_length:
            raise ValueError(f"prompt {i} has {len(prompt)} tokens + max_new_tokens={max_new_tokens} = "
                             f"{len(prompt) + max_new_tokens} > the model's context_length={cfg.context_length}")
        bad = [t for t in prompt if not 0 <= t < cfg.vocab_size]
        if bad:
            raise ValueError(f"prompt {i} holds token id {bad[0]} outside the model's vocab (size {cfg.vocab_size})")


def _left_pad(prompts: list[list[int]], fill: int, device) -> tuple[Tensor, Tensor]:
    """(tokens, valid), both (B, longest prompt) on ``device``: prompts right-aligned, ``fill`` before them."""
    B, P = len(prompts), max(map(len, prompts))
    tokens = torch.full((B, P), fill, dtype=torch.long)
    valid = torch.zeros(B, P, dtype=torch.bool)
    for i, prompt in enumerate(prompts):
        tokens[i, P - len(prompt):] = torch.tensor(prompt, dtype=torch.long)
        valid[i, P - len(prompt):] = True
    return tokens.to(device), valid.to(device)


@torch.inference_mode()
def generate(model, prompts: list[list[int]], max_new_tokens: int, temperature: float = 1.0,
             top_k: int | None = None, top_p: float | None = None, eos_id: int | None = None,
             use_cache: bool = True, seed: int | None = None, generator: torch.Generator | None = None,
             bf16: bool = False) -> list[list[int]]:
    """Continue each prompt (a list of token ids) by up to ``max_new_tokens`` tokens.

    Returns the new tokens of each prompt, stopped before ``eos_id`` (eos itself excluded).
    ``seed`` makes a fresh generator on the model's device unless ``generator`` is given;
    ``bf16`` runs under bfloat16 autocast (meant for CUDA)."""
    if not prompts:
        return []
    _check_prompts(prompts, max_new_tokens, model.cfg)
    if max_new_tokens == 0:
        return [[] for _ in prompts]

    device = next(model.parameters()).device
    if generator is None and seed is not None:
        generator = torch.Generator(device=device).manual_seed(seed)
    fill = 0 if eos_id is None else eos_id  # fed to finished sequences; their outputs are ignored
    tokens, valid = _left_pad(prompts, fill, device)
    B, P = tokens.shape
    padded = bool((~valid).any())
    mask = valid if padded else None  # no padding: plain causal attention

    def pick(logits: Tensor) -> Tensor:
        return sample_next(logits[:, -1], temperature, top_k, top_p, generator)

    amp = torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    finished = torch.zeros(B, dtype=torch.bool, device=device)
    new_tokens: list[Tensor] = []
    with amp:
        if use_cache:
            cache = model.new_cache(B, P + max_new_tokens)  # inside autocast: the cache takes its dtype
            next_logits = model(tokens, _positions(valid), cache=cache, valid=mask)
            next_pos = valid.sum(dim=1, keepdim=True)  # (B, 1): position of the next real token
        else:
            seq, seq_valid = tokens, valid
            next_logits = model(seq, _positions(seq_valid), valid=mask)
        for step in range(max_new_tokens):
            nxt = pick(next_logits).masked_fill(finished, fill)
            new_tokens.append(nxt)
            if eos_id is not None:
                finished |= nxt == eos_id
                if bool(finished.all()):
                    break
            if step == max_new_tokens - 1:
                break
            if use_cache:
                next_logits = model(nxt[:, None], next_pos, cache=cache)
                next_pos = next_pos + 1
            else:
                seq = torch.cat([seq, nxt[:, None]], dim=1)
                seq_valid = torch.cat([seq_valid, torch.ones_like(seq_valid[:, :1])], dim=1)
                next_logits = model(seq, _positions(seq_valid), valid=seq_valid if padded else None)

    out = torch.stack(new_tokens, dim=1).tolist()
    if eos_id is not None:
        out = [row[:row.index(eos_id)] if eos_id in row else row for row in out]
    return out


# ---- CLI ------------------------------------------------------------------------------------------

def _resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise ValueError(f"--device {name!r}: {exc}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {name!r}: CUDA is not available on this machine")
    return device


def _load_tokenizer(tokenizer_dir: str, special_tokens: list[str]):
    # lazy: tokenizer.encoder needs regex and tqdm, and model/ must import with only torch, triton, numpy
    from tokenizer.encoder import Tokenizer

    root = Path(tokenizer_dir)
    vocab, merges = root / "vocab.json", root / "merges.txt"
    for path in (vocab, merges):
        if not path.is_file():
            raise FileNotFoundError(f"{path}: missing (expected a tokenizer directory with vocab.json and merges.txt)")
    return Tokenizer.from_files(vocab, merges, special_tokens)


def _decode(tokenizer, ids: list[int]) -> str:
    """Decode, turning ids the tokenizer lacks (a model vocab padded past it) into U+FFFD."""
    unknown = "\ufffd".encode()
    return b"".join(tokenizer.vocab.get(i, unknown) for i in ids).decode("utf-8", errors="replace")


@dataclass(frozen=True)
class GenerateSettings:
    checkpoint: str = setting(REQUIRED, "run directory (its newest good ckpt-*.pt) or a ckpt file")
    tokenizer: str = setting(REQUIRED, "tokenizer directory holding vocab.json and merges.txt")
    prompt: tuple[str, ...] = setting(REQUIRED, "prompt text; repeat the flag for several prompts (generated as one "
                                                "batch)", repeatable=True)
    max_new_tokens: int = setting(128, "tokens to generate per prompt")
    temperature: float = setting(0.8, "sampling temperature; 0 = greedy")
    top_k: int | None = setting(None, "keep only the k most likely tokens (none: all)")
    top_p: float | None = setting(None, "nucleus sampling: keep the smallest set of tokens with this total probability")
    seed: int = setting(0, "random seed for sampling")
    device: str = setting("auto", "cpu, cuda, cuda:N or auto (cuda when available)")
    cache: bool = setting(True, "reuse the KV cache (--no-cache: recompute the whole sequence each step)")
    bf16: bool = setting(False, "run under bfloat16 autocast (CUDA)")
    eos: str = setting("<|endoftext|>", "special token that ends a completion ('' never stops early)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m model.inference.generate", description=__doc__.split("\n\n")[0])
    add_config_flags(p, GenerateSettings, bool_switches=True)
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = config_from_args(GenerateSettings, build_parser().parse_args(argv))
        device = _resolve_device(args.device)
        tokenizer = _load_tokenizer(args.tokenizer, [args.eos] if args.eos else [])
        model = load_model(args.checkpoint, device=device)
        check_tokenizer(model.tokenizer_identity, tokenizer_identity(args.tokenizer), args.checkpoint, args.tokenizer)
        eos_id = tokenizer.token_to_id(args.eos) if args.eos else None
        prompts = [tokenizer.encode(text) for text in args.prompt]
        completions = generate(model, prompts, args.max_new_tokens, temperature=args.temperature,
                               top_k=args.top_k, top_p=args.top_p, eos_id=eos_id, use_cache=args.cache,
                               seed=args.seed, bf16=args.bf16)
    except (FileNotFoundError, ValueError, CheckpointError) as exc:
        print(f"error: {exc}".splitlines()[0], file=sys.stderr)
        return 2
    for i, (text, ids) in enumerate(zip(args.prompt, completions, strict=False)):
        print(f"=== prompt {i} ({len(ids)} new tokens) ===")
        print(text + _decode(tokenizer, ids))
    return 0


if __name__ == "__main__":
    sys.exit(main())
