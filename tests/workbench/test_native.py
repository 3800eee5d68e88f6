"""Every compiled core, through the one loader (``workbench.native``): built and current after `pip install -e .`,
and replaced by its pure-Python reference only when LMW_NO_NATIVE=1 (CI runs this file both ways)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.native import source_sha256

ROOT = Path(__file__).resolve().parents[2]
LOADERS = ("tokenizer.native", "pipeline.web.native")  # each: NATIVE, CSRC, SOURCES


@pytest.mark.parametrize("loader", LOADERS)
def test_the_core_is_built_and_current_unless_disabled(loader):
    native = importlib.import_module(loader)
    if os.environ.get("LMW_NO_NATIVE", "") not in ("", "0"):
        assert native.NATIVE is None
        return
    assert native.NATIVE is not None, f"{loader}: the compiled core is missing or stale: run `pip install -e .`"
    assert native.NATIVE.SOURCE_SHA256 == source_sha256(native.CSRC, native.SOURCES)


@pytest.mark.parametrize("loader", LOADERS)
def test_the_env_var_forces_the_reference(loader):
    code = f"import {loader} as native; print(native.NATIVE)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "LMW_NO_NATIVE": "1"},
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "None"
