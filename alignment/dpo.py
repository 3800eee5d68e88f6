"""Direct Preference Optimization (Rafailov et al. 2023, "Direct Preference Optimization: Your Language Model is
Secretly a Reward Model"; CS336 assignment 5, section "Direct Preference Optimization").

The loop is thin wiring, shaped like ``alignment.sft``: preference pairs ``{"prompt", "chosen", "rejected"}``
(generated from the arithmetic task by ``alignment.tasks.arithmetic.preference_pair`` in the task's own prompt
template, or read from a JSONL by ``alignment.tasks.datasets.load_preference_pairs``: prompt/chosen/rejected or
hh-rlhf dialogues),
summed response log-probs (+ EOS) of chosen and rejected under the policy in one forward pass over the 2B stacked
sequences and under a frozen reference (default: a copy of the starting policy) without gradients,
``alignment.core.losses.dpo_loss`` (-log σ(β · margin)), gradient clipping,
``model.training.optim.AdamW`` with a cosine schedule.
Held out: preference accuracy and mean margin on pairs never trained on and, for the arithmetic task, greedy task
accuracy from ``alignment.evaluate``. ``metrics.csv`` has one row per step; its metric names follow TRL's
``DPOTrainer`` (``rewards/accuracies`` -> reward_accuracy, ``rewards/margins`` -> reward_margin, ``rewards/chosen``,
``rewards/rejected``, ``logps/chosen``, ``logps/rejected``). Checkpoints as ``alignment.sft`` writes them.

CLI: ``python -m alignment.dpo --model RUN --tokenizer TOK_DIR --out-dir runs/dpo [--steps 100 --beta 0.1 ...]``.
"""

from __future__ import annotations

import copy
import random
import sys
from dataclasses import dataclass

import torch

from alignment import loop
from alignment.config import LoopConfig, StepsConfig
from alignment.core.losses import dpo_loss
from alignment.core.policy import frozen, is_ours
from alignment.core.preference import pair_log_probs, preference_eval
from alignment.evaluate import load_model_and_tokenizer
from alignment.tasks.data import load_pairs, tasks_for
from alignment.trl_engine import train_dpo_trl
from workbench.params import override, setting

TASKS = (*tasks_for("pairs"), "none")  # none: no greedy task accuracy (pairs from a file only)
METRIC_COLUMNS = ("step", "lr", "loss", "reward_accuracy", "reward_margin", "chosen_reward", "rejected_reward",
                  "logp_chosen", "logp_rejected", "grad_norm", "val_pref_accuracy", "val_margin", "val_accuracy",
                  "val_format_rate", "seconds")
# The loss and dpo_loss's metrics (TRL's names) -> their metrics.csv columns, averaged over the microbatches of a step
SUMMED = {"loss": "loss", "rewards/accuracies": "reward_accuracy", "rewards/margins": "reward_margin",
          "rewards/chosen": "chosen_reward", "rewards/rejected": "rejected_reward", "logps/chosen": "logp_chosen",
          "logps/rejected": "logp_rejected"}


@dataclass(frozen=True)
class DPOConfig(StepsConfig):
    """Direct preference optimization (Rafailov et al. 2023); the shared settings in alignment.config. The task
    `none` trains on `pairs` alone (no greedy task accuracy)."""

    SECTION = "dpo"

    steps: int = override(StepsConfig, "steps", 100)
    out_dir: str = override(LoopConfig, "out_dir", "runs/dpo")
    task: str = setting("digits", "digits (the default: alignment.tasks.digits) or arithmetic (generated pairs, greedy "
                                  "task accuracy), or none (needs --pairs)", choices=TASKS)
    n_test: int = override(LoopConfig, "n_test", 200, "held-out task items / at most this many held-out pairs")
    template: str = override(LoopConfig, "template", "short", "task prompt template: short, r1_zero or a string with "
                                                              "{question}")
    reference: str | None = setting(None, "frozen reference model (same kinds as --model); default a frozen copy of "
                                          "--model")
    pairs: str | None = setting(None, "JSONL(.gz) of preference pairs (prompt/chosen/rejected or hh-rlhf "
                                      "chosen/rejected); replaces the generated pairs, its last tenth held out")
    beta: float = setting(0.1, "DPO's beta (Rafailov et al. 2023): strength of the implicit KL to the reference",
                          above=0)
    batch_size: int = setting(16, "pairs per microbatch (2 x batch_size sequences per forward)", at_least=1)

    def __post_init__(self) -> None:  # a rule across two settings: task none needs pairs
        super().__post_init__()
        if self.task == "none" and not self.pairs:
            raise ValueError("dpo.task='none' needs dpo.pairs (a JSONL of preference pairs)")


def _load_models(cfg: DPOConfig, model, tokenizer, reference):
    """(policy, tokenizer, frozen reference, context or None, out_dir): what is not given is loaded from the
    config (the reference: ``cfg.reference``, else a copy of the starting policy); writes config.json."""
    if model is None:
        model, tokenizer = load_model_and_tokenizer(cfg.model, cfg.tokenizer, cfg.device)
    if reference is None:
        reference = (load_model_and_tokenizer(cfg.reference, cfg.tokenizer, cfg.device)[0] if cfg.reference
                     else copy.deepcopy(model))
    reference = frozen(reference)
    model, tokenizer, ours, context, out_dir = loop.load_model_and_prepare(cfg, "dpo", model, tokenizer)
    if ours and is_ours(reference):
        if reference.cfg.vocab_size != model.cfg.vocab_size:
            raise ValueError(f"DPOConfig.reference: vocab size {reference.cfg.vocab_size} differs from the "
                             f"policy's {model.cfg.vocab_size}")
        context = min(context, reference.cfg.context_length)
    return model, tokenizer, reference, context, out_dir


def _dpo_step(cfg: DPOConfig, model, reference, tokenizer, optimizer, batches: loop.ShuffledBatches,
              train: list[dict], context: int | None) -> dict:
    """One optimizer step over ``grad_accum`` microbatches of whole pairs; the metrics row's training columns."""
    sums = dict.fromkeys(SUMMED.values(), 0.0)
    for _ in range(cfg.grad_accum):
        pairs = [train[i] for i in batches.take()]
        policy_chosen, policy_rejected = pair_log_probs(model, tokenizer, pairs, context)
        with torch.no_grad():
            ref_chosen, ref_rejected = pair_log_probs(reference, tokenizer, pairs, context)
        loss, meta = dpo_loss(policy_chosen, policy_rejected, ref_chosen.to(policy_chosen.device),
                              ref_rejected.to(policy_chosen.device), cfg.beta)
        (loss / cfg.grad_accum).backward()
        values = {"loss": loss.detach(), **meta}
        for key, column in SUMMED.items():
            sums[column] += float(values[key]) / cfg.grad_accum
    return {**sums, "grad_norm": loop.clip_and_step(cfg, model, optimizer)}


def train_dpo(cfg: DPOConfig, model=None, tokenizer=None, *, reference=None,
              data: tuple[list[dict], list[dict], list[dict]] | None = None, threads=None) -> dict:
    """Run DPO; returns the last held-out task summary (``alignment.evaluate``; accuracy None without a task)
    plus ``pref_accuracy``, ``margin``, ``pref_n``, ``checkpoint`` and ``seconds``.

    ``model``/``tokenizer`` may be given directly (else loaded from ``cfg.model``/``cfg.tokenizer``), likewise
    ``reference`` (else ``cfg.reference``, else a frozen copy of the starting policy) and ``data`` (else
    ``load_pairs(cfg)``); ``threads``: the CLI's CPU thread policy (``loop.run_loop``)."""
    if cfg.engine == "trl":
        return train_dpo_trl(cfg, model, tokenizer)
    torch.manual_seed(cfg.seed)
    train, test_pairs, test_items = data if data is not None else load_pairs(cfg)
    model, tokenizer, reference, context, out_dir = _load_models(cfg, model, tokenizer, reference)
    loop.check_context(cfg, model, tokenizer, test_items)
    optimizer = loop.make_optimizer(cfg, model)
    batches = loop.ShuffledBatches(len(train), cfg.batch_size, random.Random(cfg.seed))
    trainer = loop.Trainer(
        "dpo", METRIC_COLUMNS, lr=loop.cosine_lr(cfg),
        step=lambda step: _dpo_step(cfg, model, reference, tokenizer, optimizer, batches, train, context),
        state=batches.state, restore=batches.restore,
        # greedy task accuracy (when there are task items), then preference accuracy / margin on the held-out pairs
        held_out=lambda: {
            **loop.held_out_accuracy(cfg, model, tokenizer, test_items),
            **preference_eval(model, reference, tokenizer, test_pairs, cfg.beta, cfg.eval_batch_size, context)},
        line=lambda step, row, summary: (f"step {step}: loss {row['loss']:.4f} reward_accuracy "
                                         f"{row['reward_accuracy']:.3f} val_pref_accuracy {summary['pref_accuracy']} "
                                         f"val_accuracy {summary['accuracy']}"),
        postfix=lambda row: {"loss": f"{row['loss']:.4f}", "acc": f"{row['reward_accuracy']:.2f}"},
        val_columns={"val_pref_accuracy": "pref_accuracy", "val_margin": "margin", **loop.VAL_COLUMNS},
        panels={"loss": ("loss",), "preference": ("reward_accuracy", "val_pref_accuracy", "val_accuracy"),
                "margin": ("reward_margin", "val_margin")})
    return loop.run_loop(cfg, trainer, model, tokenizer, optimizer, out_dir, threads)[0]


def main(argv: list[str] | None = None) -> int:
    return loop.cli_main(DPOConfig, train_dpo, "dpo", argv, doc=__doc__)


if __name__ == "__main__":
    sys.exit(main())
