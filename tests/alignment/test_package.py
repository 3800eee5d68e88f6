"""alignment/__init__.py: the CS336 assignment 5 names import from ``alignment``, the same objects as at home."""

import alignment
from alignment.core import losses, policy
from alignment.tasks import rewards


def test_cs336_names_are_reexported_from_their_homes():
    homes = {losses: ("compute_entropy", "masked_mean", "masked_normalize", "sft_microbatch_train_step",
                      "compute_group_normalized_rewards", "compute_naive_policy_gradient_loss",
                      "compute_grpo_clip_loss", "compute_policy_gradient_loss", "grpo_microbatch_train_step",
                      "dpo_loss"),
             policy: ("tokenize_prompt_and_output", "get_response_log_probs", "PackedSFTDataset"),
             rewards: ("r1_zero_reward_fn", "parse_gsm8k_answer", "parse_mmlu_letter")}
    names = [name for group in homes.values() for name in group]
    assert sorted(alignment.__all__) == sorted(names)
    for module, group in homes.items():
        for name in group:
            assert getattr(alignment, name) is getattr(module, name), name
