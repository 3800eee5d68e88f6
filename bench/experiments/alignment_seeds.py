"""The alignment evidence over seeds: SFT -> (DPO, RFT, GRPO) per seed, scored on validation and test.

For each seed this runs the four loops with params.yaml's sections (flags override the seed, the folders and
the chain: DPO, GRPO and RFT all start from that seed's SFT model, RFT at GRPO's sampled-token budget), then
``alignment.report`` on the validation and test splits (SFT also gets pass@1 / pass@k), and writes one results row
per stage, seed and split to benchmarks/results/alignment.jsonl, plus mean and sd over seeds, SFT's pass@k and
GRPO's gain over SFT in standard errors of the paired per-problem difference (the acceptance: >= 3 in every seed).
``python -m bench.tools.report`` turns the rows into the tables of docs/benchmarks/alignment.md. Re-run it after a
change of the base model (one command re-validates every choice):

    python -m bench.experiments.alignment_seeds --seeds 0 1 2 --out-dir /tmp/align/seeds
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from alignment import dpo, grpo, report, rft, sft
from alignment.evaluation.stats import mean_sd, standard_error
from alignment.tasks import digits
from bench.tools.results import BenchSettings, Result, finish, parse_bench
from workbench.params import load_section, setting

STAGES = ("sft", "dpo", "rft", "grpo")


def run_seed(seed: int, out: Path, params: str, skip_done: bool = True) -> pd.DataFrame:
    """Train the four stages of one seed under ``out`` (a finished stage is kept) and score them."""
    common = ["--params", params, "--seed", str(seed), "--metrics", "none", "--report", "none"]
    runs = {stage: out / stage for stage in STAGES}
    chain = {"sft": (sft.main, []),
             "dpo": (dpo.main, ["--model", str(runs["sft"])]),
             "grpo": (grpo.main, ["--model", str(runs["sft"])]),
             "rft": (rft.main, ["--model", str(runs["sft"]), "--match-metrics", str(runs["grpo"])])}
    for stage in ("sft", "dpo", "grpo", "rft"):
        if skip_done and (runs[stage] / "latest").exists():
            continue
        main, extra = chain[stage]
        started = time.perf_counter()
        if main([*common, *extra, "--out-dir", str(runs[stage])]) != 0:
            raise SystemExit(f"seed {seed}: {stage} failed")
        print(f"seed {seed}: {stage} {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    csv = out / "alignment.csv"
    newest = max((runs[s] / "latest").stat().st_mtime for s in STAGES)
    if skip_done and csv.is_file() and csv.stat().st_mtime > newest:
        return pd.read_csv(csv)
    argv = ["--params", params, "--seed", str(seed), "--safety-n", "0", "--out", str(csv),
            "--out-dir", str(out / "outputs"), "--plot", str(out / "alignment.png"),
            "--metrics", str(out / "alignment.json"), *[f"--model={s}={runs[s]}" for s in STAGES]]
    if report.main(argv) != 0:
        raise SystemExit(f"seed {seed}: alignment.report failed")
    return pd.read_csv(csv)


def paired_gain_in_se(out: Path, task: str, stage: str, baseline: str = "sft") -> float:
    """(accuracy of ``stage`` - accuracy of ``baseline``) on test / SE of the per-problem difference."""
    def rewards(name: str) -> list[float]:
        with open(out / "outputs" / f"{name}_{task}.jsonl", encoding="utf-8") as fh:
            return [float(json.loads(line)["reward"]) for line in fh]

    diff = [a - b for a, b in zip(rewards(stage), rewards(baseline), strict=True)]
    se = standard_error(diff)
    return sum(diff) / len(diff) / se if se else float("inf") if sum(diff) > 0 else 0.0


def results(frames: dict[int, pd.DataFrame], gains: dict[int, dict[str, float]]) -> list[Result]:
    """Rows named ``<stage>/seed<k>``: accuracy per split (repeats = problems, min/max = the bootstrap 95 % CI; on
    test, ratio = the gain over SFT in paired SE), SFT's pass@k, and per stage the mean and sd over seeds."""
    rows = []
    for seed, frame in frames.items():
        sft_test = frame[(frame["split"] == "test") & (frame["stage"] == "sft")].iloc[0]
        for rec in frame.to_dict("records"):
            vs_sft = rec["stage"] != "sft" and rec["split"] == "test"
            rows.append(Result(
                f"{rec['stage']}/seed{seed}", f"{rec['split']}_accuracy", rec["accuracy"],
                baseline="sft" if vs_sft else None, baseline_value=sft_test["accuracy"] if vs_sft else None,
                ratio=gains[seed][rec["stage"]] if vs_sft else None,
                repeats=int(rec["n_problems"]), min=rec["ci_low"], max=rec["ci_high"],
                extra={"se": rec["se"], "ci_low": rec["ci_low"], "ci_high": rec["ci_high"], "seed": seed}))
        rows.append(Result(f"sft/seed{seed}", f"test_pass_at_{int(sft_test['k'])}", sft_test["pass_at_k"],
                           baseline="pass@1", baseline_value=sft_test["pass_at_1"]))
    for stage in STAGES:
        accs = [f[(f["split"] == "test") & (f["stage"] == stage)]["accuracy"].iloc[0] for f in frames.values()]
        mean, sd = mean_sd(accs)
        rows.append(Result(stage, "test_accuracy_mean", mean, repeats=len(accs), min=min(accs), max=max(accs),
                           extra={"sd": sd}))
        rows.append(Result(stage, "test_accuracy_sd", sd, repeats=len(accs)))
    return [r for r in rows if r.value is not None and r.value == r.value]


def task_rows(params: str) -> list[Result]:
    """The task's facts as rows (name ``digits_task``): problem keys, the held-out reserve, the split sizes and the
    teacher's accuracy on validation and test (how good the demonstrations are on problems never trained on)."""
    cfg = load_section("sft", params)
    n = int(cfg.get("n_test", 200))
    n_digits = int(cfg.get("digits", 2))
    slip = float(cfg.get("teacher_slip", 0.5))
    train, val, test = digits.digit_splits(int(cfg.get("n_train", 0)), n, n, n_digits)
    rows = [Result("digits_task", "problem_keys", len(digits.all_keys(n_digits)), "problems (a sum and its commuted "
                   "pair are one)"),
            Result("digits_task", "held_out_keys", digits.RESERVED, "problems never trained on"),
            Result("digits_task", "validation_problems", len(val)), Result("digits_task", "test_problems", len(test)),
            Result("digits_task", "sft_demonstrations", len(train))]
    for split, items in (("validation", val), ("test", test)):
        right = sum(not digits.teacher_is_wrong(item, slip) for item in items)
        rows.append(Result("digits_task", f"teacher_accuracy_{split}", right / len(items),
                           extra={"teacher_slip": slip}))
    return rows


def seeds_command(module: str, args) -> str:
    """The command a row of a seeded alignment experiment records: its seeds, and its params file when not the
    default."""
    command = f"python -m {module} --seeds " + " ".join(map(str, args.seeds))
    return command + (f" --params {args.params}" if args.params != "params.yaml" else "")


@dataclass(frozen=True)
class AlignmentSeedsBench(BenchSettings):
    seeds: tuple[int, ...] = setting((0, 1, 2), "seeds of the SFT -> DPO/RFT/GRPO chain", nonempty=True)
    out_dir: Path = setting(Path("/tmp/align/seeds"), "folder for the runs of each seed")
    params: str = setting("params.yaml", "params file whose stage sections the runs use")
    area: str = setting("alignment", "results file (and doc section) the rows go to")


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(AlignmentSeedsBench, argv)
    frames, gains = {}, {}
    for seed in args.seeds:
        out = args.out_dir / f"seed{seed}"
        frames[seed] = run_seed(seed, out, args.params)
        gains[seed] = {s: paired_gain_in_se(out, frames[seed]["task"].iloc[0], s) for s in STAGES if s != "sft"}
        print(f"seed {seed}: (stage - SFT) on test in paired SE: {gains[seed]}", file=sys.stderr, flush=True)
    rows = task_rows(args.params) + results(frames, gains)
    for r in rows:
        print(f"{r.name:>14} {r.metric:<20} {r.value:.4f}  {r.extra or ''}")
    return finish(args.area, rows, args, seeds_command("bench.experiments.alignment_seeds", args), show=False)


if __name__ == "__main__":
    sys.exit(main())
