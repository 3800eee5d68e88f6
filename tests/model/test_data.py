"""Token shards and batches, checked against the numpy arrays written here and a hand-computed entropy."""

import json
import math
from collections import Counter

import numpy as np
import pytest
import torch

from model.training.data import batch_rng, get_batch, load_tokens, read_meta, unigram_entropy


def _write_shards(directory, dtype: str, vocab_size: int, n_train: int = 500, n_val: int = 100, seed: int = 0):
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    arrays = {}
    for split, n in (("train", n_train), ("val", n_val)):
        arr = rng.integers(0, vocab_size, size=n).astype(dtype)
        arr.tofile(directory / f"{split}.bin")
        arrays[split] = arr
    (directory / "meta.json").write_text(json.dumps({"dtype": dtype, "vocab_size": vocab_size}))
    return arrays


@pytest.mark.parametrize("dtype,vocab_size", [("uint16", 50_000), ("uint32", 100_000)])
def test_load_tokens_round_trips(tmp_path, dtype, vocab_size):
    arrays = _write_shards(tmp_path, dtype, vocab_size)
    assert read_meta(tmp_path) == {"dtype": dtype, "vocab_size": vocab_size}
    for split, arr in arrays.items():
        data = load_tokens(tmp_path, split)
        assert data.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(np.asarray(data), arr)
    if dtype == "uint32":  # ids above 65535 survive (they would wrap in uint16)
        assert np.asarray(load_tokens(tmp_path, "train")).max() > 65535


def test_a_shard_shorter_than_its_meta_says_is_refused_in_one_line(tmp_path):
    arrays = _write_shards(tmp_path, "uint16", 1000)
    meta = {"dtype": "uint16", "vocab_size": 1000, "train_tokens": 500, "val_tokens": 100}
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    assert len(load_tokens(tmp_path, "train")) == 500
    arrays["train"][:400].tofile(tmp_path / "train.bin")  # a whole number of tokens, 100 too few: a cut copy
    with pytest.raises(ValueError, match="400 tokens, but meta.json says 500") as refused:
        load_tokens(tmp_path, "train")
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("dtype", ["uint16", "uint32"])
def test_get_batch_windows_are_contiguous_slices(tmp_path, dtype):
    arrays = _write_shards(tmp_path, dtype, 1000)
    data = load_tokens(tmp_path, "train")
    ref = arrays["train"].astype(np.int64)
    B, T = 16, 8
    x, y = get_batch(data, B, T, "cpu", np.random.default_rng(0))
    assert x.shape == (B, T) and y.shape == (B, T)
    assert x.dtype == torch.int64 and y.dtype == torch.int64
    assert x.device.type == "cpu"
    assert torch.equal(x[:, 1:], y[:, :-1])  # y is x shifted by one
    windows = np.lib.stride_tricks.sliding_window_view(ref, T + 1)  # every possible (T+1)-window
    for row_x, row_y in zip(x.numpy(), y.numpy()):
        full = np.concatenate([row_x, row_y[-1:]])
        matches = np.flatnonzero((windows == full).all(axis=1))
        assert matches.size >= 1, "batch row is not a contiguous slice of the shard"
        start = matches[0]
        np.testing.assert_array_equal(row_x, ref[start:start + T])
        np.testing.assert_array_equal(row_y, ref[start + 1:start + T + 1])


def test_starts_cover_the_whole_range_and_never_overflow():
    n, T = 12, 4
    data = np.arange(n, dtype=np.uint16)  # token value == its index, so x[:, 0] is the start
    rng = np.random.default_rng(1)
    starts = set()
    for _ in range(200):
        x, y = get_batch(data, 8, T, "cpu", rng)
        starts.update(x[:, 0].tolist())
        assert int(y.max()) <= n - 1
        assert torch.equal(y, x + 1)
    assert starts == set(range(n - T))  # 0 and the last valid start n-T-1 both occur, nothing past it


def test_context_of_length_minus_one_has_a_single_window():
    data = np.arange(6, dtype=np.uint32)
    x, y = get_batch(data, 3, 5, "cpu", np.random.default_rng(0))
    assert torch.equal(x, torch.arange(5).expand(3, 5))
    assert torch.equal(y, torch.arange(1, 6).expand(3, 5))


def test_same_seed_same_batch(tmp_path):
    _write_shards(tmp_path, "uint16", 500)
    data = load_tokens(tmp_path, "train")
    a = get_batch(data, 4, 16, "cpu", batch_rng(42, step=7))
    b = get_batch(data, 4, 16, "cpu", batch_rng(42, step=7))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    c = get_batch(data, 4, 16, "cpu", np.random.default_rng(5))
    d = get_batch(data, 4, 16, "cpu", np.random.default_rng(5))
    assert torch.equal(c[0], d[0])


def test_batch_rng_differs_across_steps_micro_steps_splits_and_seeds():
    def draw(*args, **kwargs):
        return tuple(batch_rng(*args, **kwargs).integers(0, 2**62, size=4).tolist())

    base = draw(0, 10)
    assert draw(0, 10) == base
    others = [draw(0, 11), draw(0, 10, 1), draw(0, 10, split="val"), draw(1, 10), draw(0, 0)]
    assert len({base, *others}) == 1 + len(others)
    with pytest.raises(ValueError):
        batch_rng(0, 0, split="test")


def test_missing_meta(tmp_path):
    np.arange(10, dtype=np.uint16).tofile(tmp_path / "train.bin")
    with pytest.raises(FileNotFoundError, match="meta.json"):
        load_tokens(tmp_path, "train")


@pytest.mark.parametrize("meta,field", [({"vocab_size": 5}, "dtype"), ({"dtype": "uint16"}, "vocab_size"),
                                        ({"dtype": "int8", "vocab_size": 5}, "int8")])
def test_bad_meta(tmp_path, meta, field):
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=field):
        read_meta(tmp_path)


def test_missing_bin(tmp_path):
    _write_shards(tmp_path, "uint16", 100)
    (tmp_path / "val.bin").unlink()
    with pytest.raises(FileNotFoundError, match="val.bin"):
        load_tokens(tmp_path, "val")


def test_odd_size_bin(tmp_path):
    _write_shards(tmp_path, "uint32", 100)
    with open(tmp_path / "train.bin", "ab") as fh:
        fh.write(b"\x01\x02")  # 2 extra bytes: not a whole uint32
    with pytest.raises(ValueError, match="train.bin"):
        load_tokens(tmp_path, "train")


def test_empty_bin(tmp_path):
    _write_shards(tmp_path, "uint16", 100)
    (tmp_path / "train.bin").write_bytes(b"")
    with pytest.raises(ValueError, match="train.bin"):
        load_tokens(tmp_path, "train")


def test_shard_shorter_than_context(tmp_path):
    _write_shards(tmp_path, "uint16", 100, n_train=8)
    data = load_tokens(tmp_path, "train")
    with pytest.raises(ValueError, match="context_length"):
        get_batch(data, 2, 8, "cpu", np.random.default_rng(0))  # needs 9 tokens
    get_batch(data, 2, 7, "cpu", np.random.default_rng(0))  # 8 tokens suffice for T=7


def test_unigram_entropy_matches_hand_computation():
    data = np.array([0, 0, 1, 2, 2, 2, 2, 5], dtype=np.uint16)  # counts 2,1,4,0,0,1 of 8
    p = np.array([2, 1, 4, 1]) / 8
    expected = -sum(pi * math.log(pi) for pi in p)
    assert unigram_entropy(data, vocab_size=6) == pytest.approx(expected, rel=1e-12)
    assert unigram_entropy(np.full(10, 3, dtype=np.uint16), vocab_size=4) == 0.0
    assert unigram_entropy(np.arange(64, dtype=np.uint32), vocab_size=64) == pytest.approx(math.log(64))


def test_unigram_entropy_on_skewed_data_with_chunking():
    """Hand computation with collections.Counter and math.fsum (scipy.stats would cost ~1.5 s to import)."""
    rng = np.random.default_rng(3)
    vocab = 300
    data = (rng.zipf(1.5, size=10_000) % vocab).astype(np.uint32)
    counts = Counter(data.tolist())
    n = len(data)
    expected = -math.fsum(c / n * math.log(c / n) for c in counts.values())
    assert unigram_entropy(data, vocab) == pytest.approx(expected, rel=1e-10)
    assert unigram_entropy(data, vocab, chunk=777) == pytest.approx(expected, rel=1e-10)  # chunk boundaries
