"""How far the default sweep's held-out prediction moves with the seed: ``python -m bench.experiments.scaling_seeds``.

One sweep seed is one draw of every run's initial weights and batch order. At the default's scale (models of
36k-345k parameters, a few hundred to fifteen hundred steps) a run's final loss moves by several hundredths of a
nat between seeds, so the laws fitted on one seed's sweep are one draw too. This bench measures the spread, after
`make repro`:
- the sweep again with ``train.seed = k`` for every other ``--seeds`` (into ``data/sweep_seed<k>/``, resumable, as
  ``python -m bench.benchmarks.scaling --seed-check`` does), and the `train` run again with ``--seed k`` (into
  ``data/runs/default_seed<k>/``);
- each seed's sweep fitted alone, and all of them at once (``scaling.fit`` averages the runs of one N, D, C over
  the seeds), with ``--method auto``; every method's prediction of the `train` run of every seed, read only after
  the fit;
- the seeds' losses at each sweep point (their standard deviation) and of the `train` run, also re-evaluated on the
  whole validation split (a run's own ``val_loss`` averages a few random windows drawn from its seed);
- per seed, each law refitted without the largest budget and scored on every run of it, the widest included (the
  leave-out check of ``--method auto`` scores only the best run).

Rows go to benchmarks/results/scaling_seeds.jsonl (``rel_error`` against the default `train` run, seed 0, which is
what `make repro` reports; ``extra`` has the error against every `train` seed).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from bench.benchmarks.scaling import seed_sweep_results
from bench.tools.results import BenchSettings, Result, finish, parse_bench
from model.train import evaluate
from model.training.checkpoint import load_model
from model.training.data import load_tokens
from model.training.train_config import TrainConfig
from scaling.data import load_many, load_results, load_summary_holdout, sweep_counting
from scaling.fit import FitConfig
from scaling.predict import fit_and_predict
from scaling.sweep import sweep_section
from workbench.params import read_params, setting, usage_error

AREA = "scaling_seeds"


def train_summary(params: dict, params_file: str, seed: int, python: str = sys.executable) -> Path:
    """The `train` run's summary.json for ``seed`` (seed 0: the pipeline's own run), training it when missing."""
    base = Path(params["train"]["out_dir"])
    if seed == params["train"].get("seed", 0):
        return base / "summary.json"
    out = base.parent / f"{base.name}_seed{seed}"
    if not (out / "summary.json").is_file():
        subprocess.run([python, "-m", "model.train", "--params", params_file, "--seed", str(seed),
                        "--out-dir", str(out), "--metrics", str(out / "metrics.json")], check=True)
    return out / "summary.json"


def fit_sweep(paths: list[Path], summaries: dict[int, Path], cfg: FitConfig) -> dict:
    """``scaling.fit --method auto`` of ``paths`` (several: averaged per N, D, C) and its prediction of each
    `train` seed: {selected, scores (rolling origin), predicted {law: value}, rel_error {law: {train seed: error}},
    pi95 {law: [lo, hi]}, covered {law: {train seed: inside}}}."""
    frame = load_many(paths)
    held = pd.concat([load_summary_holdout(p, sweep_counting(frame)) for p in summaries.values()], ignore_index=True)
    report = fit_and_predict(frame, cfg.target_flops, "auto", cfg.bootstrap, cfg.seed,
                             held.drop(columns="loss")).report
    runs = report["holdout"]["runs"]  # one per train seed, predicted from N, D and C alone
    losses = held["loss"].to_numpy(dtype=float)
    laws = list(runs[0]["predicted_loss"])
    return {"selected": report["selection"]["method"], "scores": report["selection"]["scores"],
            "predicted": {m: runs[0]["predicted_loss"][m] for m in laws},
            "rel_error": {m: {s: runs[i]["predicted_loss"][m] / losses[i] - 1 for i, s in enumerate(summaries)}
                          for m in laws},
            "pi95": {m: runs[0]["interval"][m]["pi95"] for m in laws},
            "covered": {m: {s: bool(runs[i]["interval"][m]["pi95"][0] <= losses[i] <= runs[i]["interval"][m]["pi95"][1])
                            for i, s in enumerate(summaries)} for m in laws},
            "dominant": {m: runs[0]["interval"][m]["dominant"] for m in laws}}


def fit_rows(name: str, fit: dict, first_train_seed: int) -> list[Result]:
    rows = []
    for method in sorted(fit["rel_error"], key=lambda m: (m != fit["selected"], m)):
        errors = fit["rel_error"][method]
        selected = method == fit["selected"]
        extra = {"vs_train_seed": errors, "rolling_origin_score": fit["scores"].get(method), "selected": selected,
                 "pi95": fit["pi95"][method], "covered_by_train_seed": fit["covered"][method],
                 "dominant": fit["dominant"][method]}
        tag = " (selected)" if selected else ""
        lo, hi = fit["pi95"][method]
        predicted = fit["predicted"][method]
        rows += [Result(name, f"rel_error {method}{tag}", errors[first_train_seed],
                        f"predicted / measured - 1 (train seed {first_train_seed})", extra=extra),
                 Result(name, f"95% PI covers the train run: {method}{tag}",
                        float(fit["covered"][method][first_train_seed]), "1 = inside", extra=extra),
                 Result(name, f"95% PI half-width: {method}{tag}", (hi - lo) / 2 / predicted,
                        "relative, (hi - lo) / 2 / predicted", extra=extra)]
    return rows


def train_losses(summaries: dict[int, Path]) -> list[float]:
    """Each `train` seed's measured loss, as the fit reads a held-out run."""
    return [float(load_summary_holdout(p, {"params": "params", "flops": "6N"})["loss"].iloc[0])
            for p in summaries.values()]


def spread_rows(fits: dict[int, dict], summaries: dict[int, Path], own: int) -> list[Result]:
    """Each sweep seed's selected prediction of the default `train` run (train seed ``own``), their spread, and a
    95% prediction interval for a held-out run that holds both noises: the law's across sweep seeds and the run's
    own across train seeds (sd of the `train` run's loss), added in quadrature around the seeds' mean prediction."""
    predicted = np.array([fit["predicted"][fit["selected"]] for fit in fits.values()])
    errors = np.array([fit["rel_error"][fit["selected"]][own] for fit in fits.values()])
    losses = train_losses(summaries)
    mean, law_sd, run_sd = float(predicted.mean()), float(predicted.std(ddof=1)), float(np.std(losses, ddof=1))
    half = 1.96 * float(np.hypot(law_sd, run_sd))
    measured = losses[list(summaries).index(own)]
    selected = {str(s): fit["selected"] for s, fit in fits.items()}
    return [Result("selected law over sweep seeds", "max |rel_error|", float(np.abs(errors).max()),
                   f"vs the train run (seed {own}), {len(errors)} sweep seeds",
                   extra={"rel_error": {str(s): float(e) for s, e in zip(fits, errors, strict=True)},
                          "selected": selected}),
            Result("selected law over sweep seeds", "median |rel_error|", float(np.median(np.abs(errors))),
                   f"vs the train run (seed {own})"),
            Result("selected law over sweep seeds", "prediction sd / mean", law_sd / mean,
                   f"relative, {len(predicted)} sweep seeds", extra={"predicted": predicted.tolist()}),
            Result("selected law over sweep seeds", "95% PI half-width / mean", half / mean,
                   "law's seed sd and the train run's seed sd in quadrature",
                   extra={"pi95": [mean - half, mean + half], "measured": measured,
                          "inside": bool(mean - half <= measured <= mean + half)})]


def left_out_budget_rows(name: str, path: Path, cfg: FitConfig) -> list[Result]:
    """Each law refitted without the largest budget, predicting every run of it (widest included: the kind of run
    the `train` run is, far wider than the optimum): the widest run's error and the mean absolute error."""
    frame = load_many([path])
    largest = frame["flops"] == frame["flops"].max()
    kept, left = frame[~largest], frame[largest].sort_values("params").reset_index(drop=True)
    report = fit_and_predict(kept, cfg.target_flops, "auto", 0, cfg.seed, left.drop(columns="loss")).report
    loss = left["loss"].to_numpy(dtype=float)
    rows = []
    for method in sorted(report["holdout"]["runs"][0]["predicted_loss"]):
        errors = np.array([run["predicted_loss"][method] for run in report["holdout"]["runs"]]) / loss - 1
        extra = {"by_params": {f"{n:.0f}": float(e) for n, e in zip(left["params"], errors, strict=True)}}
        rows += [Result(name, f"left-out budget, widest run: rel_error {method}", float(errors[-1]),
                        f"predicted / measured - 1 (N={left['params'].iloc[-1]:.3g})", extra=extra),
                 Result(name, f"left-out budget, every run: mean |rel_error| {method}", float(np.abs(errors).mean()),
                        f"over {len(errors)} runs", extra=extra)]
    return rows


def whole_split_loss(run_dir: Path, data: str, context_length: int) -> float:
    """``run_dir``'s final checkpoint scored on every non-overlapping window of the validation split (model.train's
    ``eval_batches: 0``; the run's own ``val_loss`` averages ``eval_batches`` windows drawn from its seed)."""
    cfg = TrainConfig(model={"context_length": context_length}, batch_size=32, eval_batches=0)
    return evaluate(load_model(run_dir, attention="sdpa"), load_tokens(data, "val"), cfg, "cpu", contextlib.nullcontext)


def noise_rows(paths: dict[int, Path], summaries: dict[int, Path], data: str, context_length: int) -> list[Result]:
    """The seeds' spread at each sweep point (median and largest sd) and of the `train` run's loss, as the run
    measured it and on the whole validation split (the same windows for every seed)."""
    frames = [load_results(p) for p in paths.values()]
    both = pd.concat(frames, ignore_index=True)
    sd = both.groupby(["params", "tokens", "flops"])["loss"].std().dropna()
    best = [f.groupby("flops")["loss"].min() for f in frames]
    best_sd = pd.concat(best, axis=1).std(axis=1)
    losses = train_losses(summaries)
    seeds = f"{len(paths)} seeds"
    whole = [whole_split_loss(p.parent, data, context_length) for p in summaries.values()]
    return [Result("sweep runs", "loss_sd_median", float(sd.median()), f"nats, over {len(sd)} points, {seeds}",
                   extra={"max": float(sd.max())}),
            Result("sweep runs", "loss_sd_max", float(sd.max()), f"nats, {seeds}"),
            Result("best run per budget", "loss_sd_median", float(best_sd.median()), f"nats, {seeds}",
                   extra={"by_budget": {f"{c:.3g}": float(v) for c, v in best_sd.items()}}),
            Result("train run", "loss_sd", float(np.std(losses, ddof=1)), f"nats, {len(losses)} seeds",
                   extra={"losses": losses}),
            Result("train run", "loss_mean", float(np.mean(losses)), f"nats, {len(losses)} seeds"),
            Result("train run, whole validation split", "loss_sd", float(np.std(whole, ddof=1)),
                   f"nats, {len(whole)} seeds, every window of val.bin", extra={"losses": whole}),
            Result("train run, whole validation split", "loss_mean", float(np.mean(whole)),
                   f"nats, {len(whole)} seeds")]


@dataclass(frozen=True)
class SeedsSettings(BenchSettings):
    params: str = setting("params.yaml", "params file of the sweep, fit and train sections")
    seeds: tuple[int, ...] = setting((0, 1, 2), "sweep and train seeds (first: the pipeline's own)")
    bootstrap: int = setting(200, "bootstrap resamples per fit", at_least=0)


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(SeedsSettings, argv)
    params = read_params(args.params)  # a profile merged onto its base
    own = sweep_section(args.params)["train"].get("seed", 0)
    if params["train"].get("seed", 0) != own:
        usage_error("the train and sweep sections must share one seed (the pipeline's own)")
    if len(args.seeds) < 2 or len(set(args.seeds)) != len(args.seeds) or args.seeds[0] != own:
        usage_error(f"--seeds must start with the pipeline's own seed {own} and name >= 2 distinct seeds")
    if not Path(params["sweep"]["results"]).is_file():
        usage_error(f"{params['sweep']['results']} not found: run `make repro` first")
    paths = {s: Path(params["sweep"]["results"]) if s == own else seed_sweep_results(params, s) for s in args.seeds}
    summaries = {s: train_summary(params, args.params, s) for s in args.seeds}
    cfg = FitConfig(target_flops=tuple(params["scaling_fit"]["target_flops"]), bootstrap=args.bootstrap)
    rows = []
    fits = {s: fit_sweep([path], summaries, cfg) for s, path in paths.items()}
    for s, fit in fits.items():
        rows += fit_rows(f"sweep seed {s}", fit, own)
    rows += spread_rows(fits, summaries, own)
    label = "sweep mean of seeds " + ",".join(map(str, args.seeds))
    rows += fit_rows(label, fit_sweep(list(paths.values()), summaries, cfg), own)
    rows += noise_rows(paths, summaries, params["train"]["data"], params["train"]["model"]["context_length"])
    for s, path in paths.items():
        rows += left_out_budget_rows(f"sweep seed {s}", path, cfg)
    for r in rows:
        print(f"{r.name:<30}{r.metric:<34}{r.value:>10.4g}  {r.unit}")
    command = "python -m bench.experiments.scaling_seeds --seeds " + " ".join(map(str, args.seeds))
    return finish(AREA, rows, args, command, show=False)


if __name__ == "__main__":
    sys.exit(main())
