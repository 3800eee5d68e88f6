"""The course's GRPO ablations over seeds, from one SFT model per seed: which loss, normalization and number of
epochs per rollout batch learns the held-out task best (python -m bench.experiments.alignment_ablations).

Per seed: SFT with params.yaml's ``sft`` section, then from that model every variant below with the ``grpo``
section's budget (steps x rollout batch: the same questions sampled, the same sampled tokens up to response
lengths), RFT at the sampled-token budget of the ``reinforce_baseline`` variant, and DPO with the ``dpo`` section
(it samples nothing: its pairs are built from the task). Each variant's flags set every loss setting it depends on,
so a change of the ``grpo`` section's loss does not change what a variant means. ``alignment.report`` scores every
model on the validation and test problems (the same problems for every seed; none trained on).

Rows (area ``alignment_ablations``): the task's facts (``digits_task``: split sizes, the teacher's accuracy); test
and validation accuracy per variant and seed, each with the run's budget (sampled tokens, trained response tokens,
seconds); per variant the mean and sd over seeds; per pair of variants and seed the paired difference in standard
errors over problems (``paired_z``: mean(a - b) / SE(a - b)). The plot shows test accuracy per variant, one point per
seed. Choices of the default ``grpo`` section read the validation rows only.

    python -m bench.experiments.alignment_ablations --seeds 0 1 2 --out-dir /tmp/align/ablations
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from alignment import dpo, grpo, report, rft, sft
from alignment.evaluation.stats import mean_sd, standard_error
from bench.experiments.alignment_seeds import seeds_command, task_rows
from bench.tools.results import ROOT, BenchSettings, Result, finish, parse_bench
from workbench.params import setting

AREA = "alignment_ablations"
# every loss setting spelled out per variant (GRPOConfig's flags)
_BASE = {"--loss-type": "reinforce_with_baseline", "--normalize-by-std": "true", "--length-normalization":
         "masked_mean", "--epochs-per-rollout-batch": "1", "--skip-zero-std-groups": "true"}
GRPO_VARIANTS: dict[str, dict[str, str]] = {
    "reinforce_baseline": {},  # the group mean as baseline, std-normalized (DeepSeekMath's GRPO, on-policy)
    "no_baseline": {"--loss-type": "no_baseline", "--skip-zero-std-groups": "false"},  # raw rewards
    "no_std": {"--normalize-by-std": "false"},  # Dr. GRPO's first change alone
    "dr_grpo": {"--normalize-by-std": "false", "--length-normalization": "constant"},  # Liu et al. 2025
    "grpo_clip_2ep": {"--loss-type": "grpo_clip", "--epochs-per-rollout-batch": "2"},  # off-policy second pass
    "dapo_clip_higher_2ep": {"--loss-type": "grpo_clip", "--epochs-per-rollout-batch": "2", "--cliprange-low": "0.2",
                             "--cliprange-high": "0.28"},  # DAPO's asymmetric clip (Yu et al. 2025)
}
VARIANTS = ("sft", *GRPO_VARIANTS, "rft", "dpo")


def paired_z(a: list[float], b: list[float]) -> float:
    """mean(a - b) / SE(a - b) over the same problems (SE = sample sd / sqrt(n)); 0 when a and b never differ."""
    diff = [x - y for x, y in zip(a, b, strict=True)]
    mean, se = sum(diff) / len(diff), standard_error(diff)
    if se == 0:
        return 0.0 if mean == 0 else math.copysign(math.inf, mean)
    return mean / se


def variant_flags(name: str) -> dict[str, str]:
    """Every loss flag of a GRPO variant: the shared base with the variant's changes."""
    return {**_BASE, **GRPO_VARIANTS[name]}


def budget(run: Path, epochs: int = 1) -> dict:
    """What a run spent: sampled response tokens (the sum of metrics.csv's ``sampled_tokens``; 0 for SFT and DPO,
    which sample nothing), trained response tokens of a GRPO variant (each step's sampled tokens x its
    ``trained_fraction`` x ``epochs``: a response skipped for a zero-std group is not trained on) and wall-clock
    seconds (the run's summary)."""
    with open(run / "metrics.csv", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r.get("sampled_tokens") not in (None, "")]
    sampled = sum(int(float(r["sampled_tokens"])) for r in rows)
    trained = sum(float(r["sampled_tokens"]) * float(r["trained_fraction"]) * epochs for r in rows
                  if r.get("trained_fraction") not in (None, ""))
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    return {"sampled_tokens": sampled, "trained_response_tokens": round(trained) if trained else None,
            "seconds": summary.get("seconds")}


def run_seed(seed: int, out: Path, params: str) -> dict[str, Path]:
    """Train every variant of one seed under ``out`` (a finished run is kept); return the run folders."""
    common = ["--params", params, "--seed", str(seed), "--report", "none"]
    runs = {name: out / name for name in VARIANTS}
    jobs = [("sft", sft.main, [])]
    jobs += [(name, grpo.main, ["--model", str(runs["sft"]), *itertools.chain(*variant_flags(name).items())])
             for name in GRPO_VARIANTS]
    jobs += [("rft", rft.main, ["--model", str(runs["sft"]), "--match-metrics", str(runs["reinforce_baseline"])]),
             ("dpo", dpo.main, ["--model", str(runs["sft"])])]
    for name, main, extra in jobs:
        if (runs[name] / "latest").exists():
            continue
        started = time.perf_counter()
        argv = [*common, *extra, "--out-dir", str(runs[name]), "--metrics", str(runs[name] / "summary.json")]
        if main(argv) != 0:
            raise SystemExit(f"seed {seed}: {name} failed")
        print(f"seed {seed}: {name} {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return runs


def score_seed(seed: int, out: Path, params: str, runs: dict[str, Path]) -> dict[str, dict[str, list[float]]]:
    """Per split and variant, the reward of every problem (``alignment.report``'s per-example outputs)."""
    outputs = out / "outputs"
    if not (outputs / "dpo_digits.jsonl").is_file():
        argv = ["--params", params, "--seed", str(seed), "--safety-n", "0", "--pass-k", "0",
                "--out", str(out / "alignment.csv"), "--out-dir", str(outputs), "--plot", str(out / "alignment.png"),
                "--metrics", str(out / "alignment.json"), *[f"--model={name}={path}" for name, path in runs.items()]]
        if report.main(argv) != 0:
            raise SystemExit(f"seed {seed}: alignment.report failed")
    scores = {}
    for split, suffix in (("test", ""), ("validation", "_validation")):
        scores[split] = {}
        for name in runs:
            with open(outputs / f"{name}_digits{suffix}.jsonl", encoding="utf-8") as fh:
                scores[split][name] = [float(json.loads(line)["reward"]) for line in fh]
    return scores


def rows_of(scores: dict[int, dict], budgets: dict[int, dict]) -> list[Result]:
    rows = []
    for seed, by_split in scores.items():
        for split, by_variant in by_split.items():
            for name, rewards in by_variant.items():
                rows.append(Result(f"{name}/seed{seed}", f"{split}_accuracy", sum(rewards) / len(rewards),
                                   repeats=len(rewards), extra={"seed": seed, **budgets[seed][name]}))
        test = by_split["test"]
        for a, b in itertools.combinations(VARIANTS, 2):
            z = paired_z(test[a], test[b])
            rows.append(Result(f"{a} - {b}/seed{seed}", "test_paired_z", z, "SE", repeats=len(test[a]),
                               extra={"seed": seed, "difference": (sum(test[a]) - sum(test[b])) / len(test[a])}))
    for name in VARIANTS:
        for key, unit in (("sampled_tokens", "tokens"), ("trained_response_tokens", "tokens"), ("seconds", "s")):
            values = [b[name][key] for b in budgets.values() if b[name][key] is not None]
            if values:
                rows.append(Result(name, f"{key}_mean", sum(values) / len(values), unit, repeats=len(values),
                                   min=min(values), max=max(values)))
        for split in ("test", "validation"):
            accs = [sum(s[split][name]) / len(s[split][name]) for s in scores.values()]
            mean, sd = mean_sd(accs)
            rows.append(Result(name, f"{split}_accuracy_mean", mean, repeats=len(accs), min=min(accs),
                               max=max(accs), extra={"sd": sd}))
    return rows


def plot(scores: dict[int, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4))
    for i, name in enumerate(VARIANTS):
        accs = [sum(s["test"][name]) / len(s["test"][name]) for s in scores.values()]
        ax.bar(i, sum(accs) / len(accs), color="#cfd8e3")
        ax.scatter([i] * len(accs), accs, color="#1f4e79", zorder=3, s=14)
    ax.set_xticks(range(len(VARIANTS)), VARIANTS, rotation=30, ha="right")
    ax.set(ylabel="test accuracy", ylim=(0, 1), title=f"digits task, held out by problem: {len(scores)} seeds "
                                                      "(bar: mean, dots: seeds)")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


@dataclass(frozen=True)
class AlignmentAblationsBench(BenchSettings):
    seeds: tuple[int, ...] = setting((0, 1, 2), "seeds (each: its own SFT model)", nonempty=True)
    out_dir: Path = setting(Path("/tmp/align/ablations"), "folder for every run")
    params: str = setting("params.yaml", "params file whose stage sections the runs use")
    plot: Path = setting(ROOT / "docs" / "benchmarks" / "alignment_ablations.png", "test accuracy per variant and seed")


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(AlignmentAblationsBench, argv)
    scores, budgets = {}, {}
    for seed in args.seeds:
        out = args.out_dir / f"seed{seed}"
        runs = run_seed(seed, out, args.params)
        scores[seed] = score_seed(seed, out, args.params, runs)
        budgets[seed] = {name: budget(path, int(variant_flags(name)["--epochs-per-rollout-batch"])
                                      if name in GRPO_VARIANTS else 1) for name, path in runs.items()}
        line = ", ".join(f"{n} {sum(r) / len(r):.3f}" for n, r in scores[seed]["test"].items())
        print(f"seed {seed} test: {line}", file=sys.stderr, flush=True)
    rows = task_rows(args.params) + rows_of(scores, budgets)
    plot(scores, args.plot)
    for r in rows:
        if "/" not in r.name or r.metric == "test_accuracy":
            print(f"{r.name:>34} {r.metric:<22} {r.value:.4f}")
    return finish(AREA, rows, args, seeds_command("bench.experiments.alignment_ablations", args), show=False)


if __name__ == "__main__":
    sys.exit(main())
