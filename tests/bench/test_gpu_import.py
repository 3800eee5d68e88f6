"""bench.tools.gpu_import: a GPU check summary and its logs -> results rows with the summary's machine and date."""

import json

from bench.tools import gpu_import
from bench.tools.results import read_rows

LOG = """$ /opt/venv/bin/python3 -m bench.kernel_ops --quick
device: NVIDIA H200; torch 2.11.0+cu130; triton 3.6.0; torch.bfloat16
(4) LM head + cross-entropy forward+backward, torch.bfloat16 (memory: peak above the inputs)
shape               impl    ms  peak MiB  speed vs eager  memory saved
-----------------  -----  ----  --------  --------------  ------------
8192x768, V=32768  fused  6.42       172           0.76x         17.9x
8192x768, V=32768  eager  4.86     3,072           1.00x          1.0x
[traceback trimmed]
"""


def test_import_keeps_the_summary_machine_and_date_and_reads_the_tables(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "run1-kernel_ops.log").write_text(LOG)
    summary = {"device": "NVIDIA H200", "torch": "2.11.0+cu130", "triton": "3.6.0", "parts": [
        {"part": "kernel_ops", "status": "failed",
         "command": "/opt/venv/bin/python3 -m bench.benchmarks.kernel_ops --quick",
         "numbers": {}},
        {"part": "ddp", "status": "ok", "command": "/opt/venv/bin/python3 -m model.train --parallel ddp",
         "numbers": {"val_loss": 7.8281, "tokens_per_s": 32525.2}},
        {"part": "train", "status": "failed", "command": "/opt/venv/bin/python3 -m model.train",
         "numbers": {"val_loss": 9.9}}]}
    path = tmp_path / "2026-11-26-h200-run1.json"
    path.write_text(json.dumps(summary))
    out = tmp_path / "results"
    out.mkdir()
    assert gpu_import.main([str(path), "--results-dir", str(out)]) == 0
    assert gpu_import.main([str(path), "--results-dir", str(out)]) == 0  # idempotent: files rewritten, not appended
    rows = {(r["area"], r["name"], r["metric"]): r for r in read_rows(out)}
    assert len(read_rows(out)) == len(rows)
    fused = rows[("gpu_cross_entropy", "run1/8192x768_v=32768/fused", "peak_mib")]
    assert fused["value"] == 172 and fused["date"] == "2026-11-26"
    assert fused["machine"] == "NVIDIA H200 (torch 2.11.0+cu130, Triton 3.6.0)"
    assert fused["command"] == "python -m bench.benchmarks.kernel_ops --quick"  # the interpreter's path as python
    assert rows[("gpu_cross_entropy", "run1/8192x768_v=32768/eager", "peak_mib")]["value"] == 3072
    assert rows[("gpu_cross_entropy", "run1/8192x768_v=32768/fused", "memory_saved")]["unit"] == "x"
    assert rows[("gpu_runs", "run1/ddp", "val_loss")]["value"] == 7.8281
    assert not any(name == "run1/train" for _, name, _ in rows)  # a failed run's numbers are not imported
