"""workbench.dvc_deps: a stage's code deps are its command's import closure; a missing file fails the check."""

import shutil
import textwrap
from pathlib import Path

import yaml

from workbench.dvc_deps import check, closure, main, write
from workbench.import_names import PACKAGES

ROOT = Path(__file__).resolve().parents[2]


def _tree(tmp_path: Path) -> Path:
    """A toy repo: pipeline.step imports pipeline.helper at module top and workbench.files inside a function."""
    files = {
        "pipeline/__init__.py": "",
        "pipeline/step.py": "from pipeline.helper import h\n\ndef run():\n    from workbench.files import x\n",
        "pipeline/helper.py": "import json\nh = 1\n",
        "pipeline/unused.py": "",
        "workbench/__init__.py": "",
        "workbench/files.py": "x = 1\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "dvc.yaml").write_text(textwrap.dedent("""\
        stages:
          step:
            cmd: python -m pipeline.step --out data/x   # a comment that --write keeps
            deps:
              - data/in
              - pipeline/step.py
            outs:
              - data/x
        """))
    return tmp_path


def test_closure_follows_top_level_and_function_imports(tmp_path):
    root = _tree(tmp_path)
    assert {str(p) for p in closure(root, ["pipeline.step"])} == {
        "pipeline/__init__.py", "pipeline/step.py", "pipeline/helper.py", "workbench/__init__.py", "workbench/files.py"}


def test_planted_missing_dep_fails_and_write_fixes_it(tmp_path, capsys):
    root = _tree(tmp_path)
    stages = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]
    problems = check(root, stages)
    assert "stage 'step': deps lack pipeline/helper.py (imported by pipeline.step)" in problems
    assert main(["--dvc-yaml", str(root / "dvc.yaml")]) == 1
    assert "deps lack workbench/files.py" in capsys.readouterr().err

    assert write(root, root / "dvc.yaml") == 1
    text = (root / "dvc.yaml").read_text()
    assert "# a comment that --write keeps" in text and "- data/in" in text
    assert main(["--dvc-yaml", str(root / "dvc.yaml")]) == 0


def test_a_listed_file_outside_the_closure_is_reported(tmp_path):
    root = _tree(tmp_path)
    write(root, root / "dvc.yaml")
    stage = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]
    stage["step"]["deps"].append("pipeline/unused.py")
    assert check(root, stage) == ["stage 'step': deps list pipeline/unused.py, which pipeline.step never imports"]


def test_the_repository_dvc_yaml_matches_its_closures(tmp_path):
    assert main(["--dvc-yaml", str(ROOT / "dvc.yaml")]) == 0


def test_editing_an_imported_module_to_import_a_new_one_is_caught(tmp_path):
    """Plant a new import in a copy of the real tree: the real dvc.yaml no longer covers the train stage."""
    for package in (p for p in PACKAGES if p != "bench"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "dvc.yaml", tmp_path / "dvc.yaml")
    (tmp_path / "model" / "planted.py").write_text("")
    with open(tmp_path / "model" / "training" / "optim.py", "a") as fh:
        fh.write("\nimport model.planted  # noqa\n")
    stages = yaml.safe_load((tmp_path / "dvc.yaml").read_text())["stages"]
    assert "stage 'train': deps lack model/planted.py (imported by model.train)" in check(tmp_path, stages)
