"""Does scaling.fit's "train next" suggestion narrow a target's interval more than the same compute spent on one
more budget of the ladder? ``python -m bench.experiments.train_next_check`` (after ``make recipes``).

On one recipe's ladder (``--recipe``, default ``default``; its sweep results and params in the recipes' out_dir) the
fit predicts at 10x and 100x the ladder's largest budget; its first suggestion for the farther target is option A.
Option B is the ladder's next budget (its largest times its budget ratio) at the ladder's model sizes nearest the
law's N_opt there, as many runs as A's compute buys, rounded up (so B never gets less). Each option is trained as a
sweep run of the recipe (straight WSD runs on its shards), the ladder refitted with it by the law the ladder alone
selected, and the interval at the target compared: before, with A, with B. Rows:
benchmarks/results/train_next_check.jsonl.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from bench.tools.results import ROOT, BenchSettings, Result, finish, parse_bench
from scaling.fit import FitConfig, fit_files, train_next
from scaling.recipes.spec import load_spec
from scaling.sweep import main as sweep_main
from workbench.files import write_text
from workbench.params import setting, usage_error

AREA = "train_next_check"


def train(folder: Path, name: str, budget: float, shapes: list[list[int]]) -> Path:
    """Sweep runs of the recipe at one budget and these shapes (straight WSD runs), into ``folder/train_next``."""
    params = yaml.safe_load((folder / "params.yaml").read_text())
    out = folder / "train_next"
    params["sweep"] |= {"budgets": [budget], "shapes": shapes, "branches": False, "seeds": [],
                        "out_dir": str(out / name), "results": str(out / f"{name}.csv"),
                        "total_flops": budget * len(shapes) * 1.5, "max_run_steps": 0}
    path = out / f"{name}.yaml"
    write_text(path, yaml.safe_dump(params, sort_keys=False))
    if sweep_main(["--params", str(path)]):
        raise SystemExit(f"error: training {name} failed ({path})")
    return out / f"{name}.csv"


def halfwidth(results: list[Path], cfg: FitConfig, target: float) -> tuple[float, dict]:
    """ln(hi/lo)/2 of the selected law's interval at ``target``, and that prediction row."""
    _, result = fit_files(results, cfg)
    row = next(r for r in result.report["predictions"] if r["method"] == cfg.method and r["target_flops"] == target)
    return math.log(row["loss_hi"] / row["loss_lo"]) / 2, row


@dataclass(frozen=True)
class TrainNextCheckSettings(BenchSettings):
    recipes: Path = setting(ROOT / "recipes" / "default.yaml", "the recipes file", exists=True)
    recipe: str = setting("default", "the recipe whose ladder is extended")
    bootstrap: int = setting(200, "bootstrap resamples of each fit", at_least=0)


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(TrainNextCheckSettings, argv)
    spec = load_spec(args.recipes)
    folder = spec.out_dir / args.recipe
    ladder = folder / "sweep" / "results.csv"
    if not ladder.is_file():
        usage_error(f"{ladder}: no ladder (run make recipes first)")
    runs = pd.read_csv(ladder)
    budgets = np.sort(runs["flops"].unique())
    targets = (10 * budgets[-1], 100 * budgets[-1])
    first = FitConfig(target_flops=targets, bootstrap=args.bootstrap)
    _, result = fit_files([ladder], first)
    law = result.report["selection"]["method"]
    cfg = FitConfig(target_flops=targets, bootstrap=args.bootstrap, method=law)
    suggestions = [s for s in train_next(result, cfg) if s["target_flops"] == targets[1]]
    if not suggestions:
        print("the ladder's interval at the target is not wider than the loss: nothing is suggested")
        return 0
    pick = suggestions[0]
    shapes = {int(r.params): [int(r.d_model), int(r.n_layers), int(r.n_heads)]
              for r in runs.drop_duplicates("params").itertuples()}
    option_a = train(folder, "suggested", pick["flops"], [shapes[int(round(pick["n"]))]])
    next_budget = float(budgets[-1] * budgets[-1] / budgets[-2])
    n_opt = float(result.fits[law].fitted.n_opt(next_budget))
    count = max(1, math.ceil(pick["flops"] / next_budget))
    nearest = sorted(shapes, key=lambda n: abs(math.log(n / n_opt)))[:count]
    option_b = train(folder, "next_budget", next_budget, [shapes[n] for n in nearest])
    before, row0 = halfwidth([ladder], cfg, targets[1])
    with_a, row_a = halfwidth([ladder, option_a], cfg, targets[1])
    with_b, row_b = halfwidth([ladder, option_b], cfg, targets[1])
    print(f"law {law} at C={targets[1]:.3g}: half-width (ln L) {before:.3f} [{row0['loss_lo']:.3f}, "
          f"{row0['loss_hi']:.3f}] -> suggested run N={pick['n']:.3g} C={pick['flops']:.3g}: {with_a:.3f} "
          f"[{row_a['loss_lo']:.3f}, {row_a['loss_hi']:.3f}] (expected {pick['halfwidth_log']:.3f}); next ladder "
          f"budget C={next_budget:.3g} x {count}: {with_b:.3f} [{row_b['loss_lo']:.3f}, {row_b['loss_hi']:.3f}]")
    rows = [Result("ladder alone", "half-width at 100x (ln L)", before, extra={"law": law}),
            Result(f"suggested run N={pick['n']:.3g} C={pick['flops']:.3g}", "half-width at 100x (ln L)", with_a,
                   baseline=f"next budget C={next_budget:.3g} x {count}", baseline_value=with_b,
                   extra={"expected": pick["halfwidth_log"], "compute_a": pick["flops"],
                          "compute_b": next_budget * count})]
    return finish(AREA, rows, args)


if __name__ == "__main__":
    sys.exit(main())
