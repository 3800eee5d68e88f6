"""Results rows from the committed GPU check runs: docs/gpu-check/<date>-<gpu>-<run>.json and logs/<run>-<part>.log.

These numbers were measured by ``python -m bench.tools.gpu_check`` on a lent GPU that this machine and CI do not have,
so they are imported, not re-measured: each row keeps the summary's machine (GPU, torch, Triton), the date in the
summary's file name, the part's own command and the commit that added the summary. Areas:

    gpu_attention, gpu_rmsnorm, gpu_swiglu, gpu_cross_entropy, gpu_e2e   the tables of bench.benchmarks.kernel_ops's log
    gpu_model_train   the table of bench.benchmarks.model_train (in the summary)
    gpu_runs          tests passed/failed, and the short training runs' val loss and tokens/s (in the summary)

Every imported area file is rewritten whole, so importing twice gives the same files.

    python -m bench.tools.gpu_import [SUMMARY.json ...]     (default: every docs/gpu-check/*.json)
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.tools.results import RESULTS_DIR, ROOT, Result, record
from workbench.params import parse_flags, setting

GPU_CHECK = ROOT / "docs" / "gpu-check"
KERNEL_AREAS = {"1": "gpu_attention", "2": "gpu_rmsnorm", "3": "gpu_swiglu", "4": "gpu_cross_entropy", "5": "gpu_e2e"}
RUN_METRICS = ("val_loss", "tokens_per_s", "mfu")
TEST_METRICS = ("passed", "failed", "skipped")
SECTION_TITLE = re.compile(r"^\((\d)\) ")
NUMBER = re.compile(r"^-?[\d,]*\.?\d+(?:[x%])?$")


def slug(text: str) -> str:
    """A column or row label as a name without spaces (the results markers split on whitespace)."""
    return re.sub(r"[^a-z0-9.=/-]+", "_", text.strip().lower().replace("+", "_")).strip("_")


def parse_value(cell: str) -> tuple[float, str] | None:
    """``"1,123"`` -> (1123.0, ""), ``"17.9x"`` -> (17.9, "x"), ``"23%"`` -> (23.0, "%"); None for OOM, "-"."""
    cell = cell.strip()
    if not NUMBER.match(cell):
        return None
    unit = cell[-1] if cell[-1] in "x%" else ""
    return float(cell.rstrip("x%").replace(",", "")), unit


def parse_table(lines: list[str]) -> list[Result]:
    """A ``bench.tools.timing.format_table`` table (header, rule, rows; columns two spaces apart) -> one Result per
    numeric cell: name = the label columns joined, metric = the column header."""
    header, rule, *rows = lines
    spans = [(m.start(), m.end()) for m in re.finditer(r"-+", rule)]
    cells = [[line[a:b + 1 if i + 1 < len(spans) else None].strip() for i, (a, b) in enumerate(_widen(spans))]
             for line in [header, *rows]]
    names, data = cells[0], cells[1:]
    label_cols = [i for i in range(len(names)) if all(parse_value(r[i]) is None for r in data)]
    out = []
    for r in data:
        name = "/".join(slug(r[i]) for i in label_cols)
        for i, col in enumerate(names):
            parsed = None if i in label_cols else parse_value(r[i])
            if parsed is not None:
                out.append(Result(name, slug(col), parsed[0], parsed[1]))
    return out


def _widen(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Column spans from the rule's dashes, each reaching to the next column (cells are right- or left-aligned)."""
    return [(0 if i == 0 else spans[i - 1][1] + 1, b) for i, (_, b) in enumerate(spans)]


def kernel_tables(log: str) -> dict[str, list[Result]]:
    """area -> rows for each numbered section table in a bench.benchmarks.kernel_ops log."""
    out, area, table = {}, None, []
    for line in [*log.splitlines(), ""]:
        m = SECTION_TITLE.match(line)
        if m or not line.strip() or line.startswith(("total ", "[", "$")):
            if area and len(table) > 2:
                out[area] = out.get(area, []) + parse_table(table)
            area, table = (KERNEL_AREAS.get(m.group(1)), []) if m else (None if not line.strip() else area, [])
            continue
        if area:
            table.append(line)
    return out


def short_command(command: str) -> str:
    """The part's command with the interpreter path as ``python`` and long flag lists elided."""
    words = command.split()
    words[0] = "python"
    text = " ".join(words)
    return text if len(text) <= 90 else " ".join(words[:3]) + " … (flags in the summary)"


def added_by(path: Path) -> str:
    out = subprocess.run(["git", "log", "-1", "--format=%h", "--", str(path)], cwd=ROOT, capture_output=True,
                         text=True, timeout=10)
    return out.stdout.strip() or "uncommitted"


def import_summary(path: Path) -> dict[str, tuple[list[Result], str, dict]]:
    """area -> (rows, command, meta) for one summary file."""
    summary = json.loads(path.read_text(encoding="utf-8"))
    run = path.stem.rsplit("-", 1)[-1]  # 2026-11-26-h200-run1 -> run1
    meta = {"machine": f"{summary['device']} (torch {summary['torch']}, Triton {summary['triton']})",
            "date": path.stem[:10], "commit": added_by(path)}
    areas: dict[str, tuple[list[Result], str, dict]] = {}

    def add(area, rows, command):
        old = areas.get(area, ([], command, meta))[0]
        areas[area] = (old + rows, command, meta)

    for part in summary["parts"]:
        numbers, command = part.get("numbers", {}), short_command(part["command"])
        log = path.parent / "logs" / f"{run}-{part['part']}.log"
        if part["part"] == "kernel_ops" and log.is_file():
            for area, rows in kernel_tables(log.read_text(encoding="utf-8")).items():
                add(area, [Result(f"{run}/{r.name}", r.metric, r.value, r.unit) for r in rows], command)
        elif part["part"] == "model_train" and numbers.get("table"):
            add("gpu_model_train", [Result(f"{run}/{r.name}", r.metric, r.value, r.unit)
                                    for r in parse_table(numbers["table"])], command)
        metrics = TEST_METRICS if part["part"] == "pytest" else RUN_METRICS
        trusted = part["status"] == "ok" or part["part"] == "pytest"  # a failed test run still counts its tests
        rows = [Result(f"{run}/{part['part']}", m, numbers[m]) for m in metrics
                if trusted and isinstance(numbers.get(m), int | float)]
        if rows:
            add("gpu_runs", rows, command)
    return areas


@dataclass(frozen=True)
class GpuImportSettings:
    summaries: tuple[Path, ...] = setting((), f"summary JSON files (default: {GPU_CHECK}/*.json)", positional=True)
    results_dir: Path = setting(RESULTS_DIR, "where the gpu_*.jsonl files go")


def main(argv: list[str] | None = None) -> int:
    args = parse_flags(GpuImportSettings, argv, prog="python -m bench.tools.gpu_import",
                       description=__doc__.split("\n\n")[0])
    paths = args.summaries or sorted(GPU_CHECK.glob("*.json"))
    try:
        imported = [(area, rows, command, meta) for p in paths for area, (rows, command, meta)
                    in import_summary(p).items()]
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for area in {a for a, *_ in imported}:
        (args.results_dir / f"{area}.jsonl").unlink(missing_ok=True)
    for area, rows, command, meta in imported:
        record(area, rows, command, args.results_dir, **meta)
    print(f"{sum(len(r) for _, r, _, _ in imported)} rows from {len(paths)} summaries into "
          f"{len({a for a, *_ in imported})} areas under {args.results_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
