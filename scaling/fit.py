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
input. Defaults come from the ``scaling_fit:`` section of ./params.yaml when there is one, then flags.
OPENBLAS_NUM_THREADS=1 is set in scaling/__init__.py, before numpy/scipy load.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from scaling.data import format_summary, load_results, write_headline, write_outputs
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

__all__ = ["BudgetFit", "IsoflopFit", "LossLaw", "PowerLaw", "bootstrap_isoflop", "fit_budget", "fit_isoflop",
           "fit_loss_law", "fit_power_law", "isoflop_stats", "HUBER_DELTA", "START_GRID", "ParametricLaw",
           "bootstrap_parametric", "fit_parametric", "huber_objective", "parametric_stats", "CI_PERCENTILES",
           "run_fits", "build_parser", "main"]

CI_PERCENTILES = (2.5, 97.5)


# ---------------------------------------------------------------- report, outputs, CLI
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
        point = isoflop_stats(iso, targets)
        samples, skipped = bootstrap_isoflop(n, c, loss, targets, n_boot, iso_rng)
        section: dict[str, object] = {
            "method": "Hoffmann et al. 2022 approach 2: per-budget parabola in ln N, power laws in C",
            "loss_model": "L_opt(C) = E + A*C^-gamma, least squares on per-budget minimum losses",
            "budgets": [asdict(b) for b in iso.budgets], "bootstrap": {"used": n_boot - skipped, "skipped": skipped}}
        for variant in ("parabola", "grid_minimum"):
            section[variant] = {name: {q: _stat(point, samples, f"{variant}.{name}.{q}") for q in qs} for name, qs in
                                (("n_opt", ("coef", "exponent")), ("d_opt", ("coef", "exponent")),
                                 ("loss", ("E", "A", "gamma")))}
        predictions += _prediction_rows("isoflop", targets, point, samples, "parabola.")
        predictions += _prediction_rows("isoflop_grid", targets, point, samples, "grid_minimum.")
        report["isoflop"] = section
    if method in ("parametric", "both"):
        law, theta, objective = fit_parametric(n, d, loss)
        point = parametric_stats(law, targets)
        samples, skipped = bootstrap_parametric(n, d, loss, theta, targets, n_boot, par_rng)
        section = {"method": "Besiroglu et al. 2024 approach 3: Huber(delta) on log L, L-BFGS-B from a grid",
                   "huber_delta": HUBER_DELTA, "objective": objective,
                   "max_rel_loss_error": float(np.max(np.abs(law.loss(n, d) / loss - 1))),
                   "bootstrap": {"used": n_boot - skipped, "skipped": skipped}}
        section |= {k: _stat(point, samples, k) for k in ("E", "A", "B", "alpha", "beta", "G")}
        section |= {name: {q: _stat(point, samples, f"{name}.{q}") for q in ("coef", "exponent")}
                    for name in ("n_opt", "d_opt")}
        predictions += _prediction_rows("parametric", targets, point, samples, "")
        report["parametric"] = section
    report["predictions"] = predictions
    return report, iso, law


DEFAULTS = {"target_flops": [1e23, 1e24], "method": "both", "bootstrap": 200, "seed": 0}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m scaling.fit", description=__doc__.split("\n\n")[0],
                                     epilog="Defaults come from the `scaling_fit:` section of --params when present.")
    parser.add_argument("results", type=Path, help="results CSV, or JSON list of objects (scaling/data.py columns)")
    parser.add_argument("--target-flops", type=float, nargs="+",
                        help="compute budgets to predict at (default 1e23 1e24)")
    parser.add_argument("--method", choices=("isoflop", "parametric", "both"), help="which fits to run (default both)")
    parser.add_argument("--bootstrap", type=int, help="bootstrap resamples for CIs; 0 = none (default 200)")
    parser.add_argument("--seed", type=int, help="bootstrap seed (default 0)")
    parser.add_argument("--out-dir", type=Path, help="output folder (default <input stem>_fit/ beside the input)")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    parser.add_argument("--metrics", type=Path, help="also write the headline predictions here (for dvc metrics)")
    parser.add_argument("--params", type=Path, default=Path("params.yaml"), help="params file (default params.yaml)")
    return parser


def _options(args: argparse.Namespace) -> dict:
    """Built-in defaults < ``scaling_fit:`` section of --params < flags; raises ValueError naming bad entries."""
    section = {}
    if args.params.is_file():
        import yaml

        try:
            section = (yaml.safe_load(args.params.read_text(encoding="utf-8")) or {}).get("scaling_fit") or {}
        except (yaml.YAMLError, AttributeError) as exc:
            raise ValueError(f"{args.params}: not a YAML mapping ({type(exc).__name__})") from None
        unknown = sorted(set(section) - set(DEFAULTS)) if isinstance(section, dict) else ["<not a mapping>"]
        if unknown:
            raise ValueError(f"{args.params}: scaling_fit: unknown keys {unknown} (known: {sorted(DEFAULTS)})")
    opts = {k: getattr(args, k) if getattr(args, k) is not None else section.get(k, v) for k, v in DEFAULTS.items()}
    targets = np.atleast_1d(np.asarray(opts["target_flops"], dtype=float))
    if not np.all(np.isfinite(targets) & (targets > 0)):
        raise ValueError(f"--target-flops must be positive and finite, got {targets.tolist()}")
    if opts["method"] not in ("isoflop", "parametric", "both"):
        raise ValueError(f"method must be isoflop, parametric or both, got {opts['method']!r}")
    if int(opts["bootstrap"]) < 0:
        raise ValueError(f"--bootstrap must be >= 0, got {opts['bootstrap']}")
    return opts | {"target_flops": targets, "bootstrap": int(opts["bootstrap"]), "seed": int(opts["seed"])}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        opts = _options(args)
        start = time.perf_counter()
        frame = load_results(args.results)
        try:
            report, iso, law = run_fits(frame, opts["target_flops"], opts["method"], opts["bootstrap"], opts["seed"])
        except ValueError as exc:
            raise ValueError(f"{args.results}: {exc}") from None
        seconds = time.perf_counter() - start
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out_dir = args.out_dir or args.results.with_name(f"{args.results.stem}_fit")
    write_outputs({"input": str(args.results)} | report, out_dir)
    if args.metrics:
        write_headline(report, args.metrics)
    plots = []
    if not args.no_plots:
        from scaling import plots as plotting

        plots = plotting.plot_all(frame, iso, law, opts["target_flops"], out_dir)
    print(format_summary(report))
    print(f"fit: {len(frame)} runs, method {opts['method']}, bootstrap {opts['bootstrap']} in {seconds:.2f} s "
          f"-> {out_dir}/ (fit.json, predictions.csv{''.join(', ' + p.name for p in plots)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
