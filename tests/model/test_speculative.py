"""Speculative decoding: greedy identical to plain greedy, sampled tokens follow the target's distribution."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from model.core.config import ModelConfig
from model.core.transformer import TransformerLM
from model.inference.generate import generate, sample_next
from model.inference.speculative import measure_speedup, processed_probs, speculative_generate, verify

PROMPTS = [[1, 2, 3], [5], [9, 9, 9, 9, 9, 9, 9], [40, 2, 77, 13]]


def tiny_model(seed: int, vocab_size: int = 97, **overrides) -> TransformerLM:
    torch.manual_seed(seed)
    cfg = ModelConfig(**(dict(vocab_size=vocab_size, context_length=64, d_model=32, n_layers=2, n_heads=4)
                         | overrides))
    return TransformerLM(cfg).eval()


def noisy_copy(model: TransformerLM, std: float, seed: int) -> TransformerLM:
    """The same model with Gaussian noise on every weight: a draft that agrees only part of the time."""
    noisy = tiny_model(0)
    noisy.load_state_dict(model.state_dict())
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in noisy.parameters():
            p.add_(torch.randn(p.shape, generator=g) * std)
    return noisy


class TableLM(nn.Module):
    """A cheap random LM with the interface speculative decoding uses: logits = bigram[last token]
    + bias[position], so both the context and the cache position matter."""

    def __init__(self, vocab_size: int, context_length: int, seed: int, scale: float = 1.0):
        super().__init__()
        self.cfg = SimpleNamespace(vocab_size=vocab_size, context_length=context_length)
        g = torch.Generator().manual_seed(seed)
        self.bigram = nn.Parameter(torch.randn(vocab_size, vocab_size, generator=g) * scale)
        self.bias = nn.Parameter(torch.randn(context_length, vocab_size, generator=g) * scale)

    def new_cache(self, batch_size: int, max_len: int):
        return SimpleNamespace(length=0)

    def forward(self, ids, cache=None):
        start = cache.length if cache is not None else 0
        T = ids.shape[1]
        if cache is not None:
            cache.length += T
        return self.bigram[ids] + self.bias[start:start + T]  # (B, T, V)

    def next_probs(self, last: int, position: int) -> np.ndarray:
        with torch.no_grad():
            return (self.bigram[last] + self.bias[position]).softmax(-1).double().numpy()


def tv(a: np.ndarray, b: np.ndarray) -> float:
    return 0.5 * float(np.abs(a - b).sum())


def tv_bound(p: np.ndarray, n: int, delta: float = 1e-6) -> float:
    """E[TV(empirical, p)] <= ½Σ√(p(1−p)/n), plus McDiarmid's deviation √(ln(1/δ)/2n) (one sample
    moves TV by at most 1/n): the empirical TV exceeds this with probability below δ."""
    return 0.5 * float(np.sqrt(p * (1 - p) / n).sum()) + math.sqrt(math.log(1 / delta) / (2 * n))


@pytest.mark.parametrize("settings", [dict(temperature=1.0), dict(temperature=0.7, top_k=5),
                                      dict(temperature=1.3, top_p=0.6), dict(temperature=0.9, top_k=20, top_p=0.8),
                                      dict(temperature=0)])
def test_processed_probs_draws_what_sample_next_draws(settings):
    """Same generator state + same distribution ⇒ torch.multinomial draws the very same tokens."""
    logits = torch.randn(64, 50, generator=torch.Generator().manual_seed(3)) * 3
    expected = sample_next(logits, generator=torch.Generator().manual_seed(11), **settings)
    probs = processed_probs(logits, **settings)
    torch.testing.assert_close(probs.sum(-1), torch.ones(64))
    drawn = torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(11)).squeeze(-1)
    if settings["temperature"] == 0:
        drawn = probs.argmax(-1)
    assert torch.equal(drawn, expected)


def test_verify_hand_computed_case():
    """p = (½, ½), q = (1, 0), draft token 0: accepted with probability ½; on rejection the
    residual max(0, p − q) = (0, ½) always gives token 1; p = q accepts every draft."""
    p, q = torch.tensor([[0.5, 0.5], [0.25, 0.75]]), torch.tensor([[1.0, 0.0]])
    g = torch.Generator().manual_seed(0)
    results = [verify(p, q, [0], g) for _ in range(2000)]
    rejected = [tok for n, tok in results if n == 0]
    assert set(rejected) == {1}
    assert abs(len(rejected) / 2000 - 0.5) < 0.05
    assert verify(p, p[:1], [1], g)[0] == 1
    # greedy: argmax(p_1) = 0 (ties go to the first index) so draft 0 is kept and the bonus is argmax(p_2) = 1
    assert verify(p, q, [0], greedy=True) == (1, 1)
    assert verify(p, q, [1], greedy=True) == (0, 0)
    with pytest.raises(ValueError, match="k\\+1"):
        verify(p, q, [0, 1], g)


def test_greedy_identical_to_plain_greedy():
    target = tiny_model(0)
    drafts = {"self": target, "random": tiny_model(1), "noisy": noisy_copy(target, 0.02, seed=5)}
    rates = {name: [] for name in drafts}
    for prompt in PROMPTS[:3]:
        expected = generate(target, [prompt], 24, temperature=0)[0]
        for gamma in (1, 3, 5):
            for name, draft in drafts.items():
                out, stats = speculative_generate(target, draft, prompt, 24, gamma, temperature=0)
                assert out == expected, (name, prompt, gamma)
                assert stats["emitted"] == 24
                assert stats["emitted"] == stats["accepted"] + stats["target_forwards"]  # one target token a round
                rates[name].append(stats["acceptance_rate"])
    assert all(r == 1.0 for r in rates["self"])
    assert np.mean(rates["random"]) < 0.2  # a different random model rarely agrees
    assert 0.2 < np.mean(rates["noisy"]) < 1.0  # partial acceptance: exercises the cache rollback


def test_self_draft_stats():
    target = tiny_model(0)
    out, stats = speculative_generate(target, target, [1, 2], 20, gamma=4, temperature=0)
    # rounds emit 5, 5, 5, then 4 tokens of the remaining 5 budget (k = min(4, 20-15-1) = 4)
    assert stats["proposed"] == stats["accepted"] == 4 + 4 + 4 + 4
    assert stats["target_forwards"] == 4 and stats["draft_forwards"] == 16
    assert stats["tokens_per_target_forward"] == 5.0


def _first_two(target, draft, prompt, runs, **settings):
    g = torch.Generator().manual_seed(0)
    return np.array([speculative_generate(target, draft, prompt, 3, gamma=2, generator=g, **settings)[0][:2]
                     for _ in range(runs)])


@pytest.mark.parametrize("settings, runs", [(dict(temperature=1.0), 4000), (dict(temperature=0.8, top_k=5), 2000)])
def test_sampled_tokens_follow_target_distribution(settings, runs):
    """Thousands of runs with a random draft that disagrees a lot: the first token's empirical
    distribution is the target's processed distribution, not the draft's; likewise the second
    token given the most likely first one."""
    V, prompt = 8, [3, 1]
    target, draft = TableLM(V, 8, seed=0), TableLM(V, 8, seed=1)
    samples = _first_two(target, draft, prompt, runs, **settings)

    def processed(model, last, pos):
        return processed_probs(torch.log(torch.tensor(model.next_probs(last, pos))), **settings).double().numpy()

    p1, q1 = processed(target, 1, 1), processed(draft, 1, 1)
    emp1 = np.bincount(samples[:, 0], minlength=V) / runs
    assert tv(emp1, p1) < tv_bound(p1, runs)
    assert tv(emp1, q1) > 2 * tv_bound(q1, runs)  # the test can tell the draft from the target

    first = int(np.argmax(p1))
    second = samples[samples[:, 0] == first, 1]
    p2 = processed(target, first, 2)
    assert tv(np.bincount(second, minlength=V) / len(second), p2) < tv_bound(p2, len(second))


@pytest.mark.slow
def test_transformer_sampling_follows_target_distribution():
    """The same check with real TransformerLMs (vocab 8) and their KV caches."""
    V, prompt, runs = 8, [3, 1, 4], 1200
    cfg = dict(vocab_size=V, context_length=16, d_model=16, n_layers=1, n_heads=2)
    torch.manual_seed(0)
    target = TransformerLM(ModelConfig(**cfg)).eval()
    torch.manual_seed(1)
    draft = TransformerLM(ModelConfig(**cfg)).eval()
    samples = _first_two(target, draft, prompt, runs)
    with torch.no_grad():
        p1 = target(torch.tensor([prompt]))[0, -1].softmax(-1).double().numpy()
        q1 = draft(torch.tensor([prompt]))[0, -1].softmax(-1).double().numpy()
        first = int(np.argmax(p1))
        p2 = target(torch.tensor([prompt + [first]]))[0, -1].softmax(-1).double().numpy()
    emp1 = np.bincount(samples[:, 0], minlength=V) / runs
    assert tv(emp1, p1) < tv_bound(p1, runs)
    assert tv(p1, q1) > 2 * tv_bound(q1, runs)
    second = samples[samples[:, 0] == first, 1]
    assert tv(np.bincount(second, minlength=V) / len(second), p2) < tv_bound(p2, len(second))


def test_eos_stops():
    target = tiny_model(0)
    draft = noisy_copy(target, 0.02, seed=5)
    greedy = generate(target, [[1, 2, 3]], 24, temperature=0)[0]
    eos = greedy[6]
    out, stats = speculative_generate(target, draft, [1, 2, 3], 24, 4, temperature=0, eos_id=eos)
    assert out == greedy[:greedy.index(eos)] == generate(target, [[1, 2, 3]], 24, temperature=0, eos_id=eos)[0]
    assert stats["emitted"] < 24
    for seed in range(5):  # sampling: eos never appears in the output, which stops early or at the budget
        out, _ = speculative_generate(target, draft, [4, 5], 30, 3, temperature=1.5, eos_id=7, seed=seed)
        assert 7 not in out and len(out) <= 30


def test_seed_reproducible_and_zero_tokens():
    target, draft = tiny_model(0), tiny_model(1)
    a = speculative_generate(target, draft, [1, 2], 15, 3, seed=4)
    assert a == speculative_generate(target, draft, [1, 2], 15, 3, seed=4)
    assert len(a[0]) == 15
    out, stats = speculative_generate(target, draft, [1, 2], 0)
    assert out == [] and stats["target_forwards"] == 0 and math.isnan(stats["acceptance_rate"])


def test_full_context_budget():
    """prompt + max_new_tokens == context_length works (drafts never run past the context)."""
    target = tiny_model(0)
    out, _ = speculative_generate(target, noisy_copy(target, 0.02, seed=5), [1] * 40, 24, 6, temperature=0)
    assert out == generate(target, [[1] * 40], 24, temperature=0)[0]


def test_bad_input():
    target = tiny_model(0)
    cases = [
        (dict(draft=tiny_model(1, vocab_size=50)), "vocab_size=50"),
        (dict(gamma=0), "gamma"),
        (dict(prompt=[]), "prompt"),
        (dict(prompt=[[1, 2]]), "prompt"),
        (dict(prompt=[1.5, 2]), "prompt"),
        (dict(prompt="ab"), "prompt"),
        (dict(prompt=None), "prompt"),
        (dict(prompt=[1, 97]), "token id 97"),
        (dict(prompt=[1, -1]), "token id -1"),
        (dict(max_new_tokens=-1), "max_new_tokens"),
        (dict(max_new_tokens=70), "context_length"),
        (dict(temperature=-1.0), "temperature"),
        (dict(top_k=0), "top_k"),
        (dict(top_p=1.5), "top_p"),
    ]
    for override, message in cases:
        args = dict(target=target, draft=target, prompt=[1, 2], max_new_tokens=5, gamma=2) | override
        with pytest.raises(ValueError, match=message):
            speculative_generate(**args)
    numpy_prompt = np.array([1, 2], dtype=np.int64)  # integer-like ids are accepted
    assert speculative_generate(target, target, numpy_prompt, 4, temperature=0)[0] == \
        generate(target, [[1, 2]], 4, temperature=0)[0]
    small = tiny_model(1, context_length=8)
    with pytest.raises(ValueError, match="draft's context_length=8"):
        speculative_generate(target, small, [1, 2], 10)


def test_measure_speedup_reports():
    target = tiny_model(0)
    result = measure_speedup(target, noisy_copy(target, 0.02, seed=5), PROMPTS[:2], 12, gamma=3)
    assert result["identical"] is True
    assert result["plain_s"] > 0 and result["speculative_s"] > 0
    assert 0 <= result["acceptance_rate"] <= 1 and result["tokens_per_target_forward"] >= 1
    with pytest.raises(ValueError, match="prompts"):
        measure_speedup(target, target, [], 4)
