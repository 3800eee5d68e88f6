"""The data stages on a real cluster engine: extract and filter on a Dask ``LocalCluster`` (2 worker processes) and on
a local ``ray.init()`` (2 CPUs) write byte-identical outputs to the local executor's (the reference), through the
API and through the command line with ``--address``; a task's exception is re-raised as it is locally; a worker
that dies or a task that hangs stops the stage with ``TaskFailed`` instead of hanging it. One cluster per engine is
shared by the module (starting one costs seconds). Also: the thread time limit that extraction uses on Dask's worker
threads, where SIGALRM cannot reach."""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

import pipeline.web.extract as extract
from pipeline.filters import stage as filter_step
from pipeline.filters.stage import FilterConfig, run_filter
from pipeline.sample.crawl import generate_sample
from pipeline.sample.labels import write_labelled_data
from pipeline.web.extract import ExtractConfig, run_extract
from pipeline.web.warc import Payload
from tests.pipeline.warcs import PROSE, page
from tokenizer.encoder import Tokenizer
from tokenizer.shards import write_shards
from workbench.documents import EOT
from workbench.executor import DaskExecutor, RayExecutor, TaskFailed, make_executor, thread_time_limit

ENGINES = {"dask": "dask.distributed", "ray": "ray"}
TIMING_KEYS = ("seconds", "docs_per_s")


@dataclass(frozen=True)
class LocalRun:
    """Three generated crawl files, and what the local executor made of them (the reference)."""

    warcs: list[Path]
    documents: Path
    filtered: Path
    rejected: Path
    extract_metrics: dict
    filter_metrics: dict
    filter_cfg: FilterConfig


@dataclass(frozen=True)
class Cluster:
    kind: str
    executor: DaskExecutor | RayExecutor
    address: str


def _filter_cfg(model: Path) -> FilterConfig:
    steps = {"langid": True, "gopher": True, "gopher_rep": True, "c4": True,
             "quality": {"model_path": str(model), "threshold": 0.5}, "pii": True}
    return FilterConfig(steps=steps, workers=2)


@pytest.fixture(scope="module")
def local_run(tmp_path_factory) -> LocalRun:
    pytest.importorskip("trafilatura")
    pytest.importorskip("fasttext")
    from pipeline.classifiers.models import FastTextClassifier

    root = tmp_path_factory.mktemp("local_run")
    warcs = []
    for seed in range(3):
        warcs.append(root / f"crawl-{seed}.warc.gz")
        generate_sample(warcs[-1], root / f"manifest-{seed}.jsonl", pages=20, seed=seed)
    train, _ = write_labelled_data(root / "labels", "quality", 200, seed=0)
    model = root / "quality.bin"
    FastTextClassifier.train(train, model, dim=8, bucket=1000, epoch=2)
    cfg = _filter_cfg(model)
    ext = run_extract(warcs, root / "documents", root / "extract.json", ExtractConfig(workers=1))
    filt = run_filter([root / "documents"], root / "filtered", root / "rejected", root / "filter.json",
                      FilterConfig(steps=cfg.steps, workers=1))
    return LocalRun(warcs, root / "documents", root / "filtered", root / "rejected", ext, filt, cfg)


@pytest.fixture(scope="module", params=[pytest.param(kind, marks=pytest.mark.slow) for kind in ENGINES])
def cluster(request) -> Cluster:
    """Measured on 2 cores: start ~1.5 s (Dask), ~5-7 s (Ray); every test of the module together ~30 s."""
    pytest.importorskip(ENGINES[request.param])
    with make_executor(request.param, workers=2) as executor:
        if request.param == "dask":
            address = executor.client.scheduler.address
        else:
            address = executor._ray.get_runtime_context().gcs_address
        yield Cluster(request.param, executor, address)


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _untimed(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if k not in TIMING_KEYS}


def test_extract_on_the_cluster_is_byte_identical_to_local(local_run, cluster, tmp_path):
    m = run_extract(local_run.warcs, tmp_path / "docs", tmp_path / "extract.json", ExtractConfig(workers=2),
                    executor=cluster.executor)
    reference = _tree(local_run.documents)
    assert len(reference) == 6 and local_run.extract_metrics["docs_out"] > 40  # 3 documents files + 3 stats
    assert _tree(tmp_path / "docs") == reference
    assert _untimed(m) == _untimed(local_run.extract_metrics)


def test_filter_on_the_cluster_is_byte_identical_to_local(local_run, cluster, tmp_path):
    m = run_filter([local_run.documents], tmp_path / "filtered", tmp_path / "rejected", tmp_path / "filter.json",
                   local_run.filter_cfg, cluster.executor)
    reference = local_run.filter_metrics
    assert 0 < reference["docs_out"] < reference["docs_in"] and reference["steps"]["quality"]["docs_in"] > 0
    assert _tree(tmp_path / "filtered") == _tree(local_run.filtered)
    assert _tree(tmp_path / "rejected") == _tree(local_run.rejected)
    assert m["drops"] == reference["drops"] and m["docs_out"] == reference["docs_out"]


def test_tokenize_on_the_cluster_is_byte_identical_to_local(local_run, cluster, tmp_path):
    """Issue 36: token shards (train.bin, val.bin, meta.json) from one task per documents file on Ray or Dask
    equal the local streaming run's, byte for byte."""
    tok = _byte_tokenizer(tmp_path)
    local = write_shards(local_run.documents, tok, tmp_path / "local", val_fraction=0.1)
    remote = write_shards(local_run.documents, tok, tmp_path / "remote", val_fraction=0.1, executor=cluster.executor)
    assert local["train_docs"] > 40 and local["val_docs"] > 0
    assert _tree(tmp_path / "remote") == _tree(tmp_path / "local")
    assert remote["train_tokens"] == local["train_tokens"] and remote["val_docs"] == local["val_docs"]


def _byte_tokenizer(tmp_path: Path) -> Path:
    """A byte-level tokenizer with the end-of-text token (no merges): enough to compare bytes."""
    vocab = {i: bytes([i]) for i in range(256)} | {256: EOT.encode()}
    folder = tmp_path / "tokenizer"
    folder.mkdir()
    Tokenizer(vocab, [], [EOT]).save(folder / "vocab.json", folder / "merges.txt")
    return folder


def test_the_commands_run_on_the_cluster_at_address(local_run, cluster, tmp_path, capsys):
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"filter": {"steps": local_run.filter_cfg.steps, "executor": cluster.kind,
                                                 "address": cluster.address, "task_timeout_s": 120}}))
    extract_argv = ["--params", str(params), *map(str, local_run.warcs), "--out-dir", str(tmp_path / "docs"),
                    "--metrics", str(tmp_path / "extract.json"), "--executor", cluster.kind,
                    "--address", cluster.address]
    assert extract.main(extract_argv) == 0
    # the reference's input (the stats name their input file)
    assert filter_step.main(["--params", str(params), str(local_run.documents), "--out-dir", str(tmp_path / "kept"),
                             "--rejected-dir", str(tmp_path / "rejected"),
                             "--metrics", str(tmp_path / "filter.json")]) == 0
    assert _tree(tmp_path / "docs") == _tree(local_run.documents)
    assert _tree(tmp_path / "kept") == _tree(local_run.filtered)
    assert "filter:" in capsys.readouterr().out
    if cluster.kind == "dask":  # connected, not started: the shared cluster still runs
        assert cluster.executor.client.status == "running"
        assert len(cluster.executor.client.scheduler_info()["workers"]) == 2


def _fail_on_three(x: int) -> int:
    if x == 3:
        raise ValueError(f"bad input {x}")
    return x * x


def _kill_own_worker(x: int) -> int:
    os.kill(os.getpid(), signal.SIGKILL)
    return x


def _sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def test_a_task_error_is_raised_as_under_the_local_executor(cluster):
    assert sorted(cluster.executor.map(_fail_on_three, [0, 1, 2])) == [0, 1, 4]
    with pytest.raises(ValueError, match="^bad input 3$"):
        list(make_executor("local", 1).map(_fail_on_three, [3]))
    with pytest.raises(ValueError, match="^bad input 3$"):
        list(cluster.executor.map(_fail_on_three, [1, 3]))


def test_a_worker_that_dies_stops_the_stage_with_a_clear_error(cluster):
    start = time.perf_counter()
    with pytest.raises(TaskFailed, match=f"^task 7 failed on {cluster.kind.capitalize()}: "):
        list(cluster.executor.map(_kill_own_worker, [7]))
    assert time.perf_counter() - start < 60  # the engine's retries, then the error (measured: ~1 s dask, ~4 s ray)
    assert sorted(cluster.executor.map(_fail_on_three, [0, 2])) == [0, 4]  # the cluster still works


def test_a_stalled_stage_times_out_instead_of_hanging(cluster):
    """Last in the module: Dask cannot stop the sleeping thread, so one worker stays busy for its 3 s."""
    if cluster.kind == "dask":
        executor = DaskExecutor(cluster.address, timeout_s=0.5)
    else:
        executor = RayExecutor(timeout_s=0.5)  # Ray is initialized: this joins the module's instance
    start = time.perf_counter()
    with executor, pytest.raises(TaskFailed, match=r"no task finished in 0.5 s; 1 unfinished, cancelled: 3"):
        list(executor.map(_sleep, [3]))
    assert time.perf_counter() - start < 2.5


def test_an_address_needs_a_cluster_executor():
    with pytest.raises(ValueError, match="for the ray and dask executors"):
        make_executor("local", 2, address="tcp://scheduler:8786")


def test_an_address_without_a_cluster_is_a_one_line_error():
    dask = pytest.importorskip("dask")
    pytest.importorskip("dask.distributed")
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        with pytest.raises(ValueError, match=r"^executor dask: cannot reach the dask cluster at tcp://127.0.0.1:1: "):
            make_executor("dask", address="tcp://127.0.0.1:1")


def test_a_ray_address_without_a_cluster_is_a_one_line_error():
    pytest.importorskip("ray")
    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"^executor ray: cannot reach the ray cluster at 127.0.0.1:1: nothing"):
        make_executor("ray", address="127.0.0.1:1")
    assert time.perf_counter() - start < 10  # not Ray's minutes of retries


# -- the time limit on a worker thread (no cluster needed) ---------------------------------------------------------
class _Late(Exception):
    pass


def _in_thread(fn):
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            out["error"] = e

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(10)
    assert not thread.is_alive()
    return out


def _spin(seconds: float) -> int:
    end, n = time.perf_counter() + seconds, 0
    while time.perf_counter() < end:  # Python bytecode: where an asynchronous exception lands
        n += 1
    return n


def test_thread_time_limit_stops_a_long_block_and_never_fires_after_a_short_one():
    def long_block():
        start = time.perf_counter()
        with pytest.raises(_Late):
            with thread_time_limit(0.1, _Late):
                _spin(5)
        return time.perf_counter() - start

    out = _in_thread(long_block)
    assert "error" not in out and out["value"] < 1.0

    def short_block():
        with thread_time_limit(0.2, _Late):
            _spin(0.01)
        return _spin(0.5)  # past the limit: nothing may land here

    assert "error" not in _in_thread(short_block)


def test_extraction_on_a_worker_thread_counts_a_slow_record(monkeypatch):
    """Dask runs each task on a worker thread: the record time limit must hold there as in a pool process."""
    monkeypatch.setattr(extract, "main_text", lambda html, extractor: _spin(5))
    extract._init_worker(ExtractConfig(timeout_s=0.1))
    start = time.perf_counter()
    payload = Payload("<urn:uuid:1>", "http://a.example/", "2024-05-01T12:00:00Z", "html", page("Slow", PROSE), None)
    assert _in_thread(lambda: extract._extract_one(payload)) == {"value": "extract_timeout"}
    assert time.perf_counter() - start < 2.0
