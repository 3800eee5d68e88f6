"""The README's "Your own data, stage by stage" block runs as it is, from an empty folder: WARC -> extract -> filter ->
dedup -> tokenizer -> shards -> a tiny training run -> resume -> generate -> a tiny SFT."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"<!-- walkthrough -->\s*```bash\n(.*?)```\s*<!-- /walkthrough -->", re.S)


def walkthrough(readme: Path = ROOT / "README.md") -> str:
    found = BLOCK.search(readme.read_text(encoding="utf-8"))
    assert found, f"{readme}: no <!-- walkthrough --> bash block"
    return found.group(1)


def run_script(script: str, folder: Path) -> subprocess.CompletedProcess:
    """``script`` under bash in ``folder``, stopping at the first failing command, which it names on stderr;
    ``python`` is this interpreter and the repository is importable, as after ``pip install -e .``."""
    bin_dir = folder / ".bin"
    bin_dir.mkdir()
    python = bin_dir / "python"  # a wrapper, not a link: a venv's python knows its venv by the path it runs from
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ROOT),
           "TQDM_DISABLE": "1"}
    guarded = "set -euo pipefail\ntrap 'echo \"walkthrough: failed: $BASH_COMMAND\" >&2' ERR\n" + script
    return subprocess.run(["bash", "-c", guarded], cwd=folder, env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_the_readme_walkthrough_runs_from_an_empty_folder(tmp_path):
    done = run_script(walkthrough(), tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lm = tmp_path / "my-lm"
    for output in ("extract", "filter", "rejected/filter", "dedup", "tokenizer/vocab.json", "shards/train.bin",
                   "runs/train/config.json", "runs/sft/config.json"):
        assert (lm / output).exists(), output
    assert "=== prompt 0" in done.stdout  # generate printed its completion
    assert sorted(p.name for p in tmp_path.iterdir()) == [".bin", "my-lm"]  # nothing written outside the folder


def test_a_planted_bad_line_fails_the_walkthrough(tmp_path):
    bad = "python -m pipeline tokenize dedup --no-such-flag"
    done = run_script(walkthrough().replace("python -m pipeline.sample", f"{bad}\npython -m pipeline.sample", 1),
                      tmp_path)
    assert done.returncode != 0
    assert f"walkthrough: failed: {bad}" in done.stderr
