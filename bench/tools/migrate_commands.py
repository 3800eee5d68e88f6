"""One migration of the results rows (issue 45): the commands recorded before the benchmarks moved into
bench/benchmarks, bench/experiments and bench/tools name modules that no longer exist; ``MOVED`` maps each old module
to the one that runs now, and ``python -m bench.tools.migrate_commands`` rewrites the rows' ``command`` once
(each file written to a temporary file and renamed). ``--check`` changes nothing and exits 1 naming every row whose
command names a missing module (tests/bench/test_results_commands.py runs the same check).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench.tools.results import COMMAND_MODULE as MODULE
from bench.tools.results import RESULTS_DIR, module_exists
from workbench.files import write_text

# old module -> the module that runs now (every bench.<name> moved under benchmarks/, experiments/ or tools/)
MOVED = {
    "bench.alignment_engines": "bench.benchmarks.alignment_engines",
    "bench.alignment_seeds": "bench.experiments.alignment_seeds",
    "bench.alignment_tune": "bench.experiments.alignment_tune",
    "bench.ce_memory": "bench.benchmarks.ce_memory",
    "bench.classifiers_real": "bench.benchmarks.classifiers_real",
    "bench.data": "bench.benchmarks.data",
    "bench.dedup": "bench.benchmarks.dedup",
    "bench.dedup_scale": "bench.benchmarks.dedup_scale",
    "bench.extract": "bench.benchmarks.extract",
    "bench.extract_explore": "bench.experiments.extract_explore",
    "bench.filter": "bench.benchmarks.filter",
    "bench.funnel": "bench.tools.funnel",
    "bench.gopher_words": "bench.benchmarks.gopher_words",
    "bench.kernel_e2e": "bench.benchmarks.kernel_e2e",
    "bench.kernel_ops": "bench.benchmarks.kernel_ops",
    "bench.kernel_select": "bench.benchmarks.kernel_select",
    "bench.langid": "bench.benchmarks.langid",
    "bench.model_train": "bench.benchmarks.model_train",
    "bench.pii": "bench.benchmarks.pii",
    "bench.repro_times": "bench.tools.repro_times",
    "bench.scaling": "bench.benchmarks.scaling",
    "bench.scaling_blind": "bench.experiments.scaling_blind",
    "bench.scaling_seeds": "bench.experiments.scaling_seeds",
    "bench.tokenizer": "bench.benchmarks.tokenizer",
}


def migrate(command: str) -> str:
    return MODULE.sub(lambda m: m.group(1) + MOVED.get(m.group(2), m.group(2)), command)


def missing(results_dir: Path = RESULTS_DIR) -> list[str]:
    """``file:line: module`` for every row whose command names a module that does not exist."""
    out = []
    for path in sorted(Path(results_dir).glob("*.jsonl")):
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                for _, module in MODULE.findall(json.loads(line).get("command", "")):
                    if not module_exists(module):
                        out.append(f"{path.name}:{i}: {module}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.tools.migrate_commands", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 on a row naming a missing module")
    ap.add_argument("--results-dir", type=Path, default=RESULTS_DIR, help="folder of the results rows")
    args = ap.parse_args(argv)
    if not args.check:
        changed = 0
        for path in sorted(args.results_dir.glob("*.jsonl")):
            rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
            new = [r | {"command": migrate(r.get("command", ""))} for r in rows]
            changed += sum(a != b for a, b in zip(rows, new, strict=True))
            write_text(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in new))
        print(f"migrated the command of {changed} rows")
    bad = missing(args.results_dir)
    for line in bad:
        print(f"error: {line}: no such module", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
