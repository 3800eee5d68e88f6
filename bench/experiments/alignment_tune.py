"""Choose an alignment stage's hyperparameters on the validation split: a grid x seeds, run in parallel processes.

    python -m bench.experiments.alignment_tune --stage sft --grid steps=800,1600 lr=2e-3,4e-3 --seeds 0 1 2 \\
        --workers 4 --out-dir /tmp/align/tune [--params params.yaml] [--model DIR | --model-template T]

Every grid point trains the stage once per seed (params.yaml's section; the flags of the grid and ``--seed`` win;
one torch thread per process), and reads its last in-loop validation accuracy from ``metrics.csv`` (the
stages evaluate greedily on the validation problems, never on test). The point with the best mean over seeds is
chosen; the table, the choice and one results row per run go to benchmarks/results/alignment_tune.jsonl.

``--model-template`` starts each seed from its own model, e.g. the chosen SFT point of an earlier call:
``--model-template /tmp/align/tune/sft/steps=1600,lr=0.004/seed{seed}``. A finished run is kept (resumable).
"""

from __future__ import annotations

import csv
import itertools
import multiprocessing
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch  # also at the top so that the results rows' machine (bench.tools.results.machine) names the GPU

from bench.tools.results import BenchSettings, Result, finish, parse_bench
from workbench.params import REQUIRED, setting, usage_error

STAGES = ("sft", "dpo", "grpo", "rft")


def parse_grid(items: list[str]) -> list[dict[str, str]]:
    """``["steps=800,1600", "lr=2e-3"]`` -> every combination as {flag: value}, in the order given."""
    axes = []
    for item in items:
        key, sep, values = item.partition("=")
        if not sep or not key or not values:
            usage_error(f"--grid: expected NAME=V1,V2,... (got {item!r})")
        axes.append([(key, v) for v in values.split(",")])
    return [dict(point) for point in itertools.product(*axes)]


def point_name(point: dict[str, str], varied: set[str] | None = None) -> str:
    """``steps=800,lr=2e-3``: the flags that vary across the grid (a single-valued axis is a fixed flag)."""
    return ",".join(f"{k}={v}" for k, v in point.items() if varied is None or k in varied) or "defaults"


def point_names(points: list[dict[str, str]]) -> list[str]:
    """Each point's name, naming only the flags whose value differs between points."""
    varied = {k for k in points[0] if len({p[k] for p in points}) > 1}
    return [point_name(p, varied) for p in points]


def last_validation(run: Path) -> tuple[int, float] | None:
    """(step or round, val_accuracy) of the last evaluated row of ``run/metrics.csv``; None when it has none."""
    path = run / "metrics.csv"
    if not path.is_file():
        return None
    last = None
    with open(path, encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            if row.get("val_accuracy"):
                last = (int(row.get("step") or row["round"]), float(row["val_accuracy"]))
    return last


def _run(job: tuple[str, list[str], str]) -> tuple[str, float]:
    stage, argv, label = job
    import importlib

    torch.set_num_threads(1)
    started = time.perf_counter()
    rc = importlib.import_module(f"alignment.{stage}").main(argv)
    if rc != 0:
        raise RuntimeError(f"{label}: alignment.{stage} exited {rc}")  # SystemExit would hang the pool
    return label, time.perf_counter() - started


def run_grid(stage: str, points: list[dict[str, str]], seeds: list[int], out: Path, params: str,
             model_template: str | None, workers: int) -> dict[tuple[str, int], tuple[int, float]]:
    jobs, runs = [], {}
    for (name, point), seed in itertools.product(zip(point_names(points), points, strict=True), seeds):
        run = out / stage / name / f"seed{seed}"
        runs[name, seed] = run
        if (run / "latest").exists() and last_validation(run):
            continue
        flags = itertools.chain.from_iterable((f"--{k.replace('_', '-')}", v.replace("{seed}", str(seed)))
                                              for k, v in point.items())
        argv = ["--params", params, "--seed", str(seed), "--out-dir", str(run), "--metrics", "none",
                "--report", "none", *flags]
        if model_template:
            argv += ["--model", model_template.format(seed=seed)]
        jobs.append((stage, argv, f"{name} seed {seed}"))
    print(f"{stage}: {len(jobs)} runs to train ({len(runs) - len(jobs)} kept), {workers} workers", file=sys.stderr)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        for label, seconds in pool.imap_unordered(_run, jobs):
            print(f"  done {label} in {seconds:.0f} s", file=sys.stderr, flush=True)
    found = {key: last_validation(run) for key, run in runs.items()}
    missing = [str(runs[k]) for k, v in found.items() if v is None]
    if missing:
        raise SystemExit(f"no validation accuracy in {missing[0]}/metrics.csv ({len(missing)} runs)")
    return found


def choose(points: list[dict[str, str]], seeds: list[int], found) -> tuple[str, list[Result]]:
    rows, means = [], {}
    for name in point_names(points):
        accs = [found[name, s][1] for s in seeds]
        means[name] = statistics.fmean(accs)
        for seed, acc in zip(seeds, accs, strict=True):
            rows.append(Result(f"{name}/seed{seed}", "val_accuracy", acc, extra={"step": found[name, seed][0]}))
        rows.append(Result(name, "val_accuracy_mean", means[name], repeats=len(seeds), min=min(accs),
                           max=max(accs)))
    best = max(means, key=means.get)
    return best, rows


@dataclass(frozen=True, kw_only=True)
class AlignmentTuneBench(BenchSettings):
    stage: str = setting(REQUIRED, "the alignment stage whose settings are tuned", choices=STAGES)
    grid: tuple[str, ...] = setting((), "the stage's flags to vary (e.g. steps=800,1600 lr=2e-3,4e-3); one value: a "
                                        "fixed flag (e.g. tokenizer=DIR)", metavar="FLAG=V1,V2")
    set: tuple[str, ...] = setting((), "fixed flags for every run, commas kept ({seed} substituted)",
                                   metavar="FLAG=VALUE")
    seeds: tuple[int, ...] = setting((0, 1, 2), "seeds per grid point", nonempty=True)
    params: str = setting("params.yaml", "params file whose stage section is the base")
    model_template: str | None = setting(None, "each seed's starting model, {seed} substituted")
    workers: int = setting(max(1, (os.cpu_count() or 2) - 1),
                           "runs in parallel processes (default: the cores but one)", at_least=1)
    out_dir: Path = setting(Path("/tmp/align/tune"), "folder for the runs")


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(AlignmentTuneBench, argv)
    points = [{**p, **dict(kv.split("=", 1) for kv in args.set)} for p in parse_grid(args.grid)]
    found = run_grid(args.stage, points, args.seeds, args.out_dir, args.params, args.model_template, args.workers)
    best, rows = choose(points, args.seeds, found)
    print(f"\n{args.stage}: validation accuracy per point (seeds {' '.join(map(str, args.seeds))})")
    for r in rows:
        if r.metric == "val_accuracy_mean":
            per_seed = " ".join(f"{found[r.name, s][1]:.3f}" for s in args.seeds)
            print(f"  {'*' if r.name == best else ' '} {r.name:<32} mean {r.value:.3f}   {per_seed}")
    print(f"chosen: {best} (best mean validation accuracy)")
    rows = [Result(f"{args.stage}/{r.name}", r.metric, r.value, repeats=r.repeats, min=r.min, max=r.max,
                   extra={**r.extra, "chosen": r.name.split("/")[0] == best}) for r in rows]
    command = f"python -m bench.experiments.alignment_tune --stage {args.stage} --grid {' '.join(args.grid)} " \
              f"--seeds {' '.join(map(str, args.seeds))}"
    if args.model_template:
        command += f" --model-template {args.model_template}"
    return finish("alignment_tune", rows, args, command, show=False)


if __name__ == "__main__":
    sys.exit(main())
