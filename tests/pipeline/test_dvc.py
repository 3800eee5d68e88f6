"""``dvc repro`` on a small copy of the default pipeline: runs end to end, then reruns only what changed."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from workbench import import_names

ROOT = Path(__file__).resolve().parents[2]
PATH = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # the venv's dvc and python
pytestmark = pytest.mark.skipif(shutil.which("dvc", path=PATH) is None, reason="dvc not installed")


def _run(args, cwd):
    env = {**os.environ, "PATH": PATH}
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _ran(output: str) -> list[str]:
    return [line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage")]


# (upstream, downstream) stage pairs of dvc.yaml; stages without a path between them may run in any order
EDGES = [("sample", "extract"), ("extract", "filter"), ("train_classifiers", "filter"), ("filter", "dedup"),
         ("dedup", "train_tokenizer"), ("train_tokenizer", "tokenize"), ("tokenize", "data_report"),
         ("tokenize", "train"), ("tokenize", "sweep"), ("sweep", "fit"), ("train", "sft"), ("sft", "dpo"),
         ("sft", "grpo"), ("grpo", "rft"), ("dpo", "evaluate"), ("grpo", "evaluate"), ("rft", "evaluate"),
         ("data_report", "report"), ("train", "report"), ("fit", "report"),
         ("evaluate", "report")]
STAGES = {s for edge in EDGES for s in edge}
PACKAGES = tuple(p for p in import_names.PACKAGES if p != "bench")
MAX_METRIC_COLUMNS = 40  # `dvc metrics show` prints one column per distinct key: it must fit a terminal


def _check_order(ran: list[str], expected: set[str]) -> None:
    assert set(ran) == expected and len(ran) == len(expected), ran
    for up, down in EDGES:
        if up in expected and down in expected:
            assert ran.index(up) < ran.index(down), (up, down, ran)


def _tiny_repo(tmp_path: Path) -> dict:
    """A git + DVC repo in tmp_path with the code, dvc.yaml and a params.yaml scaled down to seconds."""
    for name in ("dvc.yaml", "params.yaml", ".dvcignore"):
        shutil.copy(ROOT / name, tmp_path / name)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    params = yaml.safe_load((tmp_path / "params.yaml").read_text())
    params["sample"]["pages"] = 80
    params["classify"]["generate"] = 2000
    params["filter"]["workers"] = 1
    params["dedup"]["workers"] = 1
    params["tokenizer"]["vocab_size"] = 400
    params["train"].update(preset="nano", batch_size=4, max_steps=10, warmup_steps=2, eval_interval=5,
                           eval_batches=2, ckpt_interval=5, device="cpu")
    params["train"]["model"]["context_length"] = 64  # a digits prompt + 8 new tokens fit
    params["sweep"].update(budgets=[2e8, 4e8], shapes=[[16, 1, 2], [32, 1, 2], [48, 1, 2]], total_flops=1e10,
                           min_run_steps=1, max_run_steps=0)
    params["sweep"]["train"].update(model={"context_length": 16}, batch_size=4, eval_batches=2, threads=1)
    params["scaling_fit"]["bootstrap"] = 10
    tiny = dict(n_train=16, n_test=4, max_new_tokens=8, eval_interval=0)
    params["sft"].update(tiny, steps=2, batch_size=4)
    params["dpo"].update(tiny, steps=2, batch_size=2)
    params["grpo"].update(tiny, steps=2, rollout_batch_size=4, group_size=2, train_batch_size=4, grad_accum=1)
    params["rft"].update(tiny, rollout_batch_size=4, group_size=2, batch_size=2)
    params["alignment_report"].update(pass_k=2)
    params["alignment_report"].update(n=4, max_new_tokens=8)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    _run(["git", "init", "-q"], tmp_path)
    _run(["dvc", "init", "-q"], tmp_path)
    return params


@pytest.mark.slow
def test_dvc_repro_runs_once_then_only_changed_stages(tmp_path):
    params = _tiny_repo(tmp_path)

    _check_order(_ran(_run(["dvc", "repro"], tmp_path)), STAGES)
    for out in ("data/raw/sample.warc.gz", "data/documents/sample.jsonl.gz", "data/classifiers/quality.bin",
                "data/filtered/sample.jsonl.gz", "data/rejected/filter/sample.jsonl.gz",
                "data/deduped/sample.jsonl.gz", "metrics/filter.json", "metrics/dedup.json",
                "reports/data_funnel.csv", "reports/data_funnel.png", "data/tokenizer/merges.txt",
                "data/shards/train.bin", "data/shards/meta.json", "metrics/extract.json",
                "data/runs/default/metrics.csv", "metrics/train.json", "data/sweep/results.csv",
                "data/sweep/fit/fit.json", "metrics/fit.json", "metrics/sft.json", "metrics/dpo.json",
                "metrics/grpo.json", "data/alignment/grpo/metrics.csv", "metrics/rft.json", "reports/alignment.csv",
                "reports/alignment.png", "metrics/alignment.json", "reports/leaderboard.csv", "reports/summary.md",
                "reports/training_curves.png", "metrics/report.json"):
        assert (tmp_path / out).is_file(), out
    assert _ran(_run(["dvc", "repro"], tmp_path)) == []
    _check_metrics_fit_a_terminal(tmp_path)

    params["tokenizer"]["vocab_size"] = 420
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    _check_order(_ran(_run(["dvc", "repro"], tmp_path)),
                 {"train_tokenizer", "tokenize", "data_report", "train", "sweep", "fit", "sft", "dpo", "grpo",
                  "rft", "evaluate", "report"})


def _check_metrics_fit_a_terminal(root: Path) -> None:
    """Every stage's metrics file is flat and the union of their keys is a readable table."""
    shown = json.loads(_run(["dvc", "metrics", "show", "--json"], root))
    files = next(iter(shown.values()))["data"]
    keys = set()
    for path, entry in files.items():
        data = entry["data"]
        assert all(not isinstance(v, (dict, list)) for v in data.values()), f"{path} is not flat: {data}"
        keys |= set(data)
    assert len(files) >= 14 and len(keys) <= MAX_METRIC_COLUMNS, sorted(keys)


@pytest.mark.slow
def test_dvc_exp_run_with_a_changed_param(tmp_path):
    """`dvc exp run -S` runs an experiment on the tiny DAG and `dvc exp show` lists it with its params and metrics."""
    _tiny_repo(tmp_path)
    _run(["dvc", "repro", "data_report"], tmp_path)
    _run(["git", "add", "-A"], tmp_path)
    _run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "baseline"], tmp_path)
    out = _run(["dvc", "exp", "run", "data_report", "-n", "dedup-07", "-S", "dedup.jaccard_threshold=0.7"], tmp_path)
    assert "dedup" in _ran(out) and "extract" not in _ran(out)
    shown = _run(["dvc", "exp", "show", "--csv"], tmp_path)
    header, *rows = [line.split(",") for line in shown.strip().splitlines()]
    assert "dedup.jaccard_threshold" in header
    assert any(h == "docs_out" or h.endswith(":docs_out") for h in header)  # file:key when files share a key
    exp = next(r for r in rows if "dedup-07" in r)
    assert exp[header.index("dedup.jaccard_threshold")] == "0.7"
