"""workbench.import_names: no installed distribution shares a top-level import name with the project.

The clash of 2026-12-06 (transformers 5 requires Hugging Face's ``kernels``, the project's Triton kernels were
``kernels``) is replayed against the real environment, a planted distribution fails the CLI, and the project's own
wheel is installed beside Hugging Face's ``kernels`` and ``transformers`` in a throwaway venv."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import sysconfig
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest
import tomllib

from workbench.import_names import DISTRIBUTION, PACKAGES, clashes, main, unlisted

ROOT = Path(__file__).resolve().parents[2]


def installed(distribution: str) -> bool:
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def plant_distribution(site: Path, name: str, top_level: str) -> None:
    """The metadata of an installed distribution ``name`` 1.0 that provides the import name ``top_level``."""
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n", encoding="utf-8")
    (info / "RECORD").write_text(f"{top_level}/__init__.py,,\n{info.name}/METADATA,,\n", encoding="utf-8")
    (site / top_level).mkdir()
    (site / top_level / "__init__.py").write_text("", encoding="utf-8")


def test_the_environment_has_no_clash(capsys):
    assert clashes() == {}
    assert unlisted() == []
    assert main([]) == 0
    assert "no other installed distribution" in capsys.readouterr().out


@pytest.mark.skipif(not installed("kernels"), reason="Hugging Face's kernels is not installed")
def test_the_old_kernels_name_is_caught_against_the_real_environment():
    """Today's case: were the Triton kernels still `kernels`, the check names Hugging Face's distribution."""
    assert clashes(("workbench", "kernels")) == {"kernels": ["kernels"]}


def test_a_planted_distribution_fails_the_check_naming_both(tmp_path):
    plant_distribution(tmp_path, "pipeline-tools-x", "pipeline")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    run = subprocess.run([sys.executable, "-m", "workbench.import_names"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "'pipeline'" in lines[0] and DISTRIBUTION in lines[0] and "pipeline-tools-x 1.0" in lines[0]


def test_clashes_ignore_the_project_itself_and_name_every_other_provider():
    provided = {"pipeline": ["lm_workbench", "pipeline", "Pipeline.Tools"], "model": ["lm-workbench"], "six": ["six"]}
    assert clashes(provided=provided) == {"pipeline": ["Pipeline.Tools", "pipeline"]}


def test_a_name_the_project_installs_beyond_its_list_is_caught():
    """The old `bench*` pattern also installed benchmarks/ (a data folder) as a top-level package."""
    provided = {"benchmarks": ["lm-workbench"], "bench": ["lm-workbench"], "six": ["six"]}
    assert unlisted(provided) == ["benchmarks"]


def test_pyproject_names_exactly_these_packages():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    find = project["tool"]["setuptools"]["packages"]["find"]
    assert find["include"] == [p for name in PACKAGES for p in (name, f"{name}.*")]
    linter = project["tool"]["importlinter"]
    assert set(linter["root_packages"]) == set(PACKAGES)
    assert set(project["tool"]["ruff"]["lint"]["isort"]["known-first-party"]) == set(PACKAGES)
    acyclic = next(c for c in linter["contracts"] if c["type"] == "acyclic_siblings")
    assert set(acyclic["ancestors"]) == set(PACKAGES)


def test_every_package_folder_exists_and_no_other_top_level_package_would_install():
    folders = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert set(PACKAGES) <= folders
    assert folders - set(PACKAGES) == {"tests"}  # the tests are never installed


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The project's wheel, built as a user would (pip wheel, no dependencies), into a temporary folder."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--wheel-dir", str(out), str(ROOT)], check=True, timeout=600, capture_output=True)
    return next(out.glob("lm_workbench-*.whl"))


@pytest.mark.slow
def test_the_wheel_holds_exactly_the_packages_and_their_data(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert {t for t in top if not t.endswith((".so", ".pyd"))} == set(PACKAGES)
    assert "lmw_kernels/selection.json" in names


@pytest.mark.slow
@pytest.mark.skipif(not (installed("kernels") and installed("transformers")),
                    reason="needs Hugging Face's kernels and transformers installed")
def test_the_wheel_imports_beside_hugging_face_kernels_and_transformers(wheel, tmp_path):
    """A venv that sees this venv's packages (torch, transformers, Hugging Face's kernels) through a path entry, not
    through its site-packages' .pth files, so the project's editable install stays out; the wheel goes into the
    venv's own site-packages. Run from a folder outside the checkout, as a user of the wheel would."""
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "parent-venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    "--no-index", str(wheel)], check=True, timeout=300, capture_output=True)
    code = textwrap.dedent("""
        import kernels, transformers
        import lmw_kernels.flash_attention, lmw_kernels.selection
        from kernels import CUDAProperties  # what transformers' hub_kernels imports
        from transformers import LlamaConfig, LlamaForCausalLM
        import model
        print(kernels.__file__)
        print(lmw_kernels.flash_attention.__file__)
        print(model.__file__)
        print(lmw_kernels.selection.TABLE.is_file())
        print(type(LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32,
                                                num_hidden_layers=1, num_attention_heads=2))).__name__)
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([python, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    hf_kernels, ours, model_file, table, llama = run.stdout.split()
    assert Path(hf_kernels).is_relative_to(sysconfig.get_paths()["purelib"])
    assert Path(ours).is_relative_to(site) and Path(model_file).is_relative_to(site)
    assert (table, llama) == ("True", "LlamaForCausalLM")
    check = subprocess.run([python, "-m", "workbench.import_names"], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=300)
    assert check.returncode == 0, check.stderr
