"""`make repro`'s stage times as results rows: each stage's seconds, the alignment stages together, the whole DAG.

    git clone . /tmp/x && cd /tmp/x && make repro
    python -m bench.tools.repro_times --times /tmp/x/reports/stage_times.csv [--wall-s 609]

Reads the ``stage,status,seconds`` table ``python -m workbench.repro`` writes (every stage must have run: a table
with skipped stages is not a fresh-clone repro) and appends rows to benchmarks/results/repro.jsonl, with the goals
the issues set as the baselines (alignment stages <= 6 min; sweep + fit <= 5 min and the whole DAG <= 12 min).
``--wall-s``: the clone-to-finish wall clock including the install, when measured.
"""

from __future__ import annotations

import csv
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.tools.results import BenchSettings, Result, finish, parse_bench
from workbench.params import setting, usage_error

ALIGNMENT = ("sft", "dpo", "grpo", "rft", "evaluate")
GOALS_S = {"alignment_stages": 360.0, "sweep+fit": 300.0, "all_stages": 720.0}


def read_times(path: Path) -> dict[str, float]:
    with open(path, encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    if not rows or {"stage", "status", "seconds"} - set(rows[0]):
        raise SystemExit(f"{path}: not a stage_times.csv (columns stage, status, seconds)")
    skipped = [r["stage"] for r in rows if r["status"] != "ran"]
    if skipped:
        raise SystemExit(f"{path}: stages {', '.join(skipped)} did not run: time a fresh-clone `make repro`")
    return {r["stage"]: float(r["seconds"]) for r in rows}


def rows_of(times: dict[str, float], wall_s: float | None) -> list[Result]:
    rows = [Result(stage, "seconds", s, "s") for stage, s in times.items()]
    groups = {"alignment_stages": sum(times.get(s, 0.0) for s in ALIGNMENT),
              "sweep+fit": times.get("sweep", 0.0) + times.get("fit", 0.0),
              "all_stages": sum(times.values())}
    for name, seconds in groups.items():
        rows.append(Result(name, "seconds", seconds, "s (ratio: of the goal)", "goal", GOALS_S[name]))
    if wall_s:
        rows.append(Result("clone_to_finish", "seconds", wall_s, "s (ratio: of the goal)", "goal",
                           GOALS_S["all_stages"]))
    return rows


@dataclass(frozen=True)
class ReproTimesSettings(BenchSettings):
    times: Path = setting(Path("reports/stage_times.csv"), "the stage-time table make repro wrote")
    wall_s: float | None = setting(None, "clone-to-finish wall seconds, install included", above=0)


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(ReproTimesSettings, argv)
    if not args.times.is_file():
        usage_error(f"{args.times} not found: run make repro first")
    rows = rows_of(read_times(args.times), args.wall_s)
    for r in rows:
        goal = f"  (goal {r.baseline_value:.0f} s)" if r.baseline_value else ""
        print(f"{r.name:<36} {r.value:8.1f} s{goal}")
    command = "make repro (fresh clone); python -m bench.tools.repro_times" + \
              (f" --wall-s {args.wall_s:.0f}" if args.wall_s else "")
    return finish("repro", rows, args, command, show=False)


if __name__ == "__main__":
    sys.exit(main())
