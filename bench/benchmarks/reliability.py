"""Does every long job survive a kill, a full or read-only disk and a corrupt checkpoint? ``python -m
bench.benchmarks.reliability``

Builds a small workspace (``bench.tools.faults``): three generated crawl files of 40 pages, then extract, filter
(language ID, Gopher and PII: the classifiers need trained models), dedup with both engines, a 320-token BPE,
token shards, a tiny ``model.train`` run, a two-run ``scaling.sweep``, SFT from that run, then DPO, GRPO and RFT from
SFT, and ``alignment.evaluate`` of SFT: every job run once, uninterrupted, its outputs the reference. Training runs
are ``--deterministic`` on one thread, so a resumed run must end with the uninterrupted weights bit for bit.

Then each job is broken with each fault of ``--faults`` (seeded by ``--seed`` and the job's name), run again with
the same command and compared. A trial passes when the rerun exits 0 with the reference's outputs (bytes, or
weights), no temporary file or work folder is left, and a disk fault ended the broken run in one ``error:`` line
and exit 2. Rows (passed, and the work the rerun redid): benchmarks/results/reliability.jsonl; the page:
docs/benchmarks/reliability.md (the matrix, then the rows' table by ``bench.tools.report``). ``--jobs`` and
``--faults`` run a subset (then the page is left as it is).
"""

from __future__ import annotations

import random
import shutil
import sys
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bench.tools.faults import Job, Reference, counted, temps, trial, write_params
from bench.tools.report import generate
from bench.tools.results import ROOT, BenchSettings, Result, finish, parse_bench, read_rows
from workbench.files import write_text
from workbench.params import setting

AREA = "reliability"
DOC = ROOT / "docs" / "benchmarks" / "reliability.md"
KILLS = ("kill early", "kill mid-task", "kill while writing")
DISK = ("disk full", "read-only")
ONE_LINE = (*DISK, "truncated shard")  # the broken run must end in one error line, exit 2
FAULTS = (*KILLS, *DISK, "corrupt checkpoint", "truncated shard")

RUN = {"threads": 1, "deterministic": True}
PARAMS = {
    "sample": {"pages": 40},
    "extract": {"inputs": ["raw"], "out_dir": "documents", "metrics": "metrics/extract.json", "workers": 2},
    "filter": {"inputs": ["documents"], "out_dir": "filtered", "rejected_dir": "rejected/filter",
               "metrics": "metrics/filter.json", "workers": 2,
               "steps": {"langid": {"languages": ["en"], "min_score": 0.65, "backend": "fasttext"},
                         "gopher": True, "gopher_rep": True, "pii": True}},
    "dedup": {"inputs": ["filtered"], "out_dir": "deduped", "rejected_dir": "rejected/dedup",
              "metrics": "metrics/dedup.json", "workers": 2},
    "tokenizer": {"input": "deduped", "out_dir": "tokenizer", "metrics": "metrics/tokenizer.json", "vocab_size": 320,
                  "workers": 2},
    "shards": {"input": "deduped", "tokenizer": "tokenizer", "out_dir": "shards", "metrics": "metrics/shards.json",
               "workers": 2},
    "train": {"data": "shards", "out_dir": "runs/base", "metrics": "metrics/train.json", "preset": "nano",
              "model": {"d_model": 32, "n_layers": 2, "n_heads": 2, "context_length": 128}, "batch_size": 4,
              "max_steps": 60, "warmup_steps": 5, "lr": 3e-3, "eval_interval": 20, "eval_batches": 2,
              "log_interval": 1, "ckpt_interval": 20, "device": "cpu", **RUN},
    "sweep": {"data": "shards", "out_dir": "sweep/runs", "results": "sweep/results.csv", "budgets": [2.0e8, 4.0e8],
              "shapes": [[16, 2, 1]], "workers": 1, "min_run_steps": 1, "branches": False, "total_flops": 1.0e10},
    "alignment": {"tokenizer": "tokenizer", "task": "digits", "n_train": 64, "n_test": 8, "max_new_tokens": 40,
                  "eval_batch_size": 8, "ckpt_interval": 4, **RUN},
    "sft": {"model": "runs/base", "out_dir": "alignment/sft", "steps": 16, "batch_size": 4, "lr": 3e-3,
            "eval_interval": 8, "n_train": 64},
    "dpo": {"model": "alignment/sft", "out_dir": "alignment/dpo", "steps": 12, "batch_size": 4, "lr": 1e-4,
            "eval_interval": 6},
    "grpo": {"model": "alignment/sft", "out_dir": "alignment/grpo", "steps": 8, "lr": 1e-4, "rollout_batch_size": 8,
             "group_size": 4, "train_batch_size": 8, "grad_accum": 2, "eval_interval": 4, "max_new_tokens": 24},
    "rft": {"model": "alignment/sft", "out_dir": "alignment/rft", "token_budget": 1200, "rollout_batch_size": 8,
            "group_size": 4, "batch_size": 4, "eval_interval": 4, "max_new_tokens": 24},
}

JOBS = (
    Job("extract", ("pipeline.web.extract",), ("documents",)),
    Job("filter", ("pipeline.filters.stage",), ("filtered", "rejected/filter")),
    Job("dedup", ("pipeline.dedup.stage",), ("deduped", "rejected/dedup")),
    Job("dedup-sharded", ("pipeline.dedup.stage", "--engine", "sharded", "--out-dir", "deduped_sharded",
                          "--rejected-dir", "rejected/dedup_sharded", "--metrics", "metrics/dedup_sharded.json"),
        ("deduped_sharded", "rejected/dedup_sharded")),
    Job("tokenizer", ("tokenizer.train",), ("tokenizer",)),
    Job("shards", ("tokenizer.shards",), ("shards",)),
    Job("train", ("model.train", "--resume"), ("runs/base",), weights="runs/base", interval=20),
    Job("sweep", ("scaling.sweep",), ("sweep",), weights="sweep/runs/C4e8_d16_L2_H1", interval=20),
    Job("sft", ("alignment.sft",), ("alignment/sft",), weights="alignment/sft", interval=4),
    Job("dpo", ("alignment.dpo",), ("alignment/dpo",), weights="alignment/dpo", interval=4),
    Job("grpo", ("alignment.grpo",), ("alignment/grpo",), weights="alignment/grpo", interval=4),
    Job("rft", ("alignment.rft",), ("alignment/rft",), weights="alignment/rft", interval=4),
    Job("evaluate", ("alignment.evaluate", "--task", "digits", "--model", "alignment/sft", "--tokenizer", "tokenizer",
                     "--n", "16", "--max-new-tokens", "40", "--out-dir", "eval", "--report", "eval/report.csv"),
        ("eval/eval_digits.jsonl",)),
)


def build_workspace(folder: Path, jobs: tuple[Job, ...] = JOBS) -> dict[str, Reference]:
    """The workspace with the uninterrupted outputs of ``jobs`` (in order: each job's inputs come first), and each
    job's reference (wall time, atomic writes, metrics rows)."""
    write_params(folder, PARAMS)
    for seed in range(3):  # three crawl files: a killed extract has finished files to keep
        sample = Job("sample", ("pipeline.sample", "--seed", str(seed), "--out", f"raw/crawl-{seed}.warc.gz",
                                "--manifest", f"raw/manifest-{seed}.jsonl"), ())
        counted(sample, folder)
    for path in (folder / "raw").glob("manifest-*.jsonl"):
        path.rename(folder / path.name)  # extract reads every file of raw/
    references = {}
    for job in jobs:
        references[job.name], _ = counted(job, folder)
        print(f"{job.name}: {references[job.name].seconds:.1f} s, {references[job.name].writes} atomic writes",
              file=sys.stderr, flush=True)
    left = temps(folder)
    if left:
        raise RuntimeError(f"uninterrupted runs left temporary files: {left[:3]}")
    return references


def faults_for(job: Job, faults: tuple[str, ...]) -> list[str]:
    only = {"corrupt checkpoint": ("train", "sft", "dpo", "grpo", "rft"), "truncated shard": ("train", "sweep")}
    return [f for f in faults if job.name in only.get(f, (job.name,))]


def run_matrix(jobs: list[Job], faults: tuple[str, ...], seed: int, keep: Path | None = None) -> pd.DataFrame:
    """Every job x fault trial in a fresh workspace; one row per trial."""
    scratch = Path(tempfile.mkdtemp(prefix="lmw-reliability-")) if keep is None else keep
    try:
        workspace = scratch / "workspace"
        references = build_workspace(workspace)
        rows = []
        for job in jobs:
            rng = random.Random(seed * 1_000_003 + zlib.crc32(job.name.encode()))
            for fault in faults_for(job, faults):
                result = trial(job, workspace, scratch, fault, references[job.name], rng)
                rows.append({**result.row(), "reference_s": round(references[job.name].seconds, 2),
                             "passed": passed(result)})
                print(f"{job.name:>14} {fault:<20} identical={result.identical} redone={result.redone:g} of "
                      f"{result.redone_of} {result.redone_unit} temps={result.temps_left} {result.note}",
                      file=sys.stderr, flush=True)
        return pd.DataFrame(rows)
    finally:
        if keep is None:
            shutil.rmtree(scratch, ignore_errors=True)


def passed(result) -> bool:
    disk_ok = result.fault not in ONE_LINE or (result.fault_rc == 2 and result.error_lines == 1)
    return result.identical and result.rerun_rc == 0 and result.temps_left == 0 and disk_ok


def markdown(frame: pd.DataFrame, command: str) -> str:
    """docs/benchmarks/reliability.md: the job x fault matrix (ok or FAIL), the failures, and the marker of the
    section ``bench.tools.report`` fills from the rows (the work each rerun redid, every figure with its row)."""
    cell = frame.assign(cell=["ok" if r.passed else "**FAIL**" for r in frame.itertuples()])
    table = cell.pivot(index="job", columns="fault", values="cell").reindex(
        index=list(dict.fromkeys(frame["job"])), columns=[f for f in FAULTS if f in set(frame["fault"])]).fillna("-")
    failures = frame[~frame["passed"]]
    lines = [
        "# Reliability: every long job against kills, full and read-only disks, corrupt checkpoints",
        "",
        f"Generated by `{command}`; bench/benchmarks/reliability.py says how the workspace is built and "
        "bench/tools/faults.py what each fault does and when it strikes.",
        "",
        "A cell is **ok** when the same command, run again after the fault, succeeded with the uninterrupted run's "
        "outputs (data: every file's SHA-256; training: the final weights `torch.equal`, `--deterministic` on one "
        "thread), no temporary file or work folder was left anywhere in the workspace, and a disk fault or a token "
        "shard cut short ended the broken run in one `error:` line and the bad-input exit status (`exit 2`).",
        "",
        table.to_markdown(),
        "",
    ]
    if len(failures):
        lines += ["## Failures", "", failures[["job", "fault", "note"]].to_markdown(index=False), ""]
    lines += [
        "## Work redone by the rerun",
        "",
        "Per trial: whether it passed (`passed`: `1` or `0`) and the work the rerun did again (`redone`). Training: "
        "the steps between the checkpoint the rerun went on from (none: from the start) and the step the killed run "
        "had reached, against the checkpoint interval as the baseline (a ratio of at most one: at most one interval "
        "redone). Data stages: the rerun's atomic writes (each an output file or the record of a finished file or "
        "task) against the uninterrupted run's; the two metrics files are always written again, a global step "
        "(dedup's single engine, the tokenizer's training) is done again whole, and per-file or per-task work "
        "that finished is kept.",
        "",
        f"<!-- results area={AREA} -->",
        "<!-- /results -->",
    ]
    return "\n".join(lines) + "\n"


def rows_of(frame: pd.DataFrame, command: str) -> list[Result]:
    out = []
    for r in frame.to_dict("records"):
        name = f"{r['job']} / {r['fault']}"
        out.append(Result(name, "passed", float(r["passed"]), "bool", extra=r))
        baseline = "checkpoint interval" if r["redone_unit"] == "steps" else "uninterrupted run's writes"
        out.append(Result(name, "redone", float(r["redone"]), r["redone_unit"], baseline=baseline,
                          baseline_value=float(r["redone_of"]) or None))
    return out


@dataclass(frozen=True)
class ReliabilityBench(BenchSettings):
    jobs: tuple[str, ...] | None = setting(None, "job names (default: all)", metavar="JOB")
    faults: tuple[str, ...] = setting(FAULTS, "faults (default: all)", metavar="FAULT")
    seed: int = setting(0, "seed of the fault instants")


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(ReliabilityBench, argv)
    jobs = [j for j in JOBS if args.jobs is None or j.name in args.jobs]
    frame = run_matrix(jobs, tuple(args.faults), args.seed)
    command = "python -m bench.benchmarks.reliability" + (f" --jobs {' '.join(args.jobs)}" if args.jobs else "")
    page = markdown(frame, command)
    print(page)
    finish(AREA, rows_of(frame, command), args, command, show=False)
    if args.jobs is None and tuple(args.faults) == FAULTS and args.record:
        write_text(DOC, generate(page, read_rows(args.results_dir)))  # the rows' section filled in
    return 0 if frame["passed"].all() else 1


if __name__ == "__main__":
    sys.exit(main())
