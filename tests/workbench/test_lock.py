"""requirements/lock.txt: every dependency of every extra, and the setup's tools, at one exact version that satisfies
pyproject.toml; and the venv `make` built holds exactly the versions of the lock it was built from."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import pytest
import tomllib
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from workbench.import_names import DISTRIBUTION

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements" / "lock.txt"
INSTALLED_LOCK = Path(sys.prefix) / "installed-lock.txt"  # the Makefile copies the lock it installed from here


def pins(lock: Path) -> list[Requirement]:
    lines = (line.split("#")[0].strip() for line in lock.read_text(encoding="utf-8").splitlines())
    return [Requirement(line) for line in lines if line]


def declared() -> list[Requirement]:
    """Every requirement of pyproject.toml (dependencies and all extras) and of requirements/tools.in."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra)]
    tools = (ROOT / "requirements" / "tools.in").read_text(encoding="utf-8").splitlines()
    lines += [line.split("#")[0].strip() for line in tools if line.split("#")[0].strip()]
    return [r for r in map(Requirement, lines) if canonicalize_name(r.name) != DISTRIBUTION]


def test_every_pin_is_exact():
    loose = [str(r) for r in pins(LOCK) if len(r.specifier) != 1 or next(iter(r.specifier)).operator != "=="]
    assert not loose


def test_every_declared_requirement_is_locked_at_a_version_it_allows():
    locked: dict[str, list[Requirement]] = {}
    for pin in pins(LOCK):
        locked.setdefault(canonicalize_name(pin.name), []).append(pin)
    problems = []
    for requirement in declared():
        candidates = locked.get(canonicalize_name(requirement.name))
        if not candidates:
            problems.append(f"{requirement}: not in the lock (run make lock)")
        for pin in candidates or ():
            version = next(iter(pin.specifier)).version
            if not requirement.specifier.contains(version, prereleases=True):
                problems.append(f"{requirement}: locked at {version} (run make lock)")
    assert not problems


def test_the_lock_admits_one_version_per_package_on_this_python():
    environment = default_environment()
    seen: dict[str, list[str]] = {}
    for pin in pins(LOCK):
        if pin.marker is None or pin.marker.evaluate(environment):
            seen.setdefault(canonicalize_name(pin.name), []).append(str(pin.specifier))
    assert {name: specs for name, specs in seen.items() if len(specs) > 1} == {}


@pytest.mark.skipif(not INSTALLED_LOCK.is_file(), reason="this venv was not set up by make (no installed-lock.txt)")
def test_the_venv_holds_the_locked_versions():
    """What `pip install -c LOCK` should have done; a local label such as torch's +cpu build is allowed."""
    environment = default_environment()
    wrong = []
    for pin in pins(INSTALLED_LOCK):
        if pin.marker is not None and not pin.marker.evaluate(environment):
            continue
        try:
            version = importlib.metadata.version(pin.name)
        except importlib.metadata.PackageNotFoundError:
            continue  # locked for another platform or build (e.g. CUDA's wheels beside the CPU torch)
        if not pin.specifier.contains(version, prereleases=True):
            wrong.append(f"{pin.name} {version}, locked {pin.specifier}")
    assert not wrong
