"""GRPO loop: the logged loss of an on-policy step equals an independent recomputation (numpy advantages, a
plain log_softmax over the full sequence); a policy-gradient run raises a simple reward; off-policy
grpo_clip, the KL penalty, the checkpoint, the CLI and config validation."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest
import torch

import alignment.grpo as grpo
from alignment.evaluate import build_prompt
from alignment.grpo import GRPOConfig, main, train_grpo
from alignment.tasks.data import load_task
from model.core.transformer import TransformerLM
from model.training.checkpoint import load_model
from tests.alignment.helpers import save_nano_run


@pytest.fixture()
def base_run(tmp_path):
    return save_nano_run(tmp_path, context_length=160)


def small_cfg(run, tok, out, **kw) -> GRPOConfig:
    base = dict(model=str(run), tokenizer=str(tok), n_train=16, n_test=4, steps=2, lr=1e-3,
                rollout_batch_size=8, group_size=4, train_batch_size=8, grad_accum=2, max_new_tokens=8,
                eval_interval=0, template="short", out_dir=str(out), seed=0)
    return GRPOConfig(**{**base, **kw})


def count_a(response: str, item: dict) -> dict:
    share = response.count("a") / max(1, len(response))
    return {"reward": share, "format_reward": 0.0, "answer_reward": share}


def independent_losses(cfg: GRPOConfig, responses: list[str], run) -> np.ndarray:
    """Per-response GRPO loss of one on-policy step, recomputed with numpy advantages and a plain log_softmax
    over the full sequence (the questions are the ones the loop samples: its rng replayed)."""
    start = load_model(run).eval()
    train, _ = load_task(cfg)
    n_questions = cfg.rollout_batch_size // cfg.group_size
    items = random.Random(cfg.seed).sample(train, n_questions)
    prompts = [build_prompt("arithmetic", item, "short") for item in items for _ in range(cfg.group_size)]
    rewards = np.array([count_a(r, {})["reward"] for r in responses]).reshape(n_questions, cfg.group_size)
    adv = ((rewards - rewards.mean(1, keepdims=True)) / (rewards.std(1, ddof=1, keepdims=True) + 1e-6)).reshape(-1)
    losses = []
    with torch.no_grad():
        for prompt, response, a in zip(prompts, responses, adv):
            p, r = list(prompt.encode()), list(response.encode())
            ids = torch.tensor([p + r])
            logp = torch.log_softmax(start(ids[:, :-1]).double(), dim=-1)[0]
            token_logps = [float(logp[len(p) - 1 + j, t]) for j, t in enumerate(r)]
            losses.append(-a * np.mean(token_logps))
    return np.array(losses)


def test_on_policy_loss_matches_an_independent_recomputation(base_run, tmp_path, monkeypatch):
    run, tok = base_run
    responses = ["aab", "a", "bbbb", "ab a", "aaaa", "b", "ba", "abc"]
    monkeypatch.setattr(grpo, "rollout", lambda *a, **k: (list(responses), [False] * len(responses)))
    cfg = small_cfg(run, tok, tmp_path / "g", steps=1, lr=1e-30)
    losses = independent_losses(cfg, responses, run)
    train_grpo(cfg, reward_fn=count_a)
    logged = pd.read_csv(tmp_path / "g" / "metrics.csv")
    assert logged["loss"].iloc[-1] == pytest.approx(np.mean(losses), rel=1e-4, abs=1e-6)
    rewards = [count_a(r, {})["reward"] for r in responses]
    assert logged["reward"].iloc[-1] == pytest.approx(np.mean(rewards), rel=1e-6)
    assert logged["trained_fraction"].iloc[-1] == 1.0


def test_skipping_zero_std_groups_trains_on_the_rest_only(base_run, tmp_path, monkeypatch):
    """The second group's rewards all agree (no 'a' anywhere): with the DAPO filter its rows are not run and the
    loss is the mean over the first group's rows; without it they count as zeros in the mean."""
    run, tok = base_run
    responses = ["aab", "a", "bbbb", "ab a", "bbb", "b", "bb", "bcb"]
    monkeypatch.setattr(grpo, "rollout", lambda *a, **k: (list(responses), [False] * len(responses)))
    losses = independent_losses(small_cfg(run, tok, tmp_path, steps=1), responses, run)
    for skip in (False, True):
        cfg = small_cfg(run, tok, tmp_path / str(skip), steps=1, lr=1e-30, skip_zero_std_groups=skip)
        train_grpo(cfg, reward_fn=count_a)
        logged = pd.read_csv(tmp_path / str(skip) / "metrics.csv").iloc[-1]
        expected = losses[:4].mean() if skip else losses.mean()
        assert logged["loss"] == pytest.approx(expected, rel=1e-4, abs=1e-6)
        assert logged["trained_fraction"] == (0.5 if skip else 1.0)
        assert logged["frac_zero_std"] == 0.5
    assert np.all(losses[4:] == 0.0) and abs(losses[:4].mean()) > 1e-3
    with pytest.raises(ValueError, match="skip_zero_std_groups"):
        GRPOConfig(model="m", skip_zero_std_groups=True, loss_type="no_baseline")


def test_policy_gradient_raises_the_reward(base_run, tmp_path, monkeypatch):
    run, tok = base_run
    cfg = small_cfg(run, tok, tmp_path / "g", steps=25, lr=1e-2, rollout_batch_size=32, group_size=8,
                    train_batch_size=32, grad_accum=1, max_new_tokens=6, n_test=0)
    train_grpo(cfg, reward_fn=count_a)
    rewards = pd.read_csv(tmp_path / "g" / "metrics.csv")["reward"].dropna().to_numpy()
    print(f"reward first 5 steps {rewards[:5].mean():.3f}, last 5 {rewards[-5:].mean():.3f}")
    assert rewards[-5:].mean() > rewards[:5].mean() + 0.1, rewards


def test_off_policy_clip_and_kl_are_logged_and_checkpoint_loads(base_run, tmp_path, monkeypatch):
    run, tok = base_run
    report = tmp_path / "alignment.csv"
    cfg = small_cfg(run, tok, tmp_path / "g", loss_type="grpo_clip", epochs_per_rollout_batch=2,
                    train_batch_size=4, grad_accum=2, kl_coef=0.1, lr=3e-3, cliprange=0.05,
                    length_normalization="constant", report=str(report))
    summary = train_grpo(cfg, reward_fn=count_a)
    metrics = pd.read_csv(tmp_path / "g" / "metrics.csv")
    assert list(metrics["step"]) == [0, 1, 2]
    assert metrics["kl"].iloc[1:].notna().all() and (metrics["kl"].iloc[1:] >= 0).all()
    assert metrics["clip_fraction"].iloc[1:].max() > 0  # the second epoch moves past the clip range
    assert metrics["val_accuracy"].notna().tolist() == [True, False, True]
    model = load_model(tmp_path / "g")
    assert isinstance(model, TransformerLM)
    assert (tmp_path / "g" / "metrics.png").stat().st_size > 5_000
    assert pd.read_csv(report)["stage"].tolist() == ["grpo"]
    assert summary["n"] == 4


def test_cli_runs_and_bad_input_exits_2(base_run, tmp_path, capsys):
    run, tok = base_run
    common = ["--model", str(run), "--tokenizer", str(tok), "--n-train", "8", "--n-test", "2",
              "--rollout-batch-size", "4", "--group-size", "2", "--train-batch-size", "4", "--grad-accum", "1",
              "--max-new-tokens", "4", "--template", "short", "--params", "none"]
    assert main(common + ["--steps", "1", "--normalize-by-std", "false", "--out-dir", str(tmp_path / "cli")]) == 0
    assert load_model(tmp_path / "cli").cfg.vocab_size == 257
    for extra in (["--steps", "0"], ["--group-size", "3"], ["--epochs-per-rollout-batch", "2"]):
        capsys.readouterr()
        assert main(common + extra + ["--out-dir", str(tmp_path / "bad")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: grpo."), err


@pytest.mark.parametrize("field,value", [("lr", 0.0), ("group_size", 0), ("loss_type", "ppo"),
                                         ("temperature", 0.0), ("length_normalization", "sum"), ("top_p", 1.5),
                                         ("kl_coef", -1.0)])
def test_config_rejects_bad_values_naming_the_field(field, value):
    with pytest.raises(ValueError, match=f"grpo.{field}"):
        GRPOConfig(model="m", **{field: value})


def test_config_rejects_inconsistent_batch_sizes():
    with pytest.raises(ValueError, match="multiple of group_size"):
        GRPOConfig(model="m", rollout_batch_size=10, group_size=4)
    with pytest.raises(ValueError, match="multiple of grad_accum"):
        GRPOConfig(model="m", train_batch_size=256, grad_accum=3)
    with pytest.raises(ValueError, match="off-policy"):
        GRPOConfig(model="m", train_batch_size=128)
