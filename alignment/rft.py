"""Rejection-sampling fine-tuning (RFT, expert iteration): SFT on the policy's own verified samples.

The control for GRPO at the same verifier budget (Zelikman et al. 2022, "STaR"; Yuan et al. 2023, "Scaling
Relationship on Learning Mathematical Reasoning with LLMs" (RFT); Singh et al. 2023, "Beyond Human Data"
(ReST-EM)). Each round samples ``group_size`` responses to ``rollout_batch_size / group_size`` training questions
exactly as GRPO does (``alignment.core.rollout``, same temperature and token limit), keeps those the task's verifier
marks right (one copy of each distinct response per question), and takes ``epochs_per_round`` passes of the masked
SFT loss (``sft_microbatch_train_step``) over them in batches of ``batch_size``. Rounds go on until the sampled
response tokens (counted as GRPO counts them: the response mask of the tokenized rollouts, EOS included when it was
sampled) reach ``token_budget``, or, when it is 0, the sum of the ``sampled_tokens`` column of GRPO's
``metrics.csv`` at ``match_metrics``: the same number of sampled tokens as GRPO, overshot by at most one round.

CLI: ``python -m alignment.rft --model data/alignment/sft --match-metrics data/alignment/grpo/metrics.csv``.
"""

from __future__ import annotations

import csv
import random
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from alignment import loop
from alignment.config import LoopConfig, RolloutConfig
from alignment.core.losses import sft_microbatch_train_step
from alignment.core.policy import get_response_log_probs, model_device, tokenize_prompt_and_output
from alignment.core.rollout import rollout
from alignment.evaluate import build_prompt, score
from alignment.tasks.data import load_task
from workbench.params import override, setting

METRIC_COLUMNS = ("round", "sampled_tokens", "total_sampled_tokens", "reward", "kept", "loss", "val_accuracy",
                  "val_format_rate", "seconds")


@dataclass(frozen=True)
class RFTConfig(RolloutConfig):
    """Rejection-sampling fine-tuning at a sampled-token budget (the module docstring); the shared settings in
    alignment.config (engine: ours only)."""

    SECTION = "rft"

    eval_interval: int = override(LoopConfig, "eval_interval", 10)
    ckpt_interval: int = override(LoopConfig, "ckpt_interval", 10)
    eval_batch_size: int = override(LoopConfig, "eval_batch_size", 64)
    out_dir: str = override(LoopConfig, "out_dir", "runs/rft")
    engine: str = setting("ours", "ours (RFT has no TRL engine)", choices=("ours",))
    token_budget: int = setting(0, "sampled response tokens to spend; 0: GRPO's total from match_metrics", at_least=0)
    match_metrics: str | None = setting(None, "GRPO's run folder or metrics.csv (sampled_tokens) when token_budget "
                                              "is 0")
    max_rounds: int = setting(1000, "a guard; the token budget ends the run", at_least=1)
    rollout_batch_size: int = override(RolloutConfig, "rollout_batch_size", 128)
    batch_size: int = setting(32, "kept responses per optimizer step", at_least=1)
    epochs_per_round: int = setting(1, "passes over each round's kept responses", at_least=1)

    def __post_init__(self) -> None:  # rules across settings: whole groups, a budget or GRPO's metrics to match
        super().__post_init__()
        loop.check_multiples(self, (("rollout_batch_size", "group_size"),))
        if self.token_budget == 0 and not self.match_metrics:
            raise ValueError("rft: set token_budget > 0 or match_metrics (GRPO's metrics.csv)")

    @property
    def steps(self) -> int:  # the loop's limit; the budget ends the run first, and the summary's steps say when
        return self.max_rounds


def grpo_token_budget(metrics_csv: str | Path) -> int:
    """Total sampled response tokens of a GRPO run: the sum of its metrics.csv ``sampled_tokens`` column (a run
    folder stands for the metrics.csv in it)."""
    path = Path(metrics_csv)
    path = path / "metrics.csv" if path.is_dir() else path
    if not path.is_file():
        raise ValueError(f"RFTConfig.match_metrics: {path}: no such file (run GRPO first)")
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    if not rows or "sampled_tokens" not in rows[0]:
        raise ValueError(f"{path}: no sampled_tokens column (a GRPO metrics.csv from before RFT existed?)")
    total = sum(int(float(r["sampled_tokens"])) for r in rows if r["sampled_tokens"] not in ("", None))
    if total <= 0:
        raise ValueError(f"{path}: the sampled_tokens column sums to {total}")
    return total


def _tokens(prompts, responses, ended, tokenizer, context) -> tuple[dict, int]:
    """The tokenized rollouts (cut to the context) and their response-token count, as GRPO's ``_Batch`` counts."""
    batch = tokenize_prompt_and_output(prompts, responses, tokenizer, add_bos=True, append_eos=ended)
    if context is not None:
        batch = {k: v[:, :context] for k, v in batch.items()}
    return batch, int(batch["response_mask"].sum())


def verified(items: list[dict], responses: list[str], rewards: list[float]) -> list[int]:
    """Indices of the right responses, one per distinct (question, response)."""
    seen, keep = set(), []
    for i, (item, response, reward) in enumerate(zip(items, responses, rewards, strict=True)):
        if reward > 0 and (item["question"], response) not in seen:
            seen.add((item["question"], response))
            keep.append(i)
    return keep


def _train_on(cfg: RFTConfig, model, optimizer, batch: dict, keep: list[int], rng: random.Random, device) -> float:
    """``epochs_per_round`` passes of the SFT loss over the kept rows; the mean loss per optimizer step."""
    losses = []
    model.train()
    for _ in range(cfg.epochs_per_round):
        order = rng.sample(keep, len(keep))
        for start in range(0, len(order), cfg.batch_size):
            rows = torch.tensor(order[start: start + cfg.batch_size])
            mask = batch["response_mask"][rows]
            width = int(mask.any(dim=0).nonzero().max()) + 1
            ids, labels = batch["input_ids"][rows, :width].to(device), batch["labels"][rows, :width].to(device)
            log_probs = get_response_log_probs(model, ids, labels)["log_probs"]
            _, meta = sft_microbatch_train_step(log_probs, mask[:, :width].to(device), 1)
            loop.clip_and_step(cfg, model, optimizer)
            losses.append(float(meta["sft/loss"]))
    return sum(losses) / len(losses) if losses else float("nan")


def train_rft(cfg: RFTConfig, model=None, tokenizer=None, sample_fn=None, threads=None) -> dict:
    """Run RFT until the token budget is spent; returns the last held-out summary plus ``checkpoint``, ``seconds``,
    ``rounds`` and ``sampled_tokens``. ``sample_fn(prompts, seed) -> (responses, ended_by_eos)`` replaces sampling
    (tests); ``threads``: the CLI's CPU thread policy (``loop.run_loop``)."""
    budget = cfg.token_budget or grpo_token_budget(cfg.match_metrics)
    torch.manual_seed(cfg.seed)
    model, tokenizer, _, context, out_dir = loop.load_model_and_prepare(cfg, "rft", model, tokenizer)
    device = model_device(model)
    train, held_out = load_task(cfg)
    loop.check_context(cfg, model, tokenizer, train + held_out)
    optimizer = loop.make_optimizer(cfg, model, weight_decay=0.0)
    rng = random.Random(cfg.seed)
    if sample_fn is None:
        def sample_fn(prompts, seed):
            return rollout(model, tokenizer, prompts, cfg.max_new_tokens, temperature=cfg.temperature, seed=seed,
                           batch_size=cfg.rollout_batch_size, return_eos=True)
    spent = [0]  # sampled response tokens so far

    def one_round(rnd: int) -> dict:
        questions = rng.sample(train, min(len(train), cfg.rollout_batch_size // cfg.group_size))
        items = [item for item in questions for _ in range(cfg.group_size)]
        prompts = [build_prompt(cfg.task, item, cfg.template) for item in items]
        responses, ended = sample_fn(prompts, cfg.seed * 1_000_003 + rnd)
        batch, sampled = _tokens(prompts, responses, ended, tokenizer, context)
        spent[0] += sampled
        rewards = [score(cfg.task, r, item)["reward"] for r, item in zip(responses, items, strict=True)]
        keep = [i for i in verified(items, responses, rewards) if bool(batch["response_mask"][i].any())]
        loss = _train_on(cfg, model, optimizer, batch, keep, rng, device) if keep else None
        return {"sampled_tokens": sampled, "total_sampled_tokens": spent[0], "reward": sum(rewards) / len(rewards),
                "kept": len(keep), "loss": loss}

    def restore(saved: dict) -> None:
        rng.setstate(saved["rng"])
        spent[0] = saved["spent"]

    trainer = loop.Trainer(
        "rft", METRIC_COLUMNS, step=one_round, step_column="round", finished=lambda: spent[0] >= budget,
        state=lambda: {"rng": rng.getstate(), "spent": spent[0]}, restore=restore,
        held_out=lambda: loop.held_out_accuracy(cfg, model, tokenizer, held_out),
        line=lambda rnd, row, summary: (f"round {rnd}: {spent[0]}/{budget} sampled tokens, reward {row['reward']:.3f}, "
                                        f"val_accuracy {summary.get('accuracy')}"),
        panels={"reward": ("reward", "val_accuracy"), "loss": ("loss",)})
    out, rounds = loop.run_loop(cfg, trainer, model, tokenizer, optimizer, out_dir, threads)
    return {**out, "rounds": rounds, "sampled_tokens": spent[0], "token_budget": budget}


def main(argv: list[str] | None = None) -> int:
    return loop.cli_main(RFTConfig, train_rft, "rft", argv, doc=__doc__)


if __name__ == "__main__":
    sys.exit(main())
