"""alignment.rft: the sampled-token budget is GRPO's (read from its metrics.csv, counted as GRPO counts), RFT stops
once it is spent (overshooting by less than one round), keeps only verified distinct responses, and trains on them."""

from __future__ import annotations

import pytest
import torch

from alignment.evaluate import load_model_and_tokenizer
from alignment.grpo import _Batch
from alignment.rft import RFTConfig, _tokens, grpo_token_budget, train_rft, verified
from alignment.tasks.digits import digit_splits, solution
from tests.alignment.helpers import save_nano_run


def test_budget_is_the_sum_of_grpo_sampled_tokens(tmp_path):
    run = tmp_path / "grpo"
    run.mkdir()
    (run / "metrics.csv").write_text("step,reward,sampled_tokens\n0,,\n1,0.5,1200\n2,0.6,1350\n3,0.6,999\n")
    assert grpo_token_budget(run) == 1200 + 1350 + 999 == grpo_token_budget(run / "metrics.csv")
    (run / "metrics.csv").write_text("step,reward\n1,0.5\n")
    with pytest.raises(ValueError, match="sampled_tokens"):
        grpo_token_budget(run)


def test_tokens_are_counted_as_grpo_counts_them(tmp_path):
    base, tok = save_nano_run(tmp_path)
    model, tokenizer = load_model_and_tokenizer(str(base), str(tok))
    prompts = ["User: 1 2 + 3 4\nAssistant: <think>"] * 3
    responses = [" 2 + 4 </think> <answer> 4 6 </answer>", " no", ""]
    ended = [False, True, True]
    grpo_batch = _Batch(prompts, responses, ended, tokenizer, model.cfg.context_length, torch.device("cpu"))
    _, count = _tokens(prompts, responses, ended, tokenizer, model.cfg.context_length)
    assert count == int(grpo_batch.response_mask.sum())
    assert count == len(responses[0].encode()) + len(b" no") + 1 + 1  # bytes, + EOS where it was sampled


def test_verified_keeps_right_distinct_responses():
    items = [{"question": "q1"}] * 3 + [{"question": "q2"}] * 2
    responses = ["a", "a", "b", "a", "c"]
    assert verified(items, responses, [1.0, 1.0, 0.0, 1.0, 0.0]) == [0, 3]


def test_rft_spends_the_budget_and_trains_on_verified_samples(tmp_path):
    base, tok = save_nano_run(tmp_path)
    train, _, _ = digit_splits(40, 0, 0)
    right = {item["question"]: solution(item) for item in train}
    calls = []

    def sample_fn(prompts, seed):  # every other question answered right, the rest wrong; none ends by EOS
        questions = [p.split("User: ")[1].split("\n")[0] for p in prompts]
        out = [right[q] if i % 2 == 0 else " 0 </think> <answer> 0 </answer>" for i, q in enumerate(questions)]
        calls.append(sum(len(r.encode()) for r in out))
        return out, [False] * len(out)

    budget = 5000
    cfg = RFTConfig(model=str(base), tokenizer=str(tok), task="digits", n_train=40, n_test=0, token_budget=budget,
                    rollout_batch_size=16, group_size=4, batch_size=8, lr=1e-3, eval_interval=0,
                    out_dir=str(tmp_path / "rft"), template="short", max_new_tokens=40)
    model, tokenizer = load_model_and_tokenizer(str(base), str(tok))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    summary = train_rft(cfg, model, tokenizer, sample_fn=sample_fn)
    assert summary["sampled_tokens"] == sum(calls) >= budget > sum(calls[:-1])
    assert summary["rounds"] == len(calls)
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())
    rows = (tmp_path / "rft" / "metrics.csv").read_text().splitlines()
    assert len(rows) == 1 + len(calls)
    kept = [int(r.split(",")[4]) for r in rows[1:]]
    assert all(0 < k <= 8 for k in kept)  # half of 16 samples are right, duplicates of a question kept once
