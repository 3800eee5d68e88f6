import json
from pathlib import Path

import numpy as np
import pytest
import torch

TOY_VOCAB = 64


@pytest.fixture(autouse=True, scope="module")
def _single_thread():
    """Tiny models: one intra-op thread is fastest and immune to a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def write_toy_shards(folder: Path, vocab: int = TOY_VOCAB) -> Path:
    """A learnable toy corpus: a repeating pattern with noise, as uint16 shards + meta.json."""
    rng = np.random.default_rng(0)
    pattern = rng.integers(0, vocab, size=37)
    for split, n in (("train", 20_000), ("val", 2_000)):
        tokens = np.resize(pattern, n)
        noise = rng.random(n) < 0.1
        tokens[noise] = rng.integers(0, vocab, size=noise.sum())
        tokens.astype(np.uint16).tofile(folder / f"{split}.bin")
    (folder / "meta.json").write_text(json.dumps({"dtype": "uint16", "vocab_size": vocab, "eot_id": 0}))
    return folder


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> Path:
    return write_toy_shards(tmp_path_factory.mktemp("shards"))
