"""The default funnel as results rows: documents (and characters, tokens) left after every step of ``make repro``.

Reads the stages' detailed metrics through ``pipeline.report.funnel_rows`` (what ``reports/data_funnel.csv`` is made
of) and records one row per step and measure under benchmarks/results/funnel.jsonl, dated by the metrics files
(the ``make repro`` run that wrote them), so docs/benchmarks/data-quality.md's funnel table is generated, not typed.

    make repro && python -m bench.tools.funnel [--metrics-dir metrics]
"""

from __future__ import annotations

import datetime
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.tools.results import RESULTS_DIR, Result, record
from pipeline.report import funnel_rows
from workbench.files import details_path
from workbench.params import parse_flags, setting


def funnel_results(rows: list[dict]) -> list[Result]:
    """Per step: documents kept (and the share of the records), characters and tokens where the stage counts them."""
    out = []
    for r in rows:
        name = f"{r['stage']}/{r['step']}"
        out.append(Result(name, "docs", r["docs"], "documents"))
        out.append(Result(name, "kept_share", r["kept_share"], "of the records"))
        if r.get("chars") is not None:
            out.append(Result(name, "chars", r["chars"], "characters"))
        if r.get("tokens") is not None:
            out.append(Result(name, "tokens", r["tokens"], "tokens"))
    return out


@dataclass(frozen=True)
class FunnelSettings:
    metrics_dir: Path = setting(Path("metrics"), "make repro's metrics folder")
    results_dir: Path = setting(RESULTS_DIR, "where funnel.jsonl goes")


def main(argv: list[str] | None = None) -> int:
    args = parse_flags(FunnelSettings, argv, prog="python -m bench.tools.funnel", description=__doc__.split("\n\n")[0])
    try:
        rows = funnel_rows(args.metrics_dir)
        written = details_path(args.metrics_dir / "filter.json").stat().st_mtime
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {args.metrics_dir}: {exc}", file=sys.stderr)
        return 2
    date = datetime.date.fromtimestamp(written).isoformat()
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=args.metrics_dir, capture_output=True,
                          text=True, timeout=10).stdout.strip() or None  # the checkout whose make repro wrote them
    path = args.results_dir / "funnel.jsonl"
    path.unlink(missing_ok=True)  # one make repro run: the rows are replaced, not appended
    record("funnel", funnel_results(rows), "make repro, then python -m bench.tools.funnel", args.results_dir, date=date,
           commit=head)
    print(f"{len(rows)} funnel steps from {args.metrics_dir} ({date}) into {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
