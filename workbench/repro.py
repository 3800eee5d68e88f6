"""``python -m workbench.repro [--params FILE] [dvc repro args]``: run ``dvc repro`` and time each stage.

``make repro`` calls this. DVC prints "Running stage 'NAME':" when a stage starts and "Stage 'NAME'
didn't change, skipping" when it is up to date. A stage's time runs from its start line to the next
stage's start line, or to the end of the run for the last one, so it includes DVC's hashing of the
stage's outputs. At the end a table of stages and their seconds is printed, and also written to
``reports/stage_times.csv`` (stage, status, seconds).

``--params params-gpu.yaml`` (``make repro PARAMS=params-gpu.yaml``) runs the pipeline with another profile: the
profile, merged onto its base, stands in for params.yaml while DVC runs (DVC reads params.yaml only), and the
original params.yaml is
put back byte for byte afterwards, also after a failure or Ctrl-C (a run killed outright leaves it in
``.params.yaml.orig``, which the next run restores first). dvc.lock records the profile the outputs came from.
"""

from __future__ import annotations

import contextlib
import csv
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from workbench.files import atomic_path
from workbench.params import Parser, add_params_flag, read_params

RUNNING = re.compile(r"Running stage '([^']+)'")
SKIPPED = re.compile(r"Stage '([^']+)' didn't change, skipping")


def stage_times(lines, clock=time.monotonic) -> tuple[list[dict], float]:
    """Echo DVC's output lines and time the stages: ([{stage, status, seconds}], total seconds)."""
    start = clock()
    rows, running = [], None
    for line in lines:
        sys.stdout.write(line)
        sys.stdout.flush()
        started, skipped = RUNNING.search(line), SKIPPED.search(line)
        if not (started or skipped):
            continue
        now = clock()
        if running is not None:  # the previous stage ends where the next one starts
            running["seconds"] = round(now - running.pop("_start"), 2)
        running = {"stage": started.group(1), "status": "ran", "_start": now} if started else None
        rows.append(running or {"stage": skipped.group(1), "status": "up to date", "seconds": 0.0})
    end = clock()
    if running is not None:
        running["seconds"] = round(end - running.pop("_start"), 2)
    return rows, round(end - start, 2)


def format_table(rows: list[dict], total: float) -> str:
    width = max([len("stage"), *(len(r["stage"]) for r in rows)])
    lines = [f"{'stage':<{width}}  {'status':<10}  {'seconds':>8}", f"{'-' * width}  {'-' * 10}  {'-' * 8}"]
    lines += [f"{r['stage']:<{width}}  {r['status']:<10}  {r['seconds']:>8.1f}" for r in rows]
    lines.append(f"{'total':<{width}}  {'':<10}  {total:>8.1f}")
    return "\n".join(lines)


def write_csv(rows: list[dict], path: Path) -> None:
    with atomic_path(path) as tmp, tmp.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["stage", "status", "seconds"])
        writer.writeheader()
        writer.writerows(rows)


@contextlib.contextmanager
def params_profile(profile: Path, params: Path = Path("params.yaml")):
    """Put ``profile``, merged onto its base (workbench.params.read_params: DVC sees every value a stage reads), in
    place of ``params`` for the duration; restore the original byte for byte afterwards."""
    backup = params.with_name(f".{params.name}.orig")
    if backup.exists():  # a previous run was killed before it could restore
        os.replace(backup, params)
    if not profile.is_file():
        raise FileNotFoundError(f"{profile}: no such params file")
    if profile.resolve() == params.resolve():
        yield
        return
    import yaml

    merged = yaml.safe_dump(read_params(profile), sort_keys=False)  # read before params.yaml is replaced
    shutil.copy2(params, backup)
    try:
        params.write_text(f"# {profile} merged onto its base by workbench.repro for this run\n{merged}",
                          encoding="utf-8")
        yield
    finally:
        os.replace(backup, params)


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m workbench.repro", description=__doc__.split("\n\n")[0],
                    epilog="Other arguments go to dvc repro.")
    add_params_flag(parser)
    args, dvc_args = parser.parse_known_args(sys.argv[1:] if argv is None else list(argv))
    if shutil.which("dvc") is None:
        print("error: dvc is not installed (make repro installs it into .venv)", file=sys.stderr)
        return 2
    try:
        with params_profile(Path(args.params)):
            # stage commands inherit stderr, so their progress bars draw live; DVC's stage lines come on stdout
            proc = subprocess.Popen(["dvc", "repro", *dvc_args], stdout=subprocess.PIPE, text=True, bufsize=1)
            rows, total = stage_times(proc.stdout)
            code = proc.wait()
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if rows:
        print("\n" + format_table(rows, total))
        write_csv(rows, Path("reports/stage_times.csv"))
    if code:
        print(f"error: dvc repro failed (exit {code}); the table shows the stages up to the failure", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
