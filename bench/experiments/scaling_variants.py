"""Does a training setting take the default sweep out of its transient? ``python -m bench.experiments.scaling_variants``

The first WSD design of the default sweep (budgets 4e10 to 6.4e11) had a best loss per budget that falls faster at
its larger budgets (scaling/frontier.py), so every law fitted to it extrapolated too high a loss
(docs/benchmarks/scaling.md); these variants are how the current design was chosen. Each variant here is the default sweep with
some settings of its `sweep` section, or of the `train` section its runs inherit, changed; swept into
``data/scaling_variants/<name>/`` (resumable: a finished run is not trained again), plus two check runs
``CHECK_DISTANCE`` times beyond its largest budget (``CHECK_SHAPES``, straight runs of the same recipe). Per variant:
- each law's rolling-origin error on the variant's sweep (what ``--method auto`` measures and chooses by);
- the frontier's curvature (ln L of the best run per budget against log2 C; < 0: it falls faster and faster);
- each law, fitted on the variant's sweep alone, against the two check runs.
The default `train` run and the blind run are not read: this is validation, for choosing a sweep design.
Rows go to benchmarks/results/scaling_variants.jsonl.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import yaml

from bench.tools.results import RESULTS_DIR, Result, record
from scaling.data import load_results
from scaling.frontier import frontier_trend
from scaling.rolling import rolling_origin
from scaling.sweep import main as sweep_main
from scaling.validate import fit_family, run_predictions
from workbench.params import read_params

AREA = "scaling_variants"
FOLDER = Path("data/scaling_variants")
CHECK_DISTANCE = 4.0  # the check runs' budget over the sweep's largest (the default `train` run is at 8.2x)
CHECK_SHAPES = [[48, 4, 2], [64, 4, 2]]  # the widths on the default's frontier that far out
FAMILIES = ("isoflop", "parametric", "gadre")
# the first WSD design of issue 34 (its budgets, widths and step floor; the same rates: the inverse-width rule is
# anchored at the train run's width and rate, 4e-3 at 96 = 6e-3 at 64)
FIRST_DESIGN = {"budgets": [4.0e10, 5.66e10, 8.0e10, 1.13e11, 1.6e11, 2.26e11, 3.2e11, 4.53e11, 6.4e11],
                "shapes": [[12, 4, 1], [16, 4, 1], [24, 4, 1], [32, 4, 1], [48, 4, 2], [64, 4, 2]],
                "min_run_steps": 60, "total_flops": 1.0e13}
# name -> {"train": changes to the train section, "sweep": changes to the sweep section}; "default": params.yaml
VARIANTS: dict[str, dict] = {
    "default": {},
    "first_design": {"sweep": FIRST_DESIGN},
    "first_lr_x2": {"sweep": FIRST_DESIGN, "train": {"lr": 8e-3, "min_lr": 8e-4}},  # every width at twice its rate
    "first_lr_x4": {"sweep": FIRST_DESIGN, "train": {"lr": 1.6e-2, "min_lr": 1.6e-3}},
    # Porian et al. 2024: AdamW's beta2 = 0.95 hurts at small batch sizes
    "first_beta2_0.99": {"sweep": FIRST_DESIGN, "train": {"beta2": 0.99}},
    "first_beta2_0.999": {"sweep": FIRST_DESIGN, "train": {"beta2": 0.999}},
    # the first design's grid moved up 2x, its largest budgets past the wider models' steep drop (what `default`
    # then became, with d96 for the train run's width and the step floor at 64)
    "first_moved_up_2x": {"sweep": FIRST_DESIGN | {"budgets": [8.0e10, 1.13e11, 1.6e11, 2.26e11, 3.2e11, 4.53e11,
                                                               6.4e11, 9.05e11, 1.28e12], "total_flops": 2.5e13}},
}


def write_params(params: dict, name: str, changes: dict) -> tuple[Path, Path, float]:
    """The variant's params files, its sweep's and its check runs' (the same recipe, one budget, two shapes), and
    the check runs' budget."""
    folder = FOLDER / name
    folder.mkdir(parents=True, exist_ok=True)
    sweep = {**params, "train": {**params["train"], **changes.get("train", {})}}
    sweep["sweep"] = {**params["sweep"], **changes.get("sweep", {}), "out_dir": str(folder / "runs"),
                      "results": str(folder / "results.csv")}
    check_flops = CHECK_DISTANCE * max(float(b) for b in sweep["sweep"]["budgets"])
    check = {**sweep, "sweep": {**sweep["sweep"], "out_dir": str(folder / "check" / "runs"),
                                "results": str(folder / "check" / "results.csv"), "budgets": [check_flops],
                                "shapes": CHECK_SHAPES, "branches": False, "max_run_steps": 0,
                                "total_flops": 4 * check_flops}}
    paths = folder / "params.yaml", folder / "check_params.yaml"
    for path, values in zip(paths, (sweep, check), strict=True):
        path.write_text(yaml.safe_dump(values, sort_keys=False))
    return *paths, check_flops


def measure(name: str, sweep_path: Path, check_path: Path, check_flops: float) -> list[Result]:
    for path in (sweep_path, check_path):
        if sweep_main(["--params", str(path)]) != 0:
            raise SystemExit(f"{name}: the sweep of {path} failed")
    sweep = load_results(FOLDER / name / "results.csv")
    check = load_results(FOLDER / name / "check" / "results.csv")
    n, d, c, loss = (sweep[k].to_numpy(dtype=float) for k in ("params", "tokens", "flops", "loss"))
    runs = tuple(check[k].to_numpy(dtype=float) for k in ("params", "tokens", "flops"))
    changes = VARIANTS[name]
    out = []
    with np.errstate(all="ignore"):
        rolling = rolling_origin(FAMILIES, n, d, c, loss)
        trend = frontier_trend(c, loss)
        for family in FAMILIES:
            fit = fit_family(family, n, d, c, loss, np.array([check_flops]), 0, np.random.default_rng(0), runs)
            for method, prediction in run_predictions(fit).items():
                errors = prediction["value"] / check["loss"].to_numpy() - 1
                out.append(Result(name, f"rolling-origin error {method}", rolling["score"][method],
                                  "mean abs rel error at >= 4x", extra={"changes": changes}))
                for error, width in zip(errors, check["d_model"], strict=True):
                    out.append(Result(name, f"check run d{width}: rel_error {method}", float(error),
                                      f"predicted / measured - 1 (C={check_flops:g})", extra={"changes": changes}))
    out.append(Result(name, "frontier curvature", trend["curvature"], "d2 ln L / d(log2 C)2",
                      extra={"se": trend["curvature_se"], "drop_per_doubling": trend["drop_per_doubling"],
                             "changes": changes}))
    out += [Result(name, f"check run d{w}: loss", float(v), "nats") for w, v in zip(check["d_model"], check["loss"],
                                                                                       strict=True)]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        prog="python -m bench.experiments.scaling_variants", description=__doc__.split("\n\n")[0])
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS),
                    help="which variants to sweep and score (VARIANTS)")
    ap.add_argument("--params", default="params.yaml", help="the params file the variants change")
    ap.add_argument("--results-dir", type=Path, default=RESULTS_DIR, help="where the results rows go")
    ap.add_argument("--no-record", action="store_true", help="write no results rows")
    args = ap.parse_args(argv)
    params = read_params(args.params)
    rows = []
    for name in args.variants:
        rows += measure(name, *write_params(params, name, VARIANTS[name]))
    for r in rows:
        print(f"{r.name:<12} {r.metric:<40} {r.value:+.4f}")
    if not args.no_record:
        command = f"python -m bench.experiments.scaling_variants --variants {' '.join(args.variants)}"
        print(f"wrote {record(AREA, rows, command, args.results_dir)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
