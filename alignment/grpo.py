"""GRPO with verifiable rewards (CS336 assignment 5, section 7 "GRPO experiments"; Shao et al. 2024).

Each GRPO step: ``rollout_batch_size / group_size`` training questions are sampled, each answered
``group_size`` times (``alignment.core.rollout``: our KV-cache generation or HF ``generate``, stop at
``</answer>``); rewards come from the task's verifier (R1-Zero format + answer, ``alignment.evaluate.score``)
and become group-normalized advantages (``compute_group_normalized_rewards``). The rollout batch is then
trained on for ``epochs_per_rollout_batch`` epochs in optimizer steps of ``train_batch_size`` sequences,
split into ``grad_accum`` microbatches (``grpo_microbatch_train_step``). With one epoch and
``train_batch_size == rollout_batch_size`` the run is on-policy; otherwise (or with ``grpo_clip``) the
log-probs of the rollout policy are kept as ``old_log_probs`` for the clipped objective. An optional frozen
reference adds the k3 KL penalty (``kl_coef``); ``cliprange_low/high`` give DAPO's asymmetric clip and
``length_normalization="constant"`` Dr. GRPO's constant normalizer.

Defaults are CS336's (200 steps, lr 1e-5, rollout batch 256, group 8, AdamW betas (0.9, 0.95), clip 1.0,
reinforce_with_baseline with std normalization); params.yaml scales them down for the embedded default.
Writes ``metrics.csv`` (reward, format rate, accuracy, entropy, response length, clip fraction, KL, held-out
accuracy ...), ``metrics.png``, ``config.json`` and a checkpoint like ``alignment.sft``.

CLI: ``python -m alignment.grpo --model runs/sft --tokenizer data/tokenizer --out-dir runs/grpo [--steps ...]``.
"""

from __future__ import annotations

import copy
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch

from alignment import loop
from alignment.config import LoopConfig, RolloutConfig, StepsConfig
from alignment.core.losses import (
    LENGTH_NORMALIZATIONS,
    LOSS_TYPES,
    compute_group_normalized_rewards,
    grpo_microbatch_train_step,
    masked_mean,
)
from alignment.core.policy import frozen, get_response_log_probs, model_device, tokenize_prompt_and_output
from alignment.core.rollout import rollout
from alignment.evaluate import build_prompt, score
from alignment.tasks.data import load_task
from alignment.trl_engine import train_grpo_trl
from model.training.optim import AdamW
from workbench.params import override, setting

METRIC_COLUMNS = ("step", "lr", "loss", "reward", "format_reward", "answer_reward", "frac_zero_std",
                  "trained_fraction", "entropy", "response_tokens", "sampled_tokens", "clip_fraction", "kl",
                  "grad_norm", "rollout_seconds", "train_seconds", "val_accuracy", "val_format_rate", "seconds")


@dataclass(frozen=True)
class GRPOConfig(StepsConfig, RolloutConfig):
    """Group relative policy optimization (Shao et al. 2024) with CS336 A5's defaults (lr 1e-5 constant, 256
    rollouts in groups of 8, 128 microbatches; A5's 1024 new tokens are params-gpu.yaml's: the shared default here fits
    the default model's context); the shared settings in alignment.config (A5's
    prompt is `template: r1_zero`; the default here is the project's `short`, as for every trainer)."""

    SECTION = "grpo"

    lr: float = override(LoopConfig, "lr", 1e-5)
    warmup_steps: int = override(StepsConfig, "warmup_steps", 0)  # CS336 A5: a constant lr
    grad_accum: int = override(StepsConfig, "grad_accum", 128)
    eval_interval: int = override(LoopConfig, "eval_interval", 10)
    eval_batch_size: int = override(LoopConfig, "eval_batch_size", 64)
    out_dir: str = override(LoopConfig, "out_dir", "runs/grpo")
    ckpt_interval: int = override(LoopConfig, "ckpt_interval", 10)
    train_batch_size: int = setting(256, "responses per optimizer step (== rollout_batch_size: on-policy)", at_least=1)
    epochs_per_rollout_batch: int = setting(1, "passes over each rollout batch (> 1: off-policy, needs grpo_clip)",
                                            at_least=1)
    loss_type: str = setting("reinforce_with_baseline", "no_baseline | reinforce_with_baseline | grpo_clip",
                             choices=LOSS_TYPES)
    normalize_by_std: bool = setting(True, "divide group advantages by their std (Dr. GRPO: false)")
    advantage_eps: float = setting(1e-6, "added to the group std before dividing", at_least=0)
    cliprange: float = setting(0.2, "grpo_clip: the PPO clip range on the probability ratio", above=0)
    cliprange_low: float | None = setting(None, "a separate lower clip range (DAPO's clip-higher: 0.2)")
    cliprange_high: float | None = setting(None, "a separate upper clip range (DAPO's clip-higher: 0.28)")
    length_normalization: str = setting("masked_mean", "masked_mean (per response) | constant (Dr. GRPO: divide by "
                                                       "max_new_tokens)", choices=LENGTH_NORMALIZATIONS)
    kl_coef: float = setting(0.0, "> 0: the k3 KL to a frozen copy of the starting policy, with this weight",
                             at_least=0)
    skip_zero_std_groups: bool = setting(False, "DAPO's filter: skip groups whose rewards all agree (zero advantage)")
    top_p: float = setting(1.0, "nucleus sampling of the rollouts", above=0, at_most=1)

    def __post_init__(self) -> None:  # rules across settings: the batch shapes, the loss and what it needs
        super().__post_init__()
        self._check_batch_shapes()
        self._check_objective()

    def _check_batch_shapes(self) -> None:
        """Rollouts split into whole groups and whole optimizer steps, optimizer steps into whole microbatches."""
        loop.check_multiples(self, (("rollout_batch_size", "group_size"), ("rollout_batch_size", "train_batch_size"),
                                    ("train_batch_size", "grad_accum")))
        if self.normalize_by_std and self.group_size < 2:
            raise ValueError(f"grpo.group_size={self.group_size}: normalize_by_std needs groups of >= 2")

    def _check_objective(self) -> None:
        if self.off_policy and self.loss_type != "grpo_clip":
            raise ValueError(f"grpo.loss_type={self.loss_type!r}: epochs_per_rollout_batch="
                             f"{self.epochs_per_rollout_batch}, train_batch_size={self.train_batch_size} < "
                             f"rollout_batch_size={self.rollout_batch_size} is off-policy and needs grpo_clip")
        if self.skip_zero_std_groups and self.loss_type == "no_baseline":
            raise ValueError("grpo.skip_zero_std_groups needs advantages (reinforce_with_baseline or grpo_clip): "
                             "no_baseline learns from every rewarded response")

    @property
    def off_policy(self) -> bool:
        return self.epochs_per_rollout_batch > 1 or self.train_batch_size < self.rollout_batch_size


class _Batch:
    """One rollout batch, tokenized once: tensors on the device, cut to the model's context. A response that
    ended by sampling EOS keeps it (so an empty answer still has one token to learn from)."""

    def __init__(self, prompts, responses, ended_by_eos, tokenizer, context, device):
        batch = tokenize_prompt_and_output(prompts, responses, tokenizer, add_bos=True, append_eos=ended_by_eos)
        if context is not None:
            batch = {k: v[:, :context] for k, v in batch.items()}
        self.input_ids = batch["input_ids"].to(device)
        self.labels = batch["labels"].to(device)
        self.response_mask = batch["response_mask"].to(device)

    def rows(self, index: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The rows ``index``, trimmed to their longest sequence (less padding, faster microbatches)."""
        i = torch.tensor(index, device=self.input_ids.device)
        mask = self.response_mask[i]
        width = int(mask.any(dim=0).nonzero().max()) + 1 if mask.any() else 1
        return self.input_ids[i, :width], self.labels[i, :width], mask[:, :width]


@torch.no_grad()
def _log_probs_in_chunks(model, batch: _Batch, n: int, chunk: int) -> torch.Tensor:
    """Per-token log-probs (n, T) of the whole batch under ``model`` (old or reference policy)."""
    out = torch.zeros(batch.labels.shape, dtype=torch.float32, device=batch.labels.device)
    for start in range(0, n, chunk):
        index = list(range(start, min(n, start + chunk)))
        ids, labels, _ = batch.rows(index)
        out[start: start + len(index), : ids.shape[1]] = get_response_log_probs(model, ids, labels)["log_probs"]
    return out


@dataclass
class _Run:
    """What every GRPO step uses: the policy, its frozen reference (KL), the optimizer, the question sampler and
    the sizes the config implies."""

    cfg: GRPOConfig
    model: object
    tokenizer: object
    reference: object | None
    optimizer: AdamW
    rng: random.Random
    reward_fn: Callable[[str, dict], dict]
    train: list[dict]
    context: int | None
    device: torch.device

    @property
    def micro(self) -> int:  # sequences per microbatch
        return self.cfg.train_batch_size // self.cfg.grad_accum

    @property
    def need_old(self) -> bool:  # the clipped objective compares against the rollout policy's log-probs
        return self.cfg.loss_type == "grpo_clip"


@dataclass
class _Rollouts:
    """One step's rollout batch: sampled responses, their rewards and advantages, and the log-probs of the rollout
    policy / the reference when the objective needs them."""

    batch: _Batch
    n: int
    raw_rewards: torch.Tensor
    advantages: torch.Tensor
    reward_meta: dict
    old_log_probs: torch.Tensor | None
    ref_log_probs: torch.Tensor | None
    seconds: float


def _collect_rollouts(run: _Run, step: int) -> _Rollouts:
    """Sample ``group_size`` responses to each of ``rollout_batch_size / group_size`` training questions, score
    them, and keep the fixed log-probs the update needs."""
    cfg, started = run.cfg, time.perf_counter()
    n_questions = cfg.rollout_batch_size // cfg.group_size
    items = (run.rng.sample(run.train, n_questions) if n_questions <= len(run.train)
             else run.rng.choices(run.train, k=n_questions))
    items = [item for item in items for _ in range(cfg.group_size)]
    prompts = [build_prompt(cfg.task, item, cfg.template) for item in items]
    responses, ended_by_eos = rollout(run.model, run.tokenizer, prompts, cfg.max_new_tokens,
                                      temperature=cfg.temperature, top_p=cfg.top_p,
                                      seed=cfg.seed * 1_000_003 + step, batch_size=cfg.rollout_batch_size,
                                      return_eos=True)
    advantages, raw_rewards, reward_meta = compute_group_normalized_rewards(
        run.reward_fn, responses, items, cfg.group_size, cfg.advantage_eps, cfg.normalize_by_std)
    batch = _Batch(prompts, responses, ended_by_eos, run.tokenizer, run.context, run.device)
    n, chunk = len(prompts), max(run.micro, 64)
    run.model.eval()
    old_log_probs = _log_probs_in_chunks(run.model, batch, n, chunk) if run.need_old else None
    ref_log_probs = _log_probs_in_chunks(run.reference, batch, n, chunk) if run.reference is not None else None
    run.model.train()
    return _Rollouts(batch, n, raw_rewards, advantages, reward_meta, old_log_probs, ref_log_probs,
                     time.perf_counter() - started)


def _trainable(cfg: GRPOConfig, rollouts: _Rollouts) -> list[bool]:
    """Per response: whether it is trained on (it has response tokens inside the context and, with
    ``skip_zero_std_groups``, its group's rewards disagree: zero advantage means zero policy gradient)."""
    trainable = rollouts.batch.response_mask.any(dim=-1).tolist()  # False: the prompt filled the context
    if cfg.skip_zero_std_groups:
        spread = rollouts.raw_rewards.view(-1, cfg.group_size).std(dim=-1) > 0
        trainable = [t and bool(spread[i // cfg.group_size]) for i, t in enumerate(trainable)]
    return trainable


def _microbatch(run: _Run, rollouts: _Rollouts, index: list[int], n_micro: int, sums: dict) -> None:
    """Forward/backward of the responses ``index``; adds its loss, entropy, clip fraction and KL to ``sums``."""
    cfg = run.cfg
    ids, labels, mask = rollouts.batch.rows(index)
    width = ids.shape[1]
    out = get_response_log_probs(run.model, ids, labels, return_token_entropy=True)
    idx = torch.tensor(index, device=run.device)
    old, ref = rollouts.old_log_probs, rollouts.ref_log_probs  # ref: only with a reference (kl_coef > 0)
    loss, meta = grpo_microbatch_train_step(
        out["log_probs"], mask, n_micro, cfg.loss_type,
        raw_rewards=rollouts.raw_rewards[index].unsqueeze(-1).to(run.device),
        advantages=rollouts.advantages[index].unsqueeze(-1).to(run.device),
        old_log_probs=None if old is None else old[idx, :width],
        cliprange=cfg.cliprange, length_normalization=cfg.length_normalization,
        normalize_constant=float(cfg.max_new_tokens) if cfg.length_normalization == "constant" else None,
        ref_log_probs=None if ref is None else ref[idx, :width], kl_coef=cfg.kl_coef,
        cliprange_low=cfg.cliprange_low, cliprange_high=cfg.cliprange_high)
    sums["loss"] += float(loss)
    sums["entropy"] += float(masked_mean(out["token_entropy"].detach(), mask))
    sums["clip_fraction"] += float(meta.get("policy/clip_fraction", 0.0))
    sums["kl"] += float(meta.get("policy/kl", 0.0))
    sums["microbatches"] += 1


def _update_policy(run: _Run, rollouts: _Rollouts, trainable: list[bool]) -> dict:
    """``epochs_per_rollout_batch`` passes over the trainable responses (shuffled when off-policy), one optimizer
    step per ``train_batch_size`` of them; returns the summed losses/statistics and the counts to average them."""
    cfg, n = run.cfg, rollouts.n
    sums = {"loss": 0.0, "entropy": 0.0, "clip_fraction": 0.0, "kl": 0.0, "grad_norm": 0.0, "microbatches": 0,
            "updates": 0}
    for _ in range(cfg.epochs_per_rollout_batch):
        order = run.rng.sample(range(n), n) if cfg.off_policy else list(range(n))
        order = [i for i in order if trainable[i]]
        for start in range(0, n, cfg.train_batch_size):
            chosen = order[start: start + cfg.train_batch_size]
            if not chosen:
                continue
            n_micro = -(-len(chosen) // run.micro)  # the loss is averaged over the microbatches actually run
            for m in range(0, len(chosen), run.micro):
                _microbatch(run, rollouts, chosen[m: m + run.micro], n_micro, sums)
            sums["grad_norm"] += loop.clip_and_step(cfg, run.model, run.optimizer)
            sums["updates"] += 1
    return sums


def _step_row(run: _Run, rollouts: _Rollouts, kept: int, sums: dict, train_seconds: float) -> dict:
    """The metrics.csv row's training columns of a step (the loop adds the step, lr, held-out and time columns)."""
    updates, count, n, meta = max(sums["updates"], 1), max(sums["microbatches"], 1), rollouts.n, rollouts.reward_meta
    return {"loss": sums["loss"] / updates,
            "reward": float(meta["rewards/mean"]),
            "format_reward": float(meta["rewards/format_mean"]),
            "answer_reward": float(meta["rewards/answer_mean"]),
            "frac_zero_std": float(meta["rewards/frac_zero_std"]), "trained_fraction": kept / n,
            "entropy": sums["entropy"] / count, "response_tokens": float(rollouts.batch.response_mask.sum()) / n,
            "sampled_tokens": int(rollouts.batch.response_mask.sum()),  # the verifier budget RFT matches
            "clip_fraction": sums["clip_fraction"] / count if run.need_old else None,
            "kl": sums["kl"] / count if run.reference is not None else None, "grad_norm": sums["grad_norm"] / updates,
            "rollout_seconds": round(rollouts.seconds, 3), "train_seconds": round(train_seconds, 3)}


def _setup(cfg: GRPOConfig, model, tokenizer, reward_fn) -> tuple[_Run, list[dict], Path]:
    """(the run, held-out items, out_dir): the model loaded (unless given), config.json written, a frozen
    reference when ``kl_coef`` > 0, the optimizer, and the task's verifier unless ``reward_fn`` replaces it."""
    torch.manual_seed(cfg.seed)
    model, tokenizer, _, context, out_dir = loop.load_model_and_prepare(cfg, "grpo", model, tokenizer)
    device = model_device(model)
    train, test = load_task(cfg)
    if not train:
        raise ValueError("GRPO needs training questions (n_train >= 1)")
    loop.check_context(cfg, model, tokenizer, train + test)
    reference = frozen(copy.deepcopy(model)) if cfg.kl_coef > 0 else None
    optimizer = loop.make_optimizer(cfg, model)
    if reward_fn is None:
        reward_fn = partial(score, cfg.task)
    run = _Run(cfg, model, tokenizer, reference, optimizer, random.Random(cfg.seed), reward_fn, train, context,
               device)
    return run, test, out_dir


def train_grpo(cfg: GRPOConfig, model=None, tokenizer=None, reward_fn=None, threads=None) -> dict:
    """Run GRPO; returns the last held-out summary plus ``checkpoint`` and ``seconds``.

    ``reward_fn(response, item) -> {"reward", "format_reward", "answer_reward"}`` replaces the task's
    verifier (``alignment.evaluate.score``) for the training rollouts; held-out accuracy always uses the task's.
    ``threads``: the CLI's CPU thread policy (``loop.run_loop``)."""
    if cfg.engine == "trl":
        return train_grpo_trl(cfg, model, tokenizer, reward_fn)
    state, test, out_dir = _setup(cfg, model, tokenizer, reward_fn)
    trainer = loop.Trainer(
        "grpo", METRIC_COLUMNS, eval_at_start=True,
        lr=lambda step: cfg.lr * min(1.0, step / cfg.warmup_steps) if cfg.warmup_steps else cfg.lr,
        step=lambda step: _grpo_step(state, step),
        state=lambda: {"rng": state.rng.getstate()}, restore=lambda saved: state.rng.setstate(saved["rng"]),
        held_out=lambda: loop.held_out_accuracy(cfg, state.model, state.tokenizer, test),
        line=lambda step, row, summary: (f"step {step}: reward {row['reward']:.3f} answer "
                                         f"{row['answer_reward']:.3f} val_accuracy {summary['accuracy']}"),
        panels={"reward": ("reward", "format_reward", "answer_reward", "val_accuracy"),
                "policy": ("entropy", "clip_fraction", "kl", "frac_zero_std"), "length": ("response_tokens",)})
    return loop.run_loop(cfg, trainer, state.model, state.tokenizer, state.optimizer, out_dir, threads)[0]


def _grpo_step(state: _Run, step: int) -> dict:
    """Sample a rollout batch, update the policy on it; the metrics row's training columns."""
    rollouts = _collect_rollouts(state, step)
    update_started = time.perf_counter()
    trainable = _trainable(state.cfg, rollouts)
    sums = _update_policy(state, rollouts, trainable)
    return _step_row(state, rollouts, sum(trainable), sums, time.perf_counter() - update_started)


def main(argv: list[str] | None = None) -> int:
    return loop.cli_main(GRPOConfig, train_grpo, "grpo", argv, doc=__doc__)


if __name__ == "__main__":
    sys.exit(main())
