"""The byte-level BPE tokenizer: training (``bpe``), the encoder (``encoder``) and its compiled core (``native``,
built from ``csrc/``), and the two data stages, ``python -m tokenizer.train`` and ``python -m tokenizer.shards``.

The CS336 assignment 1 names, importable from here: ``train_bpe`` and ``Tokenizer`` (docs/architecture.md, "CS336's
import paths").
"""

from tokenizer.bpe import train_bpe
from tokenizer.encoder import Tokenizer

__all__ = ["Tokenizer", "train_bpe"]
