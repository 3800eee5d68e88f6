"""Importing ``scaling`` changes nothing in the process; a fit sets every loaded OpenBLAS to one thread
(``scaling.blas``), read back through each library's own getter. Each check runs in a fresh interpreter, with
``OPENBLAS_NUM_THREADS`` unset, so OpenBLAS starts with its own thread count."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_importing_scaling_sets_nothing():
    seen = _run("""
        import json, os
        before = dict(os.environ)
        import scaling, scaling.fit, scaling.laws  # noqa: F401
        print(json.dumps({"changed": sorted(k for k in set(before) | set(os.environ)
                                            if before.get(k) != os.environ.get(k))}))
    """)
    assert seen["changed"] == []


@pytest.mark.skipif(not Path("/proc/self/maps").is_file(), reason="finds the loaded libraries through /proc")
def test_a_fit_leaves_every_loaded_openblas_at_one_thread():
    seen = _run("""
        import json
        import numpy as np
        from scaling.blas import blas_threads, loaded_openblas
        from scaling.laws.parametric import fit_parametric

        before = blas_threads()
        n = np.array([1e6, 2e6, 4e6, 1e6, 2e6, 4e6, 8e6]); d = np.array([2e8, 2e8, 2e8, 8e8, 8e8, 8e8, 4e8])
        fit_parametric(n, d, 1.7 + 400 / n ** 0.34 + 410 / d ** 0.28, n_starts=2)
        print(json.dumps({"libraries": loaded_openblas(), "before": before, "after": blas_threads()}))
    """)
    if not seen["libraries"]:
        pytest.skip("no OpenBLAS loaded (NumPy built against another BLAS)")
    assert len(seen["after"]) == len(seen["before"]) >= 1
    assert set(seen["after"]) == {1}
