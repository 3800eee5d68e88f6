"""The package rules of docs/architecture.md (pyproject's [tool.importlinter]) hold, and a planted break fails."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("workbench", "kernels", "tokenizer", "model", "pipeline", "scaling", "alignment", "leaderboard", "bench")
LINT = Path(sys.executable).parent / "lint-imports"
pytestmark = pytest.mark.skipif(not LINT.exists(), reason="import-linter not installed")


def _lint(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(LINT), str(root / "pyproject.toml")], cwd=root, env=env,
                          capture_output=True, text=True)


def _copy(tmp_path: Path) -> Path:
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_repository_keeps_every_contract():
    done = _lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("importer, planted, broken", [
    ("kernels/runtime.py", "import model.config", "kernels import nothing of ours"),
    ("tokenizer/shards.py", "import model.config", "pipeline imports no model"),
    ("scaling/isoflop.py", "import alignment.rewards", "scaling and alignment do not import each other"),
    ("workbench/files.py", "import tokenizer.encoder", "workbench (the config and file layer) imports nothing"),
    ("model/layers.py", "import model.transformer", "no import cycles between the modules of a package"),
])
def test_a_planted_violation_breaks_its_contract(tmp_path, importer, planted, broken):
    root = _copy(tmp_path)
    with open(root / importer, "a") as fh:
        fh.write(f"\n\ndef _planted():\n    {planted}  # noqa\n")
    done = _lint(root)
    assert done.returncode != 0
    verdicts = [line.strip() for line in done.stdout.splitlines() if line.strip().endswith(("KEPT", "BROKEN"))]
    assert any(line.startswith(broken) and line.endswith("BROKEN") for line in verdicts), done.stdout
