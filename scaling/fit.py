"""Scaling-law fits from a results table, with bootstrap CIs, validity checks and held-out predictions: ``run_fits``
and ``python -m scaling.fit``.

The math lives in its own modules, re-exported here (``from scaling.fit import fit_parametric`` works):
- scaling/isoflop.py — IsoFLOP profiles, Hoffmann et al. 2022 (Chinchilla) approach 2: a parabola in ln N per
  compute budget, power laws N_opt(C), D_opt(C) through the vertices (or each budget's best run, "grid minimum"),
  and L_opt(C) = E + A·C^(−γ) for the loss.
- scaling/parametric.py — L(N, D) = E + A/N^α + B/D^β, approach 3 as replicated by Besiroglu et al. 2024: Huber
  loss on log L, L-BFGS-B from the best points of a 4500-start grid.
- scaling/gadre.py — the over-training-aware law of Gadre et al. 2024, L(C, M) = E + (a·M^η + b·M^(−η))·C^(−η)
  with M = D/N: least squares in loss.
- scaling/frontier.py — whether the best loss per budget falls faster at the larger budgets (a sweep still in a
  transient, which no law here can follow); fit.json's ``frontier`` and a summary line.
- scaling/validate.py — what each method predicts for a run, the validity checks (a fit is invalid with fewer than
  3 budgets or a vertex outside its budget's sampled N; a parameter at the optimizer's bounds is flagged; a
  leave-the-largest-budget-out miss beyond its prediction interval voids it under --strict); scaling/rolling.py —
  ``--method auto``: the valid method with the smallest rolling-origin error at >= 4x the compute fitted.
CIs: bootstrap percentiles 2.5/97.5 (runs resampled within each budget for IsoFLOP, rows for the laws in N, D).

CLI: ``python -m scaling.fit results.csv --target-flops 1e23 1e24`` writes fit.json, predictions.csv (every
prediction, with ``valid`` and ``selected``) and PNGs (scaling/plots.py) to --out-dir (default ``./<input
stem>_fit/``, in the working directory, never beside the input); exit 2 with one ``error:`` line on bad input.
``--holdout runs.csv`` (N, D or C, loss; the results' column aliases; optional run_id) and ``--holdout-summary
summary.json`` (a ``python -m model.train`` run, N and C counted as the sweep counted its runs) add held-out runs:
every method predicts them from N, D and C alone, and holdout.csv and fit.json's ``holdout`` hold the measured loss
beside each prediction. Defaults: FitConfig < the ``scaling_fit:`` section of --params (params.yaml; an unknown key
is an error) < flags; ``--help`` shows the values a run will use. ``--metrics metrics/fit.json`` writes the headline
(scaling/data.py ``headline``) there and every prediction to metrics/details/fit.json.
OPENBLAS_NUM_THREADS=1 is set in scaling/__init__.py, before numpy/scipy load.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from scaling.data import (
    format_summary,
    holdout_report,
    load_holdout,
    load_many,
    load_summary_holdout,
    parse_columns,
    sweep_counting,
    write_fit_metrics,
    write_outputs,
)
from scaling.frontier import frontier_trend
from scaling.gadre import GadreLaw, bootstrap_gadre, fit_gadre, gadre_stats
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
from scaling.rolling import rolling_origin
from scaling.validate import (
    CI_PERCENTILES,
    FAMILY_METHODS,
    FamilyFit,
    Runs,
    all_run_predictions,
    ci95,
    fit_family,
    leave_largest_out,
    select_method,
    validity,
)
from workbench.params import build_config_parser, parse_config

__all__ = ["BudgetFit", "IsoflopFit", "LossLaw", "PowerLaw", "bootstrap_isoflop", "fit_budget", "fit_isoflop",
           "fit_loss_law", "fit_power_law", "isoflop_stats", "HUBER_DELTA", "START_GRID", "ParametricLaw",
           "bootstrap_parametric", "fit_parametric", "huber_objective", "parametric_stats", "GadreLaw",
           "bootstrap_gadre", "fit_gadre", "gadre_stats", "CI_PERCENTILES", "run_fits", "FitConfig", "build_parser",
           "main"]

# --method -> the fit families it runs; auto runs them all and picks one by leave-the-largest-budget-out error
FAMILIES = {"isoflop": ("isoflop",), "parametric": ("parametric",), "gadre": ("gadre",),
            "both": ("isoflop", "parametric"), "auto": ("isoflop", "parametric", "gadre")}
METHODS = tuple(FAMILIES)
FAMILY_NAMES = {"isoflop": "IsoFLOP", "parametric": "parametric", "gadre": "Gadre"}


# ---------------------------------------------------------------- report
def _stat(point: dict[str, np.ndarray], samples: dict[str, np.ndarray], key: str) -> dict[str, object]:
    """{"value", "ci95": [lo, hi] (bootstrap percentiles), "se" (bootstrap standard deviation)}; resamples where
    the quantity is undefined (a Gadre law without an optimum) are left out of its CI and SE."""
    ci = ci95(samples, key)
    if ci is None:
        lo = hi = se = np.full_like(point[key], np.nan)
    else:
        lo, hi = ci
        values = samples[key]
        with np.errstate(over="ignore", invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # A ~ 1e146 gives an infinite SE, which is the truth
            se = np.nanstd(values, axis=0, ddof=1) if len(values) > 1 else np.full_like(point[key], np.nan)
    return {"value": point[key], "ci95": [lo, hi], "se": se}


def _prediction_rows(method: str, targets: np.ndarray, point: dict, samples: dict, prefix: str) -> list[dict]:
    """One predictions.csv row per target budget: n_opt, d_opt, tokens_per_param, loss, with _lo/_hi CIs."""
    stats = {q: _stat(point, samples, f"{prefix}pred.{q}") for q in ("n_opt", "d_opt", "loss")}

    def cells(q: str, i: int) -> dict[str, float]:
        return {q: stats[q]["value"][i], f"{q}_lo": stats[q]["ci95"][0][i], f"{q}_hi": stats[q]["ci95"][1][i]}

    with np.errstate(divide="ignore", invalid="ignore"):
        return [{"method": method, "target_flops": flops} | cells("n_opt", i) | cells("d_opt", i)
                | {"tokens_per_param": stats["d_opt"]["value"][i] / stats["n_opt"]["value"][i]} | cells("loss", i)
                for i, flops in enumerate(targets)]


def _isoflop_section(fit: FamilyFit, n_boot: int, targets: np.ndarray) -> tuple[dict, list[dict]]:
    """fit.json's ``isoflop`` section and the prediction rows of both variants (parabola, grid minimum)."""
    iso, point, samples = fit.model, fit.point, fit.samples
    section: dict[str, object] = {
        "method": "Hoffmann et al. 2022 approach 2: per-budget parabola in ln N, power laws in C",
        "loss_model": "L_opt(C) = E + A*C^-gamma, least squares on per-budget minimum losses",
        "budgets": [asdict(b) for b in iso.budgets], "bootstrap": {"used": n_boot - fit.skipped,
                                                                    "skipped": fit.skipped},
        "skipped_budgets": [{"flops": c, "model_sizes": k} for c, k in iso.skipped_budgets],
        "unbracketed_budgets": [{"flops": c, "why": why} for c, why in iso.unbracketed_budgets]}
    for variant in ("parabola", "grid_minimum"):
        section[variant] = {name: {q: _stat(point, samples, f"{variant}.{name}.{q}") for q in qs} for name, qs in
                            (("n_opt", ("coef", "exponent")), ("d_opt", ("coef", "exponent")),
                             ("loss", ("E", "A", "gamma")))}
    rows = (_prediction_rows("isoflop", targets, point, samples, "parabola.")
            + _prediction_rows("isoflop_grid", targets, point, samples, "grid_minimum."))
    return section, rows


def _law_section(fit: FamilyFit, n, d, loss, n_boot: int, targets: np.ndarray) -> tuple[dict, list[dict]]:
    """fit.json's ``parametric`` or ``gadre`` section and its prediction rows."""
    law, point, samples = fit.model, fit.point, fit.samples
    if fit.family == "parametric":
        section = {"method": "Besiroglu et al. 2024 approach 3: Huber(delta) on log L, L-BFGS-B from a grid",
                   "huber_delta": HUBER_DELTA, "objective": fit.extra["objective"]}
        names = ("E", "A", "B", "alpha", "beta", "G")
    else:
        section = {"method": "Gadre et al. 2024 eq. 4: L(C, M) = E + (a*M^eta + b*M^-eta)*C^-eta, M = D/N, C = 6ND "
                             "(Chinchilla with alpha = beta = 2*eta); least squares in loss",
                   "objective": fit.extra["objective"]}
        names = ("E", "a", "b", "eta", "A", "B", "G")
    with np.errstate(all="ignore"):
        section["max_rel_loss_error"] = float(np.max(np.abs(law.loss(n, d) / loss - 1)))
    section["bootstrap"] = {"used": n_boot - fit.skipped, "skipped": fit.skipped}
    section |= {k: _stat(point, samples, k) for k in names}
    section |= {name: {q: _stat(point, samples, f"{name}.{q}") for q in ("coef", "exponent")}
                for name in ("n_opt", "d_opt")}
    return section, _prediction_rows(fit.family, targets, point, samples, "")


def _fit_families(families: tuple[str, ...], arrays: tuple, targets: np.ndarray, n_boot: int, seed: int,
                  runs: Runs | None, strict: bool) -> tuple[dict[str, FamilyFit], dict[str, str], dict[str, dict]]:
    """Each family's fit on all runs and its leave-the-largest-budget-out check: (fits, errors, lobo by method).
    A failed fit raises when it is the only one asked for (``strict``), else it is reported and the rest go on."""
    n, d, c, loss = arrays
    # bootstrap streams: isoflop, parametric (as before gadre existed), gadre, then the three leave-out refits
    streams = dict(zip(("isoflop", "parametric", "gadre", "lobo_isoflop", "lobo_parametric", "lobo_gadre"),
                       (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(6)), strict=True))
    fits, errors, lobo = {}, {}, {}
    for family in families:
        try:
            fits[family] = fit_family(family, n, d, c, loss, targets, n_boot, streams[family], runs)
        except ValueError as exc:
            if strict:
                raise
            # e.g. a budget whose runs do not bracket the optimum: report it, keep the other fits
            print(f"warning: {FAMILY_NAMES[family]} fit skipped: {exc}", file=sys.stderr)
            errors[family] = str(exc)
            continue
        lobo |= leave_largest_out(family, n, d, c, loss, n_boot, streams[f"lobo_{family}"])
    return fits, errors, lobo


def run_fits(frame: pd.DataFrame, targets: np.ndarray, method: str = "both", n_boot: int = 200, seed: int = 0,
             runs: Runs | None = None, strict: bool = False) -> tuple[dict, dict[str, FamilyFit]]:
    """Fit, bootstrap, predict at ``targets`` (and for ``runs``: the held-out runs' N, D, C, never their loss),
    validate and select; returns (report for fit.json, the fits by family)."""
    targets = np.asarray(targets, dtype=float)
    arrays = n, d, c, loss = tuple(frame[k].to_numpy(dtype=float) for k in ("params", "tokens", "flops", "loss"))
    families = FAMILIES[method]
    report: dict[str, object] = {"n_runs": len(frame), "target_flops": targets, "bootstrap": n_boot, "seed": seed,
                                 "ci_percentiles": CI_PERCENTILES, "method": method}
    fits, errors, lobo = _fit_families(families, arrays, targets, n_boot, seed, runs, strict=len(families) == 1)
    if "isoflop" in errors:
        report["isoflop_error"] = errors["isoflop"]
    predictions: list[dict] = []
    valid: dict[str, dict] = {}
    for family in families:
        fit = fits.get(family)
        valid |= validity(family, fit, errors.get(family), n, c, lobo, strict)
        if fit is None:
            continue
        if family == "isoflop":
            report["isoflop"], rows = _isoflop_section(fit, n_boot, targets)
        else:
            report[family], rows = _law_section(fit, n, d, loss, n_boot, targets)
        predictions += rows
    methods = [m for f in families if f in fits for m in FAMILY_METHODS[f]]
    rolling = rolling_origin(tuple(f for f in families if f in fits), n, d, c, loss) if method == "auto" else None
    selection = select_method(method, methods, valid, lobo, rolling)
    if rolling is not None:
        report["rolling_origin"] = rolling
    for row in predictions:
        row |= {"valid": valid[row["method"]]["valid"], "selected": row["method"] == selection["method"],
                "at_bound": " ".join(valid[row["method"]]["at_bound"])}
    report |= {"validity": valid, "leave_largest_budget_out": lobo, "selection": selection,
               "frontier": frontier_trend(c, loss), "predictions": predictions}
    return report, fits


# ---------------------------------------------------------------- CLI
@dataclass(frozen=True)
class FitConfig:
    """The ``scaling_fit:`` section of params.yaml; every field is also a flag."""

    target_flops: tuple[float, ...] = field(default=(1e23, 1e24), metadata={"help": "compute budgets to predict at"})
    method: str = field(default="both", metadata={
        "help": "which fits to run: isoflop, parametric, gadre, both (isoflop + parametric) or auto (all three, "
                "the valid one that extrapolates best from several origins at >= 4x the compute fitted selected)"})
    bootstrap: int = field(default=200, metadata={"help": "bootstrap resamples for CIs; 0 = none"})
    seed: int = field(default=0, metadata={"help": "bootstrap seed"})
    columns: tuple[str, ...] = field(default=(), metadata={
        "help": "the results' own column names, as KEY=COLUMN pairs (KEY: params, tokens, flops, loss or an alias "
                "such as N, D, C), e.g. params='Model Size' flops='Training FLOP': a published CSV fits unedited"})
    strict: bool = field(default=False, metadata={
        "help": "a leave-the-largest-budget-out miss outside the refit's 95%% CI voids the law (default: a note; "
                "--method auto ranks the laws by that miss either way)"})
    drop_highest_loss: int = field(default=0, metadata={
        "help": "outlier rule, off at 0: leave out the k highest-loss runs before fitting (Epoch's Chinchilla "
                "replication dropped 5); the runs left out are listed in fit.json"})

    def __post_init__(self) -> None:
        try:
            targets = tuple(float(c) for c in np.atleast_1d(self.target_flops))  # YAML 1.1 reads 1e23 as a string
        except (TypeError, ValueError):
            raise ValueError(f"target_flops must be numbers, got {self.target_flops!r}") from None
        if not targets or not all(np.isfinite(c) and c > 0 for c in targets):
            raise ValueError(f"--target-flops must be positive and finite, got {list(targets)}")
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if int(self.bootstrap) < 0:
            raise ValueError(f"--bootstrap must be >= 0, got {self.bootstrap}")
        if not isinstance(self.drop_highest_loss, int) or self.drop_highest_loss < 0:
            raise ValueError(f"--drop-highest-loss must be an int >= 0, got {self.drop_highest_loss!r}")
        parse_columns(self.columns)  # a bad KEY=COLUMN is an error before anything is read
        object.__setattr__(self, "columns", tuple(self.columns))
        object.__setattr__(self, "target_flops", targets)
        object.__setattr__(self, "bootstrap", int(self.bootstrap))
        object.__setattr__(self, "seed", int(self.seed))


def build_parser() -> argparse.ArgumentParser:
    """The flags of FitConfig (defaults: the ``scaling_fit:`` section of --params) plus the files in and out."""
    parser = build_config_parser(FitConfig, "scaling_fit", prog="python -m scaling.fit",
                                 description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, nargs="+",
                        help="results CSV, or JSON list of objects (scaling/data.py columns); several files (the same "
                             "sweep under other seeds) are fitted as one, runs of the same N, D and C averaged")
    parser.add_argument("--out-dir", type=Path, help="output folder (default: ./<results stem>_fit, in the working "
                                                     "directory)")
    parser.add_argument("--holdout", type=Path, help="held-out runs to predict: CSV or JSON with N, D (or C), loss "
                                                     "and optionally run_id (the results' column aliases)")
    parser.add_argument("--holdout-summary", type=Path, help="a python -m model.train summary.json to predict as a "
                                                             "held-out run, N and C counted as the sweep counted "
                                                             "its runs")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    parser.add_argument("--metrics", type=Path, help="also write the headline predictions here (for dvc metrics; "
                                                     "every prediction goes to details/ beside it)")
    return parser


def read_holdout(args: argparse.Namespace, frame: pd.DataFrame) -> tuple[pd.DataFrame | None, dict | None]:
    """The held-out runs of --holdout and --holdout-summary (None when neither is given) and, with a summary, how
    its N and C were counted."""
    parts, counting = [], None
    if args.holdout is not None:
        parts.append(load_holdout(args.holdout))
    if args.holdout_summary is not None:
        counting = sweep_counting(frame)
        parts.append(load_summary_holdout(args.holdout_summary, counting))
    return (pd.concat(parts, ignore_index=True) if parts else None), counting


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


def fit_file(results: Path | list[Path], cfg: FitConfig, args: argparse.Namespace | None = None
             ) -> tuple[pd.DataFrame, dict, dict[str, FamilyFit]]:
    """Load the results (several files: ``load_many``; repeated runs averaged) and the held-out runs, run the fits,
    predict the held-out runs; a ValueError names the file."""
    paths = results if isinstance(results, list) else [results]
    frame = load_many(paths, parse_columns(cfg.columns))
    results = paths[0] if len(paths) == 1 else ", ".join(map(str, paths))
    frame, outliers = drop_highest_loss(frame, cfg.drop_highest_loss)
    holdout, counting = read_holdout(args, frame) if args is not None else (None, None)
    runs = None if holdout is None else tuple(holdout[k].to_numpy(dtype=float) for k in ("params", "tokens", "flops"))
    try:
        report, fits = run_fits(frame, np.asarray(cfg.target_flops), cfg.method, cfg.bootstrap, cfg.seed, runs,
                                cfg.strict)
    except ValueError as exc:
        raise ValueError(f"{results}: {exc}") from None
    if outliers is not None:
        report["outliers"] = outliers
    if holdout is not None:  # the held-out losses are read here, after every prediction was made
        predictions = all_run_predictions(fits)
        report["holdout"] = holdout_report(holdout, predictions, report["selection"]["method"], counting)
    return frame, report, fits


def warn_invalid(report: dict) -> None:
    """One ``warning:`` line per invalid fit, with its reasons."""
    for method, check in report["validity"].items():
        if not check["valid"]:
            print(f"warning: {method} fit invalid, kept out of the predictions: {'; '.join(check['reasons'])}",
                  file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    try:
        cfg, args = parse_config(FitConfig, "scaling_fit", argv, parser=build_parser())
        start = time.perf_counter()
        frame, report, fits = fit_file(args.results, cfg, args)
        seconds = time.perf_counter() - start
    except ValueError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    out_dir = args.out_dir or Path(f"{args.results[0].stem}_fit")
    inputs = [str(p) for p in args.results]
    write_outputs({"input": inputs[0] if len(inputs) == 1 else inputs} | report, out_dir)
    if args.metrics:
        write_fit_metrics(report, args.metrics)
    iso, law = (getattr(fits.get(f), "model", None) for f in ("isoflop", "parametric"))
    plots = [] if args.no_plots else plot_all(frame, iso, law, np.asarray(cfg.target_flops), out_dir)
    warn_invalid(report)
    print(format_summary(report))
    outputs = ["fit.json", "predictions.csv"] + (["holdout.csv"] if "holdout" in report else []) + [p.name for p in
                                                                                                   plots]
    averaged = int(frame["repeats"].sum()) if "repeats" in frame else len(frame)
    if averaged > len(frame):
        print(f"averaged {averaged} runs into {len(frame)} points (repeats of one N, D, C: other seeds)")
    print(f"fit: {len(frame)} runs, method {cfg.method}, bootstrap {cfg.bootstrap} in {seconds:.2f} s "
          f"-> {out_dir}/ ({', '.join(outputs)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
