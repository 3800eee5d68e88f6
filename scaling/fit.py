"""Scaling-law fits from a results table, with bootstrap CIs: ``run_fits`` and ``python -m scaling.fit``.

The math lives in two modules, re-exported here (``from scaling.fit import fit_parametric`` works):
- scaling/isoflop.py — IsoFLOP profiles, Hoffmann et al. 2022 (Chinchilla) approach 2: a parabola in ln N per
  compute budget, power laws N_opt(C), D_opt(C) through the vertices (or each budget's best run, "grid minimum"),
  and L_opt(C) = E + A·C^(−γ) for the loss.
- scaling/parametric.py — L(N, D) = E + A/N^α + B/D^β, approach 3 as replicated by Besiroglu et al. 2024: Huber
  loss on log L, L-BFGS-B from the best points of a 4500-start grid.
CIs: bootstrap percentiles 2.5/97.5 (runs resampled within each budget for IsoFLOP, rows for the parametric fit).

CLI: ``python -m scaling.fit results.csv --target-flops 1e23 1e24`` writes fit.json, predictions.csv and PNGs
(scaling/plots.py) to --out-dir (default ``<stem>_fit/`` beside the input); exit 2 with one ``error:`` line on bad
input. Defaults: FitConfig < the ``scaling_fit:`` section of --params (params.yaml; an unknown key is an error) <
flags. ``--metrics metrics/fit.json`` writes the headline prediction there (scaling/data.py ``headline``) and every
prediction to metrics/details/fit.json.
OPENBLAS_NUM_THREADS=1 is set in scaling/__init__.py, before numpy/scipy load.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from scaling.data import format_summary, load_results, write_fit_metrics, write_outputs
from scaling.isoflop import (
    BudgetFit,
    IsoflopFit,
    LossLaw,
    PowerLaw,
    bootstrap_isoflop,
    fit_budget,
    fit_isoflop,
    fit_loss_law,
    fit_power_law,
    isoflop_stats,
)
from scaling.parametric import (
    HUBER_DELTA,
    START_GRID,
    ParametricLaw,
    bootstrap_parametric,
    fit_parametric,
    huber_objective,
    parametric_stats,
)
from scaling.plots import plot_all
from workbench.params import build_config_parser, parse_config

__all__ = ["BudgetFit", "IsoflopFit", "LossLaw", "PowerLaw", "bootstrap_isoflop", "fit_budget", "fit_isoflop",
           "fit_loss_law", "fit_power_law", "isoflop_stats", "HUBER_DELTA", "START_GRID", "ParametricLaw",
           "bootstrap_parametric", "fit_parametric", "huber_objective", "parametric_stats", "CI_PERCENTILES",
           "run_fits", "FitConfig", "build_parser", "main"]

CI_PERCENTILES = (2.5, 97.5)
METHODS = ("isoflop", "parametric", "both")


# ---------------------------------------------------------------- report
def _stat(point: dict[str, np.ndarray], samples: dict[str, np.ndarray], key: str) -> dict[str, object]:
    """{"value", "ci95": [lo, hi] (bootstrap percentiles), "se" (bootstrap standard deviation)}."""
    if len(samples.get(key, ())) == 0:
        lo = hi = se = np.full_like(point[key], np.nan)
    else:
        lo, hi = np.percentile(samples[key], CI_PERCENTILES, axis=0)
        with np.errstate(over="ignore"):  # resamples far off (A ~ 1e146) give an infinite SE, which is the truth
            se = samples[key].std(axis=0, ddof=1) if len(samples[key]) > 1 else np.full_like(point[key], np.nan)
    return {"value": point[key], "ci95": [lo, hi], "se": se}


def _prediction_rows(method: str, targets: np.ndarray, point: dict, samples: dict, prefix: str) -> list[dict]:
    """One predictions.csv row per target budget: n_opt, d_opt, tokens_per_param, loss, with _lo/_hi CIs."""
    stats = {q: _stat(point, samples, f"{prefix}pred.{q}") for q in ("n_opt", "d_opt", "loss")}

    def cells(q: str, i: int) -> dict[str, float]:
        return {q: stats[q]["value"][i], f"{q}_lo": stats[q]["ci95"][0][i], f"{q}_hi": stats[q]["ci95"][1][i]}

    return [{"method": method, "target_flops": flops} | cells("n_opt", i) | cells("d_opt", i)
            | {"tokens_per_param": stats["d_opt"]["value"][i] / stats["n_opt"]["value"][i]} | cells("loss", i)
            for i, flops in enumerate(targets)]


def _isoflop_section(iso: IsoflopFit, n, c, loss, targets: np.ndarray, n_boot: int,
                     rng: np.random.Generator) -> tuple[dict, list[dict]]:
    """fit.json's ``isoflop`` section and the prediction rows of both variants (parabola, grid minimum)."""
    point = isoflop_stats(iso, targets)
    samples, skipped = bootstrap_isoflop(n, c, loss, targets, n_boot, rng)
    section: dict[str, object] = {
        "method": "Hoffmann et al. 2022 approach 2: per-budget parabola in ln N, power laws in C",
        "loss_model": "L_opt(C) = E + A*C^-gamma, least squares on per-budget minimum losses",
        "budgets": [asdict(b) for b in iso.budgets], "bootstrap": {"used": n_boot - skipped, "skipped": skipped}}
    for variant in ("parabola", "grid_minimum"):
        section[variant] = {name: {q: _stat(point, samples, f"{variant}.{name}.{q}") for q in qs} for name, qs in
                            (("n_opt", ("coef", "exponent")), ("d_opt", ("coef", "exponent")),
                             ("loss", ("E", "A", "gamma")))}
    rows = (_prediction_rows("isoflop", targets, point, samples, "parabola.")
            + _prediction_rows("isoflop_grid", targets, point, samples, "grid_minimum."))
    return section, rows


def _parametric_section(n, d, loss, targets: np.ndarray, n_boot: int,
                        rng: np.random.Generator) -> tuple[ParametricLaw, dict, list[dict]]:
    """The fitted law, fit.json's ``parametric`` section and its prediction rows."""
    law, theta, objective = fit_parametric(n, d, loss)
    point = parametric_stats(law, targets)
    samples, skipped = bootstrap_parametric(n, d, loss, theta, targets, n_boot, rng)
    section = {"method": "Besiroglu et al. 2024 approach 3: Huber(delta) on log L, L-BFGS-B from a grid",
               "huber_delta": HUBER_DELTA, "objective": objective,
               "max_rel_loss_error": float(np.max(np.abs(law.loss(n, d) / loss - 1))),
               "bootstrap": {"used": n_boot - skipped, "skipped": skipped}}
    section |= {k: _stat(point, samples, k) for k in ("E", "A", "B", "alpha", "beta", "G")}
    section |= {name: {q: _stat(point, samples, f"{name}.{q}") for q in ("coef", "exponent")}
                for name in ("n_opt", "d_opt")}
    return law, section, _prediction_rows("parametric", targets, point, samples, "")


def run_fits(frame: pd.DataFrame, targets: np.ndarray, method: str = "both", n_boot: int = 200,
             seed: int = 0) -> tuple[dict, IsoflopFit | None, ParametricLaw | None]:
    """Fit, bootstrap and predict at ``targets``; returns (report for fit.json, IsoFLOP fit, parametric law)."""
    targets = np.asarray(targets, dtype=float)
    n, d, c, loss = (frame[k].to_numpy(dtype=float) for k in ("params", "tokens", "flops", "loss"))
    iso_rng, par_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
    report: dict[str, object] = {"n_runs": len(frame), "target_flops": targets, "bootstrap": n_boot, "seed": seed,
                                 "ci_percentiles": CI_PERCENTILES}
    predictions: list[dict] = []
    iso = law = None
    if method in ("isoflop", "both"):
        try:
            iso = fit_isoflop(n, c, loss)
        except ValueError as exc:
            if method == "isoflop":
                raise
            # e.g. a budget whose runs do not bracket the optimum: report it, keep the parametric fit
            print(f"warning: IsoFLOP fit skipped: {exc}", file=sys.stderr)
            report["isoflop_error"] = str(exc)
    if iso is not None:
        report["isoflop"], rows = _isoflop_section(iso, n, c, loss, targets, n_boot, iso_rng)
        predictions += rows
    if method in ("parametric", "both"):
        law, report["parametric"], rows = _parametric_section(n, d, loss, targets, n_boot, par_rng)
        predictions += rows
    report["predictions"] = predictions
    return report, iso, law


# ---------------------------------------------------------------- CLI
@dataclass(frozen=True)
class FitConfig:
    """The ``scaling_fit:`` section of params.yaml; every field is also a flag."""

    target_flops: tuple[float, ...] = field(default=(1e23, 1e24), metadata={"help": "compute budgets to predict at"})
    method: str = field(default="both", metadata={"help": "which fits to run: isoflop, parametric or both"})
    bootstrap: int = field(default=200, metadata={"help": "bootstrap resamples for CIs; 0 = none"})
    seed: int = field(default=0, metadata={"help": "bootstrap seed"})

    def __post_init__(self) -> None:
        try:
            targets = tuple(float(c) for c in np.atleast_1d(self.target_flops))  # YAML 1.1 reads 1e23 as a string
        except (TypeError, ValueError):
            raise ValueError(f"target_flops must be numbers, got {self.target_flops!r}") from None
        if not targets or not all(np.isfinite(c) and c > 0 for c in targets):
            raise ValueError(f"--target-flops must be positive and finite, got {list(targets)}")
        if self.method not in METHODS:
            raise ValueError(f"method must be isoflop, parametric or both, got {self.method!r}")
        if int(self.bootstrap) < 0:
            raise ValueError(f"--bootstrap must be >= 0, got {self.bootstrap}")
        object.__setattr__(self, "target_flops", targets)
        object.__setattr__(self, "bootstrap", int(self.bootstrap))
        object.__setattr__(self, "seed", int(self.seed))


def build_parser() -> argparse.ArgumentParser:
    """The flags of FitConfig (defaults: the ``scaling_fit:`` section of --params) plus the files in and out."""
    parser = build_config_parser(FitConfig, "scaling_fit", prog="python -m scaling.fit",
                                 description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="results CSV, or JSON list of objects (scaling/data.py columns)")
    parser.add_argument("--out-dir", type=Path, help="output folder (default <input stem>_fit/ beside the input)")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    parser.add_argument("--metrics", type=Path, help="also write the headline predictions here (for dvc metrics; "
                                                     "every prediction goes to details/ beside it)")
    return parser


def fit_file(results: Path, cfg: FitConfig) -> tuple[pd.DataFrame, dict, IsoflopFit | None, ParametricLaw | None]:
    """Load the results table and run the fits; a ValueError names the file."""
    frame = load_results(results)
    try:
        report, iso, law = run_fits(frame, np.asarray(cfg.target_flops), cfg.method, cfg.bootstrap, cfg.seed)
    except ValueError as exc:
        raise ValueError(f"{results}: {exc}") from None
    return frame, report, iso, law


def main(argv: list[str] | None = None) -> int:
    try:
        cfg, args = parse_config(FitConfig, "scaling_fit", argv, parser=build_parser())
        start = time.perf_counter()
        frame, report, iso, law = fit_file(args.results, cfg)
        seconds = time.perf_counter() - start
    except ValueError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    out_dir = args.out_dir or args.results.with_name(f"{args.results.stem}_fit")
    write_outputs({"input": str(args.results)} | report, out_dir)
    if args.metrics:
        write_fit_metrics(report, args.metrics)
    plots = [] if args.no_plots else plot_all(frame, iso, law, np.asarray(cfg.target_flops), out_dir)
    print(format_summary(report))
    print(f"fit: {len(frame)} runs, method {cfg.method}, bootstrap {cfg.bootstrap} in {seconds:.2f} s "
          f"-> {out_dir}/ (fit.json, predictions.csv{''.join(', ' + p.name for p in plots)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
