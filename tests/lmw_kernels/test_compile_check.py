"""`python -m lmw_kernels.compile_check` AOT-compiles the kernels for sm_90 / sm_80 on CPU (ptxas ships in the wheel).

Runs as a subprocess: the test session sets TRITON_INTERPRET=1, under which the kernels import their one
small interpreter config instead of the real autotune lists."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A kernel whose tl.dot tiles need 2 x 256 x 256 fp32 in shared memory (512 KB) and one that cannot compile.
PLANTED = textwrap.dedent('''
    import triton
    import triton.language as tl

    from lmw_kernels.compile_check import Spec


    @triton.jit
    def _big_dot(A, B, C, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        a = tl.load(A + offs[:, None] * BLOCK + offs[None, :])
        b = tl.load(B + offs[:, None] * BLOCK + offs[None, :])
        tl.store(C + offs[:, None] * BLOCK + offs[None, :], tl.dot(a, b))


    @triton.jit
    def _broken(X, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(X + offs, tl.dot(tl.load(X + offs), tl.load(X + offs)))  # 1-D dot: a compile error


    SPECS = [
        Spec("planted._big_dot", _big_dot, {"A": "io", "B": "io", "C": "fp32"},
             configs=(triton.Config({"BLOCK": 256}, num_warps=8, num_stages=3),), dtypes=("fp32",)),
        Spec("planted._broken", _broken, {"X": "io"}, configs=(triton.Config({"BLOCK": 64}),), dtypes=("fp32",)),
    ]
''')


def run_check(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, "-m", "lmw_kernels.compile_check", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_planted_smem_overflow_and_compile_error_fail(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(PLANTED)
    report = tmp_path / "report.json"
    proc = run_check("--spec-module", str(planted), "--kernel", "planted.", "--no-cache", "--json", str(report))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "compile_check: FAIL" in proc.stdout
    rows = json.loads(report.read_text())["rows"]
    big = [r for r in rows if r["kernel"] == "planted._big_dot"]
    assert {r["target"] for r in big} == {"sm_90", "sm_80"}
    assert all(r["error"] is None and r["shared"] > 227 * 1024 for r in big)
    assert "SMEM>LIMIT planted._big_dot" in proc.stdout
    broken = [r for r in rows if r["kernel"] == "planted._broken"]
    assert len(broken) == 2 and all(r["error"] for r in broken)
    assert "ERROR planted._broken" in proc.stdout


def test_small_kernels_pass_and_report_resources(tmp_path):
    report = tmp_path / "report.json"
    proc = run_check("--kernel", "swiglu", "--kernel", "_bwd_delta", "--cache-dir", str(tmp_path / "cache"),
                     "--json", str(report))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(report.read_text())
    assert data["ok"] and len(data["rows"]) == 4 * 3 * 2 + 1 * 2 * 3 * 2  # swiglu fwd/bwd, packed too; delta x 2 dims
    assert all(r["regs"] and r["shared"] is not None and not r["cached"] for r in data["rows"])
    again = run_check("--kernel", "swiglu", "--cache-dir", str(tmp_path / "cache"), "--json", str(report))
    assert again.returncode == 0 and all(r["cached"] for r in json.loads(report.read_text())["rows"])


def test_every_kernel_has_a_spec():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    code = "from lmw_kernels.compile_check import registry, uncovered_kernels; print(uncovered_kernels(registry()))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


@pytest.mark.slow
def test_real_kernels_pass_quick(tmp_path):
    """Every entry kernel, every config, bf16 at the largest head dim, sm_90 and sm_80 (~1-2 min on 2 cores)."""
    proc = run_check("--quick", "--no-cache")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 errors, 0 over the shared-memory limit" in proc.stdout
