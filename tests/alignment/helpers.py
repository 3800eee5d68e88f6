"""Shared by the alignment tests: a byte-level tokenizer (no merges) for tiny models."""

from pipeline.tokenizer import Tokenizer

EOT = "<|endoftext|>"


def byte_tokenizer() -> Tokenizer:
    """No merges: token ids are the UTF-8 bytes, <|endoftext|> is 256."""
    return Tokenizer({i: bytes([i]) for i in range(256)}, [], [EOT])
