"""Which data recipe wins at the compute you will train with: ``python -m scaling.compare runs.csv --by recipe``.

Every recipe's runs (one ladder of model sizes and budgets, trained on that recipe's data) are fitted by every law
of scaling/laws/ (scaling/predict.py ``fit_and_predict``, without its bootstrap), then, by default (``--share
exponents``), the recipes are fitted together (scaling/joint.py): one law whose model term and exponents (and R*)
every recipe shares, each recipe with its own irreducible loss E and data coefficient B, the parametric or the data-
constrained form by their joint rolling-origin error. ``--share none`` keeps each recipe's own fit of one law
(``--method auto``: the law valid for every recipe whose mean rolling-origin error over the recipes is smallest). At
each target compute (default: 10x and 100x the ladder's largest budget) each recipe gets its compute-optimal N, D
and loss with a 95 % prediction interval, and its epochs over its unique tokens there. Each pair of recipes gets the
predicted difference with a 95 % interval from a paired bootstrap and paired rolling-origin errors
(scaling/pairs.py), P(A better), a verdict (A or B only when P >= ``--confidence``, else undecided), the compute
where the ranking flips (between the ladder and 100x the largest target) and, beside it, the single-scale baseline's
verdict (DataDecide, Magnusson et al. 2025: rank by the best run at the ladder's largest budget). For each undecided
pair, the runs expected to narrow its interval most within ``--suggest-flops`` (scaling/next_runs.py).

Writes compare.csv (recipe, target_flops, distance, loss, lo, hi, n_opt, d_opt, unique_tokens, epochs, law),
pairs.csv (a, b, target_flops, diff = loss_a − loss_b, lo, hi, p_a_better, verdict, flip_flops, baseline_verdict),
next_runs.csv, compare.json (everything, with each recipe's fit), summary.md and compare.png to --out-dir.
Exit status: 2 and one ``error:`` line on bad input; 3 when no law is valid for every recipe.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from scaling.data import load_groups, parse_columns, parse_where, results_paths
from scaling.intervals import prediction_interval
from scaling.joint import (
    JOINT_LAWS,
    JointFit,
    fit_joint,
    joint_at_bound,
    joint_rolling,
    paired_bootstrap_joint,
    rolling_score,
)
from scaling.laws import LAWS, Fitted
from scaling.next_runs import TOP, candidate_runs, extrapolation, suggest
from scaling.pairs import difference, flip_flops, paired_bootstrap, paired_errors, paired_scatter, single_scale_verdict
from scaling.plots import new_figure, save_figure
from scaling.predict import AUTO, FitResult, choose_laws, default_targets, fit_and_predict, rolling_errors
from scaling.report import jsonable
from scaling.select import TIE
from scaling.settings import FitSettings
from workbench.files import write_json, write_metrics, write_text
from workbench.params import add_config_flags, build_config_parser, config_from_args, override, parse_config, setting

NO_SHARED_LAW = 3
FLIP_REACH = 100.0  # flips are looked for up to this many times the largest target
GRID_POINTS = 49
SHARE_EXPONENTS, SHARE_NONE = "exponents", "none"
SUGGEST_DISTANCE = 4.0  # default compute cap of the "train next" suggestions: 4x the ladder's largest budget


@dataclass(frozen=True)
class CompareConfig(FitSettings):
    """The ``scaling_compare:`` section of params.yaml; every field is also a flag."""

    SECTION = "scaling_compare"

    method: str = override(FitSettings, "method", AUTO,
                           f"the law every recipe is fitted with: auto (with --share exponents: parametric or "
                           f"data_constrained, fitted jointly; with --share none: the law valid for every recipe with "
                           f"the smallest mean rolling-origin error) or one of {', '.join(LAWS)}")
    bootstrap: int = override(FitSettings, "bootstrap", 200, "paired bootstrap resamples of the ladder (0: intervals "
                                                             "without the parameter part)")
    by: str = override(FitSettings, "by", "recipe", "the column that names each run's recipe (its data)")
    confidence: float = setting(0.95, "a verdict names a recipe only when P(it is better) reaches this", above=0.5,
                                below=1)
    share: str = setting(SHARE_EXPONENTS, "exponents: one joint fit, the model term and exponents shared, each recipe "
                                          "its own E and B (scaling/joint.py); none: each recipe fitted on its own",
                         choices=(SHARE_EXPONENTS, SHARE_NONE))

    def __post_init__(self) -> None:  # --method: one law of a registry that grows at run time, no fixed choices
        object.__setattr__(self, "confidence", float(self.confidence))
        super().__post_init__()
        if self.method != AUTO and "," in self.method:
            raise ValueError(f"--method is one law for every recipe (or auto), got {self.method!r}")


@dataclass(frozen=True)
class CompareFiles:
    results: tuple[str, ...] = setting((), "runs CSV or JSON (scaling.fit's columns plus the --by column); several "
                                           "files are read as one table", positional=True)
    out_dir: str | None = setting(None, "output folder (none: ./<results stem>_compare)")
    plots: bool = setting(True, "write compare.png")
    metrics: str | None = setting(None, "also write each recipe's prediction and each verdict here (dvc metrics)")


def read_recipes(paths: list[Path], by: str, columns: dict[str, str] | None = None,
                 where: dict[str, str] | None = None) -> dict[str, pd.DataFrame]:
    """{recipe: its canonical runs} (scaling/data.py ``load_groups``); fewer than two recipes is an error."""
    recipes = load_groups(paths, by, columns, where)
    if len(recipes) < 2:
        raise ValueError(f"{', '.join(map(str, paths))}: {len(recipes)} value(s) in column '{by}' "
                         f"({', '.join(recipes)}): need two or more recipes to compare")
    return recipes


def shared_law(fits: dict[str, FitResult], method: str) -> tuple[str | None, str]:
    """(the law every recipe is fitted with, why); None when no law is valid for every recipe."""
    names = list(choose_laws(method))
    valid = [m for m in names if all(f.report["validity"][m]["valid"] for f in fits.values())]
    if not valid:
        why = "; ".join(f"{r}: " + ", ".join(f"{m} ({'; '.join(f.report['validity'][m]['reasons'])})"
                                             for m in names if not f.report["validity"][m]["valid"])
                        for r, f in fits.items())
        return None, f"no law is valid for every recipe ({why})"
    if len(names) == 1:
        return names[0], f"--method {names[0]}"
    free = [m for m in valid if not any(f.report["validity"][m]["at_bound"] for f in fits.values())] or valid
    scores = {m: np.mean([f.report["rolling_origin"]["score"].get(m, np.inf) for f in fits.values()]) for m in free}
    if not any(np.isfinite(s) for s in scores.values()):
        law = min(free, key=lambda m: LAWS[m].preference)
        return law, f"no rolling origin for every recipe: the first valid of {', '.join(free)} (Law.preference)"
    best = min(scores.values())
    tied = [m for m in free if scores[m] <= best + TIE]
    law = min(tied, key=lambda m: (LAWS[m].n_params, LAWS[m].preference))
    listing = ", ".join(f"{m} {scores[m]:.2%}" for m in sorted(scores, key=scores.get))
    return law, f"valid for every recipe, smallest mean rolling-origin error over the recipes: {listing}"


@dataclass
class Comparison:
    report: dict  # compare.json
    recipes: dict[str, pd.DataFrame]
    fits: dict[str, FitResult]
    law: str | None
    grid: np.ndarray  # compute budgets of the plotted curves
    curves: dict[str, dict[str, np.ndarray]]  # recipe: loss, lo, hi on the grid


@dataclass
class RecipeModel:
    """What a recipe's predictions and intervals come from: its fitted law, its residual sd (ln L), the distances
    and ln errors of its rolling origin, and that rolling-origin report (paired with another recipe's)."""

    fitted: Fitted
    scatter: float
    errors: tuple[np.ndarray, np.ndarray]
    rolling: dict

    def interval(self, value: float, boot: np.ndarray | None, distance: float) -> dict:
        return prediction_interval(value, boot, self.scatter, distance, self.errors)


def independent_models(fits: dict[str, FitResult], law: str) -> dict[str, RecipeModel]:
    """Each recipe by its own fit of ``law`` (``--share none``)."""
    return {n: RecipeModel(f.fits[law].fitted, f.fits[law].residual_sd, rolling_errors(f.report, law),
                           f.report["rolling_origin"]) for n, f in fits.items()}


def joint_models(fits: dict[str, FitResult], method: str) -> tuple[str | None, str, JointFit | None,
                                                                   dict[str, RecipeModel]]:
    """(law, why, the joint fit, each recipe's model) for ``--share exponents`` (scaling/joint.py): the joint law of
    smallest rolling-origin error among those without a shared parameter at its bound, as scaling/select.py rules;
    ties go to the fewer parameters (parametric)."""
    runs = {n: f.runs for n, f in fits.items()}
    names = [m for m in JOINT_LAWS if method in (AUTO, m)]
    if "data_constrained" in names and any(r.unique is None for r in runs.values()):
        names.remove("data_constrained")
    tried, nested = {}, None
    for law in names:
        own = {n: f.fits[law].fitted for n, f in fits.items()}
        if any(f is None for f in own.values()):
            continue
        joint = fit_joint(law, runs, own, nested=nested)
        nested = joint if law == "parametric" else nested
        rolling = joint_rolling(law, runs, own)
        tried[law] = (joint, rolling, rolling_score(rolling, law), joint_at_bound(joint))
    if not tried:
        return None, f"no law of {', '.join(JOINT_LAWS)} could be fitted to every recipe", None, {}
    free = [m for m in tried if not tried[m][3]] or list(tried)
    best = min(tried[m][2] for m in free)
    law = min((m for m in free if tried[m][2] <= best + TIE), key=lambda m: LAWS[m].n_params)
    listing = ", ".join(f"{m} {tried[m][2]:.2%}" + (f" (at bound: {', '.join(tried[m][3])})" if tried[m][3] else "")
                        for m in tried)
    why = (f"joint fit, shared A, alpha, beta{', R*' if law == 'data_constrained' else ''}, each recipe its own E and "
           f"B; mean rolling-origin error of every recipe's best runs: {listing}")
    joint, rolling, _, _ = tried[law]
    models = {}
    for name, fitted in joint.fitted.items():
        with np.errstate(all="ignore"):
            residuals = LAWS[law].residuals(fitted, runs[name])
        scatter = float(np.std(residuals, ddof=1)) if len(residuals) > 1 else float("nan")
        origins = rolling[name]
        errors = [e for o in origins["origins"] for e in o["errors"][law]]
        models[name] = RecipeModel(fitted, scatter, (np.array([e["distance"] for e in errors]),
                                                     np.array([e["log_error"] for e in errors])), origins)
    return law, why, joint, models


def _recipe_rows(name: str, model: RecipeModel, law: str, targets: np.ndarray, boot: np.ndarray | None, max_c: float,
                 unique: float) -> list[dict]:
    rows = []
    fitted = model.fitted
    with np.errstate(all="ignore"):
        loss, n_opt, d_opt = fitted.loss_opt(targets), fitted.n_opt(targets), fitted.d_opt(targets)
    for i, flops in enumerate(targets):
        pi = model.interval(float(loss[i]), None if boot is None else np.exp(boot[:, i]), flops / max_c)
        rows.append({"recipe": name, "target_flops": float(flops), "distance": float(flops / max_c),
                     "loss": pi["value"], "lo": pi["pi95"][0], "hi": pi["pi95"][1], "n_opt": float(n_opt[i]),
                     "d_opt": float(d_opt[i]), "unique_tokens": unique, "epochs": float(d_opt[i] / unique),
                     "law": law, "interval_dominant": pi["dominant"], "calibration": pi["calibration"]})
    return rows


def _curve(model: RecipeModel, grid: np.ndarray, boot: np.ndarray | None, max_c: float) -> dict[str, np.ndarray]:
    """The recipe's compute-optimal loss on ``grid`` with its 95 % prediction band."""
    with np.errstate(all="ignore"):
        loss = model.fitted.loss_opt(grid)
    bands = [model.interval(float(loss[i]), None if boot is None else np.exp(boot[:, i]), grid[i] / max_c)["pi95"]
             for i in range(len(grid))]
    return {"loss": loss, "lo": np.array([b[0] for b in bands]), "hi": np.array([b[1] for b in bands])}


def _pair_row(a: str, b: str, la: float, lb: float, d: dict) -> dict:
    lo, hi = lb * np.expm1(d["r"] - d["halfwidth_log"]), lb * np.expm1(d["r"] + d["halfwidth_log"])
    return {"a": a, "b": b, "diff": la - lb, "lo": float(lo), "hi": float(hi), "p_a_better": d["p_a_better"],
            "verdict": d["verdict"], "interval_dominant": d["dominant"], "calibration": d["calibration"]}


def compare_recipes(recipes: dict[str, pd.DataFrame], targets=(), method: str = AUTO, bootstrap: int = 200,
                    seed: int = 0, confidence: float = 0.95, suggest_flops: float = 0.0,
                    runs_at: np.ndarray | None = None, share: str = SHARE_EXPONENTS) -> Comparison:
    """Fit every recipe, choose the law, predict each at the targets, and judge every pair (module docstring).
    ``recipes``: {name: canonical runs (scaling/data.py)}; ``targets``: () for 10x and 100x the ladder's largest
    budget; ``runs_at``: (k, 3) N, D, C of runs to predict for every recipe as well (held-out target runs: ``run_rows``
    and ``run_pairs`` of the report, judged as the targets are); ``share``: "exponents" (one joint fit,
    scaling/joint.py) or "none" (each recipe fitted on its own)."""
    max_c = max(float(f["flops"].max()) for f in recipes.values())
    min_c = min(float(f["flops"].min()) for f in recipes.values())
    targets = np.asarray(targets, dtype=float) if len(targets) else default_targets(max_c)
    fits = {name: fit_and_predict(frame, targets, method, bootstrap=0, seed=seed) for name, frame in recipes.items()}
    runs = {n: f.runs for n, f in fits.items()}
    joint = None
    if share == SHARE_EXPONENTS and method in (AUTO, *JOINT_LAWS):
        law, why, joint, models = joint_models(fits, method)
    else:
        law, why = shared_law(fits, method)
        models = independent_models(fits, law) if law else {}
    report: dict = {"recipes": list(recipes), "target_flops": targets.tolist(), "ladder_max_flops": max_c,
                    "method": method, "share": share if joint else "none", "law": law, "why": why,
                    "bootstrap": bootstrap, "seed": seed, "confidence": confidence,
                    "fits": {n: f.report for n, f in fits.items()}, "rows": [], "pairs": [], "next_runs": [],
                    "run_rows": [], "run_pairs": []}
    grid = np.geomspace(min_c, FLIP_REACH * targets.max(), GRID_POINTS)
    if law is None:
        return Comparison(report, recipes, fits, None, grid, {})
    points = np.concatenate([targets, grid])
    held = np.empty((0, 3)) if runs_at is None else np.atleast_2d(np.asarray(runs_at, dtype=float))
    sizes = np.concatenate([r.n for r in runs.values()])
    candidates = candidate_runs(sizes, lambda c: np.exp(np.mean([np.log(m.fitted.n_opt(c)) for m in models.values()],
                                                                axis=0)), min_c,
                                suggest_flops or SUGGEST_DISTANCE * max_c, runs_per_candidate=2)

    def predict(_: str, refit: Fitted) -> np.ndarray:
        return np.log(np.concatenate([refit.loss_opt(points), refit.loss(*held.T), refit.loss(*candidates.T)]))

    if not bootstrap:
        boot = {n: np.empty((0, 0)) for n in recipes}
    elif joint is not None:
        boot = paired_bootstrap_joint(joint, runs, bootstrap, seed, predict)
    else:
        boot = paired_bootstrap(LAWS[law], runs, {n: m.fitted for n, m in models.items()}, bootstrap, seed, predict)
    cols = {"targets": slice(0, len(targets)), "grid": slice(len(targets), len(points)),
            "candidates": slice(len(points) + len(held), None)}

    def samples(name: str, what: slice | int) -> np.ndarray | None:
        return boot[name][:, what] if boot[name].size else None

    for name, model in models.items():
        unique = float(runs[name].unique.max()) if runs[name].unique is not None else float("nan")
        report["rows"] += _recipe_rows(name, model, law, targets, samples(name, cols["targets"]), max_c, unique)
        with np.errstate(all="ignore"):
            values = model.fitted.loss(*held.T)
        for j, (n, d, c) in enumerate(held):
            at = samples(name, len(points) + j)
            pi = model.interval(float(values[j]), None if at is None else np.exp(at), c / max_c)
            report["run_rows"].append({"recipe": name, "n": n, "d": d, "flops": c, "distance": c / max_c,
                                       "loss": pi["value"], "lo": pi["pi95"][0], "hi": pi["pi95"][1]})
    curves = {name: _curve(model, grid, samples(name, cols["grid"]), max_c) for name, model in models.items()}
    with np.errstate(all="ignore"):
        residuals = {n: (runs[n].take(LAWS[law].scored(runs[n])), LAWS[law].residuals(m.fitted, runs[n]))
                     for n, m in models.items()}
    for a, b in itertools.combinations(recipes, 2):
        errors = paired_errors(models[a].rolling, models[b].rolling, law)
        flip = flip_flops(grid, np.log(curves[a]["loss"]), np.log(curves[b]["loss"]), max_c)
        baseline, baseline_flops = single_scale_verdict(runs[a], runs[b])
        scatter = paired_scatter(*residuals[a], *residuals[b])
        for i, flops in enumerate(targets):
            la, lb = (float(models[x].fitted.loss_opt(flops)) for x in (a, b))
            ba, bb = samples(a, i), samples(b, i)
            d = difference(np.log(la), np.log(lb), ba, bb, scatter, flops / max_c, errors, confidence)
            if d["verdict"] == "undecided" and ba is not None and bb is not None:
                report["next_runs"] += [{"a": a, "b": b, "target_flops": float(flops)} | s for s in suggest(
                    ba - bb, [samples(a, cols["candidates"]), samples(b, cols["candidates"])],
                    [models[a].scatter, models[b].scatter], candidates, d["parts"]["scatter"], extrapolation(errors),
                    max_c, float(flops))]
            report["pairs"].append(_pair_row(a, b, la, lb, d) | {
                "target_flops": float(flops), "flip_flops": flip, "baseline_verdict": baseline,
                "baseline_flops": baseline_flops, "distance": float(flops / max_c),
                "paired_origin_errors": int(len(errors[1]))})
        for j, (n, d, c) in enumerate(held):
            la, lb = (float(models[x].fitted.loss(n, d, c)) for x in (a, b))
            diff = difference(np.log(la), np.log(lb), samples(a, len(points) + j), samples(b, len(points) + j),
                              scatter, c / max_c, errors, confidence)
            report["run_pairs"].append(_pair_row(a, b, la, lb, diff) | {"n": n, "d": d, "flops": c,
                                                                       "baseline_verdict": baseline})
    return Comparison(report, recipes, fits, law, grid, curves)


PAIR_COLUMNS = ["a", "b", "target_flops", "diff", "lo", "hi", "p_a_better", "verdict", "flip_flops",
                "baseline_verdict"]
NEXT_COLUMNS = ["a", "b", "target_flops", "n", "d", "flops", "runs", "cost", "halfwidth_log", "now_halfwidth_log",
                "parameters_log"]
ROW_COLUMNS = ["recipe", "target_flops", "distance", "loss", "lo", "hi", "n_opt", "d_opt", "unique_tokens", "epochs",
               "law"]


def format_summary(report: dict) -> str:
    """The printed (and summary.md) decision: the shared law, one line per recipe x target, one per pair."""
    if report["law"] is None:
        return f"no decision: {report['why']}"
    lines = [f"law: {report['law']} ({report['why']})",
             f"{'recipe':<16}{'C':>9}{'x ladder':>9}  {'loss [95% PI]':<24}{'N_opt':>9}{'D_opt':>10}{'epochs':>8}"]
    for r in report["rows"]:
        lines.append(f"{r['recipe']:<16}{r['target_flops']:>9.3g}{r['distance']:>9.3g}  "
                     f"{r['loss']:.4f} [{r['lo']:.4f}, {r['hi']:.4f}]".ljust(58) +
                     f"{r['n_opt']:>10.3g}{r['d_opt']:>10.3g}{r['epochs']:>10.3g}")
    lines.append(f"{'pair (a vs b)':<34}{'C':>9}  {'loss_a - loss_b [95%]':<30}{'P(a better)':>12}  "
                 f"{'verdict':<11}{'single-scale':<13}flips at")
    for p in report["pairs"]:
        verdict = p[p["verdict"]] if p["verdict"] in ("a", "b") else "undecided"
        base = p[p["baseline_verdict"]] if p["baseline_verdict"] in ("a", "b") else "undecided"
        flip = f"{p['flip_flops']:.3g}" if np.isfinite(p["flip_flops"]) else "-"
        lines.append(f"{p['a'] + ' vs ' + p['b']:<34}{p['target_flops']:>9.3g}  "
                     f"{p['diff']:+.4f} [{p['lo']:+.4f}, {p['hi']:+.4f}]".ljust(41) +
                     f"{p['p_a_better']:>12.3f}  {verdict:<11}{base:<13}{flip}")
    best: dict[tuple, dict] = {}
    for s in report.get("next_runs") or ():
        best.setdefault((s["a"], s["b"], s["target_flops"]), s)
    top = sorted(best.values(), key=lambda s: s["halfwidth_log"] - s["now_halfwidth_log"])[:TOP]
    for s in top:
        lines.append(f"train next for {s['a']} vs {s['b']} at C={s['target_flops']:.3g}: N={s['n']:.3g} "
                     f"D={s['d']:.3g} (C={s['flops']:.3g}, one run per recipe) is expected to narrow the difference's "
                     f"interval from +-{s['now_halfwidth_log']:.3f} to +-{s['halfwidth_log']:.3f} in ln L")
    if len(best) > len(top):
        lines.append(f"({len(best) - len(top)} more undecided pair(s) with suggestions: next_runs.csv, {TOP} each)")
    for r in report["rows"]:
        if np.isfinite(r["hi"] - r["lo"]) and r["hi"] - r["lo"] > r["loss"]:
            lines.append(f"warning: {r['recipe']} at C={r['target_flops']:.3g}: the 95% interval [{r['lo']:.3g}, "
                         f"{r['hi']:.3g}] is wider than the loss itself ({r['distance']:.3g}x the ladder): more "
                         f"budgets or a nearer target")
    return "\n".join(lines)


def write_comparison(result: Comparison, out_dir: Path, metrics: str | None = None) -> list[str]:
    report = result.report
    write_json(out_dir / "compare.json", jsonable(report))
    write_text(out_dir / "compare.csv", pd.DataFrame(report["rows"], columns=ROW_COLUMNS).to_csv(index=False))
    write_text(out_dir / "pairs.csv", pd.DataFrame(report["pairs"], columns=PAIR_COLUMNS).to_csv(index=False))
    write_text(out_dir / "leaderboard.csv", pd.DataFrame(leaderboard_rows(report),
                                                         columns=LEADERBOARD_COLUMNS).to_csv(index=False))
    write_text(out_dir / "next_runs.csv", pd.DataFrame(report["next_runs"], columns=NEXT_COLUMNS).to_csv(index=False))
    write_text(out_dir / "summary.md", "# Data recipes compared\n\n```\n" + format_summary(report) + "\n```\n")
    if metrics:
        write_metrics(metrics, jsonable({"rows": report["rows"], "pairs": report["pairs"]}), headline(report))
    return ["compare.json", "compare.csv", "pairs.csv", "next_runs.csv", "leaderboard.csv", "summary.md"]


LEADERBOARD_COLUMNS = ["run_id", "kind", "data_recipe", "target_flops", "n_opt", "d_opt", "predicted_loss",
                       "predicted_lo", "predicted_hi", "law"]


def leaderboard_rows(report: dict) -> list[dict]:
    """Each recipe's prediction at each target as rows in reports/leaderboard.csv's columns (kind
    recipe_prediction), best first per target, to append to the project's leaderboard."""
    rows = [{"run_id": f"{r['recipe']}@{r['target_flops']:.3g}", "kind": "recipe_prediction",
             "data_recipe": r["recipe"], "target_flops": r["target_flops"], "n_opt": r["n_opt"], "d_opt": r["d_opt"],
             "predicted_loss": r["loss"], "predicted_lo": r["lo"], "predicted_hi": r["hi"], "law": r["law"]}
            for r in report["rows"]]
    return sorted(rows, key=lambda r: (r["target_flops"], r["predicted_loss"]))


def headline(report: dict) -> dict:
    """The flat DVC metrics: each recipe's predicted loss at the largest target, and each pair's verdict there."""
    if report["law"] is None:
        return {"law": "none"}
    top = max(report["target_flops"])
    out: dict = {"law": report["law"], "flops": top}
    for r in report["rows"]:
        if r["target_flops"] == top:
            out[f"loss_{r['recipe']}"] = r["loss"]
    for p in report["pairs"]:
        if p["target_flops"] == top:
            out[f"verdict_{p['a']}_vs_{p['b']}"] = p[p["verdict"]] if p["verdict"] in ("a", "b") else "undecided"
    return jsonable(out)


def plot_recipes(result: Comparison, path: Path) -> Path:
    """Each recipe's compute-optimal loss against C with its 95 % prediction band, its ladder's best run per budget,
    the targets (dotted) and every compute where two recipes swap rank (a cross on the crossing)."""
    fig, (ax,) = new_figure(width=7.2)
    grid = result.grid
    for name, curve in result.curves.items():
        line = ax.plot(grid, curve["loss"], lw=1.5, label=name)[0]
        ax.fill_between(grid, curve["lo"], curve["hi"], color=line.get_color(), alpha=0.15, lw=0)
        runs = result.fits[name].runs
        best = runs.best_runs()
        ax.scatter(runs.c[best], runs.loss[best], s=14, color=line.get_color(), edgecolor="black", lw=0.3, zorder=3)
    for pair in result.report["pairs"]:
        flip = pair["flip_flops"]
        if np.isfinite(flip):
            loss = float(np.interp(np.log(flip), np.log(grid), result.curves[pair["a"]]["loss"]))
            ax.scatter([flip], [loss], marker="x", s=70, color="black", zorder=4)
    for target in result.report["target_flops"]:
        ax.axvline(target, color="grey", lw=0.6, ls=":")
    ax.axvline(result.report["ladder_max_flops"], color="black", lw=0.6, ls="--")
    losses = np.concatenate([c["loss"] for c in result.curves.values()])
    from matplotlib.ticker import ScalarFormatter

    ax.set(xscale="log", yscale="log", xlabel="compute C (FLOPs)", ylabel="compute-optimal loss (95% band)",
           ylim=(0.8 * np.nanmin(losses), 1.2 * np.nanmax(losses)))
    ax.set_title(f"recipes by {result.law}: dots best ladder runs, dashed ladder end, dotted targets, x flips",
                 fontsize=9)
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(ScalarFormatter())
    ax.legend(fontsize=7)
    return save_figure(fig, path)


def build_parser() -> argparse.ArgumentParser:
    parser = build_config_parser(CompareConfig, "scaling_compare", prog="python -m scaling.compare",
                                 description=__doc__.split("\n\n")[0])
    add_config_flags(parser, CompareFiles, bool_switches=True)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        cfg, args = parse_config(CompareConfig, "scaling_compare", argv, parser=build_parser())
        files = config_from_args(CompareFiles, args)
        paths = results_paths(files.results, "runs CSV/JSON files with a recipe column")
        start = time.perf_counter()
        recipes = read_recipes(paths, cfg.by, parse_columns(cfg.columns), parse_where(cfg.where))
        result = compare_recipes(recipes, cfg.target_flops, cfg.method, cfg.bootstrap, cfg.seed, cfg.confidence,
                                 cfg.suggest_flops, share=cfg.share)
        seconds = time.perf_counter() - start
    except ValueError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    out_dir = Path(files.out_dir) if files.out_dir else Path(f"{paths[0].stem}_compare")
    outputs = write_comparison(result, out_dir, files.metrics)
    if files.plots and result.law is not None:
        outputs.append(plot_recipes(result, out_dir / "compare.png").name)
    print(format_summary(result.report))
    n_runs = sum(len(f) for f in recipes.values())
    print(f"compare: {len(recipes)} recipes, {n_runs} runs, bootstrap {cfg.bootstrap} in {seconds:.2f} s -> "
          f"{out_dir}/ ({', '.join(outputs)})")
    if result.law is None:
        print(f"error: {result.report['why']}", file=sys.stderr)
        return NO_SHARED_LAW
    return 0


if __name__ == "__main__":
    sys.exit(main())
