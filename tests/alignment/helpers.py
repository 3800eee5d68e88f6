"""Shared by the alignment tests: a byte-level tokenizer (no merges) for tiny models."""

import torch

from model.core.config import ModelConfig
from model.core.transformer import TransformerLM
from model.training.checkpoint import save_checkpoint
from tokenizer.encoder import Tokenizer

EOT = "<|endoftext|>"


class ByteHFTokenizer:
    """A HF-style tokenizer over bytes (eos 256), enough for TokenizerAdapter."""

    eos_token_id = pad_token_id = 256
    bos_token_id = None

    def encode(self, text, add_special_tokens=False):
        return list(text.encode())

    def decode(self, ids):
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")

    def __len__(self):
        return 257


def byte_tokenizer() -> Tokenizer:
    """No merges: token ids are the UTF-8 bytes, <|endoftext|> is 256."""
    return Tokenizer({i: bytes([i]) for i in range(256)}, [], [EOT])


def save_nano_run(tmp_path, context_length: int = 192, seed: int = 0):
    """A random nano TransformerLM (vocab 257) saved as ``tmp_path/base`` and a byte tokenizer in ``tmp_path/tok``."""
    torch.manual_seed(seed)
    cfg = ModelConfig.from_preset("nano", vocab_size=257, context_length=context_length)
    save_checkpoint(tmp_path / "base", 0, {"model": TransformerLM(cfg).state_dict(), "model_config": cfg.to_dict()})
    tok = tmp_path / "tok"
    tok.mkdir()
    byte_tokenizer().save(tok / "vocab.json", tok / "merges.txt")
    return tmp_path / "base", tok
