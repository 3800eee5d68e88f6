"""AdamW, schedules and gradient clipping, each against an independent reference: torch.optim.AdamW,
torch.nn.utils.clip_grad_norm_, or formulas written out here.

How our AdamW differs from torch.optim.AdamW, and so which tolerances are honest:

* eps placement. Ours folds the bias corrections into the step size (Kingma & Ba §2):
  θ -= lr·√(1−β₂ᵗ)/(1−β₁ᵗ) · m/(√v + ε); torch computes θ -= lr/(1−β₁ᵗ) · m/(√v/√(1−β₂ᵗ) + ε).
  Both are the same update with ε replaced by ε/√(1−β₂ᵗ) in torch's form, so they differ by a relative
  ≈ ε·(1/√(1−β₂ᵗ) − 1)/√v̂ per step: negligible for ε ≪ |g| but *not* 1e-6 when gradients are ~1e-3 and
  ε=1e-8 (measured: ~1e-5 relative on the update). The tight comparisons below therefore use a tiny ε
  in float64, where the two forms agree to ~1e-12; the ε=1e-8 case is checked against a naive loop
  written here in the folded form.
* weight-decay order. Ours applies the decay *after* the Adam step, to the updated parameter
  (θ ← θ − α_t·m/(√v+ε); θ ← θ − lr·λ·θ, as in the CS336 handout); torch decays the pre-step θ first.
  Per step the two differ by exactly lr·λ·(Adam step) = O(lr²·λ), which over 20 steps is ~1e-7..1e-4
  absolute depending on lr and λ: far above 1e-6 relative. So decay is checked two ways: exactly,
  against torch's AdamW(weight_decay=0) followed by θ *= 1 − lr·λ (the same ordering), and against
  torch's AdamW(weight_decay=λ) within the O(n·lr²·λ) bound that the ordering alone accounts for.
"""

import io
import math

import pytest
import torch

from model.training.optim import AdamW, clip_grad_norm, cosine_schedule, wsd_schedule


def _model(seed: int = 0, dtype=torch.float64) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)).to(dtype)


def _train(models_and_opts, steps: int, seed: int = 1, after_step=None, dtype=torch.float64):
    """Drive each (model, optimizer) pair on the same regression batches."""
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(32, 8, generator=g, dtype=dtype)
        y = torch.randn(32, 4, generator=g, dtype=dtype)
        for model, opt in models_and_opts:
            opt.zero_grad()
            ((model(x) - y) ** 2).mean().backward()
            opt.step()
            if after_step is not None:
                after_step(model, opt)


def _assert_params_close(a: torch.nn.Module, b: torch.nn.Module, **tol):
    for (name, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        torch.testing.assert_close(pa, pb, msg=lambda m, name=name: f"{name}: {m}", **tol)


@pytest.mark.parametrize("lr,betas", [(1e-3, (0.9, 0.999)), (1e-2, (0.9, 0.95)), (3e-2, (0.8, 0.99))])
def test_adamw_matches_torch_without_decay(lr, betas):
    ours, ref = _model(), _model()
    eps = 1e-16  # see module docstring: ε placement differs, so make ε irrelevant for the tight check
    _train([(ours, AdamW(ours.parameters(), lr=lr, betas=betas, eps=eps, weight_decay=0.0)),
            (ref, torch.optim.AdamW(ref.parameters(), lr=lr, betas=betas, eps=eps, weight_decay=0.0))], steps=20)
    moved = max((p - q).abs().max().item() for p, q in zip(ours.parameters(), _model().parameters()))
    assert moved > 10 * lr  # the optimizer did move the parameters
    _assert_params_close(ours, ref, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("lr,weight_decay", [(1e-3, 0.01), (1e-2, 0.1), (3e-2, 0.5)])
def test_adamw_decay_is_applied_after_the_adam_step(lr, weight_decay):
    """Same ordering built from torch parts: torch AdamW without decay, then θ *= 1 − lr·λ."""
    betas, eps = (0.9, 0.95), 1e-16
    ours, ref = _model(), _model()

    def decay_after(model, opt):
        if opt is ref_opt:
            with torch.no_grad():
                for p in model.parameters():
                    p.mul_(1 - lr * weight_decay)

    ref_opt = torch.optim.AdamW(ref.parameters(), lr=lr, betas=betas, eps=eps, weight_decay=0.0)
    _train([(ours, AdamW(ours.parameters(), lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)),
            (ref, ref_opt)], steps=20, after_step=decay_after)
    _assert_params_close(ours, ref, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("lr,weight_decay", [(1e-3, 0.01), (1e-3, 0.1), (1e-2, 0.1)])
def test_adamw_vs_torch_decay_differs_only_by_ordering(lr, weight_decay):
    """torch.optim.AdamW(weight_decay=λ) decays before the step; per step that changes θ by lr·λ·|Δθ_t|
    with |Δθ_t| ≤ lr·|m̂/√v̂| (≲ 1 for these gradients), so after n steps the gap is ≲ n·lr²·λ; 2x slack
    covers the feedback through the gradients."""
    betas, eps, steps = (0.9, 0.95), 1e-16, 20
    ours, ref = _model(), _model()
    _train([(ours, AdamW(ours.parameters(), lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)),
            (ref, torch.optim.AdamW(ref.parameters(), lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))],
           steps=steps)
    _assert_params_close(ours, ref, rtol=0, atol=2 * steps * lr * lr * weight_decay)


def _naive_adamw(params, grads_per_step, lr, betas, eps, weight_decay):
    """AdamW written out element by element in the folded form (ε added to √v, not √v̂)."""
    beta1, beta2 = betas
    params = [p.clone() for p in params]
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    for t, grads in enumerate(grads_per_step, start=1):
        alpha_t = lr * math.sqrt(1 - beta2**t) / (1 - beta1**t)
        for i, g in enumerate(grads):
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * g * g
            params[i] = params[i] - alpha_t * m[i] / (v[i].sqrt() + eps)
            params[i] = params[i] - lr * weight_decay * params[i]
    return params


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_adamw_matches_naive_folded_form_with_default_eps(weight_decay):
    g = torch.Generator().manual_seed(3)
    init = [torch.randn(5, 7, generator=g, dtype=torch.float64), torch.randn(7, generator=g, dtype=torch.float64)]
    # small gradients (~1e-3) make ε = 1e-8 matter, so this pins the ε placement
    grads = [[torch.randn(p.shape, generator=g, dtype=torch.float64) * 1e-3 for p in init] for _ in range(20)]
    kw = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=weight_decay)
    params = [torch.nn.Parameter(p.clone()) for p in init]
    opt = AdamW(params, **kw)
    for step_grads in grads:
        for p, gr in zip(params, step_grads):
            p.grad = gr.clone()
        opt.step()
    for p, q in zip(params, _naive_adamw(init, grads, **kw)):
        torch.testing.assert_close(p.detach(), q, rtol=1e-12, atol=1e-14)


def test_adamw_float32_model_close_to_torch():
    """The everyday case, float32 with default ε and β₂ = 0.999. Early on torch's effective ε is up to
    ε/√(1−β₂) ≈ 30ε, which moves elements with tiny gradients by ~1e-3 of a step (measured 3e-6 at
    lr=1e-3); 1% of one step still catches real errors (a missing bias correction is ~70% of a step)."""
    lr = 1e-3
    ours, ref = _model(dtype=torch.float32), _model(dtype=torch.float32)
    _train([(ours, AdamW(ours.parameters(), lr=lr, weight_decay=0.0)),
            (ref, torch.optim.AdamW(ref.parameters(), lr=lr, weight_decay=0.0))], steps=20, dtype=torch.float32)
    _assert_params_close(ours, ref, rtol=0, atol=1e-2 * lr)


def test_adamw_per_parameter_step_counts_match_torch():
    """A parameter whose gradient is missing on some steps keeps its own step count, as in torch."""
    g = torch.Generator().manual_seed(4)
    init = [torch.randn(3, 4, generator=g, dtype=torch.float64), torch.randn(6, generator=g, dtype=torch.float64)]
    ours = [torch.nn.Parameter(p.clone()) for p in init]
    ref = [torch.nn.Parameter(p.clone()) for p in init]
    kw = dict(lr=1e-2, betas=(0.9, 0.99), eps=1e-16, weight_decay=0.0)
    opts = [AdamW(ours, **kw), torch.optim.AdamW(ref, **kw)]
    for step in range(12):
        grads = [torch.randn(p.shape, generator=g, dtype=torch.float64) for p in init]
        for params, opt in ((ours, opts[0]), (ref, opts[1])):
            params[0].grad = grads[0].clone()
            params[1].grad = grads[1].clone() if step % 3 else None  # second param skips every third step
            opt.step()
    assert int(opts[0].state[ours[1]]["step"]) == 8
    for p, q in zip(ours, ref):
        torch.testing.assert_close(p, q, rtol=1e-9, atol=1e-12)


def test_param_without_grad_is_untouched_and_gets_no_state():
    used = torch.nn.Parameter(torch.ones(3))
    unused = torch.nn.Parameter(torch.full((4,), 2.0))
    opt = AdamW([used, unused], lr=0.1, weight_decay=0.1)
    for _ in range(3):
        used.grad = torch.ones(3)
        opt.step()
    assert torch.equal(unused, torch.full((4,), 2.0))
    assert unused not in opt.state or len(opt.state[unused]) == 0
    assert not torch.equal(used, torch.ones(3))


def test_state_dict_round_trip_resumes_exactly(tmp_path):
    kw = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    straight = _model()
    straight_opt = AdamW(straight.parameters(), **kw)
    _train([(straight, straight_opt)], steps=20, seed=7)

    first = _model()
    first_opt = AdamW(first.parameters(), **kw)
    # first 10 steps with the same batches as the uninterrupted run
    g = torch.Generator().manual_seed(7)
    batches = [(torch.randn(32, 8, generator=g, dtype=torch.float64), torch.randn(32, 4, generator=g,
                                                                                   dtype=torch.float64))
               for _ in range(20)]

    def run(model, opt, part):
        for x, y in part:
            opt.zero_grad()
            ((model(x) - y) ** 2).mean().backward()
            opt.step()

    run(first, first_opt, batches[:10])
    path = tmp_path / "opt.pt"
    torch.save({"model": first.state_dict(), "optim": first_opt.state_dict()}, path)
    saved = torch.load(path, weights_only=True)

    resumed = _model(seed=123)  # different init, overwritten by the checkpoint
    resumed.load_state_dict(saved["model"])
    resumed_opt = AdamW(resumed.parameters(), **kw)
    resumed_opt.load_state_dict(saved["optim"])
    run(resumed, resumed_opt, batches[10:])
    for p, q in zip(resumed.parameters(), straight.parameters()):
        assert torch.equal(p, q)


def test_state_dict_survives_bytes_buffer():
    p = torch.nn.Parameter(torch.randn(3))
    opt = AdamW([p])
    p.grad = torch.randn(3)
    opt.step()
    buf = io.BytesIO()
    torch.save(opt.state_dict(), buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=True)
    assert float(state["state"][0]["step"]) == 1.0


@pytest.mark.parametrize("kwargs", [dict(lr=-1e-3), dict(betas=(1.0, 0.999)), dict(betas=(0.9, 1.0)),
                                    dict(betas=(-0.1, 0.999)), dict(eps=0.0), dict(eps=-1e-8),
                                    dict(weight_decay=-0.1)])
def test_invalid_hyperparameters_raise(kwargs):
    with pytest.raises(ValueError):
        AdamW([torch.nn.Parameter(torch.zeros(2))], **kwargs)


# --- schedules -----------------------------------------------------------------------------------

def _cosine_reference(t, max_lr, min_lr, warmup, cosine):
    if t < warmup:
        return max_lr * t / warmup
    if t > cosine:
        return min_lr
    return min_lr + (max_lr - min_lr) * (1 + math.cos((t - warmup) / (cosine - warmup) * math.pi)) / 2


def test_cosine_schedule_matches_cs336_reference_values():
    max_lr, min_lr, warmup, cosine = 1.0, 0.1, 7, 21
    got = [cosine_schedule(t, max_lr, min_lr, warmup, cosine) for t in range(25)]
    expected = [_cosine_reference(t, max_lr, min_lr, warmup, cosine) for t in range(25)]
    assert got == pytest.approx(expected, abs=1e-12)
    assert got[0] == 0.0
    assert got[7] == pytest.approx(1.0)
    assert got[14] == pytest.approx(0.55)  # half way through the cosine: (max + min) / 2
    assert got[21] == pytest.approx(0.1)
    assert got[24] == pytest.approx(0.1)
    # a couple of values from the CS336 adapter test, written out
    assert got[1] == pytest.approx(1 / 7)
    assert got[8] == pytest.approx(0.9887175604818206)
    assert got[20] == pytest.approx(0.11128243951817937)


def test_wsd_schedule_shape():
    max_lr, min_lr, warmup, total = 2.0, 0.2, 10, 100  # decay over the last 20%: steps 80..100
    lr = [wsd_schedule(t, max_lr, min_lr, warmup, total, decay_fraction=0.2) for t in range(121)]
    for t in range(warmup):
        assert lr[t] == pytest.approx(max_lr * t / warmup)
    assert all(x == max_lr for x in lr[warmup:81])
    for t in range(80, 101):
        assert lr[t] == pytest.approx(max_lr + (t - 80) / 20 * (min_lr - max_lr))
    assert lr[90] == pytest.approx((max_lr + min_lr) / 2)
    assert all(x == min_lr for x in lr[100:])
    assert all(a >= b for a, b in zip(lr[warmup:], lr[warmup + 1:]))  # never increases after warmup


# --- gradient clipping ---------------------------------------------------------------------------

def _params_with_grads(seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    shapes = [(4, 5), (5,), (3, 2, 2)]
    params = [torch.nn.Parameter(torch.randn(s, generator=g)) for s in shapes]
    for p in params:
        p.grad = torch.randn(p.shape, generator=g) * scale
    return params


@pytest.mark.parametrize("max_norm_factor", [0.1, 0.5, 1.5, 10.0])
def test_clip_grad_norm_matches_torch(max_norm_factor):
    ours, ref = _params_with_grads(), _params_with_grads()
    norm = math.sqrt(sum(float((p.grad.double() ** 2).sum()) for p in ref))
    max_norm = max_norm_factor * norm
    got = clip_grad_norm(ours, max_norm)
    want = torch.nn.utils.clip_grad_norm_(ref, max_norm)
    torch.testing.assert_close(got.float(), want.float(), rtol=1e-6, atol=0)
    assert float(got) == pytest.approx(norm, rel=1e-6)  # the pre-clip norm
    for p, q in zip(ours, ref):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-6, atol=1e-8)
    clipped = math.sqrt(sum(float((p.grad.double() ** 2).sum()) for p in ours))
    if max_norm < norm:
        assert clipped == pytest.approx(max_norm * norm / (norm + 1e-6), rel=1e-5)  # scale = max/(norm + 1e-6)
    else:
        assert clipped == pytest.approx(norm, rel=1e-7)  # untouched


def test_clip_grad_norm_ignores_params_without_grad():
    ours, ref = _params_with_grads(1), _params_with_grads(1)
    extra_ours, extra_ref = torch.nn.Parameter(torch.ones(7)), torch.nn.Parameter(torch.ones(7))
    got = clip_grad_norm([*ours, extra_ours], 0.5)
    want = torch.nn.utils.clip_grad_norm_([*ref, extra_ref], 0.5)
    torch.testing.assert_close(got.float(), want.float(), rtol=1e-6, atol=0)
    assert extra_ours.grad is None
    for p, q in zip(ours, ref):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-6, atol=1e-8)


def test_clip_grad_norm_accepts_a_generator():
    ours, ref = _params_with_grads(2), _params_with_grads(2)
    got = clip_grad_norm((p for p in ours), 0.3)
    want = torch.nn.utils.clip_grad_norm_(ref, 0.3)
    torch.testing.assert_close(got.float(), want.float(), rtol=1e-6, atol=0)
    for p, q in zip(ours, ref):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("bad,check", [(float("nan"), math.isnan), (float("inf"), math.isinf)])
def test_clip_grad_norm_non_finite(bad, check):
    params = _params_with_grads(3)
    params[1].grad[2] = bad
    assert check(float(clip_grad_norm(params, 1.0)))
