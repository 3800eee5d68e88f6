"""Our data contracts open in the Hugging Face stack: documents (gzip JSONL) with `datasets`, token shards
with numpy from their meta.json alone. (Exported models and tokenizers in transformers: tests/model/test_export.py.)"""

import json

import numpy as np
import pytest

from model.training.data import load_tokens
from workbench.files import write_jsonl


def test_documents_load_with_datasets(tmp_path):
    datasets = pytest.importorskip("datasets")
    docs = [{"id": f"rec-{i}", "url": f"https://example.org/{i}", "text": f"Document {i}. Ünïcode ✓\nline 2",
             "lang": "en", "lang_score": 0.9, "pii": {"emails": i}} for i in range(5)]
    path = tmp_path / "sample.jsonl.gz"
    write_jsonl(path, docs)
    loaded = datasets.load_dataset("json", data_files=str(path), split="train", cache_dir=str(tmp_path / "cache"))
    assert loaded.num_rows == 5
    assert loaded[3]["text"] == docs[3]["text"] and loaded[3]["pii"] == {"emails": 3}
    assert loaded.column_names == ["id", "url", "text", "lang", "lang_score", "pii"]


def test_token_shards_read_from_meta_alone(tmp_path):
    """DESIGN.md's shard contract: flat little-endian uint16/uint32 plus meta.json naming the dtype."""
    tokens = np.array([0, 1, 65535, 256, 7], dtype="<u2")
    tokens.tofile(tmp_path / "train.bin")
    (tmp_path / "meta.json").write_text(json.dumps({"dtype": "uint16", "vocab_size": 65536, "eot_id": 256}))
    meta = json.loads((tmp_path / "meta.json").read_text())
    ours = np.asarray(load_tokens(tmp_path, "train"))
    plain = np.fromfile(tmp_path / "train.bin", dtype=np.dtype(meta["dtype"]).newbyteorder("<"))
    assert ours.tolist() == plain.tolist() == tokens.tolist()
