"""Real SIGKILLs and disk faults on the CLIs as users run them (subprocesses in a session of their own, workers
included), each followed by the same command: the outputs equal an uninterrupted run's (data: every file's
SHA-256; training: final weights ``torch.equal``), nothing temporary is left. A sample of the matrix of
``python -m bench.benchmarks.reliability`` (docs/benchmarks/reliability.md), which runs every long job against
every fault; the in-process resume tests of each trainer are tests/alignment/test_resume.py."""

from __future__ import annotations

import random

import pytest

from bench.benchmarks.reliability import JOBS, build_workspace, passed
from bench.tools.faults import trial

CHAIN = ("extract", "filter", "dedup", "dedup-sharded", "tokenizer", "shards", "train")
TRIALS = [("extract", "kill while writing"), ("dedup-sharded", "kill mid-task"), ("shards", "kill while writing"),
          ("filter", "disk full"), ("train", "kill mid-task"), ("train", "corrupt checkpoint")]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("reliability")
    jobs = {job.name: job for job in JOBS}
    references = build_workspace(root / "workspace", tuple(jobs[name] for name in CHAIN))
    return root, jobs, references


@pytest.mark.parametrize("name,fault", TRIALS)
def test_the_rerun_after_a_fault_gives_the_uninterrupted_outputs(workspace, name, fault):
    root, jobs, references = workspace
    result = trial(jobs[name], root / "workspace", root, fault, references[name], random.Random(f"{name}/{fault}"))
    assert result.fault_rc != 0, f"{name} was not broken: {result}"  # the fault landed before the job ended
    assert passed(result), result
    if fault == "disk full":
        assert (result.fault_rc, result.error_lines) == (2, 1)
    if result.redone_unit == "steps":
        assert result.redone <= result.redone_of == 20  # at most one of train's checkpoint intervals
