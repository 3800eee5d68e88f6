"""The package rules of docs/architecture.md (pyproject's [tool.importlinter]) hold, and a planted break fails."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.import_names import PACKAGES

ROOT = Path(__file__).resolve().parents[2]
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


LAYERS = "the package layers of docs/architecture.md"
CYCLES = "no import cycles between the modules of a package"


@pytest.mark.parametrize("importer, planted, broken", [
    ("lmw_kernels/runtime.py", "import model.core.config", LAYERS),  # lmw_kernels import nothing of ours
    ("lmw_kernels/runtime.py", "import tokenizer.encoder", LAYERS),  # kernels | tokenizer: not each other
    ("pipeline/report.py", "import model.core.config", LAYERS),  # model | pipeline: not each other
    ("model/inference/generate.py", "import pipeline.filters.pii", LAYERS),
    ("tokenizer/shards.py", "import pipeline.web.warc", LAYERS),  # the tokenizer sits below pipeline
    ("scaling/isoflop.py", "import alignment.tasks.rewards", LAYERS),  # scaling | alignment: not each other
    ("workbench/files.py", "import tokenizer.encoder", LAYERS),  # workbench imports nothing of ours
    ("model/train.py", "import leaderboard.report", LAYERS),  # no library package imports leaderboard or bench
    ("pipeline/classify.py", "import bench.tools.timing", LAYERS),
    ("model/core/layers.py", "import model.core.transformer", CYCLES),
    ("pipeline/filters/words.py", "import pipeline.filters.quality_rules", CYCLES),  # inside a sub-package
    ("pipeline/web/warc.py", "import pipeline.classifiers.labelled", CYCLES),  # between sub-packages
    ("model/core/config.py", "import model.training.checkpoint", CYCLES),  # between model's sub-packages
    ("bench/tools/timing.py", "import bench.benchmarks.model_train", CYCLES),  # between bench's sub-packages
])
def test_a_planted_violation_breaks_its_contract(tmp_path, importer, planted, broken):
    root = _copy(tmp_path)
    with open(root / importer, "a") as fh:
        fh.write(f"\n\ndef _planted():\n    {planted}  # noqa\n")
    done = _lint(root)
    assert done.returncode != 0
    verdicts = [line.strip() for line in done.stdout.splitlines() if line.strip().endswith(("KEPT", "BROKEN"))]
    assert any(line.startswith(broken) and line.endswith("BROKEN") for line in verdicts), done.stdout
