"""The sharded dedup engine (pipeline/dedup/sharded.py) against the single-process stage (the reference): kept and
rejected files byte-identical on hand-made corpora (exact, near and line duplicates across files, bad lines,
documents without id), on the generated crawl, on real pages from ../shared/data (skipped when absent), on the
local pool and on Ray and Dask (skipped when not installed); a run killed mid-stage resumes per task to the same
bytes; bucket verification does not depend on band order."""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pipeline.dedup import sharded, tasks
from pipeline.dedup.minhash import UnionFind, candidate_buckets, jaccard, verified_clusters
from pipeline.dedup.stage import DedupConfig, run_dedup
from tests.pipeline.test_dedup import edit, prose
from workbench.executor import LocalExecutor, make_executor
from workbench.files import read_jsonl, write_jsonl
from workbench.ledger import WORK_FOLDER

ROOT = Path(__file__).resolve().parents[2]
REAL_PAGES = ROOT.parent / "shared" / "data" / "web"
ENGINES = {"dask": "dask.distributed", "ray": "ray"}


def _tree(folder: Path) -> dict[str, bytes]:
    """Every documents file under ``folder`` (not _done, not _work): name -> bytes."""
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.jsonl*"))}


def _both(inputs, tmp_path: Path, cfg: DedupConfig, executor=None, tag: str = "") -> tuple[dict, dict]:
    """Run the single stage and the sharded one on ``inputs``; assert byte-identical outputs; return both metrics."""
    ref = run_dedup(inputs, tmp_path / f"single{tag}", None, cfg, rejected_dir=tmp_path / f"single-rej{tag}")
    sharded_cfg = DedupConfig(**{**cfg.__dict__, "engine": "sharded"})
    got = run_dedup(inputs, tmp_path / f"sharded{tag}", None, sharded_cfg, rejected_dir=tmp_path / f"sharded-rej{tag}",
                    executor=executor)
    kept, rejected = _tree(tmp_path / f"single{tag}"), _tree(tmp_path / f"single-rej{tag}")
    assert kept and _tree(tmp_path / f"sharded{tag}") == kept
    assert _tree(tmp_path / f"sharded-rej{tag}") == rejected
    assert not (tmp_path / f"sharded{tag}" / WORK_FOLDER).exists()  # removed once complete
    same = ("docs_in", "docs_out", "chars_in", "chars_out", "drops", "clusters", "clustered_docs", "candidate_docs",
            "lines_removed", "bad_files", "invalid_utf8")
    assert {k: got.get(k) for k in same} == {k: ref.get(k) for k in same}
    return ref, got


def _corpus(folder: Path) -> Path:
    """Three files: exact copies (normalisation-equal too), near copies, shared boilerplate lines, wordless texts,
    documents without id, a bad JSON line and invalid UTF-8, all across files."""
    rng = random.Random(3)
    base = [prose(100 + k) for k in range(12)]
    footer = "Share this post!\nCookies keep this site going."
    docs = []
    for k in range(60):
        b = base[k % 12]
        kind = rng.choice(["orig", "exact", "upper", "near", "near", "other", "footer"])
        text = {"orig": b, "exact": b, "upper": b.upper() + "!", "near": edit(b, rng.randint(1, 4), k),
                "other": prose(500 + k), "footer": prose(600 + k) + "\n" + footer}[kind]
        doc = {"id": f"d{k}", "text": text, "url": f"https://x/{k}"}
        if k % 17 == 5:
            del doc["id"]
        docs.append(doc)
    docs += [{"id": "empty", "text": ""}, {"id": "punct", "text": "!!! ..."}, {"id": "empty2", "text": "  "}]
    write_jsonl(folder / "a.jsonl.gz", docs[:25])
    write_jsonl(folder / "b.jsonl.gz", docs[25:50])
    write_jsonl(folder / "c.jsonl", docs[50:])
    with gzip.open(folder / "b.jsonl.gz", "ab") as fh:
        bad = json.dumps({"id": "bad-utf8", "text": "café " + base[0]}, ensure_ascii=False).encode()
        fh.write(b'{"id": "broken", "text": \n' + bad.replace("é".encode(), b"\xe9") + b"\n")
    return folder


@pytest.mark.parametrize("cfg", [
    DedupConfig(), DedupConfig(workers=2, shards=3), DedupConfig(line_dedup="first", shards=2),
    DedupConfig(exact=False, shards=1), DedupConfig(num_hashes=32, num_bands=16, jaccard_threshold=0.5, shards=5),
], ids=["default", "pool-3-shards", "line-dedup", "no-exact", "loose"])
def test_sharded_is_byte_identical_to_single_on_a_hand_made_corpus(tmp_path, cfg):
    ref, _ = _both(_corpus(tmp_path / "in"), tmp_path, cfg)
    assert ref["drops"].get("minhash_duplicate", 0) > 3 and ref["drops"]["bad_json"] == 1
    assert cfg.exact is False or ref["drops"]["exact_duplicate"] > 3
    assert cfg.line_dedup == "none" or ref["lines_removed"] > 3


def test_sharded_is_byte_identical_on_the_generated_crawl(sample_crawl, tmp_path):
    docs = sample_crawl.docs
    inp = tmp_path / "in"
    for k in range(3):  # three files, so originals and copies fall in different ones
        write_jsonl(inp / f"part-{k}.jsonl.gz", docs[k::3])
    ref, got = _both(inp, tmp_path, DedupConfig(workers=2), tag="-3files")
    assert ref["drops"]["exact_duplicate"] > 10 and ref["drops"]["minhash_duplicate"] > 10
    _both([sample_crawl.documents], tmp_path, DedupConfig(line_dedup="first", shards=3), tag="-lines")


@pytest.fixture(scope="module")
def real_pages(tmp_path_factory) -> Path:
    """Two files of real pages (trafilatura's test pages, extracted by resiliparse), plus a third of their
    copies: exact, re-cased and with a few words edited."""
    warcs = sorted(REAL_PAGES.glob("trafilatura-pages-0[01].warc.gz"))
    if len(warcs) < 2:
        pytest.skip(f"real pages not found in {REAL_PAGES}")
    pytest.importorskip("resiliparse")
    from pipeline.web.extract import ExtractConfig, run_extract

    root = tmp_path_factory.mktemp("real_pages")
    run_extract(warcs, root / "documents", None, ExtractConfig(extractor="resiliparse", workers=1))
    docs = [d for f in sorted((root / "documents").glob("*.jsonl.gz")) for d in read_jsonl(f)]
    rng = random.Random(0)
    copies = []
    for k, d in enumerate(rng.sample(docs, min(80, len(docs)))):
        text = [d["text"], d["text"].upper(), edit(d["text"], 2, k) if len(d["text"].split(" ")) > 60 else d["text"]]
        copies.append({**d, "id": f"copy-{k}", "text": text[k % 3]})
    write_jsonl(root / "documents" / "copies.jsonl.gz", copies)
    return root / "documents"


def test_sharded_is_byte_identical_on_real_pages(real_pages, tmp_path):
    ref, _ = _both(real_pages, tmp_path, DedupConfig(workers=2, shards=3))
    assert ref["docs_in"] > 150 and ref["drops"]["exact_duplicate"] > 20
    _both(real_pages, tmp_path, DedupConfig(line_dedup="first"), tag="-lines")


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(ENGINES))
def test_sharded_on_ray_and_dask_is_byte_identical(kind, tmp_path):
    pytest.importorskip(ENGINES[kind])
    with make_executor(kind, workers=2) as executor:
        _both(_corpus(tmp_path / "in"), tmp_path, DedupConfig(line_dedup="first", shards=2), executor)


_KILL = """
import os, signal, sys
from pathlib import Path
from pipeline.dedup import sharded, tasks
from pipeline.dedup.stage import DedupConfig, run_dedup
victim, kind = sys.argv[1], sys.argv[2]
body, calls = getattr(tasks, victim).body, []
def dying(layout, part, folder):
    out = body(layout, part, folder)  # every output of the task written, then killed before its done.json
    (folder / "partial.tmp").write_bytes(b"half")
    calls.append(part)
    if len(calls) == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return out
setattr(tasks, victim, tasks._resumable(kind)(dying))
run_dedup(Path(sys.argv[3]), Path(sys.argv[4]), None, DedupConfig(engine="sharded", line_dedup="first", shards=2),
          rejected_dir=Path(sys.argv[5]))
"""


@pytest.mark.parametrize("victim,kind", [("signatures", "sig"), ("pairs", "pairs"), ("filter_file", "filter")])
def test_a_run_killed_mid_stage_resumes_per_task_to_the_same_bytes(tmp_path, victim, kind):
    inp = _corpus(tmp_path / "in")
    cfg = DedupConfig(line_dedup="first", shards=2)
    ref = run_dedup(inp, tmp_path / "single", None, cfg, rejected_dir=tmp_path / "single-rej")
    out, rej = tmp_path / "out", tmp_path / "rej"
    done = subprocess.run([sys.executable, "-c", _KILL, victim, kind, str(inp), str(out), str(rej)], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    work = out / WORK_FOLDER
    finished = {p: p.stat().st_mtime_ns for p in work.rglob("done.json")}
    half_done = [p.parent for p in work.glob(f"*/{kind}/*/partial.tmp") if not (p.parent / "done.json").exists()]
    assert finished and len(half_done) == 1  # the killed task left its outputs but no done.json
    m = run_dedup(inp, out, None, DedupConfig(engine="sharded", line_dedup="first", shards=2), rejected_dir=rej)
    assert m["tasks"]["skipped"] == len(finished)  # resumed per task: nothing finished ran again
    assert _tree(out) == _tree(tmp_path / "single") and _tree(rej) == _tree(tmp_path / "single-rej")
    kept = sum(1 for f in out.glob("*.jsonl*") for _ in read_jsonl(f))
    dropped = sum(1 for f in rej.glob("*.jsonl*") for _ in read_jsonl(f))
    assert kept + dropped == m["docs_in"] == ref["docs_in"]


def test_bad_settings_and_a_single_engine_on_a_cluster_are_one_line_errors(tmp_path):
    with pytest.raises(ValueError, match="dedup.engine"):
        DedupConfig(engine="spark")
    with pytest.raises(ValueError, match="dedup.shards"):
        DedupConfig(shards=0)

    class FakeCluster:  # not a LocalExecutor
        pass

    with pytest.raises(ValueError, match="needs dedup.engine sharded"):
        run_dedup(_corpus(tmp_path / "in"), tmp_path / "o", None, DedupConfig(), executor=FakeCluster())


def test_a_changed_input_clears_the_work_of_an_interrupted_run(tmp_path):
    inp = _corpus(tmp_path / "in")
    cfg = DedupConfig(engine="sharded")
    stale = tmp_path / "out" / WORK_FOLDER / ("0" * 16) / "sig" / "00000"  # the work folder of other inputs
    stale.mkdir(parents=True)
    (stale / "done.json").write_text('{"docs": 999}')  # a stale task of another run
    m = run_dedup(inp, tmp_path / "out", None, cfg, rejected_dir=tmp_path / "rej")
    assert m["docs_in"] == 64 and m["tasks"]["skipped"] == 0


# -- bucket verification is a pure function of the bucket -----------------------------------------------
def _components(keys: np.ndarray, sets: list[np.ndarray], threshold: float) -> list[int]:
    """Brute force: join every pair that shares a band and passes the threshold."""
    uf = UnionFind(len(keys))
    for bucket in candidate_buckets(keys):
        for a in bucket.tolist():
            for b in bucket.tolist():
                if a < b and jaccard(sets[a], sets[b]) >= threshold:
                    uf.union(a, b)
    return [uf.find(i) for i in range(len(keys))]


@pytest.mark.parametrize("seed", range(5))
def test_verified_clusters_do_not_depend_on_band_order_and_are_components_when_uncapped(seed):
    rng = np.random.default_rng(seed)
    n, bands = 80, 4
    keys = rng.integers(1, 4, size=(n, bands)).astype(np.uint64)  # few keys: big, overlapping buckets
    sets = [np.unique(rng.integers(0, 12, size=6)).astype(np.uint64) for _ in range(n)]
    reference = verified_clusters(keys, sets.__getitem__, 0.5, max_tries=10**6)
    assert reference == _components(keys, sets, 0.5)
    for capped in (3, 64):
        one = verified_clusters(keys, sets.__getitem__, 0.5, max_tries=capped)
        assert verified_clusters(keys[:, ::-1].copy(), sets.__getitem__, 0.5, max_tries=capped) == one
        assert verified_clusters(keys[:, rng.permutation(bands)].copy(), sets.__getitem__, 0.5,
                                 max_tries=capped) == one


def test_tasks_have_module_level_names_for_the_cluster_engines():
    import pickle

    for fn in (tasks.signatures, tasks.exact, tasks.buckets, tasks.shingles, tasks.pairs, tasks.clusters, tasks.lines,
               tasks.filter_file):
        assert pickle.loads(pickle.dumps(fn)) is fn
    assert isinstance(LocalExecutor(1), LocalExecutor)


def test_more_documents_get_more_shards_and_the_same_bytes(tmp_path, monkeypatch):
    """A shard holds at most about SHARD_DOCS documents (a bucket or pairs task's memory does not grow with the
    corpus); the shard count is a partition of the work only: the outputs stay the single stage's, byte for byte."""
    inputs = _corpus(tmp_path / "in")
    monkeypatch.setattr(sharded, "SHARD_DOCS", 7)  # ~64 documents -> 10 shards instead of the configured 4
    _, got = _both(inputs, tmp_path, DedupConfig(line_dedup="first"))
    assert got["shards"] == -(-got["docs_in"] // 7) > 4


def test_each_task_stage_reports_its_peak_rss_outside_the_marker(tmp_path):
    """The scale benchmark's per-task memory: every stage that ran has a peak RSS above the interpreter's, the
    clusters task among them with the pairs it joined counted; none of it reaches the completion marker."""
    got = run_dedup(_corpus(tmp_path / "in"), tmp_path / "out", None, DedupConfig(engine="sharded", workers=2),
                    rejected_dir=tmp_path / "rej")
    peaks = got["task_peak_rss_mb"]
    if not Path("/proc/self/clear_refs").exists():
        pytest.skip("no /proc/self/clear_refs: per-task peak RSS is Linux-only")
    assert {"sig", "exact", "buckets", "shingles", "pairs", "clusters", "filter"} <= set(peaks)
    assert all(10 < mb < 4096 for mb in peaks.values())
    assert got["verified_pairs"] >= got["drops"]["minhash_duplicate"]  # a cluster of k documents needs k - 1 joins
    marker = json.loads((tmp_path / "out" / "_done" / "dedup.json").read_text(encoding="utf-8"))
    assert "task_peak_rss_mb" not in marker["metrics"] and "seconds" not in marker["metrics"]


def test_a_run_killed_while_removing_its_work_folder_redoes_no_task(tmp_path, monkeypatch):
    """Killed after every output and the stage's marker were written, half way through removing _work: the rerun
    finds the stage done (nothing runs) and removes what was left; before, it redid every task."""
    inp = _corpus(tmp_path / "in")
    cfg = DedupConfig(engine="sharded", shards=2)
    ref = run_dedup(inp, tmp_path / "ref", None, cfg, rejected_dir=tmp_path / "ref-rej")
    out, rej = tmp_path / "out", tmp_path / "rej"
    real_rmtree = shutil.rmtree

    def killed_while_removing(path, *args, **kwargs):
        if Path(path).name == WORK_FOLDER:
            next(Path(path).rglob("done.json")).unlink()  # the removal got this far
            raise KeyboardInterrupt  # SIGKILL's stand-in
        return real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", killed_while_removing)
    with pytest.raises(KeyboardInterrupt):
        run_dedup(inp, out, None, cfg, rejected_dir=rej)
    monkeypatch.undo()
    assert (out / WORK_FOLDER).exists()
    again = run_dedup(inp, out, None, cfg, rejected_dir=rej)
    assert again["seconds"] == 0.0  # the stage was done: no task ran again
    assert not (out / WORK_FOLDER).exists()
    assert _tree(out) == _tree(tmp_path / "ref") and _tree(rej) == _tree(tmp_path / "ref-rej")
    assert again["docs_out"] == ref["docs_out"]
