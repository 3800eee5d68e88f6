"""Issue 46: every data stage survives a SIGKILL. Each stage's command runs in a forked process that is killed
(SIGKILL: no handler, no ``finally``) in the middle of its writes, just before an atomic rename, when its finished
temporary files sit beside the outputs. The rerun must leave outputs byte-identical to an uninterrupted run's and no
temporary file behind (the bug: sharded dedup, killed while writing and rerun, left empty
``.c2_sample.jsonl.gz.<random>.tmp`` files beside identical outputs)."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.__main__ import main
from tokenizer.encoder import Tokenizer
from workbench.documents import EOT

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    """Two generated crawls, their documents, and a byte-level tokenizer: each stage's input."""
    pytest.importorskip("trafilatura")
    root = tmp_path_factory.mktemp("inputs")
    for name, seed in (("a", 0), ("b", 1)):
        subprocess.run([sys.executable, "-m", "pipeline.sample", "--pages", "16", "--seed", str(seed), "--out",
                        str(root / "crawl" / f"{name}.warc.gz"), "--manifest", str(root / f"{name}.jsonl")],
                       cwd=ROOT, check=True, capture_output=True)
    assert main(["--params", "none", "extract", str(root / "crawl"), "--out-dir", str(root / "docs")]) == 0
    tokenizer = root / "tokenizer"
    tokenizer.mkdir()
    vocab = {i: bytes([i]) for i in range(256)} | {256: EOT.encode()}
    Tokenizer(vocab, [], [EOT]).save(tokenizer / "vocab.json", tokenizer / "merges.txt")
    return {"crawl": root / "crawl", "docs": root / "docs", "tokenizer": tokenizer}


STAGES = {  # each stage's command, its outputs relative to the folder it runs in
    "extract": lambda i: ["extract", str(i["crawl"]), "--out-dir", "out"],
    "filter": lambda i: ["filter", str(i["docs"]), "--out-dir", "out", "--rejected-dir", "rejected"],
    "dedup": lambda i: ["dedup", str(i["docs"]), "--out-dir", "out", "--rejected-dir", "rejected"],
    "dedup-sharded": lambda i: ["dedup", str(i["docs"]), "--out-dir", "out", "--rejected-dir", "rejected",
                                "--engine", "sharded", "--shards", "2"],
    "tokenize": lambda i: ["tokenize", str(i["docs"]), "--tokenizer", str(i["tokenizer"]), "--out-dir", "out"],
}


def _run(args: list[str]) -> int:
    return main(["--params", "none", *args])


def _count_renames(args: list[str], monkeypatch) -> int:
    renames = []
    real = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: (renames.append(dst), real(src, dst)))
    assert _run(args) == 0
    monkeypatch.setattr(os, "replace", real)
    return len(renames)


def _killed_at_rename(args: list[str], nth: int) -> None:
    """In a forked child: the stage's command, SIGKILLed just before its ``nth`` atomic rename."""
    real, seen = os.replace, [0]

    def dying(src, dst):
        seen[0] += 1
        if seen[0] == nth:
            os.kill(os.getpid(), signal.SIGKILL)
        real(src, dst)

    os.replace = dying
    _run(args)


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("stage", list(STAGES))
def test_a_stage_killed_mid_write_reruns_to_the_same_bytes_and_leaves_no_temporary_file(
        stage, inputs, tmp_path, monkeypatch):
    args = STAGES[stage](inputs)
    reference, killed = tmp_path / "reference", tmp_path / "killed"
    reference.mkdir()
    killed.mkdir()
    monkeypatch.chdir(reference)
    renames = _count_renames(args, monkeypatch)
    assert renames >= 3  # enough writes to be killed in the middle of them (tokenize: train, val, meta)

    monkeypatch.chdir(killed)
    child = mp.get_context("fork").Process(target=_killed_at_rename, args=(args, renames // 2 + 1))
    child.start()
    child.join(120)
    assert child.exitcode == -signal.SIGKILL
    assert any(p.name.endswith(".tmp") for p in killed.rglob("*"))  # the kill left temporary files

    assert _run(args) == 0
    assert [p for p in killed.rglob("*") if p.name.endswith(".tmp")] == []
    assert _tree(killed) == _tree(reference)
