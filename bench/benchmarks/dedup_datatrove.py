"""Our dedup stage against datatrove's MinHash pipeline on the same files, like for like
(python -m bench.benchmarks.dedup_datatrove).

Both sides read the same gzip JSONL files (the pipeline's filtered crawl, replicated ``k`` times with edits by
``bench.benchmarks.dedup_scale.replicate``, or ``--source`` documents as they are) and use FineWeb's settings: word
5-grams, 14 bands x 8 rows. datatrove runs its four stages (signatures per file, buckets per band, clustering,
filter per file) on ``LocalPipelineExecutor`` with the same number of worker processes as ours; it hashes shingles
with sha1 (its xxhash path does not run with the installed xxhash 4). Each side runs in a fresh process, ``--repeats``
times; the rows are the median seconds, docs/s and their ratio.

Decisions: a document is *duplicated* when it shares a cluster with another (ours: exact duplicates, then MinHash
candidates verified by true Jaccard >= 0.8; datatrove: every LSH candidate, no verification), and *removed* unless it
is the copy its cluster keeps (ours: the first in input order; datatrove: its union-find root). Every document on
which the two sides differ, in duplicated-or-not or in removed-or-not, is put in one class below.
``decision_agreement`` is the share of documents outside every class but ``other_copy_kept`` (a cluster both sides
found, each keeping another copy of it, decides the same about every document but which copy stays);
``raw_decision_agreement`` counts that choice as a disagreement too. ``--jaccard-threshold 1e-9`` makes our stage
join every LSH candidate as datatrove does (no verification): then what is left is the two sides' shingling and LSH.

- ``other_copy_kept``: both call it duplicated; each kept another copy of the cluster (a representative choice);
- ``below_jaccard_threshold``: datatrove joined it, its best true Jaccard (our shingles) with that cluster is < 0.8,
  so our verification left it out (by design);
- ``our_lsh_miss``: datatrove joined it and the Jaccard is >= 0.8, but no band of ours collided (LSH is random);
- ``too_short_for_datatrove``: we joined it, but it has fewer than 5 words for datatrove's tokenizer, so datatrove
  makes no signature and never removes it (we shingle a short text as one shingle);
- ``datatrove_lsh_miss``: we joined it (a verified Jaccard >= 0.8 with our normalization) and datatrove's
  shingles did not collide in any band; ``datatrove_jaccard`` in the row is its best Jaccard under datatrove's own
  normalization (digits -> 0, punctuation -> space, spaCy words).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from bench.benchmarks.dedup_scale import replicate
from bench.tools.results import ROOT, BenchSettings, Result, finish, parse_bench
from workbench.files import read_jsonl
from workbench.params import setting, usage_error

NGRAMS, BANDS, ROWS = 5, 14, 8

_OURS = f"""
import json, sys, time
from pathlib import Path
from pipeline.dedup.stage import DedupConfig, run_dedup
src, out, engine = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
workers, threshold = int(sys.argv[4]), float(sys.argv[5])
cfg = DedupConfig(engine=engine, workers=workers, ngrams={NGRAMS}, num_bands={BANDS}, num_hashes={BANDS} * {ROWS},
                  jaccard_threshold=threshold)
t0 = time.perf_counter()
m = run_dedup(src, out / "kept", None, cfg, rejected_dir=out / "rejected")
print(json.dumps({{"seconds": time.perf_counter() - t0, "docs_in": m["docs_in"]}}))
"""

_DATATROVE = f"""
import json, sys, time
from pathlib import Path
from datatrove.executor.local import LocalPipelineExecutor
from datatrove.pipeline.dedup.minhash import (MinhashConfig, MinhashDedupBuckets, MinhashDedupCluster,
                                              MinhashDedupFilter, MinhashDedupSignature)
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import JsonlWriter
from datatrove.utils.hashing import HashConfig
from datatrove.utils.logging import logger
logger.remove()
src, out, workers = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
files = len(list(Path(src).glob("*.jsonl.gz")))
cfg = MinhashConfig(n_grams={NGRAMS}, num_buckets={BANDS}, hashes_per_bucket={ROWS},
                    hash_config=HashConfig(precision=64, hash_fc="sha1"))
read = lambda: JsonlReader(src, glob_pattern="*.jsonl.gz")
stages = [
    ([read(), MinhashDedupSignature(str(out / "sigs"), config=cfg)], files),
    ([MinhashDedupBuckets(str(out / "sigs"), str(out / "buckets"), config=cfg)], cfg.num_buckets),
    ([MinhashDedupCluster(str(out / "buckets"), str(out / "remove"), config=cfg, save_cluster_id=True)], 1),
    ([read(), MinhashDedupFilter(str(out / "remove"), exclusion_writer=JsonlWriter(str(out / "removed")),
                                 load_cluster_ids=True), JsonlWriter(str(out / "kept"))], files),
]
t0 = time.perf_counter()
for i, (pipeline, tasks) in enumerate(stages):
    LocalPipelineExecutor(pipeline, tasks=tasks, workers=min(workers, tasks), logging_dir=str(out / f"logs{{i}}"),
                          skip_completed=False, start_method="fork").run()
print(json.dumps({{"seconds": time.perf_counter() - t0}}))
"""


def _run(code: str, *args) -> dict:
    done = subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"error: {' '.join(map(str, args))}: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


class Components:
    """Union-find over document ids: a document's cluster on one side."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: str, b: str) -> None:
        self.parent[self.find(a)] = self.find(b)

    def groups(self) -> dict[str, list[str]]:
        out = defaultdict(list)
        for x in list(self.parent):
            out[self.find(x)].append(x)
        return out


def our_decisions(out: Path) -> tuple[set[str], Components]:
    """The ids we removed and our clusters (exact duplicates joined to their original and its MinHash cluster)."""
    removed, comp = set(), Components()
    for f in sorted((out / "rejected").glob("*.jsonl*")):
        for d in read_jsonl(f):
            removed.add(d["id"])
            for key in ("duplicate_of", "minhash_cluster"):
                if d.get(key):
                    comp.union(d["id"], d[key])
    return removed, comp


def datatrove_decisions(out: Path) -> tuple[set[str], Components]:
    """The ids datatrove removed and its clusters (``minhash_cluster_id`` on kept and removed documents)."""
    removed, comp = set(), Components()
    for folder in ("removed", "kept"):
        for f in sorted((out / folder).glob("*.jsonl*")):
            for d in read_jsonl(f):
                if folder == "removed":
                    removed.add(d["id"])
                cluster = (d.get("metadata") or {}).get("minhash_cluster_id", -1)
                if cluster != -1:
                    comp.union(d["id"], f"cluster:{cluster}")
    return removed, comp


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def compare(texts: dict[str, str], ours: tuple[set[str], Components], theirs: tuple[set[str], Components],
            threshold: float = 0.8) -> dict:
    """Agreement per decision and per duplicated-or-not, and the class of every disagreement."""
    from datatrove.pipeline.dedup.minhash import MinhashConfig, MinhashDedupSignature
    from datatrove.utils.hashing import HashConfig

    from pipeline.dedup.minhash import shingle_set

    dt = MinhashDedupSignature("/tmp/unused", MinhashConfig(n_grams=NGRAMS, hash_config=HashConfig(64, "sha1")))
    our_removed, our_comp = ours
    dt_removed, dt_comp = theirs
    our_mates = {x: [m for m in g if m != x and m in texts] for g in our_comp.groups().values() for x in g}
    dt_mates = {x: [m for m in g if m != x and m in texts] for g in dt_comp.groups().values() for x in g}
    ours_shingles = lambda x: shingle_set(texts[x], NGRAMS)  # noqa: E731
    dt_shingles = lambda x: set(dt.get_shingles(texts[x]).ravel().tolist())  # noqa: E731
    classes, dt_jaccards = Counter(), []
    same_removal = 0
    for x in texts:
        ours_dup, dt_dup = bool(our_mates.get(x)), bool(dt_mates.get(x))
        same = (x in our_removed) == (x in dt_removed)
        same_removal += same
        if ours_dup == dt_dup:
            if not same:
                classes["other_copy_kept" if ours_dup else "unexplained"] += 1
        elif dt_dup:
            best = max(jaccard(ours_shingles(x), ours_shingles(m)) for m in dt_mates[x])
            classes["below_jaccard_threshold" if best < threshold else "our_lsh_miss"] += 1
        elif len(dt.word_tokenizer.word_tokenize(texts[x])) < NGRAMS or dt.get_shingles(texts[x]).size == 0:
            classes["too_short_for_datatrove"] += 1
        else:
            classes["datatrove_lsh_miss"] += 1
            dt_jaccards.append(max(jaccard(dt_shingles(x), dt_shingles(m)) for m in our_mates[x]))
    n = len(texts)
    differ = sum(v for k, v in classes.items() if k != "other_copy_kept")
    return {"docs": n, "decision_agreement": 1 - differ / n, "raw_decision_agreement": same_removal / n,
            "ours_removed": len(our_removed), "datatrove_removed": len(dt_removed),
            "disagreements": dict(sorted(classes.items())),
            "datatrove_jaccard": sorted(round(j, 3) for j in dt_jaccards)}


def measure(source: Path, tmp: Path, workers: int, repeats: int, label: str, threshold: float = 0.8) -> list[Result]:
    texts = {d["id"]: d["text"] for f in sorted(source.glob("*.jsonl.gz")) for d in read_jsonl(f)}
    seconds = defaultdict(list)
    for r in range(repeats):
        for engine in ("single", "sharded"):
            got = _run(_OURS, source, tmp / f"{engine}{r}", engine, workers, threshold)
            seconds[engine].append(got["seconds"])
        seconds["datatrove"].append(_run(_DATATROVE, source, tmp / f"dt{r}", workers)["seconds"])
        print(f"{label} repeat {r}: " + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in seconds.items()))
    cmp = compare(texts, our_decisions(tmp / "sharded0"), datatrove_decisions(tmp / "dt0"), threshold)
    print(f"{label}: {json.dumps(cmp)}")
    n = len(texts)
    med = {k: statistics.median(v) for k, v in seconds.items()}
    extra = {"docs": n, "workers": workers, "jaccard_threshold": threshold,
             **{k: v for k, v in cmp.items() if k != "docs"}}
    rows = [Result(f"datatrove {label}", "docs_per_s", round(n / med["datatrove"], 1), "docs/s", repeats=repeats,
                   min=round(n / max(seconds["datatrove"]), 1), median=round(n / med["datatrove"], 1),
                   max=round(n / min(seconds["datatrove"]), 1), extra=extra)]
    for engine in ("single", "sharded"):
        rows.append(Result(f"ours {engine} {label}", "docs_per_s", round(n / med[engine], 1), "docs/s",
                           "datatrove", round(n / med["datatrove"], 1), repeats=repeats,
                           min=round(n / max(seconds[engine]), 1), median=round(n / med[engine], 1),
                           max=round(n / min(seconds[engine]), 1), extra=extra))
    rows += [Result(f"ours vs datatrove {label}", metric, round(cmp[metric], 5), "fraction", extra=extra)
             for metric in ("decision_agreement", "raw_decision_agreement")]
    return rows


@dataclass(frozen=True)
class DedupDatatroveBench(BenchSettings):
    source: Path = setting(ROOT / "data" / "filtered", "documents (gzip JSONL) to replicate (from make repro)")
    scales: tuple[int, ...] = setting((1, 10), "replication factors; copies after the first have a few words edited",
                                      at_least=1, nonempty=True)
    label: str = setting("crawl", "row name prefix for this source")
    workers: int = setting(2, "worker processes on both sides", at_least=1)
    repeats: int = setting(3, "runs per side, median reported", at_least=1)
    jaccard_threshold: float = setting(0.8, "our verification threshold (the stage's default 0.8); a tiny one such as "
                                            "1e-9 joins every LSH candidate, as datatrove does", above=0, at_most=1.0)


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(DedupDatatroveBench, argv)
    if not any(args.source.glob("*.jsonl*")):
        usage_error(f"no documents (*.jsonl.gz) in {args.source}: run make repro or give --source")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for scale in args.scales:
            d = Path(tmp) / f"x{scale}"
            replicate(args.source, scale, d / "in")
            label = f"{args.label} {scale}x"
            if args.jaccard_threshold != 0.8:
                label += f" J>={args.jaccard_threshold:g}"
            results += measure(d / "in", d, args.workers, args.repeats, label, args.jaccard_threshold)
    return finish("dedup_datatrove", results, args)


if __name__ == "__main__":
    raise SystemExit(main())
