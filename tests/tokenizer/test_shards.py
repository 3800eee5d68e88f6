"""Token shards: layout, end-of-text separators, deterministic split, dtype, meta."""

import json

import numpy as np
import pytest

from tokenizer.encoder import Tokenizer
from tokenizer.shards import EOT, is_val, iter_texts, write_shards
from workbench.files import write_jsonl

TEXTS = [f"Document {i}: the quick brown fox jumps over {i} lazy dogs. Ünïcödé ✓ 漢字" for i in range(200)]


def _tokenizer_dir(tmp_path, n_extra=0):
    """A byte-level tokenizer (no merges, or dummy merges to grow the vocab past uint16)."""
    vocab = {i: bytes([i]) for i in range(256)}
    vocab[256] = EOT.encode()
    merges = []
    for k in range(n_extra):  # distinct two-byte-sequence tokens built from merges of ids
        a, b = bytes([k % 256]), bytes([(k // 256) % 256])
        merges.append((a, b))
        vocab[257 + k] = a + b
    d = tmp_path / "tok"
    d.mkdir()
    Tokenizer(vocab, merges, [EOT]).save(d / "vocab.json", d / "merges.txt")
    return d


def _docs(tmp_path):
    path = tmp_path / "docs" / "a.jsonl.gz"
    write_jsonl(path, [{"id": f"doc-{i}", "url": f"http://x/{i}", "text": t} for i, t in enumerate(TEXTS)])
    return path.parent


def _split(arr, eot):
    cuts = np.flatnonzero(arr == eot)
    assert cuts.size and cuts[-1] == len(arr) - 1, "shard must end with end-of-text"
    return np.split(arr, cuts + 1)[:-1]


def test_shards_decode_back_to_the_documents_in_order(tmp_path):
    tok_dir, docs = _tokenizer_dir(tmp_path), _docs(tmp_path)
    meta = write_shards(docs, tok_dir, tmp_path / "shards", val_fraction=0.2, seed=3, workers=1)
    saved = json.loads((tmp_path / "shards" / "meta.json").read_text())
    assert saved["dtype"] == "uint16" and saved["eot_id"] == 256
    assert saved == {k: v for k, v in meta.items() if k not in ("seconds", "tokens_per_s")}
    tok = Tokenizer.from_files(tok_dir / "vocab.json", tok_dir / "merges.txt", [EOT])
    expected = {"train": [], "val": []}
    for i, text in enumerate(TEXTS):
        expected["val" if is_val(f"doc-{i}", 0.2, 3) else "train"].append(text)
    assert 20 < len(expected["val"]) < 60  # ~20% of 200
    for split in ("train", "val"):
        arr = np.memmap(tmp_path / "shards" / f"{split}.bin", dtype=np.uint16, mode="r")
        assert len(arr) == meta[f"{split}_tokens"]
        docs_back = [tok.decode(d[:-1].tolist()) for d in _split(np.asarray(arr), 256)]
        assert docs_back == expected[split]


def test_shards_do_not_depend_on_workers(tmp_path):
    tok_dir, docs = _tokenizer_dir(tmp_path), _docs(tmp_path)
    write_shards(docs, tok_dir, tmp_path / "one", workers=1)
    write_shards(docs, tok_dir, tmp_path / "two", workers=2)
    for name in ("train.bin", "val.bin"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()


def test_large_vocab_uses_uint32(tmp_path):
    tok_dir, docs = _tokenizer_dir(tmp_path, n_extra=65_536 - 257 + 10), _docs(tmp_path)
    meta = write_shards(docs, tok_dir, tmp_path / "shards")
    assert meta["dtype"] == "uint32" and meta["vocab_size"] > 65_536
    arr = np.fromfile(tmp_path / "shards" / "train.bin", dtype="<u4")
    assert arr.max() < meta["vocab_size"] and (arr == meta["eot_id"]).sum() == meta["train_docs"]


def test_bad_document_line_is_skipped_counted_and_named(tmp_path, caplog):
    tok_dir = _tokenizer_dir(tmp_path)
    bad = tmp_path / "docs" / "bad.jsonl.gz"
    write_jsonl(bad, [{"id": "a", "text": "fine"}, {"id": "b", "text": None}])
    meta = write_shards(bad, tok_dir, tmp_path / "shards")
    assert meta["bad_json"] == 1 and meta["train_docs"] + meta["val_docs"] == 1
    assert any("bad.jsonl.gz:2: not a document" in r.message for r in caplog.records)


def test_rerun_gives_byte_identical_outputs(tmp_path):
    tok_dir, docs = _tokenizer_dir(tmp_path), _docs(tmp_path)
    write_shards(docs, tok_dir, tmp_path / "a")
    write_shards(docs, tok_dir, tmp_path / "b")
    for name in ("train.bin", "val.bin", "meta.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_plain_text_file_with_eot_separators_is_a_document_source(tmp_path):
    txt = tmp_path / "stories.txt"
    txt.write_text(f"Once upon a time.\n{EOT}\nThe end.{EOT}  \n{EOT}Third story", encoding="utf-8")
    assert [text for _, text in iter_texts(txt)] == ["Once upon a time.", "The end.", "Third story"]
    (tmp_path / "bad.txt").write_bytes(b"ok\xff")
    with pytest.raises(ValueError, match="bad.txt: not UTF-8"):
        list(iter_texts(tmp_path / "bad.txt"))
