"""model.inference.export: our TransformerLM <-> Hugging Face LlamaForCausalLM, logits must agree."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("safetensors")

from model.core.config import ModelConfig  # noqa: E402
from model.core.transformer import TransformerLM  # noqa: E402
from model.inference.export import export_llama, import_llama  # noqa: E402

CONFIGS = {
    "untied": dict(),
    "tied": dict(tie_embeddings=True),
    "d_head32": dict(n_heads=2, rope_theta=500.0, norm_eps=1e-6),
}


def _model(seed: int = 0, **overrides) -> TransformerLM:
    torch.manual_seed(seed)
    shape = dict(vocab_size=300, context_length=64, d_model=64, n_layers=2, n_heads=4, d_ff=96)
    model = TransformerLM(ModelConfig(**{**shape, **overrides})).eval()
    with torch.no_grad():  # norm gains away from 1 so a swapped norm would show
        for name, param in model.named_parameters():
            if name.endswith(("ln1.weight", "ln2.weight", "ln_final.weight", "norm.weight")):
                param.uniform_(0.5, 1.5)
    return model


def _tokens(cfg: ModelConfig, batch: int = 2) -> torch.Tensor:
    return torch.randint(0, cfg.vocab_size, (batch, cfg.context_length), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("overrides", CONFIGS.values(), ids=CONFIGS.keys())
def test_hf_llama_matches_our_logits(tmp_path, overrides):
    transformers = pytest.importorskip("transformers")
    model = _model(**overrides)
    out = export_llama(model, model.cfg, tmp_path / "hf")
    hf = transformers.LlamaForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    tokens = _tokens(model.cfg)
    with torch.no_grad():
        ours, theirs = model(tokens), hf(input_ids=tokens).logits
    torch.testing.assert_close(theirs, ours, atol=1e-4, rtol=1e-4)
    assert hf.config.rope_parameters["rope_theta"] == model.cfg.rope_theta
    assert hf.config.tie_word_embeddings == model.cfg.tie_embeddings


@pytest.mark.parametrize("overrides", CONFIGS.values(), ids=CONFIGS.keys())
def test_round_trip_gives_identical_logits(tmp_path, overrides):
    model = _model(**overrides)
    cfg, state = import_llama(export_llama(model, model.cfg, tmp_path / "hf"))
    assert cfg == model.cfg
    back = TransformerLM(cfg).eval()
    back.load_state_dict(state)
    tokens = _tokens(cfg)
    with torch.no_grad():
        assert torch.equal(back(tokens), model(tokens))


def test_export_files_and_dtype(tmp_path):
    from safetensors import safe_open

    model = _model(tie_embeddings=True)
    out = export_llama(model.state_dict(), model.cfg, tmp_path / "hf", dtype="bfloat16",
                       config_overrides={"eos_token_id": 256})
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["dtype"] == "bfloat16"
    assert config["eos_token_id"] == 256 and config["num_key_value_heads"] == 4
    with safe_open(out / "model.safetensors", "pt") as f:
        assert "lm_head.weight" not in f.keys()
        assert f.get_tensor("model.embed_tokens.weight").dtype == torch.bfloat16


def test_export_replaces_existing_dir_atomically(tmp_path):
    first, second = _model(seed=0), _model(seed=1)
    out = tmp_path / "hf"
    export_llama(first, first.cfg, out)
    (out / "stale.txt").write_text("old export")
    export_llama(second, second.cfg, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]  # no temp or backup dirs left
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors"]
    _, state = import_llama(out)
    assert torch.equal(state["token_embeddings.weight"], second.token_embeddings.weight)


def test_tied_config_with_untied_weights_raises(tmp_path):
    model = _model()
    with pytest.raises(ValueError, match="tie_embeddings"):
        export_llama(model, model.cfg.replace(tie_embeddings=True), tmp_path / "hf")


def test_qk_norm_export_raises(tmp_path):
    model = _model(qk_norm=True)
    with pytest.raises(ValueError, match="qk_norm"):
        export_llama(model, model.cfg, tmp_path / "hf")
    assert not (tmp_path / "hf").exists()


@pytest.mark.parametrize("field, value", [
    ("num_key_value_heads", 2),
    ("attention_bias", True),
    ("mlp_bias", True),
    ("rope_parameters", {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0}),
    ("rope_scaling", {"type": "dynamic", "factor": 2.0}),
])
def test_import_rejects_unsupported_config(tmp_path, field, value):
    model = _model()
    out = export_llama(model, model.cfg, tmp_path / "hf")
    config = json.loads((out / "config.json").read_text())
    if field == "rope_scaling":
        del config["rope_parameters"]  # a transformers-4 style config
    config[field] = value
    (out / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=field):
        import_llama(out)


def test_cli_exports_run_with_tokenizer_loadable_by_transformers(tmp_path):
    transformers = pytest.importorskip("transformers")
    from model.inference.export import main
    from model.training.checkpoint import save_checkpoint
    from tokenizer.encoder import Tokenizer
    from tokenizer.shards import EOT

    vocab = {i: bytes([i]) for i in range(256)} | {256: EOT.encode(), 257: b"th", 258: b"the"}
    tok = Tokenizer(vocab, [(b"t", b"h"), (b"th", b"e")], [EOT])
    tok_dir = tmp_path / "tok"
    tok_dir.mkdir()
    tok.save(tok_dir / "vocab.json", tok_dir / "merges.txt")
    tok.to_hf_json(tok_dir / "tokenizer.json")
    model = _model(vocab_size=300)
    save_checkpoint(tmp_path / "run", 7, {"model": model.state_dict(), "model_config": model.cfg.to_dict(), "step": 7})

    assert main([str(tmp_path / "run"), str(tmp_path / "hf"), "--tokenizer", str(tok_dir)]) == 0
    hf_tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    text = "the theme of the<|endoftext|>"
    assert hf_tok(text)["input_ids"] == tok.encode(text)
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf", dtype=torch.float32).eval()
    assert hf.config.eos_token_id == 256
    ids = torch.tensor([tok.encode(text)])
    with torch.no_grad():
        torch.testing.assert_close(hf(ids).logits, model(ids), atol=1e-4, rtol=1e-4)
    assert main([str(tmp_path / "missing"), str(tmp_path / "hf2")]) == 2
