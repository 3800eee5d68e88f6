"""Scaling-law fits from a results table: ``python -m scaling.fit results.csv``.

Every law of scaling/laws/ (IsoFLOP parabola and grid minimum, Hoffmann et al. 2022 approach 2; the parametric
L(N, D), approach 3 as Besiroglu et al. 2024 fitted it; the over-training law of Gadre et al. 2024; the
data-constrained law of Muennighoff et al. 2023, where the runs' unique tokens are known) is fitted,
bootstrapped and checked (scaling/select.py), one is selected by its rolling-origin error (``--method auto``, the
default everywhere), and each prediction carries a 95 % prediction interval calibrated on the sweep's own
extrapolation errors (scaling/intervals.py). The library call is scaling/predict.py ``fit_and_predict``.

Writes fit.json, predictions.csv (every prediction, with ``valid`` and ``selected``) and PNGs (scaling/plots.py) to
--out-dir (default ``./<input stem>_fit/``, in the working directory, never beside the input). ``--holdout runs.csv``
(N, D or C, loss; the results' column names and --columns; optional run_id) and ``--holdout-summary summary.json``
(a ``python -m model.train`` run, N and C counted as the sweep counted its runs) add held-out runs: every law predicts
them from N, D and C alone, and holdout.csv and fit.json's ``holdout`` put the measured loss beside each prediction.
Defaults: FitConfig < the ``scaling_fit:`` section of --params (params.yaml; an unknown key is an error) < flags.
Exit status: 2 and one ``error:`` line on bad input; 3 when no law is valid (one line says so and nothing is
selected), or 0 with ``--allow-no-valid`` (how the ``fit`` stage of dvc.yaml records it without breaking
``dvc repro``: fit.json's selection is then empty and reports/summary.md says so).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from scaling.data import (
    load_groups,
    load_holdout,
    load_many,
    load_summary_holdout,
    parse_columns,
    parse_where,
    results_paths,
    sweep_counting,
)
from scaling.next_runs import TOP, fit_suggestions
from scaling.plots import plot_all
from scaling.predict import FitResult, fit_and_predict, rolling_errors
from scaling.report import format_summary, selection_line, write_fit_metrics, write_outputs
from scaling.settings import FitSettings
from workbench.files import write_text
from workbench.params import add_config_flags, build_config_parser, config_from_args, parse_config, setting
from workbench.stage_cli import optional_path

NO_VALID_LAW = 3
SUGGEST_DISTANCE = 4.0  # default cap of the "train next" suggestions: 4x the sweep's largest budget


@dataclass(frozen=True)
class FitConfig(FitSettings):
    """The ``scaling_fit:`` section of params.yaml; every field is also a flag."""

    SECTION = "scaling_fit"

    drop_highest_loss: int = setting(0, "outlier rule, off at 0: leave out the k highest-loss runs before fitting "
                                        "(Epoch's Chinchilla replication dropped 5); the runs left out are listed in "
                                        "fit.json", at_least=0)


@dataclass(frozen=True)
class FitFiles:
    """The files in and out of a fit."""

    results: tuple[str, ...] = setting((), "results CSV, or JSON list of objects (scaling/data.py columns); several "
                                           "files (the same sweep under other seeds) are fitted as one, repeats of one "
                                           "N, D and C averaged", positional=True)
    out_dir: str | None = setting(None, "output folder (none: ./<results stem>_fit, in the working directory)")
    holdout: str | None = setting(None, "held-out runs to predict: CSV or JSON with N, D (or C), loss and optionally "
                                        "run_id (the results' column names)")
    holdout_summary: str | None = setting(None, "a python -m model.train summary.json to predict as a held-out run, "
                                                "N and C counted as the sweep counted its runs")
    allow_no_valid: bool = setting(False, "exit 0 when no law is valid (the outputs say so): for pipelines such as "
                                          "dvc repro")
    plots: bool = setting(True, "write the PNG plots")
    metrics: str | None = setting(None, "also write the headline predictions here (for dvc metrics; every "
                                        "prediction goes to details/ beside it)")


def build_parser() -> argparse.ArgumentParser:
    """The flags of FitConfig (defaults: the ``scaling_fit:`` section of --params) plus the files in and out."""
    parser = build_config_parser(FitConfig, "scaling_fit", prog="python -m scaling.fit",
                                 description=__doc__.split("\n\n")[0])
    add_config_flags(parser, FitFiles, bool_switches=True)
    return parser


def drop_highest_loss(frame: pd.DataFrame, k: int) -> tuple[pd.DataFrame, dict | None]:
    """The frame without its k highest-loss runs, and what was left out (None when k is 0)."""
    if k == 0:
        return frame, None
    if k >= len(frame):
        raise ValueError(f"--drop-highest-loss {k} would leave none of the {len(frame)} runs")
    worst = frame["loss"].nlargest(k).index
    dropped = frame.loc[worst, ["params", "tokens", "flops", "loss"]].to_dict("records")
    return frame.drop(index=worst).reset_index(drop=True), {"rule": f"drop the {k} highest-loss runs",
                                                            "dropped": dropped}


def read_holdout(holdout: Path | None, summary: Path | None, frame: pd.DataFrame,
                 columns: dict[str, str]) -> tuple[pd.DataFrame | None, dict | None]:
    """The held-out runs of --holdout and --holdout-summary (None when neither is given) and, with a summary, how
    its N and C were counted."""
    parts, counting = [], None
    if holdout is not None:
        parts.append(load_holdout(holdout, columns))
    if summary is not None:
        counting = sweep_counting(frame)
        parts.append(load_summary_holdout(summary, counting))
    return (pd.concat(parts, ignore_index=True) if parts else None), counting


def fit_files(results: list[Path], cfg: FitConfig, holdout: Path | None = None,
              holdout_summary: Path | None = None) -> tuple[pd.DataFrame, FitResult]:
    """Load the results and the held-out runs, then ``fit_and_predict``; a ValueError names the file."""
    frame = load_many(results, parse_columns(cfg.columns), parse_where(cfg.where))
    return fit_frame(frame, results, cfg, holdout, holdout_summary)


def fit_groups(results: list[Path], cfg: FitConfig, holdout: Path | None = None,
               holdout_summary: Path | None = None) -> dict[str, tuple[pd.DataFrame, FitResult]]:
    """--by: {value: (its runs, its fit)} for each value of the column, each fitted on its own."""
    groups = load_groups(results, cfg.by, parse_columns(cfg.columns), parse_where(cfg.where))
    return {name: fit_frame(frame, results, cfg, holdout, holdout_summary) for name, frame in groups.items()}


def fit_frame(frame: pd.DataFrame, results: list[Path], cfg: FitConfig, holdout: Path | None = None,
              holdout_summary: Path | None = None) -> tuple[pd.DataFrame, FitResult]:
    """``fit_and_predict`` on loaded runs, with the held-out runs and the outlier rule."""
    columns = parse_columns(cfg.columns)
    notes = list(frame.attrs.get("notes", []))
    frame, outliers = drop_highest_loss(frame, cfg.drop_highest_loss)
    held, counting = read_holdout(holdout, holdout_summary, frame, columns)
    result = fit_and_predict(frame, cfg.target_flops, cfg.method, cfg.bootstrap, cfg.seed, held)
    report = result.report
    report["input"] = str(results[0]) if len(results) == 1 else [str(p) for p in results]
    report["notes"] = notes
    if outliers is not None:
        report["outliers"] = outliers
        runs = ", ".join(f"N={r['params']:.3g} D={r['tokens']:.3g} loss={r['loss']:.4g}" for r in outliers["dropped"])
        notes.append(f"outliers ({outliers['rule']}, left out of every fit): {runs}")
    if counting is not None:
        report["holdout"]["counting"] = counting
    return frame, result


def train_next(result: FitResult, cfg: FitConfig) -> list[dict]:
    """When the selected law's interval at a target is wider than the loss, the runs expected to narrow it most
    (scaling/next_runs.py), within --suggest-flops."""
    report = result.report
    method = report["selection"]["method"]
    wide = [r for r in report["predictions"] if r["method"] == method and r["valid"] and
            np.isfinite(r["loss_hi"] - r["loss_lo"]) and r["loss_hi"] - r["loss_lo"] > r["loss"]]
    if not wide or cfg.bootstrap < 3:
        return []
    fit = result.fits[method]
    max_c = float(result.runs.c.max())
    out = []
    for row in wide:
        out += [{"target_flops": row["target_flops"]} | s for s in fit_suggestions(
            fit.law, result.runs, fit.fitted, rolling_errors(report, method), fit.residual_sd, row["target_flops"],
            cfg.suggest_flops or SUGGEST_DISTANCE * max_c, cfg.bootstrap, cfg.seed)]
    return out


def next_run_lines(suggestions: list[dict]) -> list[str]:
    lines, seen = [], set()
    for s in suggestions:
        if s["target_flops"] in seen:
            continue
        seen.add(s["target_flops"])
        lines.append(f"train next for C={s['target_flops']:.3g}: N={s['n']:.3g} D={s['d']:.3g} (C={s['flops']:.3g}) "
                     f"is expected to narrow the interval from +-{s['now_halfwidth_log']:.3f} to "
                     f"+-{s['halfwidth_log']:.3f} in ln L (next_runs.csv lists {TOP})")
    return lines


def main(argv: list[str] | None = None) -> int:
    try:
        cfg, args = parse_config(FitConfig, "scaling_fit", argv, parser=build_parser())
        files = config_from_args(FitFiles, args)
        results = results_paths(files.results, "results CSV/JSON files")
        start = time.perf_counter()
        if cfg.by:
            fitted = fit_groups(results, cfg, optional_path(files.holdout), optional_path(files.holdout_summary))
        else:
            fitted = {"": fit_files(results, cfg, optional_path(files.holdout), optional_path(files.holdout_summary))}
        seconds = time.perf_counter() - start
    except ValueError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    out_dir = Path(files.out_dir) if files.out_dir else Path(f"{results[0].stem}_fit")
    status = 0
    for name, (frame, result) in fitted.items():
        if name:
            print(f"== {cfg.by}={name} ==")
        status = max(status, write_and_print(frame, result, cfg, files, out_dir / name if name else out_dir, seconds))
    return status


def write_and_print(frame: pd.DataFrame, result: FitResult, cfg: FitConfig, files: FitFiles, out_dir: Path,
                    seconds: float) -> int:
    """One fit's files, plots, summary and "train next" lines; its exit status."""
    report = result.report
    write_outputs(report, out_dir)
    if files.metrics:
        write_fit_metrics(report, files.metrics)
    plots = plot_all(frame, result, np.asarray(report["target_flops"]), out_dir) if files.plots else []
    suggestions = train_next(result, cfg)
    if suggestions:
        write_text(out_dir / "next_runs.csv", pd.DataFrame(suggestions).to_csv(index=False))
    print("\n".join([format_summary(report)] + next_run_lines(suggestions)))
    outputs = ["fit.json", "predictions.csv"] + (["holdout.csv"] if "holdout" in report else []) + \
        (["next_runs.csv"] if suggestions else []) + [p.name for p in plots]
    print(f"fit: {len(frame)} runs, method {cfg.method}, bootstrap {cfg.bootstrap} in {seconds:.2f} s "
          f"-> {out_dir}/ ({', '.join(outputs)})")
    if report["selection"]["method"] is None:
        print(f"{'warning' if files.allow_no_valid else 'error'}: {selection_line(report)}", file=sys.stderr)
        return 0 if files.allow_no_valid else NO_VALID_LAW
    return 0


if __name__ == "__main__":
    sys.exit(main())
