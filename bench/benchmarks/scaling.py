"""The default sweep's evidence as results rows: ``python -m bench.benchmarks.scaling`` after ``make repro``.

Reads what the pipeline wrote (params.yaml's sweep results CSV, the fit stage's ``data/sweep/fit/fit.json``,
``reports/stage_times.csv``) and records, in benchmarks/results/scaling.jsonl:
- per compute budget: the best run's loss and the IsoFLOP parabola's vertex N with the sampled N range
  (``interior`` 1 when the vertex lies strictly inside it);
- the held-out `train` run: its measured loss and every method's prediction and relative error (the fit never saw
  that loss), the selected method first;
- with ``--seed-check``: the same sweep again with ``train.seed = 1`` (other initialisations and data order) into
  ``data/sweep_seed1/``, fitted the same way; the second seed's N_opt exponent against the first seed's 95% CI;
- the ``sweep``, ``fit`` and ``train`` stage seconds of that `make repro`.
``python -m bench.tools.report`` then regenerates the "The default sweep" tables of docs/benchmarks/scaling.md.
"""

from __future__ import annotations

import csv
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from bench.tools.results import BenchSettings, Result, finish, parse_bench
from workbench.files import read_json
from workbench.params import read_params, setting, usage_error

FIT_DIR = Path("data/sweep/fit")
STAGES = ("train", "sweep", "fit")


def vertex_rows(fit: dict, results: list[dict]) -> list[Result]:
    """Per budget: the best run's loss and the parabola vertex against the sampled N range."""
    rows = []
    budgets = ((fit.get("laws") or {}).get("isoflop") or {}).get("budgets") or []
    for budget in budgets:
        c = float(budget["flops"])
        runs = [r for r in results if abs(float(r["flops"]) / c - 1) < 1e-2]
        n = [float(r["params"]) for r in runs]
        lo, hi = min(n), max(n)
        vertex = float(budget["n_opt"])
        best = min(runs, key=lambda r: float(r["loss"]))
        label = f"C={c:.3g}"
        extra = {"sampled_n": [lo, hi], "runs": len(runs), "best_run": best["run_id"]}
        rows += [Result(label, "vertex_n", vertex, "params", extra=extra),
                 Result(label, "interior", float(lo < vertex < hi), "1 = inside the sampled N", extra=extra),
                 Result(label, "best_loss", float(best["loss"]), f"nats/token ({best['run_id']})")]
    return rows


def holdout_rows(fit: dict) -> list[Result]:
    """The held-out run against every method's prediction, the selected method first."""
    holdout = fit.get("holdout")
    if not holdout:
        return []
    selected = holdout.get("selected_method")
    valid = {m: v["valid"] for m, v in (fit.get("validity") or {}).items()}
    methods = sorted(holdout["predicted_loss"], key=lambda m: (m != selected, m))
    actual = float(holdout["actual_loss"])
    rows = [Result("measured", "holdout_loss", actual, f"{holdout['run_id']}: N={holdout['n']:.3g}, "
                   f"D={holdout['d']:.3g}, C={holdout['flops']:.3g}")]
    for method in methods:
        tag = f"{method}{' (selected)' if method == selected else ''}{'' if valid.get(method, True) else ' (invalid)'}"
        predicted = float(holdout["predicted_loss"][method])
        rows += [Result(tag, "predicted_loss", predicted, "nats/token", "measured", actual),
                 Result(tag, "rel_error", float(holdout["rel_error"][method]), "predicted / measured - 1")]
    return rows


METHODS = ("isoflop", "isoflop_grid")  # the laws whose N_opt exponent is a fitted parameter


def exponent(fit: dict, method: str) -> tuple[float, list[float]] | None:
    """(N_opt exponent, its 95% CI) of one IsoFLOP law's fit, None when that fit is absent."""
    stat = (((fit.get("laws") or {}).get(method) or {}).get("parameters") or {}).get("n_opt.exponent")
    if not stat or not stat.get("ci95"):
        return None
    return float(stat["value"]), [float(v) for v in stat["ci95"]]


def seed_rows(first: dict, second: dict) -> list[Result]:
    """Per method: the second seed's N_opt exponent against the first seed's 95% CI (the first seed's selected
    method is marked)."""
    selected = (first.get("selection") or {}).get("method")
    rows = []
    for method in METHODS:
        a, b = exponent(first, method), exponent(second, method)
        if a is None or b is None:
            continue
        (value, (lo, hi)), (other, other_ci) = a, b
        name = f"{method}{' (selected)' if method == selected else ''}"
        extra = {"seed0_ci95": [lo, hi], "seed1_ci95": other_ci}
        rows += [Result(f"{name} seed 0", "n_opt_exponent", value, f"95% CI [{lo:.3g}, {hi:.3g}]", extra=extra),
                 Result(f"{name} seed 1", "n_opt_exponent", other, f"95% CI [{other_ci[0]:.3g}, {other_ci[1]:.3g}]",
                        extra=extra),
                 Result(f"{name} seed 1", "inside_seed0_ci", float(lo <= other <= hi), "1 = inside", extra=extra)]
    return rows


def published_fit_rows(fit: dict) -> list[Result]:
    """A fit of published IsoFLOP runs (the CS336 data): each IsoFLOP law's N_opt exponent with its CI, each law's
    rolling-origin error, the predictions at the target budgets (95% prediction intervals of the loss), and the
    parametric law's parameters."""
    rows = []
    for method in METHODS:
        stat = exponent(fit, method)
        if stat:
            (lo, hi) = stat[1]
            rows.append(Result(method, "n_opt_exponent", stat[0], f"95% CI [{lo:.4g}, {hi:.4g}]"))
    rolling = fit.get("rolling_origin") or {}
    for method, score in (rolling.get("score") or {}).items():
        unit = f"mean |rel error| at >= {rolling['distance']:.3g}x the compute fitted"
        rows.append(Result(method, "rolling_origin_error", float(score), unit))
    for pred in fit.get("predictions", []):
        c = f"C={pred['target_flops']:.0e}"
        for q, unit in (("n_opt", "params, 95% CI"), ("d_opt", "tokens, 95% CI"), ("loss", "nats/token, 95% PI")):
            rows.append(Result(f"{pred['method']} @ {c}", q, float(pred[q]),
                               f"{unit} [{pred[q + '_lo']:.4g}, {pred[q + '_hi']:.4g}]"))
    law = (fit.get("laws") or {}).get("parametric")
    if law:
        rows += [Result("parametric", name, float(law["parameters"][name]["value"]), "law parameter") for name in
                 ("E", "A", "B", "alpha", "beta")]
        rows.append(Result("parametric", "residual_sd", float(law["residual_sd"]), "sd of ln(predicted / measured)"))
    return rows


def run_published_fit(path: Path, python: str = sys.executable) -> dict:
    out = Path("data/scaling_published_fit")
    subprocess.run([python, "-m", "scaling.fit", str(path), "--target-flops", "1e23", "1e24", "--method", "auto",
                    "--params", "none", "--out-dir", str(out), "--no-plots"], check=True)
    return read_json(out / "fit.json")


def stage_rows(path: Path) -> list[Result]:
    if not path.is_file():
        return []
    with open(path, newline="") as fh:
        seconds = {r["stage"]: float(r["seconds"]) for r in csv.DictReader(fh) if r["status"] == "ran"}
    rows = [Result(stage, "stage_seconds", seconds[stage], "s (make repro)") for stage in STAGES if stage in seconds]
    if "sweep" in seconds and "fit" in seconds:
        rows.append(Result("sweep + fit", "stage_seconds", seconds["sweep"] + seconds["fit"], "s (make repro)"))
    return rows


def seed_sweep_results(params: dict, seed: int, python: str = sys.executable) -> Path:
    """The sweep of ``params`` with train.seed = ``seed`` into data/sweep_seed<seed>/ (resumable: finished runs are
    kept); returns its results CSV."""
    folder = Path(f"data/sweep_seed{seed}")
    folder.mkdir(parents=True, exist_ok=True)
    section = params["sweep"] | {"out_dir": str(folder / "runs"), "results": str(folder / "results.csv"),
                                 "train": (params["sweep"].get("train") or {}) | {"seed": seed}}
    profile = folder / "params.yaml"
    profile.write_text(yaml.safe_dump({"sweep": section, "train": params["train"],  # the runs inherit train
                                       "scaling_fit": params["scaling_fit"]}))
    subprocess.run([python, "-m", "scaling.sweep", "--params", str(profile)], check=True)
    return folder / "results.csv"


def run_seed_sweep(params: dict, seed: int, python: str = sys.executable) -> dict:
    """``seed_sweep_results``, then its fit (no holdout) into data/sweep_seed<seed>/fit/."""
    results = seed_sweep_results(params, seed, python)
    folder = results.parent
    subprocess.run([python, "-m", "scaling.fit", str(results), "--params", str(folder / "params.yaml"),
                    "--out-dir", str(folder / "fit"), "--no-plots"], check=True)
    return read_json(folder / "fit" / "fit.json")


@dataclass(frozen=True)
class ScalingBench(BenchSettings):
    params: str = setting("params.yaml", "params file of the sweep and the fit")
    fit_dir: Path = setting(FIT_DIR, "folder of the fit stage's fit.json")
    stage_times: Path = setting(Path("reports/stage_times.csv"), "the stage-time table make repro wrote")
    seed_check: bool = setting(False, "repeat the sweep with seed 1 (minutes)")
    published: Path | None = setting(None, "instead: fit published IsoFLOP runs (../shared/data/scaling/"
                                           "isoflops_curves.json) and record them as area scaling_published",
                                     exists=True, metavar="RESULTS")


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(ScalingBench, argv)
    if args.published:
        rows = published_fit_rows(run_published_fit(args.published))
        command = f"python -m bench.benchmarks.scaling --published {args.published}"
        return finish("scaling_published", rows, args, command)
    params = read_params(args.params)  # a profile merged onto its base
    fit_path = args.fit_dir / "fit.json"
    if not fit_path.is_file():
        usage_error(f"{fit_path} not found: run `make repro` (or `dvc repro fit`) first")
    fit = read_json(fit_path)
    with open(params["sweep"]["results"], newline="") as fh:
        results = list(csv.DictReader(fh))
    rows = vertex_rows(fit, results) + holdout_rows(fit) + stage_rows(args.stage_times)
    if args.seed_check:
        rows += seed_rows(fit, run_seed_sweep(params, 1))
    command = "python -m bench.benchmarks.scaling" + (" --seed-check" if args.seed_check else "")
    return finish("scaling", rows, args, command)


if __name__ == "__main__":
    sys.exit(main())
