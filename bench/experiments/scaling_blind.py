"""A blind test of the default sweep's laws: predictions for a run nobody has trained, recorded before it trains.

    python -m bench.experiments.scaling_blind predict --shape 48,4,2 --flops 1.05e13   # rows, then commit them
    python -m bench.experiments.scaling_blind measure --shape 48,4,2 --flops 1.05e13   # trains it, scores them

``predict`` fits data/sweep/results.csv as the ``fit`` stage does (params.yaml's scaling_fit section) and records
every method's predicted loss for the planned run (N, D and C counted as the sweep counts its runs) in
benchmarks/results/scaling_blind.jsonl; it refuses once the run has a measured loss, so a prediction cannot be made
after the fact. Commit the rows before ``measure``: the git history then shows the prediction came first.
``measure`` trains the run exactly as a sweep run of that shape and budget is trained (the sweep section's
``train`` settings and lr rule, one run, out of data/scaling_blind/), then records the measured loss and each
method's relative error. The default ``train`` run is the fit stage's own held-out check; this one is a second
check at another shape and budget, chosen before any of its numbers existed.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bench.tools.results import BenchSettings, Result, finish, parse_bench, read_rows
from scaling.data import load_many, sweep_counting
from scaling.fit import FitConfig
from scaling.predict import fit_and_predict
from scaling.sweep import Run, SweepConfig, plan_runs, read_results, result_row, run_one, sweep_section, write_results
from workbench.params import REQUIRED, load_section, setting

AREA = "scaling_blind"
FOLDER = Path("data/scaling_blind")


def shape_of(text: str) -> tuple[int, int, int]:
    try:
        d_model, n_layers, n_heads = (int(x) for x in text.split(","))
    except ValueError:
        raise SystemExit(f"--shape: expected D_MODEL,N_LAYERS,N_HEADS (got {text!r})") from None
    return d_model, n_layers, n_heads


def planned_run(params: str, shape: tuple[int, int, int], flops: float) -> tuple[Run, SweepConfig]:
    """The sweep's Run for one shape at one budget, outside the step window (the blind run is larger on purpose)."""
    section = sweep_section(params)
    section |= {"budgets": [flops], "shapes": [list(shape)], "min_run_steps": 1, "max_run_steps": 0,
                "out_dir": str(FOLDER / "runs"), "results": str(FOLDER / "results.csv"), "total_flops": flops * 1.01}
    cfg = SweepConfig.from_dict(section)
    runs, skipped = plan_runs(cfg)
    if not runs:
        raise SystemExit(f"the blind run cannot be planned: {'; '.join(skipped)}")
    return runs[0], cfg


def predictions(params: str, run: Run, results: Path) -> tuple[dict[str, float], str]:
    """Every method's predicted loss for ``run`` from the sweep's ``results``, and the method the fit selects."""
    cfg = FitConfig(**load_section("scaling_fit", params, known=FitConfig))
    frame = load_many([results])
    counting = sweep_counting(frame)  # N and C as the sweep counted its runs (the fit stage's held-out rule)
    n = float(run.params if counting["params"] == "params" else run.params_non_embedding)
    c = 6.0 * n * run.tokens if counting["flops"] == "6N" else float(run.flops)
    held = pd.DataFrame({"run_id": [run.run_id], "params": [n], "tokens": [float(run.tokens)], "flops": [c]})
    report = fit_and_predict(frame, cfg.target_flops, cfg.method, cfg.bootstrap, cfg.seed, held).report
    values = {m: float(v) for m, v in report["holdout"]["runs"][0]["predicted_loss"].items()}
    return values, report["selection"]["method"]


def measured_loss(run: Run) -> float | None:
    row = read_results(FOLDER / "results.csv").get(run.run_id)
    return float(row["loss"]) if row else None


def predict(args: BlindSettings) -> list[Result]:
    run, _ = planned_run(args.params, shape_of(args.shape), args.flops)
    if measured_loss(run) is not None or (Path(run.train.out_dir) / "summary.json").exists():
        raise SystemExit(f"{run.run_id} has already been trained: a prediction now would not be blind")
    values, selected = predictions(args.params, run, args.results)
    extra = {"run_id": run.run_id, "n": run.params, "d": run.tokens, "flops": run.flops, "steps": run.steps,
             "selected": selected, "sweep_results": str(args.results)}
    return [Result(run.run_id, f"predicted_loss_{m}", v, "nats", extra=extra | {"method": m})
            for m, v in values.items()]


def measure(args: BlindSettings) -> list[Result]:
    run, _ = planned_run(args.params, shape_of(args.shape), args.flops)
    rows = [r for r in read_rows(args.results_dir) if r["area"] == AREA and r["name"] == run.run_id
            and r["metric"].startswith("predicted_loss_")]
    if not rows:
        raise SystemExit(f"no recorded prediction for {run.run_id}: run `predict` (and commit its rows) first")
    summary = run_one(run)
    loss = float(summary["val_loss"])
    write_results(FOLDER / "results.csv", [result_row(run, summary)])
    out = [Result(run.run_id, "measured_loss", loss, "nats", extra={"steps": summary["steps"],
                                                                     "seconds": summary["seconds"]})]
    for r in rows:
        method = r["metric"].removeprefix("predicted_loss_")
        out.append(Result(run.run_id, f"rel_error_{method}", r["value"] / loss - 1, "predicted / measured - 1",
                          "measured", loss, ratio=r["value"] / loss,
                          extra={"predicted": r["value"], "selected": r["extra"].get("selected")}))
    return out


@dataclass(frozen=True)
class BlindSettings(BenchSettings):
    step: str = setting(REQUIRED, "predict: record the predictions before the run exists; measure: train it and score "
                                  "them", choices=("predict", "measure"), positional=True, kw_only=True)
    shape: str = setting("48,4,2", "D_MODEL,N_LAYERS,N_HEADS of the blind run")
    flops: float = setting(1.05e13, "its compute budget C", above=0)
    params: str = setting("params.yaml", "params file of the sweep, fit and train sections")
    results: Path = setting(Path("data/sweep/results.csv"), "the sweep to fit")


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(BlindSettings, argv)
    rows = predict(args) if args.step == "predict" else measure(args)
    for r in rows:
        print(f"{r.name}  {r.metric:<28} {r.value:.4f}")
    return finish(AREA, rows, args, show=False)


if __name__ == "__main__":
    sys.exit(main())
