"""`python -m bench.benchmarks.kernel_ops --smoke` runs every section on tiny shapes (CPU: the Triton interpreter)."""

import pytest
import torch

from bench.benchmarks.kernel_ops import main


def test_smoke_run_prints_every_section(capsys):
    assert main(["--smoke"]) == 0
    out = capsys.readouterr().out
    for title in ("(1) FlashAttention-2", "(2) RMSNorm", "(3) SwiGLU", "(4) LM head + cross-entropy",
                  "(5) training step"):
        assert title in out
    assert all(f" {variant} " in out for variant in ("reference", "none", "all", "auto")) and "sdpa-flash" in out


def test_bad_section_and_missing_gpu_are_clear_errors(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--smoke", "--only", "attention,nope"])
    assert exit_.value.code == 2
    assert "unknown section(s) nope" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert main([]) == 2
        assert "needs a CUDA GPU" in capsys.readouterr().err
