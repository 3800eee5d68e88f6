"""The policy adapter: one code path for our TransformerLM and Hugging Face causal LMs.

Mirrors the CS336 assignment 5 building blocks (``tokenize_prompt_and_output``,
``get_response_log_probs``) and its supplementary packed instruction-tuning dataset:

- ``TokenizerAdapter`` puts our ``tokenizer.encoder.Tokenizer`` (``encode``/``decode``,
  ``special_token_ids["<|endoftext|>"]``) and a HF tokenizer (``encode(..., add_special_tokens=
  False)``, ``eos_token_id``, ``pad_token_id``) behind four names: ``encode``, ``decode``,
  ``eos_id``, ``pad_id`` (+ ``bos_id`` when the tokenizer prepends one by default, as Llama's does).
- ``logits_of(model, input_ids)``: our model returns the logits tensor, a HF model an output
  object with ``.logits``; ``Policy`` bundles a model with its tokenizer.
- ``tokenize_prompt_and_output``: prompt and output are tokenized apart and concatenated, so the
  response mask is exact even where a joint tokenization would merge across the boundary.
- ``PackedSFTDataset``: every example becomes BOS? + template(prompt, response) + EOS; all are
  concatenated and cut into windows of ``seq_len + 1`` tokens that share their boundary token
  (inputs ``t[i*L:(i+1)*L]``, labels ``t[i*L+1:(i+1)*L+1]``), so no token transition is lost.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from alignment.core.losses import compute_entropy

# The Alpaca template CS336 uses for SFT and DPO (``alpaca_sft.prompt``); ``{response}`` comes last.
ALPACA_TEMPLATE = (
    "Below is an instruction that describes a task. Write a response that appropriately "
    "completes the request.\n\n### Instruction:\n{instruction}\n\n### Response:\n{response}"
)
EOS_TOKEN = "<|endoftext|>"


def clean_text(text) -> str:
    """``text`` as a string that encodes to UTF-8 (lone surrogates become U+FFFD; None -> "")."""
    if text is None:
        return ""
    if not isinstance(text, str):
        text = text.decode("utf-8", errors="replace") if isinstance(text, bytes | bytearray) else str(text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", errors="surrogatepass").decode("utf-8", errors="replace")
    return text


def split_template(template: str, instruction: str) -> tuple[str, str]:
    """``(prefix, suffix)`` of ``template`` around ``{response}`` with ``{instruction}`` filled in.

    Plain replacement, not ``str.format``, so braces in the instruction are kept as they are."""
    if template.count("{response}") != 1:
        raise ValueError(f"template must contain '{{response}}' exactly once, got {template!r}")
    prefix, suffix = template.split("{response}")
    return prefix.replace("{instruction}", instruction), suffix.replace("{instruction}", instruction)


class TokenizerAdapter:
    """``encode(text) -> ids`` (no special tokens added), ``decode``, ``eos_id``, ``pad_id``, ``bos_id``.

    Wraps our ``tokenizer.encoder.Tokenizer`` or any HF tokenizer; an adapter passes through."""

    def __new__(cls, tokenizer):
        if isinstance(tokenizer, TokenizerAdapter):
            return tokenizer
        return super().__new__(cls)

    def __init__(self, tokenizer):
        if tokenizer is self:
            return
        self.tokenizer = tokenizer
        self.is_hf = hasattr(tokenizer, "eos_token_id") and not hasattr(tokenizer, "special_token_ids")
        if self.is_hf:
            self.eos_id = tokenizer.eos_token_id
            pad = getattr(tokenizer, "pad_token_id", None)
            self.pad_id = pad if pad is not None else self.eos_id
            bos = getattr(tokenizer, "bos_token_id", None)
            # Only a BOS the tokenizer itself prepends (Llama) counts; GPT-2's bos == eos is not used.
            default = tokenizer.encode("a") if bos is not None else []
            self.bos_id = bos if default and default[0] == bos else None
        else:
            self.eos_id = tokenizer.special_token_ids.get(EOS_TOKEN)
            self.pad_id = self.eos_id
            self.bos_id = None
        if self.pad_id is None:
            self.pad_id = 0

    def encode(self, text: str) -> list[int]:
        text = clean_text(text)
        if self.is_hf:
            return list(self.tokenizer.encode(text, add_special_tokens=False))
        return self.tokenizer.encode(text)

    def decode(self, ids: Iterable[int]) -> str:
        ids = [int(i) for i in ids]
        return self.tokenizer.decode(ids)

    @property
    def vocab_size(self) -> int:
        return len(self.tokenizer) if self.is_hf else self.tokenizer.vocab_size


def logits_of(model, input_ids: Tensor) -> Tensor:
    """Logits (B, T, V) of our ``TransformerLM`` (returns a tensor) or a HF causal LM (``.logits``)."""
    # HF models (they carry a ``config``): no KV cache is wanted for a full forward pass.
    out = model(input_ids=input_ids, use_cache=False) if hasattr(model, "config") else model(input_ids)
    if isinstance(out, Tensor):
        return out
    if hasattr(out, "logits"):
        return out.logits
    if isinstance(out, tuple | list) and out and isinstance(out[0], Tensor):
        return out[0]
    raise TypeError(f"cannot read logits from a {type(out).__name__} returned by {type(model).__name__}")


def model_device(model) -> torch.device:
    param = next(iter(model.parameters()), None)
    return param.device if param is not None else torch.device("cpu")


def is_ours(model) -> bool:
    """Our ``TransformerLM`` (a ``cfg`` and a KV cache), not a Hugging Face model."""
    return hasattr(model, "cfg") and hasattr(model, "new_cache")


def frozen(model):
    """``model`` in eval mode without gradients (a reference policy); returns it."""
    model.eval()
    model.requires_grad_(False)
    return model


def tokenize_prompt_and_output(prompt_strs: Sequence[str], output_strs: Sequence[str], tokenizer,
                               add_bos: bool = False, append_eos: bool | Sequence[bool] = False) -> dict[str, Tensor]:
    """Tokenize prompts and outputs apart, concatenate, right-pad (CS336 A5).

    Returns ``input_ids`` and ``labels`` (B, max_len - 1): the padded sequences without their last
    / first token, and ``response_mask`` (B, max_len - 1), true where the label is an output token.
    Padding uses the tokenizer's pad id (its EOS when it has none). ``add_bos`` prepends the BOS
    a tokenizer like Llama's adds by default (none for GPT-2/Qwen/ours); ``append_eos`` ends each
    output with the EOS id (part of the response mask); a sequence of bools chooses per output (a rollout
    that ended by sampling EOS keeps it)."""
    if len(prompt_strs) != len(output_strs):
        raise ValueError(f"prompt_strs has {len(prompt_strs)} items but output_strs has {len(output_strs)}")
    tok = TokenizerAdapter(tokenizer)
    bos = [tok.bos_id] if add_bos and tok.bos_id is not None else []
    flags = [append_eos] * len(output_strs) if isinstance(append_eos, bool) else list(append_eos)
    if len(flags) != len(output_strs):
        raise ValueError(f"append_eos has {len(flags)} flags for {len(output_strs)} outputs")
    eos = [tok.eos_id] if tok.eos_id is not None else []
    rows = [(bos + tok.encode(p), tok.encode(o) + (eos if flag else []))
            for p, o, flag in zip(prompt_strs, output_strs, flags, strict=False)]
    width = max((len(p) + len(o) for p, o in rows), default=0)
    width = max(width, 2)  # at least one (input, label) position
    ids = torch.full((len(rows), width), tok.pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.bool)
    for i, (p, o) in enumerate(rows):
        ids[i, : len(p) + len(o)] = torch.tensor(p + o, dtype=torch.long)
        mask[i, len(p): len(p) + len(o)] = True
    return {"input_ids": ids[:, :-1], "labels": ids[:, 1:], "response_mask": mask[:, 1:]}


def get_response_log_probs(model, input_ids: Tensor, labels: Tensor,
                           return_token_entropy: bool = False) -> dict[str, Tensor]:
    """Per-token ``log p(labels | prefix)`` (B, T) and, optionally, the next-token entropy (B, T).

    ``log_softmax`` is never materialized: logit[label] - logsumexp(logits), in fp32."""
    logits = logits_of(model, input_ids).float()  # (B, T, V)
    picked = logits.gather(-1, labels.unsqueeze(-1).long()).squeeze(-1)  # (B, T)
    out = {"log_probs": picked - torch.logsumexp(logits, dim=-1)}
    if return_token_entropy:
        out["token_entropy"] = compute_entropy(logits)
    return out


def sequence_log_probs(model, tokenizer, prompts: Sequence[str], responses: Sequence[str],
                       append_eos: bool = False) -> Tensor:
    """Summed log-probs (B,) of each response (+ EOS if ``append_eos``) given its prompt, which
    starts with BOS when the tokenizer adds one by default (Llama)."""
    batch = tokenize_prompt_and_output(prompts, responses, tokenizer, add_bos=True, append_eos=append_eos)
    device = model_device(model)
    log_probs = get_response_log_probs(model, batch["input_ids"].to(device), batch["labels"].to(device))
    return (log_probs["log_probs"] * batch["response_mask"].to(device)).sum(dim=-1)


@dataclass
class Policy:
    """A model and its tokenizer behind one interface (our TransformerLM or a HF causal LM)."""

    model: object
    tokenizer: object

    def __post_init__(self) -> None:  # a normalization: any tokenizer behind one interface
        self.tokenizer = TokenizerAdapter(self.tokenizer)

    def logits(self, input_ids: Tensor) -> Tensor:
        return logits_of(self.model, input_ids)

    def sequence_log_probs(self, prompts: Sequence[str], responses: Sequence[str],
                           append_eos: bool = False) -> Tensor:
        return sequence_log_probs(self.model, self.tokenizer, prompts, responses, append_eos)


class PackedSFTDataset(torch.utils.data.Dataset):
    """CS336's packed instruction-tuning dataset over ``{"prompt", "response"}`` examples.

    Each example -> BOS (if the tokenizer has one) + template(prompt, response) + EOS; examples
    (shuffled with ``seed`` when ``shuffle``) are concatenated and cut into ``(len - 1) // seq_len``
    windows: item i = {"input_ids": t[i*L:(i+1)*L], "labels": t[i*L+1:(i+1)*L+1]}."""

    def __init__(self, examples: Iterable[Mapping[str, str]], tokenizer, seq_len: int,
                 template: str = ALPACA_TEMPLATE, shuffle: bool = True, seed: int = 0):
        if not isinstance(seq_len, int) or seq_len <= 0:
            raise ValueError(f"PackedSFTDataset.seq_len must be a positive integer, got {seq_len!r}")
        split_template(template, "")  # validates the template
        tok = TokenizerAdapter(tokenizer)
        examples = list(examples)
        for i, ex in enumerate(examples):
            if not isinstance(ex, Mapping) or "prompt" not in ex or "response" not in ex:
                raise ValueError(f"PackedSFTDataset: example {i} needs 'prompt' and 'response' keys, got {ex!r:.80}")
        if shuffle:
            random.Random(seed).shuffle(examples)
        ids: list[int] = []
        bos, eos = ([tok.bos_id] if tok.bos_id is not None else []), ([tok.eos_id] if tok.eos_id is not None else [])
        for ex in examples:
            prefix, suffix = split_template(template, clean_text(ex["prompt"]))
            ids += bos + tok.encode(prefix + clean_text(ex["response"]) + suffix) + eos
        self.seq_len = seq_len
        self.tokens = torch.tensor(ids, dtype=torch.long)
        self.num_tokens = len(ids)

    def __len__(self) -> int:
        return max(0, (self.num_tokens - 1) // self.seq_len)

    def __getitem__(self, i: int) -> dict[str, Tensor]:
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"PackedSFTDataset index {i} out of range for {len(self)} windows")
        start = i * self.seq_len
        return {"input_ids": self.tokens[start: start + self.seq_len],
                "labels": self.tokens[start + 1: start + self.seq_len + 1]}
