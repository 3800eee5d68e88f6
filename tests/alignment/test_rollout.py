"""Rollouts: a scripted model that recites a known text (hand-written expected completions), batch vs
one-by-one greedy on a nano TransformerLM, our model vs a hand-written greedy loop, a HF Llama vs its
own greedy loop, and junk input that must not crash."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from alignment.core.policy import Policy
from alignment.core.rollout import cut_at_stop, rollout
from model.core.config import ModelConfig
from model.core.transformer import TransformerLM
from tests.alignment.helpers import EOT, ByteHFTokenizer, byte_tokenizer

EOS_ID = 256
SCRIPT = "Q: 2+2? <think> 2 + 2 = 4 </think> <answer> 4 </answer> and more text"



class Reciter(nn.Module):
    """Predicts, at position p, token p+1 of ``SCRIPT`` bytes + EOS (then EOS forever): a model whose
    greedy output is known by hand. Same call signature as TransformerLM (positions, cache, valid)."""

    def __init__(self, script: str = SCRIPT, context_length: int = 256):
        super().__init__()
        self.cfg = SimpleNamespace(vocab_size=257, context_length=context_length)
        self.dummy = nn.Parameter(torch.zeros(1))
        self.register_buffer("script", torch.tensor(list(script.encode()) + [EOS_ID], dtype=torch.long))

    def new_cache(self, batch_size, max_len=None):
        return None

    def forward(self, token_ids, positions=None, cache=None, valid=None):
        B, T = token_ids.shape
        if positions is None:
            positions = torch.arange(T).expand(B, T)
        nxt = self.script[(positions + 1).clamp(max=len(self.script) - 1)].expand(B, T)  # (B, T)
        return torch.nn.functional.one_hot(nxt, self.cfg.vocab_size).float() * 10


def nano(vocab_size=257, context_length=96, seed=0) -> TransformerLM:
    torch.manual_seed(seed)
    return TransformerLM(ModelConfig.from_preset("nano", vocab_size=vocab_size, context_length=context_length)).eval()


def test_cut_at_stop_hand_written():
    assert cut_at_stop("a </answer> b </answer>", ["</answer>"]) == "a </answer>"
    assert cut_at_stop("x STOP y END", ["END", "STOP"]) == "x STOP"
    assert cut_at_stop("no stop here", ["</answer>"]) == "no stop here"
    assert cut_at_stop("abc", None) == "abc" and cut_at_stop("abc", ["", "c"]) == "abc"


def test_rollout_stops_at_stop_string_keeping_it():
    k = SCRIPT.index("<think>") + len("<think>")
    out = rollout(Reciter(), byte_tokenizer(), [SCRIPT[:k]], max_new_tokens=100, temperature=0)
    assert out == [" 2 + 2 = 4 </think> <answer> 4 </answer>"]


def test_rollout_stops_at_eos_and_at_max_new_tokens():
    k = SCRIPT.index("and")
    assert rollout(Reciter(), byte_tokenizer(), [SCRIPT[:k]], 100, temperature=0, stop=None) == ["and more text"]
    assert rollout(Reciter(), byte_tokenizer(), [SCRIPT[:k]], 3, temperature=0, stop=None) == ["and"]
    # prompts of different lengths in one batch, each continuing from its own end
    out = rollout(Reciter(), byte_tokenizer(), [SCRIPT[:k], SCRIPT[:k + 4]], 100, temperature=0, stop=())
    assert out == ["and more text", "more text"]


def test_rollout_batched_equals_one_by_one_greedy():
    model, tok = nano(), byte_tokenizer()
    prompts = ["User: 12 + 7?\nAssistant: <think>", "hi", "a much longer prompt with several words", "x"]
    batched = rollout(model, tok, prompts, 12, temperature=0, stop=None, batch_size=4)
    single = [rollout(model, tok, [p], 12, temperature=0, stop=None, batch_size=1)[0] for p in prompts]
    assert batched == single
    assert rollout(Policy(model, tok), None, prompts, 12, temperature=0, stop=None, batch_size=3) == batched


def test_rollout_matches_hand_written_greedy_loop():
    model, tok = nano(seed=1), byte_tokenizer()
    prompt = "2 + 3 ="
    ids = list(prompt.encode())
    new = []
    with torch.no_grad():
        for _ in range(10):
            nxt = int(model(torch.tensor([ids + new]))[0, -1].argmax())
            if nxt == EOS_ID:
                break
            new.append(nxt)
    expected = bytes(t for t in new if t < 256).decode("utf-8", errors="replace")
    assert rollout(model, tok, [prompt], 10, temperature=0, stop=None) == [expected]


def test_rollout_sampling_is_seeded():
    model, tok = nano(seed=2), byte_tokenizer()
    a = rollout(model, tok, ["ab", "cd"], 8, temperature=1.0, top_p=0.9, seed=3, stop=None)
    b = rollout(model, tok, ["ab", "cd"], 8, temperature=1.0, top_p=0.9, seed=3, stop=None)
    assert a == b and len(a) == 2


def test_rollout_hf_model_matches_its_greedy_loop():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=257, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                   num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
                                   eos_token_id=EOS_ID, pad_token_id=EOS_ID, bos_token_id=None)
    model = transformers.LlamaForCausalLM(cfg).eval()
    tok = ByteHFTokenizer()
    prompts = ["abc", "hello there"]
    expected = []
    with torch.no_grad():
        for p in prompts:
            ids, new = list(p.encode()), []
            for _ in range(6):
                nxt = int(model(torch.tensor([ids + new])).logits[0, -1].argmax())
                if nxt == EOS_ID:
                    break
                new.append(nxt)
            expected.append(tok.decode(new))
    assert rollout(model, tok, prompts, 6, temperature=0, stop=None, batch_size=1) == expected


def test_rollout_junk_input_never_crashes():
    model, tok = nano(context_length=32), byte_tokenizer()
    junk = ["", "   ", "\ud800 lone surrogate", "\x00\xff binary", "z" * 10_000, EOT]
    out = rollout(model, tok, junk, 40, temperature=0)  # 40 > context: clipped
    assert len(out) == len(junk) and all(isinstance(o, str) for o in out)
    assert rollout(model, tok, [], 5) == []
    assert rollout(model, tok, ["a"], 0) == [""]
    with pytest.raises(ValueError, match="max_new_tokens"):
        rollout(model, tok, ["a"], -1)
