"""Do scaling.compare's recipe decisions hold at held-out target runs? ``python -m bench.benchmarks.recipes_validation``

Reads the recipes of ``make recipes`` (``--recipes``, default recipes/default.yaml, and their ladders in its
out_dir). For every recipe it trains held-out target runs the fit never sees: the ``train`` section's model (d_model
64, 4 layers) at ``--target-flops`` (default 8x the ladder's largest budget) on the recipe's shards, under seeds 0
and 1 (scaling/sweep.py with that one budget and shape, ``seeds: [1]``; finished runs are reused, so a rerun after a
kill trains only what is missing). Then scaling.compare, as ``make recipes`` runs it, predicts every recipe's loss at
exactly that run (N, D, C) from the ladders alone, and only then are the measured losses read (bits per byte of the
shared validation text, mean over seeds).

Both ways of fitting the recipes are scored: the joint fit (``--share exponents``, the default) and independent fits
(``--share none``). Per pair (the joint fit's): the predicted difference with its 95 % interval, P(A better) and the
verdict; the single-scale baseline's pick (DataDecide, Magnusson et al. 2025: the better best run at the ladder's
largest budget, same ladder cost); the measured difference with its seed standard error. Scored on the pairs whose
measured difference exceeds 2 seed-SE: decision accuracy (the sign of the predicted difference; the baseline's pick
beside it), confident calls (a verdict with P >= 0.95) and how many were wrong; on every pair: the sign's
accuracy (beside the baseline's) and whether the difference's interval holds the measured one.

The constructed case (no training): two recipes generated from known laws (Chinchilla's constants, R* = 3), one with
20 % less data loss but 2e9 unique tokens, so the true ranking flips between the ladder and 100x it; scored as the
tests do (tests/scaling/test_compare.py), with the baseline's pick beside it. Timing: ``compare_recipes`` on a
table alone, 3 recipes x 100 generated runs, bootstrap as set.

Rows: benchmarks/results/recipes_validation.jsonl; per-pair table: benchmarks/recipes_validation_pairs.csv; plot:
docs/benchmarks/recipes_validation.png; ``python -m bench.tools.report`` regenerates docs/benchmarks/scaling.md.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy.optimize import minimize_scalar

from bench.tools.results import ROOT, BenchSettings, Result, finish, parse_bench
from scaling.compare import compare_recipes, read_recipes
from scaling.recipes.run import restart_if_tokens_changed
from scaling.recipes.spec import load_spec
from scaling.sweep import main as sweep_main
from workbench.files import read_json, write_text
from workbench.params import setting, usage_error

AREA = "recipes_validation"
PLOT = ROOT / "docs" / "benchmarks" / "recipes_validation.png"
PAIRS = ROOT / "benchmarks" / "recipes_validation_pairs.csv"
SHARES = {"exponents": "joint fit (the default)", "none": "independent fits"}


def train_targets(out_dir: Path, recipe: str, flops: float, shape: list[int], seeds: int) -> pd.DataFrame:
    """The recipe's held-out target runs (one budget, one shape, ``seeds`` seeds), trained or reused."""
    folder = out_dir / recipe
    params = yaml.safe_load((folder / "params.yaml").read_text())
    params["sweep"] |= {"budgets": [flops], "shapes": [shape], "seeds": list(range(1, seeds)), "branches": False,
                        "out_dir": str(folder / "targets" / "runs"), "results": str(folder / "targets" / "results.csv"),
                        "total_flops": flops * seeds * 1.5, "max_run_steps": 0}
    restart_if_tokens_changed(folder / "targets", folder / "shards", f"{recipe}: its target runs")
    path = folder / "targets" / "params.yaml"
    write_text(path, yaml.safe_dump(params, sort_keys=False))
    if sweep_main(["--params", str(path)]):
        raise SystemExit(f"error: the target runs of recipe '{recipe}' failed ({path})")
    return pd.read_csv(folder / "targets" / "results.csv")


def bits_per_byte(out_dir: Path, recipe: str, nats: np.ndarray) -> np.ndarray:
    meta = read_json(out_dir / recipe / "shards" / "meta.json")
    return np.asarray(nats) * meta["val_tokens"] / meta["validation_bytes"] / math.log(2)


def score(pairs: pd.DataFrame) -> dict:
    """The headline numbers over the resolved pairs (|measured| > 2 seed-SE) and the interval coverage over all."""
    resolved = pairs[pairs["resolved"]]
    confident = resolved[resolved["verdict"] != "undecided"]
    return {"pairs": len(pairs), "resolved": len(resolved),
            "decision_accuracy": float(resolved["sign_correct"].mean()) if len(resolved) else float("nan"),
            "all_accuracy": float(pairs["sign_correct"].mean()),
            "all_baseline_accuracy": float(pairs["baseline_correct"].mean()),
            "baseline_accuracy": float(resolved["baseline_correct"].mean()) if len(resolved) else float("nan"),
            "confident_calls": int((pairs["verdict"] != "undecided").sum()),
            "confident_wrong": int(((pairs["verdict"] != "undecided") & ~pairs["verdict_correct"]).sum()),
            "confident_resolved": len(confident), "coverage": float(pairs["covered"].mean())}


def judge(comparison, measured: dict[str, np.ndarray]) -> pd.DataFrame:
    """One row per pair: predicted (from ``comparison.report["run_pairs"]``) beside measured."""
    rows = []
    for p in comparison.report["run_pairs"]:
        a, b = measured[p["a"]], measured[p["b"]]
        diff = float(a.mean() - b.mean())
        se = float(math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b)))
        winner = "a" if diff < 0 else "b"
        rows.append({"a": p["a"], "b": p["b"], "predicted": p["diff"], "lo": p["lo"], "hi": p["hi"],
                     "p_a_better": p["p_a_better"], "verdict": p["verdict"], "baseline": p["baseline_verdict"],
                     "measured": diff, "seed_se": se, "resolved": abs(diff) > 2 * se,
                     "sign_correct": (p["diff"] < 0) == (diff < 0), "baseline_correct": p["baseline_verdict"] == winner,
                     "verdict_correct": p["verdict"] == winner, "covered": p["lo"] <= diff <= p["hi"]})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- the constructed flip
CHINCHILLA = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28, "R_star": 3.0}


def _true_loss(n, d, u, E, A, B, alpha, beta, R_star):
    seen = np.minimum(d, u)
    return E + A / n ** alpha + B / (seen + seen * R_star * (1 - np.exp(-(d / seen - 1) / R_star))) ** beta


def _ladder(law: dict, unique: float, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = [(np.sqrt(c / 120) * k, c) for c in np.geomspace(1e17, 1e19, 7) for k in (0.25, 0.5, 1, 2, 4)]
    n, c = np.array(rows).T
    d = c / (6 * n)
    loss = _true_loss(n, d, unique, **law) * np.exp(rng.normal(0, 0.005, len(n)))
    return pd.DataFrame({"params": n, "tokens": d, "flops": c, "loss": loss, "unique_tokens": unique})


def _optimum(c: float, law: dict, unique: float) -> float:
    res = minimize_scalar(lambda x: _true_loss(np.exp(x), c / (6 * np.exp(x)), unique, **law),
                          bounds=(np.log(1e5), np.log(1e13)), method="bounded", options={"xatol": 1e-10})
    return float(res.fun)


def constructed_flip(bootstrap: int) -> list[Result]:
    strict = dict(CHINCHILLA, B=CHINCHILLA["B"] * 0.8)
    recipes = {"lenient": _ladder(CHINCHILLA, 1e15, 2), "strict": _ladder(strict, 2e9, 1)}
    result = compare_recipes(recipes, method="data_constrained", bootstrap=bootstrap)
    out = []
    for p in result.report["pairs"]:
        truth = _optimum(p["target_flops"], CHINCHILLA, 1e15) - _optimum(p["target_flops"], strict, 2e9)
        true_winner = "a" if truth < 0 else "b"
        name = f"constructed flip at {p['target_flops']:.0e}"
        out += [Result(name, "true diff (lenient - strict)", truth),
                Result(name, "predicted diff", p["diff"], extra={"lo": p["lo"], "hi": p["hi"]}),
                Result(name, "interval holds the truth", float(p["lo"] <= truth <= p["hi"])),
                Result(name, "verdict right or undecided", float(p["verdict"] in (true_winner, "undecided"))),
                Result(name, "single-scale baseline right", float(p["baseline_verdict"] == true_winner)),
                Result(name, "predicted flip (log10 FLOPs)", float(np.log10(p["flip_flops"])))]
    return out


def timing(bootstrap: int) -> list[Result]:
    """scaling.compare on a table alone (no training): 3 recipes x 100 runs (10 budgets x 10 sizes from Chinchilla's
    law, E apart by 0.03), the joint fit and independent fits, seconds of compare_recipes."""
    rng = np.random.default_rng(0)
    recipes = {}
    for name, shift in (("a", 0.0), ("b", 0.03), ("c", 0.06)):
        rows = [(np.sqrt(c / 120) * k, c) for c in np.geomspace(1e17, 1e20, 10) for k in np.geomspace(0.2, 5, 10)]
        n, c = np.array(rows).T
        d = c / (6 * n)
        loss = (1.69 + shift + 406.4 / n ** 0.34 + 410.7 / d ** 0.28) * np.exp(rng.normal(0, 0.01, len(n)))
        recipes[name] = pd.DataFrame({"params": n, "tokens": d, "flops": c, "loss": loss})
    out = []
    for share in SHARES:
        start = time.perf_counter()
        compare_recipes(recipes, bootstrap=bootstrap, share=share)
        out.append(Result(f"compare 3 recipes x 100 runs ({SHARES[share]})", "seconds", time.perf_counter() - start,
                          unit="s"))
    return out


def plot(pairs: pd.DataFrame, path: Path) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 5.2), layout="constrained")
    ax = fig.subplots()
    y = np.arange(len(pairs))
    ax.errorbar(pairs["predicted"], y, xerr=[pairs["predicted"] - pairs["lo"], pairs["hi"] - pairs["predicted"]],
                fmt="o", color="C0", label="predicted (95% interval)")
    ax.errorbar(pairs["measured"], y + 0.2, xerr=2 * pairs["seed_se"], fmt="s", color="C3",
                label="measured (2 seed-SE)")
    ax.axvline(0, color="grey", lw=0.6)
    ax.set_yticks(y, [f"{a} - {b}" for a, b in zip(pairs["a"], pairs["b"], strict=True)], fontsize=7)
    ax.set(xlabel="loss difference (bits per byte of the validation text)",
           title="recipes at the held-out target runs")
    ax.legend(fontsize=7)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


@dataclass(frozen=True)
class RecipesBench(BenchSettings):
    recipes: Path = setting(ROOT / "recipes" / "default.yaml", "the recipes file", exists=True)
    target_distance: float = setting(8.0, "the target runs' compute, in multiples of the ladder's largest budget",
                                     above=0)
    shape: tuple[int, ...] = setting((64, 4, 2), "d_model n_layers n_heads of the target runs", at_least=1)
    seeds: int = setting(2, "seeds per target run", at_least=1)
    bootstrap: int = setting(200, "the comparison's paired bootstrap resamples", at_least=0)
    plot: Path = setting(PLOT, "the predicted-vs-measured PNG")


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(RecipesBench, argv)
    if len(args.shape) != 3:
        usage_error(f"--shape needs three values (d_model n_layers n_heads), got {len(args.shape)}")
    spec = load_spec(args.recipes)
    runs_csv = spec.out_dir / "runs.csv"
    if not runs_csv.is_file():
        usage_error(f"{runs_csv}: no ladders (run make recipes first)")
    recipes = read_recipes([runs_csv], "recipe")
    flops = args.target_distance * max(float(f["flops"].max()) for f in recipes.values())
    targets = {name: train_targets(spec.out_dir, name, flops, list(args.shape), args.seeds) for name in recipes}
    first = next(iter(targets.values()))
    point = first[["params", "tokens", "flops"]].iloc[0].to_numpy(dtype=float)
    comparisons = {share: compare_recipes(recipes, bootstrap=args.bootstrap, runs_at=point[None, :], share=share)
                   for share in SHARES}  # every prediction is made before a measured loss is read
    measured = {name: bits_per_byte(spec.out_dir, name, frame["loss"].to_numpy()) for name, frame in targets.items()}
    rows = []
    for share, comparison in comparisons.items():
        pairs = judge(comparison, measured)
        s = score(pairs)
        print(pairs.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
        print(f"{SHARES[share]} ({comparison.law}): {s['resolved']} of {s['pairs']} pairs resolved (> 2 seed-SE): "
              f"decision accuracy {s['decision_accuracy']:.0%} (single-scale baseline {s['baseline_accuracy']:.0%}); "
              f"confident calls {s['confident_calls']}, wrong {s['confident_wrong']}; intervals hold "
              f"{s['coverage']:.0%} of the measured differences")
        name = f"{SHARES[share]}: {len(recipes)} recipes at {args.target_distance:g}x the ladder"
        rows += [Result(name, "decision accuracy (resolved pairs)", s["decision_accuracy"], baseline="single-scale",
                        baseline_value=s["baseline_accuracy"]),
                 Result(name, "resolved pairs", s["resolved"], extra={"pairs": s["pairs"]}),
                 Result(name, "decision accuracy (all pairs)", s["all_accuracy"], baseline="single-scale",
                        baseline_value=s["all_baseline_accuracy"]),
                 Result(name, "confident calls", s["confident_calls"]),
                 Result(name, "confident wrong calls", s["confident_wrong"]),
                 Result(name, "interval coverage", s["coverage"], extra={"law": comparison.law})]
    pairs = judge(comparisons["exponents"], measured)
    PAIRS.parent.mkdir(parents=True, exist_ok=True)
    write_text(PAIRS, pairs.to_csv(index=False))
    for p in pairs.itertuples():
        name = f"{p.a} - {p.b}"
        rows += [Result(name, "predicted diff", p.predicted, extra={"lo": p.lo, "hi": p.hi, "verdict": p.verdict,
                                                                   "baseline": p.baseline}),
                 Result(name, "measured diff", p.measured, extra={"seed_se": p.seed_se}),
                 Result(name, "seed SE", p.seed_se)]
    rows += constructed_flip(args.bootstrap)
    rows += timing(args.bootstrap)
    if args.plot:
        plot(pairs, args.plot)
    return finish(AREA, rows, args)


if __name__ == "__main__":
    sys.exit(main())
