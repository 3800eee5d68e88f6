"""Supervised fine-tuning with a masked response loss (CS336 assignment 5, section 4: "SFT experiment").

The loop is thin wiring over the building blocks: (prompt, response) pairs from
``alignment.tasks.arithmetic.sft_example`` (R1-Zero answer format), ``tokenize_prompt_and_output`` (response mask +
EOS), ``get_response_log_probs``, ``sft_microbatch_train_step`` (NLL summed over response tokens /
``normalize_constant``, averaged over the batch and the accumulation steps), gradient clipping,
``model.training.optim.AdamW`` with a cosine schedule, and a periodic held-out greedy accuracy from
``alignment.evaluate``. Writes ``metrics.csv`` (one row per step, validation columns filled at eval steps),
``config.json`` and a checkpoint with ``model.training.checkpoint.save_checkpoint`` in the format ``model.train``
writes, so ``model.training.checkpoint.load_model(out_dir)`` and ``python -m alignment.evaluate`` read it. Hugging Face
models are saved with ``save_pretrained`` under ``out_dir/hf``.

CLI: ``python -m alignment.sft --model RUN --tokenizer TOK_DIR --out-dir runs/sft [--steps 200 ...]``.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass

import torch

from alignment import loop
from alignment.config import LoopConfig, StepsConfig
from alignment.core.losses import sft_microbatch_train_step
from alignment.core.policy import get_response_log_probs, model_device, tokenize_prompt_and_output
from alignment.tasks.data import demonstrations, load_task
from alignment.trl_engine import train_sft_trl
from workbench.params import override, setting

METRIC_COLUMNS = ("step", "lr", "loss", "nll_per_token", "grad_norm", "response_tokens", "val_accuracy",
                  "val_format_rate", "seconds")


@dataclass(frozen=True)
class SFTConfig(StepsConfig):
    """Supervised fine-tuning on (prompt, response) demonstrations; the shared settings in alignment.config."""

    SECTION = "sft"

    lr: float = override(LoopConfig, "lr", 1e-3)  # cosine to lr/10 after warmup (tiny models; ~1e-5 at 1B scale)
    out_dir: str = override(LoopConfig, "out_dir", "runs/sft")
    teacher_slip: float = setting(0.0, "digits/arithmetic: how often the teacher forgets a carry "
                                       "(alignment.tasks.digits)", at_least=0, at_most=1)
    batch_size: int = setting(16, "sequences per microbatch", at_least=1)
    normalize_constant: float = setting(1.0, "the summed response NLL is divided by this (CS336 A5)", above=0)


def _sft_step(cfg: SFTConfig, model, tokenizer, optimizer, batches: loop.ShuffledBatches, examples, context,
              device) -> dict:
    """One optimizer step over ``grad_accum`` microbatches; the metrics row's training columns."""
    loss_sum = nll_sum = tokens = 0.0
    for _ in range(cfg.grad_accum):
        picked = batches.take()
        prompts, responses = [examples[i][0] for i in picked], [examples[i][1] for i in picked]
        batch = tokenize_prompt_and_output(prompts, responses, tokenizer, add_bos=True, append_eos=True)
        if context is not None:  # too-long pairs are cut at the context (the end of the response is lost)
            batch = {k: v[:, :context] for k, v in batch.items()}
        batch = {k: v.to(device) for k, v in batch.items()}
        log_probs = get_response_log_probs(model, batch["input_ids"], batch["labels"])["log_probs"]
        _, meta = sft_microbatch_train_step(log_probs, batch["response_mask"], cfg.grad_accum,
                                            cfg.normalize_constant)
        loss_sum += float(meta["sft/loss"]) / cfg.grad_accum
        nll_sum += float(meta["sft/nll_per_token"]) / cfg.grad_accum
        tokens += float(meta["sft/response_tokens"])
    grad_norm = loop.clip_and_step(cfg, model, optimizer)
    return {"loss": loss_sum, "nll_per_token": nll_sum, "grad_norm": grad_norm, "response_tokens": int(tokens)}


def train_sft(cfg: SFTConfig, model=None, tokenizer=None, threads=None) -> dict:
    """Run SFT; returns the last held-out summary (``alignment.evaluate``) plus ``checkpoint``.

    ``model``/``tokenizer`` may be given directly (else loaded from ``cfg.model``/``cfg.tokenizer``); ``threads``: the
    CLI's CPU thread policy (``loop.run_loop``)."""
    if cfg.engine == "trl":
        return train_sft_trl(cfg, model, tokenizer)
    torch.manual_seed(cfg.seed)
    model, tokenizer, _, context, out_dir = loop.load_model_and_prepare(cfg, "sft", model, tokenizer)
    device = model_device(model)
    train, test = load_task(cfg)
    loop.check_context(cfg, model, tokenizer, test)
    examples = demonstrations(cfg, train)
    optimizer = loop.make_optimizer(cfg, model)
    batches = loop.ShuffledBatches(len(examples), cfg.batch_size, random.Random(cfg.seed))
    trainer = loop.Trainer(
        "sft", METRIC_COLUMNS, lr=loop.cosine_lr(cfg),
        step=lambda step: _sft_step(cfg, model, tokenizer, optimizer, batches, examples, context, device),
        held_out=lambda: loop.held_out_accuracy(cfg, model, tokenizer, test),
        state=batches.state, restore=batches.restore,
        line=lambda step, row, summary: (f"step {step}: loss {row['loss']:.4f} nll/token {row['nll_per_token']:.4f} "
                                         f"val_accuracy {summary['accuracy']}"),
        panels={"loss": ("loss", "nll_per_token"), "held-out": ("val_accuracy", "val_format_rate")})
    return loop.run_loop(cfg, trainer, model, tokenizer, optimizer, out_dir, threads)[0]


def main(argv: list[str] | None = None) -> int:
    return loop.cli_main(SFTConfig, train_sft, "sft", argv, doc=__doc__)


if __name__ == "__main__":
    sys.exit(main())
