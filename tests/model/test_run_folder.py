"""A run folder is self-describing: ``--resume`` needs only ``--out-dir``, and a checkpoint knows its tokenizer
(generate, export and the alignment loaders refuse another one in one line, exit 2)."""

from __future__ import annotations

import gzip
import json
import logging
import shutil
from pathlib import Path

import pytest
import torch

from model.train import main as train_main
from model.training.checkpoint import TokenizerMismatch, load_latest, read_latest
from tokenizer.shards import write_shards
from tokenizer.train import train_tokenizer

# a model that is nothing like the default preset: resuming with the defaults would not even load its weights
SHAPE = ["--preset", "nano", "--model.d-model", "48", "--model.n-heads", "3", "--model.n-layers", "1",
         "--model.context-length", "16"]
RUN = ["--batch-size", "4", "--warmup-steps", "2", "--max-steps", "12", "--ckpt-interval", "4", "--keep-last", "5",
       "--eval-interval", "6", "--eval-batches", "2", "--log-interval", "3", "--lr", "3e-3", "--device", "cpu",
       "--threads", "1", "--deterministic", "--schedule", "wsd"]


def _documents(folder: Path, n: int = 120) -> Path:
    words = "the city council met on monday to vote on the new budget for parks schools and roads".split()
    folder.mkdir()
    with gzip.open(folder / "docs.jsonl.gz", "wt", encoding="utf-8") as fh:
        for i in range(n):
            text = " ".join(words[(i * 7 + k) % len(words)] for k in range(40 + i % 13))
            fh.write(json.dumps({"id": f"doc{i}", "text": text}) + "\n")
    return folder


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict:
    """Documents, two tokenizers trained on them (vocab 300 and 320) and shards encoded with the first."""
    root = tmp_path_factory.mktemp("corpus")
    docs = _documents(root / "docs")
    for name, size in (("tok", 300), ("other_tok", 320)):
        train_tokenizer(docs, root / name, size, ["<|endoftext|>"])
    write_shards(docs, root / "tok", root / "shards", val_fraction=0.1)
    return {"root": root, "docs": docs, "tok": root / "tok", "other": root / "other_tok", "shards": root / "shards"}


@pytest.fixture(scope="module")
def run(corpus, tmp_path_factory) -> Path:
    """An uninterrupted 12-step run with non-default model flags, checkpointed every 4 steps."""
    out = tmp_path_factory.mktemp("runs") / "full"
    assert train_main(["--params", "none", "--data", str(corpus["shards"]), "--out-dir", str(out), *SHAPE, *RUN]) == 0
    return out


def _interrupted_copy(run: Path, dest: Path, at_step: int) -> Path:
    """The run folder as a kill after step ``at_step``'s checkpoint leaves it: later checkpoints absent."""
    shutil.copytree(run, dest)
    for ckpt in dest.glob("ckpt-*.pt"):
        if int(ckpt.stem.split("-")[1]) > at_step:
            ckpt.unlink()
    return dest


def test_resume_with_only_out_dir_ends_with_the_uninterrupted_weights(run, tmp_path, monkeypatch, caplog):
    resumed = _interrupted_copy(run, tmp_path / "resumed", at_step=4)
    monkeypatch.chdir(tmp_path)  # no params.yaml here: nothing but the run folder says what the run was
    with caplog.at_level(logging.INFO, logger="model.train"):
        assert train_main(["--out-dir", str(resumed), "--resume"]) == 0
    assert "(step 4)" in caplog.text  # went on from the checkpoint, not from scratch
    assert read_latest(resumed)["step"] == 12
    expected, got = load_latest(run)[1]["model"], load_latest(resumed)[1]["model"]
    assert expected.keys() == got.keys()
    for name in expected:
        assert torch.equal(expected[name], got[name]), name


def test_resume_accepts_a_flag_that_only_changes_how_it_runs(run, tmp_path, monkeypatch):
    resumed = _interrupted_copy(run, tmp_path / "resumed", at_step=8)
    monkeypatch.chdir(tmp_path)
    assert train_main(["--out-dir", str(resumed), "--resume", "--log-interval", "1", "--keep-last", "2"]) == 0
    expected, got = load_latest(run)[1]["model"], load_latest(resumed)[1]["model"]
    assert torch.equal(expected["lm_head.weight"], got["lm_head.weight"])


@pytest.mark.parametrize("flag", [["--model.d-model", "64"], ["--lr", "0.01"], ["--max-steps", "20"]])
def test_resume_refuses_a_flag_that_contradicts_the_run(run, tmp_path, monkeypatch, capsys, flag):
    resumed = _interrupted_copy(run, tmp_path / "resumed", at_step=4)
    monkeypatch.chdir(tmp_path)
    assert train_main(["--out-dir", str(resumed), "--resume", *flag]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {flag[0]} {flag[1]} contradicts the run")
    assert load_latest(resumed)[1]["step"] == 4  # nothing trained


def _same_head(run: Path, other: Path) -> bool:
    return torch.equal(load_latest(run)[1]["model"]["lm_head.weight"], load_latest(other)[1]["model"]["lm_head.weight"])


def test_resume_with_a_corrupt_newest_checkpoint_uses_the_one_before(run, tmp_path, monkeypatch, caplog):
    resumed = _interrupted_copy(run, tmp_path / "resumed", at_step=8)
    newest = resumed / "ckpt-00000008.pt"
    newest.write_bytes(newest.read_bytes()[:1000])
    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.INFO):
        assert train_main(["--out-dir", str(resumed), "--resume"]) == 0
    bad = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and newest.name in r.getMessage()]
    assert len(bad) == 1 and "\n" not in bad[0] and "(step 4)" in caplog.text
    assert _same_head(run, resumed)


def test_resume_with_every_checkpoint_corrupt_is_one_line_and_restart_starts_over(run, corpus, tmp_path, monkeypatch,
                                                                                 capsys):
    resumed = _interrupted_copy(run, tmp_path / "resumed", at_step=8)
    for ckpt in resumed.glob("ckpt-*.pt"):
        ckpt.write_bytes(ckpt.read_bytes()[:1000])
    monkeypatch.chdir(tmp_path)
    assert train_main(["--out-dir", str(resumed), "--resume"]) == 2  # not a silent start from scratch
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error:") and "--restart" in err[-1]
    assert train_main(["--params", "none", "--data", str(corpus["shards"]), "--out-dir", str(resumed), "--restart",
                       *SHAPE, *RUN]) == 0
    assert _same_head(run, resumed)


def test_resume_refuses_another_number_of_micro_batches_per_step(run, tmp_path, monkeypatch, capsys):
    resumed = _interrupted_copy(run, tmp_path / "resumed", at_step=4)
    monkeypatch.chdir(tmp_path)
    assert train_main(["--out-dir", str(resumed), "--resume", "--grad-accum", "2"]) == 2  # 1 rank: the run's 1 x 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is not the run's 1 x 1" in err


def test_resume_refuses_shards_of_another_tokenizer(run, corpus, tmp_path, monkeypatch, capsys):
    other_shards = tmp_path / "other_shards"
    write_shards(corpus["docs"], corpus["other"], other_shards, val_fraction=0.1)
    resumed = _interrupted_copy(run, tmp_path / "resumed", at_step=4)
    assert train_main(["--out-dir", str(resumed), "--resume", "--data", str(other_shards)]) == 2
    assert "another tokenizer" in capsys.readouterr().err


def test_the_run_records_its_shards_tokenizer(run, corpus):
    meta = json.loads((corpus["shards"] / "meta.json").read_text())
    expected = {"vocab_size": meta["vocab_size"], "sha256": meta["tokenizer_sha256"]}
    assert json.loads((run / "config.json").read_text())["tokenizer"] == expected
    assert load_latest(run)[1]["tokenizer"] == expected


def test_generate_refuses_another_tokenizer(run, corpus, capsys):
    from model.inference.generate import main as generate_main

    base = ["--checkpoint", str(run), "--prompt", "the city", "--max-new-tokens", "4", "--device", "cpu"]
    assert generate_main([*base, "--tokenizer", str(corpus["tok"])]) == 0
    capsys.readouterr()
    assert generate_main([*base, "--tokenizer", str(corpus["other"])]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is not the one" in err and str(corpus["other"]) in err


def test_export_refuses_another_tokenizer(run, corpus, tmp_path, capsys):
    from model.inference.export import main as export_main

    assert export_main([str(run), str(tmp_path / "hf"), "--tokenizer", str(corpus["other"])]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is not the one" in err
    assert not (tmp_path / "hf").exists()


def test_alignment_loader_refuses_another_tokenizer(run, corpus):
    from alignment.evaluate import load_model_and_tokenizer

    model, _ = load_model_and_tokenizer(str(run), str(corpus["tok"]))
    assert model.tokenizer_identity["sha256"] == json.loads((run / "config.json").read_text())["tokenizer"]["sha256"]
    with pytest.raises(TokenizerMismatch, match="is not the one"):
        load_model_and_tokenizer(str(run), str(corpus["other"]))


def test_alignment_cli_exits_2_on_another_tokenizer(run, corpus, tmp_path, capsys):
    from alignment.sft import main as sft_main

    out = tmp_path / "sft"
    assert sft_main(["--params", "none", "--model", str(run), "--tokenizer", str(corpus["other"]),
                     "--out-dir", str(out), "--steps", "1", "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is not the one" in err
