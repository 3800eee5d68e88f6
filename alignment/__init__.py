"""Post-training, in sub-packages by role: tasks (the task definitions, their data and verifiers), core (the building
blocks: the policy adapter and log-probs, rollouts, the loss math, DPO's log-probs) and evaluation (the refusal judge
and the statistics over problems). At the top: the commands ``python -m alignment.sft``, ``.dpo``, ``.grpo``, ``.rft``,
``.evaluate`` (greedy evaluation on a task; its functions are what the loops and the report score with) and
``.report``, and what the trainers share: ``config`` (the settings), ``loop`` (loading, metrics, checkpoints, the CLI)
and ``trl_engine`` (TRL as the other engine). loop and trl_engine import evaluate, which imports the sub-packages, so
they sit at the top with it.

The CS336 assignment 5 names, importable from here: ``tokenize_prompt_and_output``, ``compute_entropy``,
``get_response_log_probs``, ``masked_mean``, ``masked_normalize``, ``sft_microbatch_train_step``,
``compute_group_normalized_rewards``, ``compute_naive_policy_gradient_loss``, ``compute_grpo_clip_loss``,
``compute_policy_gradient_loss``, ``grpo_microbatch_train_step``, ``dpo_loss``, ``PackedSFTDataset``,
``r1_zero_reward_fn``, ``parse_gsm8k_answer`` and ``parse_mmlu_letter``. The per-instance DPO loss (a model-running
helper) is ``alignment.core.preference.per_instance_dpo_loss``.
"""

from alignment.core.losses import (
    compute_entropy,
    compute_group_normalized_rewards,
    compute_grpo_clip_loss,
    compute_naive_policy_gradient_loss,
    compute_policy_gradient_loss,
    dpo_loss,
    grpo_microbatch_train_step,
    masked_mean,
    masked_normalize,
    sft_microbatch_train_step,
)
from alignment.core.policy import PackedSFTDataset, get_response_log_probs, tokenize_prompt_and_output
from alignment.tasks.rewards import parse_gsm8k_answer, parse_mmlu_letter, r1_zero_reward_fn

__all__ = ["PackedSFTDataset", "compute_entropy", "compute_group_normalized_rewards", "compute_grpo_clip_loss",
           "compute_naive_policy_gradient_loss", "compute_policy_gradient_loss", "dpo_loss", "get_response_log_probs",
           "grpo_microbatch_train_step", "masked_mean", "masked_normalize", "parse_gsm8k_answer", "parse_mmlu_letter",
           "r1_zero_reward_fn", "sft_microbatch_train_step", "tokenize_prompt_and_output"]
