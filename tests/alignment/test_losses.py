"""Loss math vs naive per-element loops, explicit formulas and torch.distributions (CS336 A5)."""

from __future__ import annotations

import math
import statistics

import pytest
import torch

from alignment.core.losses import (
    compute_entropy,
    compute_group_normalized_rewards,
    compute_grpo_clip_loss,
    compute_kl_penalty,
    compute_naive_policy_gradient_loss,
    compute_policy_gradient_loss,
    dpo_loss,
    grpo_microbatch_train_step,
    masked_mean,
    masked_normalize,
    sft_microbatch_train_step,
)
from alignment.core.preference import per_instance_dpo_loss
from tests.alignment.helpers import byte_tokenizer


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def rand_mask(*shape, seed=1):
    return torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) > 0.4


# ---- entropy and masked reductions -------------------------------------------------------------

def test_entropy_matches_torch_categorical():
    logits = rand(3, 5, 11) * 4
    expected = torch.distributions.Categorical(logits=logits).entropy()
    torch.testing.assert_close(compute_entropy(logits).double(), expected, rtol=1e-5, atol=1e-5)


def test_entropy_is_stable_for_huge_and_minus_inf_logits():
    huge = torch.tensor([[1e4, 1e4, -1e4, 1e4]])  # three equal winners: H = log 3
    assert compute_entropy(huge).item() == pytest.approx(math.log(3), abs=1e-5)
    masked = torch.tensor([[0.0, 0.0, float("-inf"), float("-inf")]], requires_grad=True)
    h = compute_entropy(masked)
    assert h.item() == pytest.approx(math.log(2), abs=1e-6)
    h.sum().backward()
    assert torch.isfinite(masked.grad).all()
    assert compute_entropy(torch.zeros(2, 7)).tolist() == pytest.approx([math.log(7)] * 2)


def naive_masked_mean(t, m, dim):
    t, m = t.tolist(), m.tolist()
    if dim is None:
        flat = [(x, k) for row in zip(t, m) for x, k in zip(*row)]
        n = sum(k for _, k in flat)
        return sum(x for x, k in flat if k) / n if n else float("nan")
    if dim in (-1, 1):
        rows = [[x for x, k in zip(tr, mr) if k] for tr, mr in zip(t, m)]
    else:
        rows = [[t[i][j] for i in range(len(t)) if m[i][j]] for j in range(len(t[0]))]
    return [sum(r) / len(r) if r else float("nan") for r in rows]


@pytest.mark.parametrize("dim", [None, 0, 1, -1])
def test_masked_mean_matches_loops(dim):
    t, m = rand(4, 6), rand_mask(4, 6)
    m[2] = False  # an all-masked row: nan along dim=-1, no special case
    got = masked_mean(t, m, dim)
    want = naive_masked_mean(t, m, dim)
    if dim is None:
        assert got.item() == pytest.approx(want)
    else:
        assert got.tolist() == pytest.approx(want, nan_ok=True)
    if dim in (1, -1):
        assert math.isnan(got[2].item())


@pytest.mark.parametrize("dim", [None, 0, -1])
def test_masked_normalize_matches_loops(dim):
    t, m = rand(3, 5), rand_mask(3, 5)
    got = masked_normalize(t, m, 7.0, dim)
    T, M = t.tolist(), m.tolist()
    if dim is None:
        want = sum(x for r, k in zip(T, M) for x, b in zip(r, k) if b) / 7.0
        assert got.item() == pytest.approx(want)
    elif dim == 0:
        want = [sum(T[i][j] for i in range(3) if M[i][j]) / 7.0 for j in range(5)]
        assert got.tolist() == pytest.approx(want)
    else:
        want = [sum(x for x, b in zip(r, k) if b) / 7.0 for r, k in zip(T, M)]
        assert got.tolist() == pytest.approx(want)


# ---- SFT ---------------------------------------------------------------------------------------

def test_sft_step_loss_and_grad_match_formula():
    logp = (-rand(2, 4).abs()).requires_grad_()
    mask = torch.tensor([[0, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool)
    loss, meta = sft_microbatch_train_step(logp, mask, gradient_accumulation_steps=3, normalize_constant=2.0)
    L = logp.detach().tolist()
    seq0 = -(L[0][1] + L[0][2]) / 2.0
    seq1 = -sum(L[1]) / 2.0
    assert loss.item() == pytest.approx((seq0 + seq1) / 2 / 3)
    assert not loss.requires_grad
    # d loss / d logp = -mask / (constant · batch · accumulation)
    torch.testing.assert_close(logp.grad, -mask.double() / (2.0 * 2 * 3))
    assert meta["sft/response_tokens"].item() == 6


class Bigram(torch.nn.Module):
    """logits[b, t] = W[token[b, t]]: a model whose log-probs can be written down by hand."""

    def __init__(self, vocab: int, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.W = torch.nn.Parameter(torch.randn(vocab, vocab, generator=g, dtype=torch.float64))

    def forward(self, ids):
        return self.W[ids]


def bigram_log_probs(model, ids, labels):
    return torch.log_softmax(model(ids), -1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)


def test_sft_gradient_accumulation_equals_full_batch():
    ids = torch.randint(0, 9, (4, 6), generator=torch.Generator().manual_seed(3))
    labels = torch.randint(0, 9, (4, 6), generator=torch.Generator().manual_seed(4))
    mask = rand_mask(4, 6, seed=5)
    full, halves = Bigram(9), Bigram(9)
    sft_microbatch_train_step(bigram_log_probs(full, ids, labels), mask, 1, normalize_constant=5.0)
    for part in (slice(0, 2), slice(2, 4)):
        sft_microbatch_train_step(bigram_log_probs(halves, ids[part], labels[part]), mask[part], 2, 5.0)
    torch.testing.assert_close(halves.W.grad, full.W.grad)


# ---- GRPO --------------------------------------------------------------------------------------

def fake_reward(response: str, truth: str) -> dict[str, float]:
    fmt = float(response.startswith("<answer>"))
    ans = float(response.endswith(truth))
    return {"reward": fmt * ans + 0.25 * fmt, "format_reward": fmt, "answer_reward": ans}


RESPONSES = ["<answer>4", "<answer>5", "4", "<answer>4",  # group 1 (truth 4)
             "x", "y", "z", "w",  # group 2: all zero -> zero std
             "<answer>9", "9", "<answer>1", "<answer>9"]  # group 3 (truth 9)
TRUTHS = ["4"] * 4 + ["7"] * 4 + ["9"] * 4


def test_group_normalized_rewards_match_statistics_module():
    adv, raw, meta = compute_group_normalized_rewards(fake_reward, RESPONSES, TRUTHS, 4, 1e-6, True)
    rewards = [fake_reward(r, t)["reward"] for r, t in zip(RESPONSES, TRUTHS)]
    assert raw.tolist() == pytest.approx(rewards)
    want = []
    for g in range(3):
        group = rewards[4 * g: 4 * g + 4]
        mu, sd = statistics.mean(group), statistics.stdev(group)  # sample std (n - 1)
        want += [(r - mu) / (sd + 1e-6) for r in group]
    assert adv.tolist() == pytest.approx(want, abs=1e-5)
    assert meta["rewards/mean"].item() == pytest.approx(statistics.mean(rewards))
    assert meta["rewards/format_mean"].item() == pytest.approx(6 / 12)  # 3 + 0 + 3 formatted
    assert meta["rewards/answer_mean"].item() == pytest.approx(6 / 12)  # 3 + 0 + 3 correct
    assert meta["rewards/frac_zero_std"].item() == pytest.approx(1 / 3)


def test_group_rewards_without_std_are_centered_only():
    adv, raw, _ = compute_group_normalized_rewards(fake_reward, RESPONSES, TRUTHS, 2, 1e-6, False)
    r = raw.tolist()
    want = [r[i] - (r[i - i % 2] + r[i - i % 2 + 1]) / 2 for i in range(12)]
    assert adv.tolist() == pytest.approx(want)


def test_group_rewards_reject_bad_shapes():
    with pytest.raises(ValueError, match="group_size=5"):
        compute_group_normalized_rewards(fake_reward, RESPONSES, TRUTHS, 5, 1e-6, True)
    with pytest.raises(ValueError, match="repeated_ground_truths"):
        compute_group_normalized_rewards(fake_reward, RESPONSES, TRUTHS[:-1], 4, 1e-6, True)
    with pytest.raises(ValueError, match="group_size=1"):
        compute_group_normalized_rewards(fake_reward, RESPONSES, TRUTHS, 1, 1e-6, True)


def test_naive_policy_gradient_loss_matches_loops():
    logp, rewards = rand(3, 4), rand(3, 1, seed=2)
    got = compute_naive_policy_gradient_loss(rewards, logp)
    want = [[-rewards[b, 0].item() * logp[b, t].item() for t in range(4)] for b in range(3)]
    assert got.tolist() == [pytest.approx(row) for row in want]
    torch.testing.assert_close(compute_naive_policy_gradient_loss(rewards.squeeze(-1), logp), got)


def naive_clip(adv, logp, old, lo, hi):
    out, clipped = [], []
    for b in range(len(logp)):
        row, crow = [], []
        for t in range(len(logp[b])):
            ratio = math.exp(logp[b][t] - old[b][t])
            a = adv[b]
            plain, clip = ratio * a, min(max(ratio, 1 - lo), 1 + hi) * a
            row.append(-min(plain, clip))
            crow.append(clip < plain)
        out.append(row)
        clipped.append(crow)
    return out, clipped


@pytest.mark.parametrize("lo,hi", [(0.2, 0.2), (0.2, 0.28)])
def test_grpo_clip_loss_matches_loops(lo, hi):
    logp, old, adv = rand(4, 5) * 0.4, rand(4, 5, seed=7) * 0.4, rand(4, seed=8)
    loss, meta = compute_grpo_clip_loss(adv.unsqueeze(-1), logp, old, lo, cliprange_high=hi)
    want, clipped = naive_clip(adv.tolist(), logp.tolist(), old.tolist(), lo, hi)
    assert loss.tolist() == [pytest.approx(r) for r in want]
    assert meta["clipped"].tolist() == clipped
    assert meta["clip_fraction"].item() == pytest.approx(sum(map(sum, clipped)) / 20)


def test_grpo_clip_fraction_counts_hand_made_ratios():
    # ratios 0.5, 0.9, 1.0, 1.1, 1.5 with eps 0.2: A > 0 clips only 1.5; A < 0 clips only 0.5
    ratios = torch.tensor([0.5, 0.9, 1.0, 1.1, 1.5])
    old = torch.zeros(2, 5)
    logp = ratios.log().repeat(2, 1)
    adv = torch.tensor([[1.0], [-1.0]])
    loss, meta = compute_grpo_clip_loss(adv, logp, old, 0.2)
    assert meta["clipped"].tolist() == [[False, False, False, False, True], [True, False, False, False, False]]
    assert meta["clipped_high"].tolist()[0][4] and meta["clipped_low"].tolist()[1][0]
    assert meta["clip_fraction"].item() == pytest.approx(0.2)
    assert loss[0, 4].item() == pytest.approx(-1.2) and loss[1, 0].item() == pytest.approx(0.8)
    # DAPO clip-higher: with eps_high = 0.6 the 1.5 ratio is no longer clipped
    _, meta = compute_grpo_clip_loss(adv, logp, old, None, cliprange_low=0.2, cliprange_high=0.6)
    assert meta["clip_fraction"].item() == pytest.approx(0.1)


def test_dispatcher_routes_and_names_errors():
    logp, old, adv, raw = rand(2, 3), rand(2, 3, seed=3), rand(2, 1, seed=4), rand(2, 1, seed=5)
    got, _ = compute_policy_gradient_loss(logp, "no_baseline", raw_rewards=raw)
    torch.testing.assert_close(got, -raw * logp)
    got, _ = compute_policy_gradient_loss(logp, "reinforce_with_baseline", advantages=adv)
    torch.testing.assert_close(got, -adv * logp)
    got, meta = compute_policy_gradient_loss(logp, "grpo_clip", advantages=adv, old_log_probs=old, cliprange=0.2)
    assert "clip_fraction" in meta
    with pytest.raises(ValueError, match="loss_type='ppo'.*no_baseline"):
        compute_policy_gradient_loss(logp, "ppo", raw_rewards=raw)
    with pytest.raises(ValueError, match="'no_baseline' needs raw_rewards"):
        compute_policy_gradient_loss(logp, "no_baseline", advantages=adv)
    with pytest.raises(ValueError, match="'reinforce_with_baseline' needs advantages"):
        compute_policy_gradient_loss(logp, "reinforce_with_baseline", raw_rewards=raw)
    with pytest.raises(ValueError, match="needs old_log_probs, cliprange"):
        compute_policy_gradient_loss(logp, "grpo_clip", advantages=adv)


def test_k3_kl_matches_schulman_formula_and_is_nonnegative():
    logp, ref = rand(3, 4), rand(3, 4, seed=9)
    got = compute_kl_penalty(logp, ref)
    for b in range(3):
        for t in range(4):
            r = math.exp(ref[b, t].item() - logp[b, t].item())  # pi_ref / pi
            assert got[b, t].item() == pytest.approx(r - math.log(r) - 1)
    assert (got >= 0).all() and compute_kl_penalty(logp, logp).abs().max() == 0


def naive_grpo_step_loss(per_token, mask, accum, constant=None):
    seqs = []
    for row, m in zip(per_token.tolist(), mask.tolist()):
        total = sum(x for x, k in zip(row, m) if k)
        seqs.append(total / (constant if constant else sum(m)))
    return sum(seqs) / len(seqs) / accum


@pytest.mark.parametrize("loss_type", ["no_baseline", "reinforce_with_baseline", "grpo_clip"])
def test_grpo_step_loss_matches_loops(loss_type):
    logp = (rand(3, 5) * 0.3).requires_grad_()
    old, adv, raw = rand(3, 5, seed=2) * 0.3, rand(3, 1, seed=3), rand(3, 1, seed=4)
    mask = torch.tensor([[1, 1, 0, 0, 0], [0, 1, 1, 1, 1], [1, 0, 1, 0, 1]], dtype=torch.bool)
    loss, meta = grpo_microbatch_train_step(logp, mask, 2, loss_type, raw, adv, old, 0.2)
    per_token, _ = compute_policy_gradient_loss(logp.detach(), loss_type, raw, adv, old, 0.2)
    assert loss.item() == pytest.approx(naive_grpo_step_loss(per_token, mask, 2))
    assert logp.grad is not None and (logp.grad[~mask] == 0).all()
    if loss_type == "grpo_clip":
        _, clipped = naive_clip(adv.squeeze(-1).tolist(), logp.tolist(), old.tolist(), 0.2, 0.2)
        masked = [c for row, m in zip(clipped, mask.tolist()) for c, k in zip(row, m) if k]
        assert meta["policy/clip_fraction"].item() == pytest.approx(sum(masked) / len(masked))


def test_grpo_step_constant_normalizer_and_kl():
    logp = (rand(2, 4) * 0.3).requires_grad_()
    ref, adv = rand(2, 4, seed=5) * 0.3, rand(2, 1, seed=6)
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]], dtype=torch.bool)
    loss, meta = grpo_microbatch_train_step(logp, mask, 1, "reinforce_with_baseline", advantages=adv,
                                            length_normalization="constant", normalize_constant=4.0,
                                            ref_log_probs=ref, kl_coef=0.5)
    per_token = -adv * logp.detach() + 0.5 * compute_kl_penalty(logp.detach(), ref)
    assert loss.item() == pytest.approx(naive_grpo_step_loss(per_token, mask, 1, constant=4.0))
    kl = compute_kl_penalty(logp.detach(), ref)
    assert meta["policy/kl"].item() == pytest.approx(kl[mask].mean().item())
    # Dr. GRPO: the constant defaults to the padded length
    a = grpo_microbatch_train_step(logp.detach().clone().requires_grad_(), mask, 1, "reinforce_with_baseline",
                                   advantages=adv, length_normalization="constant")[0]
    assert a.item() == pytest.approx(naive_grpo_step_loss(-adv * logp.detach(), mask, 1, constant=4))
    with pytest.raises(ValueError, match="kl_coef=0.1 needs ref_log_probs"):
        grpo_microbatch_train_step(logp, mask, 1, "reinforce_with_baseline", advantages=adv, kl_coef=0.1)
    with pytest.raises(ValueError, match="length_normalization='sum'"):
        grpo_microbatch_train_step(logp, mask, 1, "reinforce_with_baseline", advantages=adv,
                                   length_normalization="sum")


def test_grpo_gradient_accumulation_equals_full_batch():
    ids = torch.randint(0, 7, (4, 5), generator=torch.Generator().manual_seed(1))
    labels = torch.randint(0, 7, (4, 5), generator=torch.Generator().manual_seed(2))
    mask = rand_mask(4, 5, seed=3)
    mask[:, 0] = True
    adv = rand(4, 1, seed=4)
    full, halves = Bigram(7), Bigram(7)
    old = bigram_log_probs(full, ids, labels).detach() + 0.1 * rand(4, 5, seed=6)
    grpo_microbatch_train_step(bigram_log_probs(full, ids, labels), mask, 1, "grpo_clip",
                               advantages=adv, old_log_probs=old, cliprange=0.2)
    for p in (slice(0, 2), slice(2, 4)):
        grpo_microbatch_train_step(bigram_log_probs(halves, ids[p], labels[p]), mask[p], 2, "grpo_clip",
                                   advantages=adv[p], old_log_probs=old[p], cliprange=0.2)
    torch.testing.assert_close(halves.W.grad, full.W.grad)


# ---- DPO ---------------------------------------------------------------------------------------

def test_dpo_loss_matches_hand_computation():
    pc, pr = torch.tensor([-3.0, -5.0]), torch.tensor([-4.0, -2.0])
    rc, rr = torch.tensor([-3.5, -4.0]), torch.tensor([-3.5, -3.0])
    loss, metrics = dpo_loss(pc, pr, rc, rr, beta=0.5)
    # pair 1: 0.5·((-3+3.5) - (-4+3.5)) = 0.5;  pair 2: 0.5·((-5+4) - (-2+3)) = -1
    want = (math.log(1 + math.exp(-0.5)) + math.log(1 + math.exp(1.0))) / 2
    assert loss.item() == pytest.approx(want, rel=1e-6)
    assert metrics["rewards/accuracies"].item() == 0.5
    assert metrics["rewards/margins"].item() == pytest.approx(-0.25)
    assert metrics["rewards/chosen"].item() == pytest.approx((0.25 - 0.5) / 2)
    assert metrics["rewards/rejected"].item() == pytest.approx((-0.25 + 0.5) / 2)


def test_dpo_sign_sanity():
    ref = torch.tensor([-4.0])
    preferred, _ = dpo_loss(torch.tensor([-2.0]), torch.tensor([-6.0]), ref, ref, 0.1)
    assert preferred.item() < math.log(2)
    neutral, _ = dpo_loss(ref, ref, ref, ref, 0.1)
    assert neutral.item() == pytest.approx(math.log(2))
    dispreferred, _ = dpo_loss(torch.tensor([-6.0]), torch.tensor([-2.0]), ref, ref, 0.1)
    assert dispreferred.item() > math.log(2)


def test_per_instance_dpo_loss_matches_hand_computation():
    tok = byte_tokenizer()
    policy, reference = Bigram(257, seed=1), Bigram(257, seed=2)
    template = "Q:{instruction}\nA:{response}"
    beta, prompt, chosen, rejected = 0.3, "2+2", "4", "five"

    def response_logp(model, response):
        ids = list(f"Q:{prompt}\nA:".encode()) + list(response.encode()) + [256]
        n_prompt = len(f"Q:{prompt}\nA:".encode())
        logp = torch.log_softmax(model.W.detach(), -1)
        return sum(logp[ids[i - 1], ids[i]].item() for i in range(n_prompt, len(ids)))

    z = beta * ((response_logp(policy, chosen) - response_logp(reference, chosen))
                - (response_logp(policy, rejected) - response_logp(reference, rejected)))
    loss = per_instance_dpo_loss(policy, reference, tok, beta, prompt, chosen, rejected, template=template)
    assert loss.item() == pytest.approx(-math.log(1 / (1 + math.exp(-z))), rel=1e-6)
    loss.backward()
    assert policy.W.grad is not None and reference.W.grad is None


def test_per_instance_dpo_default_template_and_bad_text():
    tok = byte_tokenizer()
    policy, reference = Bigram(257, seed=1), Bigram(257, seed=1)
    loss = per_instance_dpo_loss(policy, reference, tok, 0.1, "bad \udc80 text", "", "\x00\xff junk")
    assert loss.item() == pytest.approx(math.log(2))  # identical models: zero margin
