"""The pipeline CLIs end to end on a small generated crawl: params defaults, flag overrides, exit codes."""

import json

import numpy as np
import pytest
import yaml

from pipeline.__main__ import main
from pipeline.sample.crawl import generate_sample
from tokenizer.encoder import Tokenizer
from workbench.files import read_jsonl


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("run")
    generate_sample(d / "raw" / "sample.warc.gz", d / "raw" / "manifest.jsonl", pages=120, seed=7)
    params = {
        "extract": {"inputs": [str(d / "raw" / "sample.warc.gz")], "out_dir": str(d / "docs"),
                    "metrics": str(d / "metrics" / "extract.json"), "workers": 2},
        "tokenizer": {"input": str(d / "docs"), "out_dir": str(d / "tok"), "vocab_size": 600,
                      "special_tokens": ["<|endoftext|>"], "metrics": str(d / "metrics" / "tokenizer.json")},
        "shards": {"input": str(d / "docs"), "tokenizer": str(d / "tok"), "out_dir": str(d / "shards"),
                   "val_fraction": 0.1},
    }
    (d / "params.yaml").write_text(yaml.safe_dump(params))
    return d


def test_extract_train_tokenize_from_params(run_dir, capsys):
    p = ["--params", str(run_dir / "params.yaml")]
    assert main(p + ["extract"]) == 0
    assert main(p + ["train-tokenizer", "--vocab-size", "700"]) == 0  # a flag overrides params
    assert main(p + ["tokenize"]) == 0
    out = capsys.readouterr().out
    assert "extract:" in out and "train-tokenizer:" in out and "tokenize:" in out and "reused" not in out
    assert main(p + ["tokenize"]) == 0  # nothing changed: the file's tokens are copied, not encoded again
    assert "; 1 unchanged file reused" in capsys.readouterr().out

    manifest = {r["record_id"]: r for r in read_jsonl(run_dir / "raw" / "manifest.jsonl")}
    docs = list(read_jsonl(run_dir / "docs" / "sample.jsonl.gz"))
    assert docs and all(d["id"] in manifest for d in docs)
    assert not any(manifest[d["id"]]["broken"] == "non_html" for d in docs)

    tok = Tokenizer.from_files(run_dir / "tok" / "vocab.json", run_dir / "tok" / "merges.txt", ["<|endoftext|>"])
    assert tok.vocab_size == 700
    meta = json.loads((run_dir / "shards" / "meta.json").read_text())
    train = np.memmap(run_dir / "shards" / "train.bin", dtype=meta["dtype"], mode="r")
    val = np.memmap(run_dir / "shards" / "val.bin", dtype=meta["dtype"], mode="r")
    assert meta["train_docs"] + meta["val_docs"] == len(docs)
    assert int((train == meta["eot_id"]).sum()) == meta["train_docs"] and len(val) == meta["val_tokens"]
    first = np.asarray(train[: int(np.argmax(np.asarray(train) == meta["eot_id"]))]).tolist()
    assert tok.decode(first) in {d["text"] for d in docs}

    metrics = json.loads((run_dir / "metrics" / "details" / "extract.json").read_text())
    assert metrics["docs_out"] == len(docs) and metrics["records_read"] == len(manifest)


def test_bad_input_exits_2_with_one_line_error(run_dir, capsys):
    assert main(["--params", str(run_dir / "params.yaml"), "extract", str(run_dir / "missing.warc.gz")]) == 2
    err = capsys.readouterr().err.strip()
    assert "missing.warc.gz" in err and len(err.splitlines()) == 1
    assert main(["--params", "none", "tokenize"]) == 2
    assert "missing setting" in capsys.readouterr().err


def test_help_explains_every_flag(capsys):
    with pytest.raises(SystemExit) as e:
        main(["extract", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--out-dir", "--extractor", "--workers", "--max-bytes", "--timeout-s", "--force"):
        assert flag in out
