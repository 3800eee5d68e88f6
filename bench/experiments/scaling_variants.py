"""Does a training setting take the default sweep out of its transient? ``python -m bench.experiments.scaling_variants``

The default sweep's best loss per budget falls faster at its larger budgets (scaling/frontier.py), so every law
fitted to it extrapolates too high a loss (docs/benchmarks/scaling.md). Each variant here is the default sweep with
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

import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from bench.tools.results import BenchSettings, Result, finish, parse_bench
from scaling.data import load_results
from scaling.predict import fit_and_predict
from scaling.sweep import main as sweep_main
from workbench.params import read_params, setting

AREA = "scaling_variants"
FOLDER = Path("data/scaling_variants")
CHECK_DISTANCE = 4.0  # the check runs' budget over the sweep's largest (the default `train` run is at 8.2x)
CHECK_SHAPES = [[48, 4, 2], [64, 4, 2]]  # the widths on the default's frontier that far out
# name -> {"train": changes to the train section, "sweep": changes to the sweep section}; "default": params.yaml
MOVED_UP_2X = [8.0e10, 1.13e11, 1.6e11, 2.26e11, 3.2e11, 4.53e11, 6.4e11, 9.05e11, 1.28e12]
VARIANTS: dict[str, dict] = {
    "default": {},
    "lr_x2": {"train": {"lr": 1.2e-2, "min_lr": 1.2e-3}},  # every width at twice its rate (inverse_width scales it)
    "lr_x4": {"train": {"lr": 2.4e-2, "min_lr": 2.4e-3}},
    "beta2_0.99": {"train": {"beta2": 0.99}},  # Porian et al. 2024: AdamW's beta2 = 0.95 hurts at small batches
    "beta2_0.999": {"train": {"beta2": 0.999}},
    # the same x1.41 grid moved up 2x: its largest budgets past the wider models' steep drop
    "moved_up_2x": {"sweep": {"budgets": MOVED_UP_2X, "total_flops": 2.5e13}},
    # ... and as it was tried as the default (af2392b): one budget more below, d96 added, the step floor at 64
    "moved_up": {"sweep": {"budgets": [5.66e10, *MOVED_UP_2X], "min_run_steps": 64, "total_flops": 2.5e13,
                           "shapes": [[12, 4, 1], [16, 4, 1], [24, 4, 1], [32, 4, 1], [48, 4, 2], [64, 4, 2],
                                      [96, 4, 3]]}},
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
    changes = VARIANTS[name]
    out = []
    report = fit_and_predict(sweep, [check_flops], "auto", 0, 0, check.drop(columns="loss")).report
    rolling, trend = report["rolling_origin"], report["frontier"]
    for method, score in rolling["score"].items():
        out.append(Result(name, f"rolling-origin error {method}", score,
                          f"mean abs rel error at >= {rolling['distance']:.3g}x", extra={"changes": changes}))
    for run, loss, width in zip(report["holdout"]["runs"], check["loss"], check["d_model"], strict=True):
        for method, predicted in run["predicted_loss"].items():
            out.append(Result(name, f"check run d{width}: rel_error {method}", float(predicted / loss - 1),
                              f"predicted / measured - 1 (C={check_flops:g})", extra={"changes": changes}))
    out.append(Result(name, "frontier curvature", trend["curvature"], "d2 ln L / d(log2 C)2",
                      extra={"se": trend["curvature_se"], "drop_per_doubling": trend["drop_per_doubling"],
                             "changes": changes}))
    out += [Result(name, f"check run d{w}: loss", float(v), "nats") for w, v in zip(check["d_model"], check["loss"],
                                                                                       strict=True)]
    return out


@dataclass(frozen=True)
class VariantsSettings(BenchSettings):
    variants: tuple[str, ...] = setting(tuple(VARIANTS), "which variants to sweep and score (VARIANTS)",
                                        choices=tuple(VARIANTS), nonempty=True)
    params: str = setting("params.yaml", "the params file the variants change")


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(VariantsSettings, argv)
    params = read_params(args.params)
    rows = []
    for name in args.variants:
        rows += measure(name, *write_params(params, name, VARIANTS[name]))
    for r in rows:
        print(f"{r.name:<12} {r.metric:<40} {r.value:+.4f}")
    return finish(AREA, rows, args, show=False)


if __name__ == "__main__":
    sys.exit(main())
