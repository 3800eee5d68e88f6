"""Generation: KV cache vs recompute, left-padded batches, sampling filters, eos, CLI."""

from __future__ import annotations

import math

import pytest
import torch

from model.core.config import ModelConfig
from model.core.transformer import TransformerLM
from model.inference.generate import generate, main, sample_next
from model.training.checkpoint import save_checkpoint

PROMPTS = [[1, 2, 3], [5, 6, 7, 8, 9, 10, 11], [4], [9, 9, 9, 9, 9]]


def tiny_model(attention: str = "naive", vocab_size: int = 97, seed: int = 0) -> TransformerLM:
    torch.manual_seed(seed)
    cfg = ModelConfig(vocab_size=vocab_size, context_length=64, d_model=32, n_layers=2, n_heads=4,
                      attention=attention)
    return TransformerLM(cfg).eval()


@pytest.mark.parametrize("attention", ["naive", "sdpa"])
def test_cache_matches_recompute_and_single_prompts(attention):
    model = tiny_model(attention)
    cached = generate(model, PROMPTS, 16, temperature=0)
    recomputed = generate(model, PROMPTS, 16, temperature=0, use_cache=False)
    alone = [generate(model, [p], 16, temperature=0)[0] for p in PROMPTS]
    assert [len(c) for c in cached] == [16] * len(PROMPTS)
    assert cached == recomputed
    assert cached == alone


def test_cached_logits_match_full_forward():
    """The KV-cache path reproduces the full forward's logits for a padded batch."""
    model = tiny_model()
    tokens = torch.tensor([[0, 0, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6]])
    valid = torch.tensor([[False, False, True, True, True, True], [True] * 6])
    positions = (valid.long().cumsum(1) - 1).clamp(min=0)
    with torch.inference_mode():
        full = model(tokens, positions, valid=valid)
        cache = model.new_cache(2, 8)
        prefill = model(tokens[:, :4], positions[:, :4], cache=cache, valid=valid[:, :4])
        steps = [model(tokens[:, i:i + 1], positions[:, i:i + 1], cache=cache) for i in (4, 5)]
    torch.testing.assert_close(torch.cat([prefill, *steps], dim=1)[valid], full[valid])


def test_top_k_1_and_tiny_top_p_equal_greedy():
    model = tiny_model()
    greedy = generate(model, PROMPTS, 12, temperature=0)
    assert generate(model, PROMPTS, 12, temperature=1.0, top_k=1, seed=1) == greedy
    assert generate(model, PROMPTS, 12, temperature=1.0, top_p=1e-6, seed=2) == greedy


def _draws(probs: list[float], n: int = 3000, **kwargs) -> set[int]:
    logits = torch.tensor([math.log(p) for p in probs]).repeat(n, 1)
    g = torch.Generator().manual_seed(0)
    return set(sample_next(logits, generator=g, **kwargs).tolist())


@pytest.mark.parametrize("kwargs, allowed", [
    ({"top_k": 2}, {4, 1}),
    ({"top_k": 4}, {4, 1, 3, 0}),
    ({"top_p": 0.5}, {4, 1}),  # 0.4 < 0.5, 0.4 + 0.3 >= 0.5
    ({"top_p": 0.75}, {4, 1, 3}),  # 0.7 < 0.75, 0.85 >= 0.75
    ({"top_p": 0.3}, {4}),
    ({"top_k": 3, "top_p": 0.6}, {4, 1}),  # renormalised over 3: 0.47, 0.35, 0.18
    ({"temperature": 0.5, "top_k": 3}, {4, 1, 3}),
])
def test_sample_next_never_picks_filtered_tokens(kwargs, allowed):
    probs = [0.1, 0.3, 0.05, 0.15, 0.4]  # by rank: 4 (0.4), 1 (0.3), 3 (0.15), 0 (0.1), 2 (0.05)
    assert _draws(probs, **kwargs) == allowed


def test_sample_next_greedy_and_argument_checks():
    logits = torch.tensor([[0.0, 3.0, 1.0], [2.0, -1.0, 0.5]])
    assert sample_next(logits, temperature=0).tolist() == [1, 0]
    for bad in ({"temperature": -1.0}, {"top_k": 0}, {"top_p": 0.0}, {"top_p": 1.5}):
        with pytest.raises(ValueError):
            sample_next(logits, **bad)


def test_same_seed_same_samples():
    model = tiny_model()
    a = generate(model, PROMPTS, 12, temperature=1.0, seed=7)
    b = generate(model, PROMPTS, 12, temperature=1.0, seed=7)
    c = generate(model, PROMPTS, 12, temperature=1.0, seed=8)
    assert a == b
    assert a != c
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert generate(model, PROMPTS, 8, generator=g1) == generate(model, PROMPTS, 8, generator=g2)


def test_eos_stops_sequences_and_is_excluded():
    model = tiny_model()
    free = generate(model, PROMPTS, 12, temperature=0)
    eos = free[0][3]  # the first prompt's 4th new token
    stopped = generate(model, PROMPTS, 12, temperature=0, eos_id=eos)
    for row_free, row in zip(free, stopped):
        assert row == (row_free[:row_free.index(eos)] if eos in row_free else row_free)
    assert len(stopped[0]) <= 3 and eos not in stopped[0]
    # every sequence ends at once: nothing generated
    first = {row[0] for row in free}
    if len(first) == 1:
        assert generate(model, PROMPTS, 12, temperature=0, eos_id=first.pop()) == [[]] * len(PROMPTS)


def test_bad_requests_raise():
    model = tiny_model()
    with pytest.raises(ValueError, match=r"70 > the model's context_length=64"):
        generate(model, [[1] * 60], 10)
    with pytest.raises(ValueError, match="empty"):
        generate(model, [[1, 2], []], 4)
    with pytest.raises(ValueError, match="vocab"):
        generate(model, [[1, 500]], 4)
    assert generate(model, [[1, 2]], 0) == [[]]


def _byte_tokenizer_dir(path):
    from tokenizer.encoder import Tokenizer

    tok = Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
    path.mkdir()
    tok.save(path / "vocab.json", path / "merges.txt")
    return tok


def test_cli_generates_and_reports_bad_input(tmp_path, capsys):
    tok = _byte_tokenizer_dir(tmp_path / "tok")
    model = tiny_model(vocab_size=260)
    run = tmp_path / "run"
    save_checkpoint(run, 0, {"model": model.state_dict(), "model_config": model.cfg.to_dict(), "step": 0})

    argv = ["--checkpoint", str(run), "--tokenizer", str(tmp_path / "tok"), "--prompt", "Hello",
            "--prompt", "a longer prompt", "--max-new-tokens", "6", "--device", "cpu", "--top-k", "5"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "=== prompt 0" in out and "=== prompt 1" in out
    assert "\nHello" in out and "\na longer prompt" in out

    assert main([*argv, "--temperature", "0", "--no-cache"]) == 0
    greedy_recompute = capsys.readouterr().out
    assert main([*argv, "--temperature", "0"]) == 0
    assert capsys.readouterr().out == greedy_recompute
    eos_id = tok.token_to_id("<|endoftext|>")
    assert eos_id == 256

    assert main([*argv[:1], str(tmp_path / "missing"), *argv[2:]]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "missing" in err and err.count("\n") == 1
    assert main([*argv, "--max-new-tokens", "100"]) == 2
    assert "context_length=64" in capsys.readouterr().err
