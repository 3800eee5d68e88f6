"""Token shards: layout, end-of-text separators, deterministic split, dtype, meta."""

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from tokenizer import shards
from tokenizer.encoder import Tokenizer
from tokenizer.shards import EOT, encode_file, is_val, iter_texts, tokenize_ledger, work_folder, write_shards
from workbench.documents import document_paths
from workbench.executor import LocalExecutor
from workbench.files import write_jsonl
from workbench.ledger import identity

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
    assert saved == {k: v for k, v in meta.items() if k not in ("seconds", "tokens_per_s", "files_reused")}
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


def _three_files(tmp_path):
    """TEXTS over three documents files, one with a bad line (skipped and counted the same by both paths)."""
    folder = tmp_path / "docs3"
    for k in range(3):
        write_jsonl(folder / f"part-{k}.jsonl.gz",
                    [{"id": f"doc-{i}", "text": t} for i, t in enumerate(TEXTS) if i % 3 == k])
    with gzip.open(folder / "part-1.jsonl.gz", "at", encoding="utf-8") as fh:
        fh.write("{not json\n")
    return folder


def _shard_bytes(folder):
    return {name: (folder / name).read_bytes() for name in ("train.bin", "val.bin", "meta.json")}


def test_per_file_tasks_give_the_bytes_of_the_streamed_run(tmp_path):
    """The cluster path (one ``encode_file`` task per input file, parts joined in file order) on the local pool
    equals the one-reader streaming path, byte for byte, with the same counts and bad-input stats."""
    tok, docs = _tokenizer_dir(tmp_path), _three_files(tmp_path)
    streamed = write_shards(docs, tok, tmp_path / "streamed", val_fraction=0.2)
    with LocalExecutor(2) as executor:
        tasked = write_shards(docs, tok, tmp_path / "tasked", val_fraction=0.2, executor=executor)
    assert _shard_bytes(tmp_path / "tasked") == _shard_bytes(tmp_path / "streamed")
    assert streamed["val_docs"] > 0 and streamed["bad_json"] == 1
    for key in ("train_tokens", "val_tokens", "train_docs", "val_docs", "bad_json"):
        assert tasked[key] == streamed[key], key
    assert not (tmp_path / "tasked" / "_work").exists()  # the parts go once the shards are written


def test_a_killed_tokenize_run_redoes_only_unfinished_files(tmp_path, monkeypatch):
    tok, docs = _tokenizer_dir(tmp_path), _three_files(tmp_path)
    write_shards(docs, tok, tmp_path / "reference", val_fraction=0.2)
    out = tmp_path / "out"
    paths = document_paths(docs)
    work = work_folder(tokenize_ledger(out, tok, 0.2, 0), [identity(p) for p in paths], [0, 1, 2])
    first = encode_file((0, str(paths[0]), str(tok), str(work), 0.2, 0))  # finished before the kill
    (work / "000001.train.bin").write_bytes(b"partial")  # killed mid-file: a part without its done record
    encoded = []

    def counting(task):  # in this process (one local worker): which files are encoded again
        encoded.append((task[0], (Path(task[3]) / f"{task[0]:06d}.done.json").is_file()))
        return encode_file(task)

    monkeypatch.setattr(shards, "encode_file", counting)
    with LocalExecutor(1) as executor:
        write_shards(docs, tok, out, val_fraction=0.2, executor=executor)
    assert _shard_bytes(out) == _shard_bytes(tmp_path / "reference")
    assert encoded == [(0, True), (1, False), (2, False)]  # file 0 came back from its done record
    assert first["counts"]["train"][0] + first["counts"]["val"][0] == len(TEXTS[0::3])


def _encoding_counter(monkeypatch) -> list[int]:
    """The input indices ``encode_file`` is run on (in this process: one local worker)."""
    encoded = []

    def counting(task):
        encoded.append(task[0])
        return encode_file(task)

    monkeypatch.setattr(shards, "encode_file", counting)
    return encoded


def test_a_changed_input_is_the_only_file_encoded_again(tmp_path, monkeypatch, capsys):
    tok, docs = _tokenizer_dir(tmp_path), _three_files(tmp_path)
    out = tmp_path / "out"
    encoded = _encoding_counter(monkeypatch)
    with LocalExecutor(1) as executor:
        write_shards(docs, tok, out, val_fraction=0.2, executor=executor)
        assert encoded == [0, 1, 2]
        again = write_shards(docs, tok, out, val_fraction=0.2, executor=executor)
        assert encoded == [0, 1, 2] and again["files_reused"] == 3  # nothing changed: nothing encoded
        write_jsonl(docs / "part-1.jsonl.gz", [{"id": f"new-{i}", "text": f"a new text {i}"} for i in range(40)])
        changed = write_shards(docs, tok, out, val_fraction=0.2, executor=executor)
    assert encoded == [0, 1, 2, 1] and changed["files_reused"] == 2
    assert "part-1.jsonl.gz changed since" in capsys.readouterr().out
    clean = write_shards(docs, tok, tmp_path / "clean", val_fraction=0.2)
    assert _shard_bytes(out) == _shard_bytes(tmp_path / "clean")
    marker = Path("_done", "tokenize.json")
    assert (out / marker).read_bytes() == (tmp_path / "clean" / marker).read_bytes()
    assert all(changed[k] == clean[k] for k in ("train_tokens", "val_tokens", "train_docs", "val_docs"))
    assert again["bad_json"] == 1 and "bad_json" not in changed and "bad_json" not in clean  # a reused file's bad
    # lines still counted; the changed file was the one with the bad line


@pytest.mark.parametrize("change", ["seed", "shard", "marker"])
def test_shards_not_matching_their_marker_are_encoded_afresh(tmp_path, monkeypatch, change):
    tok, docs = _tokenizer_dir(tmp_path), _three_files(tmp_path)
    out = tmp_path / "out"
    write_shards(docs, tok, out, val_fraction=0.2)
    seed = 1 if change == "seed" else 0
    if change == "shard":  # a train.bin another run left, of another length
        (out / "train.bin").write_bytes((out / "train.bin").read_bytes()[:-4])
    if change == "marker":  # killed between replacing the shards and writing their marker
        (out / "_done" / "tokenize.json").unlink()
    encoded = _encoding_counter(monkeypatch)
    with LocalExecutor(1) as executor:
        write_shards(docs, tok, out, val_fraction=0.2, seed=seed, executor=executor)
    assert encoded == [0, 1, 2]
    write_shards(docs, tok, tmp_path / "clean", val_fraction=0.2, seed=seed)
    assert _shard_bytes(out) == _shard_bytes(tmp_path / "clean")


def test_a_kill_while_the_work_folder_is_removed_leaves_a_rerun_that_works(tmp_path, monkeypatch):
    """Killed after the shards were written, half way through removing _work (a part gone, its done record
    still there): the rerun encodes that file again instead of trusting the record, and gives the same bytes."""
    tok, docs = _tokenizer_dir(tmp_path), _three_files(tmp_path)
    write_shards(docs, tok, tmp_path / "reference", val_fraction=0.2)
    out = tmp_path / "out"

    def killed_while_removing(path, *args, **kwargs):
        sorted(Path(path).rglob("*.train.bin"))[0].unlink()
        raise KeyboardInterrupt  # SIGKILL's stand-in, between two unlinks of the removal

    with LocalExecutor(1) as executor:
        monkeypatch.setattr(shards.shutil, "rmtree", killed_while_removing)
        with pytest.raises(KeyboardInterrupt):
            write_shards(docs, tok, out, val_fraction=0.2, executor=executor)
        monkeypatch.undo()
        write_shards(docs, tok, out, val_fraction=0.2, executor=executor)
    assert _shard_bytes(out) == _shard_bytes(tmp_path / "reference")
    assert not (out / "_work").exists()
