"""Policy adapter: hand-written token layouts, log-probs vs log_softmax+gather, entropy vs
torch.distributions, our TransformerLM vs the same weights as a HF Llama, packed SFT windows."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from alignment.core.policy import (
    ALPACA_TEMPLATE,
    PackedSFTDataset,
    Policy,
    TokenizerAdapter,
    get_response_log_probs,
    logits_of,
    sequence_log_probs,
    tokenize_prompt_and_output,
)
from model.core.config import ModelConfig
from model.core.transformer import TransformerLM
from model.inference.export import export_llama
from tests.alignment.helpers import EOT, byte_tokenizer
from tokenizer.bpe import train_bpe
from tokenizer.encoder import Tokenizer

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
GPT2 = SHARED / "tokenizer"



@pytest.fixture(scope="module")
def gpt2():
    if not (GPT2 / "gpt2_vocab.json").exists():
        pytest.skip(f"{GPT2} is absent")
    return Tokenizer.from_files(GPT2 / "gpt2_vocab.json", GPT2 / "gpt2_merges.txt", [EOT])


@pytest.fixture(scope="module")
def tiny_bpe(tmp_path_factory):
    corpus = tmp_path_factory.mktemp("bpe") / "corpus.txt"
    corpus.write_text(("the cat sat on the mat. the dog ate the hat. " * 20 + EOT) * 5, encoding="utf-8")
    vocab, merges = train_bpe(corpus, 300, [EOT], num_workers=1)
    return Tokenizer(vocab, merges, [EOT])


def nano_model(vocab_size: int, seed: int = 0) -> TransformerLM:
    torch.manual_seed(seed)
    cfg = ModelConfig.from_preset("nano", vocab_size=vocab_size, context_length=64)
    return TransformerLM(cfg).eval()


def reference_log_probs(logits, labels):
    return torch.log_softmax(logits.double(), dim=-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)


# ---- tokenize_prompt_and_output ----------------------------------------------------------------

def test_tokenize_prompt_and_output_hand_written_bytes():
    batch = tokenize_prompt_and_output(["ab", "c"], ["d", "efg"], byte_tokenizer())
    # rows: a b d <pad=256> / c e f g
    assert batch["input_ids"].tolist() == [[97, 98, 100], [99, 101, 102]]
    assert batch["labels"].tolist() == [[98, 100, 256], [101, 102, 103]]
    assert batch["response_mask"].tolist() == [[False, True, False], [True, True, True]]
    eos = tokenize_prompt_and_output(["ab"], ["d"], byte_tokenizer(), append_eos=True)
    assert eos["labels"].tolist() == [[98, 100, 256]] and eos["response_mask"].tolist() == [[False, True, True]]


def test_tokenize_prompt_and_output_gpt2_ids(gpt2):
    batch = tokenize_prompt_and_output(["Hello", "Hi"], [" world!", " there"], gpt2)
    # Hello=15496, " world"=995, "!"=0, Hi=17250, " there"=612, pad = <|endoftext|> = 50256
    assert batch["input_ids"].tolist() == [[15496, 995], [17250, 612]]
    assert batch["labels"].tolist() == [[995, 0], [612, 50256]]
    assert batch["response_mask"].tolist() == [[True, True], [True, False]]


def test_tokenize_roundtrips_on_tiny_bpe(tiny_bpe):
    prompts, outputs = ["the cat", "a dog ate", "x"], [" sat on the mat.", " the hat", " the dog ate the cat"]
    batch = tokenize_prompt_and_output(prompts, outputs, tiny_bpe)
    n_prompt = [len(tiny_bpe.encode(p)) for p in prompts]
    for i, (p, o) in enumerate(zip(prompts, outputs)):
        assert tiny_bpe.decode(batch["labels"][i][batch["response_mask"][i]].tolist()) == o
        assert tiny_bpe.decode(batch["input_ids"][i][: n_prompt[i]].tolist()) == p
        assert int(batch["response_mask"][i].sum()) == len(tiny_bpe.encode(o))
        # the mask starts at the label of the prompt's last input token
        assert batch["response_mask"][i].tolist().index(True) == n_prompt[i] - 1


# ---- log-probs and entropy ---------------------------------------------------------------------

def test_log_probs_and_entropy_on_our_model_match_torch(tiny_bpe):
    model = nano_model(tiny_bpe.vocab_size)
    batch = tokenize_prompt_and_output(["the cat", "the"], [" sat on the mat", " dog"], tiny_bpe)
    out = get_response_log_probs(model, batch["input_ids"], batch["labels"], return_token_entropy=True)
    with torch.no_grad():
        logits = model(batch["input_ids"])
    torch.testing.assert_close(out["log_probs"].double(), reference_log_probs(logits, batch["labels"]),
                               rtol=1e-5, atol=1e-5)
    entropy = torch.distributions.Categorical(logits=logits.double()).entropy()
    torch.testing.assert_close(out["token_entropy"].double(), entropy, rtol=1e-5, atol=1e-5)
    assert "token_entropy" not in get_response_log_probs(model, batch["input_ids"], batch["labels"])
    out["log_probs"].sum().backward()  # differentiable through the adapter
    assert model.lm_head.weight.grad is not None


def test_policy_wraps_model_and_sums_response_log_probs():
    tok = byte_tokenizer()
    model = nano_model(257)
    policy = Policy(model, tok)
    got = policy.sequence_log_probs(["ab", "c"], ["d", "efg"])
    with torch.no_grad():
        full = torch.log_softmax(model(torch.tensor([[97, 98, 100, 99], [99, 101, 102, 103]])).double(), -1)
    want = [full[0, 1, 100].item(), (full[1, 0, 101] + full[1, 1, 102] + full[1, 2, 103]).item()]
    assert got.tolist() == pytest.approx(want, abs=1e-5)
    assert torch.equal(policy.logits(torch.tensor([[1, 2]])), logits_of(model, torch.tensor([[1, 2]])))
    assert sequence_log_probs(model, tok, ["ab"], ["d"]).item() == pytest.approx(want[0], abs=1e-5)


@pytest.fixture(scope="module")
def transformers():
    return pytest.importorskip("transformers")


def test_hf_llama_log_probs_match_torch(transformers):
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 300, (2, 9), generator=torch.Generator().manual_seed(1))
    out = get_response_log_probs(model, ids[:, :-1], ids[:, 1:], return_token_entropy=True)
    with torch.no_grad():
        logits = model(ids[:, :-1]).logits
    torch.testing.assert_close(out["log_probs"].double(), reference_log_probs(logits, ids[:, 1:]),
                               rtol=1e-5, atol=1e-5)
    entropy = torch.distributions.Categorical(logits=logits.double()).entropy()
    torch.testing.assert_close(out["token_entropy"].double(), entropy, rtol=1e-5, atol=1e-5)


def test_same_weights_as_hf_llama_give_same_log_probs(transformers, tiny_bpe, tmp_path):
    """Our model exported to HF (model.inference.export) through the same adapter, with a HF tokenizer
    built from our tokenizer.json (the `tokenizers` library as the independent encoder)."""
    ours = nano_model(tiny_bpe.vocab_size, seed=3)
    hf = transformers.LlamaForCausalLM.from_pretrained(export_llama(ours, ours.cfg, tmp_path / "hf"),
                                                       dtype=torch.float32).eval()
    tiny_bpe.to_hf_json(tmp_path / "tokenizer.json")
    hf_tok = transformers.PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "tokenizer.json"), eos_token=EOT)
    prompts, outputs = ["the cat", "the dog ate"], [" sat on the mat", " the hat"]
    ours_batch = tokenize_prompt_and_output(prompts, outputs, tiny_bpe)
    hf_batch = tokenize_prompt_and_output(prompts, outputs, hf_tok)
    for key in ours_batch:
        assert torch.equal(ours_batch[key], hf_batch[key]), key
    adapter = TokenizerAdapter(hf_tok)
    assert adapter.eos_id == adapter.pad_id == tiny_bpe.special_token_ids[EOT] and adapter.bos_id is None
    a = Policy(ours, tiny_bpe).sequence_log_probs(prompts, outputs)
    b = Policy(hf, hf_tok).sequence_log_probs(prompts, outputs)
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


# ---- packed SFT --------------------------------------------------------------------------------

def test_packed_sft_windows_hand_written():
    examples = [{"prompt": "a", "response": "b"}, {"prompt": "cd", "response": "e"}]
    ds = PackedSFTDataset(examples, byte_tokenizer(), seq_len=4, template="Q:{instruction} A:{response}",
                          shuffle=False)
    stream = list(b"Q:a A:b") + [256] + list(b"Q:cd A:e") + [256]  # 17 tokens -> (17 - 1) // 4 windows
    assert len(ds) == 4
    for i in range(4):
        assert ds[i]["input_ids"].tolist() == stream[4 * i: 4 * i + 4]
        assert ds[i]["labels"].tolist() == stream[4 * i + 1: 4 * i + 5]
    assert ds[-1]["labels"].tolist() == stream[13:17]
    with pytest.raises(IndexError):
        ds[4]


def test_packed_sft_shuffle_is_seeded_and_a_permutation():
    examples = [{"prompt": f"p{i}", "response": f"r{i}"} for i in range(30)]
    tok = byte_tokenizer()
    a = PackedSFTDataset(examples, tok, 8, shuffle=True, seed=1)
    b = PackedSFTDataset(examples, tok, 8, shuffle=True, seed=1)
    c = PackedSFTDataset(examples, tok, 8, shuffle=True, seed=2)
    plain = PackedSFTDataset(examples, tok, 8, shuffle=False)
    assert torch.equal(a.tokens, b.tokens) and not torch.equal(a.tokens, c.tokens)
    assert sorted(a.tokens.tolist()) == sorted(plain.tokens.tolist())
    text = tok.decode(plain.tokens.tolist())
    assert text.startswith(ALPACA_TEMPLATE.split("{instruction}")[0]) and text.count(EOT) == 30
    with pytest.raises(ValueError, match="seq_len"):
        PackedSFTDataset(examples, tok, 0)
    with pytest.raises(ValueError, match="'prompt' and 'response'"):
        PackedSFTDataset([{"prompt": "x"}], tok, 4)


class LlamaLikeTokenizer:
    """Duck-typed HF tokenizer that prepends BOS=1 by default (as Llama's does); EOS=2, no pad."""

    bos_token_id, eos_token_id, pad_token_id = 1, 2, None

    def encode(self, text, add_special_tokens=True):
        return ([1] if add_special_tokens else []) + [10 + b for b in text.encode("utf-8")]

    def decode(self, ids):
        return bytes(i - 10 for i in ids if i >= 10).decode("utf-8", errors="replace")

    def __len__(self):
        return 266


def test_bos_only_where_the_tokenizer_adds_one():
    tok = TokenizerAdapter(LlamaLikeTokenizer())
    assert (tok.bos_id, tok.eos_id, tok.pad_id) == (1, 2, 2)
    ds = PackedSFTDataset([{"prompt": "a", "response": "b"}], tok, 3, template="{instruction}{response}",
                          shuffle=False)
    assert ds.tokens.tolist() == [1, 10 + 97, 10 + 98, 2]
    batch = tokenize_prompt_and_output(["a"], ["b"], tok, add_bos=True)
    assert batch["input_ids"].tolist() == [[1, 107]] and batch["response_mask"].tolist() == [[False, True]]


# ---- robustness --------------------------------------------------------------------------------

def test_bad_text_never_crashes(tiny_bpe):
    junk = bytes(range(256)).decode("latin-1")
    prompts = ["", "bad \udc80 surrogate", junk, "x" * 200_000, "   \n\t "]
    outputs = ["", "\ud800", "\x00" * 10, "y", ""]
    for tok in (byte_tokenizer(), tiny_bpe):
        batch = tokenize_prompt_and_output(prompts, outputs, tok)
        assert batch["input_ids"].shape == batch["labels"].shape == batch["response_mask"].shape
        assert batch["response_mask"][0].sum() == 0 and batch["response_mask"][1].sum() > 0
    empty = tokenize_prompt_and_output([""], [""], byte_tokenizer())
    assert empty["input_ids"].shape == (1, 1) and not empty["response_mask"].any()
    none = tokenize_prompt_and_output([], [], byte_tokenizer())
    assert none["input_ids"].shape == (0, 1)
    ds = PackedSFTDataset([{"prompt": "\udc80", "response": junk}, {"prompt": "", "response": ""}],
                          byte_tokenizer(), 16, shuffle=False)
    assert len(ds) > 0 and all(len(ds[i]["input_ids"]) == 16 for i in range(len(ds)))
    assert len(PackedSFTDataset([], byte_tokenizer(), 16)) == 0
    with pytest.raises(ValueError, match="output_strs has 1"):
        tokenize_prompt_and_output(["a", "b"], ["c"], byte_tokenizer())
