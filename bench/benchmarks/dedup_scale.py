"""The dedup stage at growing sizes: one process vs sharded tasks on the local pool and on Ray
(python -m bench.benchmarks.dedup_scale).

The input is the pipeline's filtered generated crawl (``data/filtered``, ``make repro``), replicated ``k`` times
(1x, 10x, ...): replica r > 0 of a document has a few words edited (a near duplicate) or none (an exact one), so
the corpus grows in documents and in duplicates. Each engine runs in a fresh process on empty outputs; the kept
and rejected files must be byte-identical between engines (else the run stops). Rows per size: seconds, the driver
process's peak RSS and the largest worker's: for the single engine its forked sketch pool (``RUSAGE_CHILDREN``), for
the sharded ones the largest peak of one task (each task measures its own: ``task_peak_rss_mb`` in the stage's
metrics), the clusters task apart (``clusters_task_peak_rss_mb``: it holds the verified pairs, ``verified_pairs``
in the row, not the documents)."""

from __future__ import annotations

import gzip
import json
import random
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench.tools.results import ROOT, BenchSettings, Result, finish, parse_bench
from workbench.files import read_jsonl
from workbench.params import setting, usage_error

_RUN = """
import json, resource, sys
from pathlib import Path
from pipeline.dedup.stage import DedupConfig, run_dedup
from workbench.executor import make_executor
from workbench.memory import peak_rss_mb
d, engine, workers = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
cfg = DedupConfig(engine=engine.split("-")[0], workers=workers)
with make_executor("ray" if engine.endswith("-ray") else "local", workers=workers) as executor:
    m = run_dedup(d / "in", d / engine, None, cfg, rejected_dir=d / (engine + "-rej"), executor=executor)
hwm = peak_rss_mb()
kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
tasks = m.get("task_peak_rss_mb", {})
print(json.dumps({"seconds": m["seconds"], "docs_in": m["docs_in"], "docs_out": m["docs_out"], "driver_mb": hwm,
                  "worker_mb": max((v for k, v in tasks.items() if k != "clusters"), default=kids),
                  "clusters_mb": tasks.get("clusters"), "verified_pairs": m.get("verified_pairs")}))
"""


ENGINES = ("single", "sharded", "sharded-ray")


def replicate(source: Path, scale: int, out: Path, files: int = 8, seed: int = 0, docs_per_file: int = 2000) -> int:
    """The source's documents ``scale`` times (replica 0 as is, later ones exact or with 1-3 words edited), shuffled
    into at least ``files`` files of at most about ``docs_per_file`` documents: a crawl grows in files, not in file
    size, so a per-file task's memory stays the same at every scale."""
    docs = [d for f in sorted(source.glob("*.jsonl*")) for d in read_jsonl(f)]
    rng = random.Random(seed)
    rows = []
    for r in range(scale):
        for d in docs:
            text = d["text"]
            if r and rng.random() < 0.7:
                words = text.split(" ")
                for _ in range(rng.randint(1, 3)):
                    words[rng.randrange(len(words))] = f"edit{rng.randrange(10**6)}"
                text = " ".join(words)
            rows.append({**d, "id": f"{d['id']}~{r}", "text": text})
    rng.shuffle(rows)
    files = max(files, -(-len(rows) // docs_per_file))
    out.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        with gzip.open(out / f"part-{f:02d}.jsonl.gz", "wt", encoding="utf-8", compresslevel=1) as fh:
            fh.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows[f::files])
    return len(rows)


def plot(results: list[Result], path: Path) -> None:
    """Seconds, and the driver's and largest worker's peak RSS, against documents (log-log), one line per engine."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_time, ax_rss) = plt.subplots(1, 2, figsize=(10, 4))
    engines = sorted({r.name.split(" ")[0] for r in results})
    for color, engine in zip(plt.rcParams["axes.prop_cycle"].by_key()["color"], engines, strict=False):
        mine = [r for r in results if r.name.split(" ")[0] == engine]
        for ax, metric, style, label in (
                (ax_time, "seconds", "-", engine), (ax_rss, "driver_peak_rss_mb", "-", f"{engine}: driver"),
                (ax_rss, "worker_peak_rss_mb", "--", f"{engine}: largest task / worker"),
                (ax_rss, "clusters_task_peak_rss_mb", ":", f"{engine}: clusters task")):
            points = sorted((r.extra["docs"], r.value) for r in mine if r.metric == metric)
            if points:
                ax.plot(*zip(*points, strict=True), style, color=color, marker="o", label=label)
    ax_time.set(xscale="log", yscale="log", xlabel="documents", ylabel="seconds", title="dedup wall time")
    ax_rss.set(xscale="log", xlabel="documents", ylabel="peak RSS (MB)", title="peak RSS per process")
    for ax in (ax_time, ax_rss):
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.legend()
        ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.jsonl*"))}


@dataclass(frozen=True)
class DedupScaleBench(BenchSettings):
    source: Path = setting(ROOT / "data" / "filtered", "documents to replicate (from make repro)")
    scales: tuple[int, ...] = setting((1, 10), "replication factors", at_least=1, nonempty=True)
    workers: int = setting(2, "sharded: local pool processes or Ray workers", at_least=1)
    engines: tuple[str, ...] = setting(ENGINES, "single: one process; sharded: tasks on the local pool; sharded-ray: "
                                                "the same tasks on a local Ray cluster of --workers CPUs",
                                       choices=ENGINES, nonempty=True)
    plot: Path = setting(ROOT / "docs" / "benchmarks" / "dedup_scale.png",
                         "time and peak RSS against documents, per engine")


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(DedupScaleBench, argv)
    if not args.source.is_dir():
        usage_error(f"no documents at {args.source}: run make repro or give --source")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for scale in args.scales:
            d = Path(tmp) / f"x{scale}"
            n = replicate(args.source, scale, d / "in")
            got = {}
            for engine in args.engines:
                done = subprocess.run([sys.executable, "-c", _RUN, str(d), engine, str(args.workers)], cwd=ROOT,
                                      capture_output=True, text=True, check=True)
                got[engine] = json.loads(done.stdout.strip().splitlines()[-1])
                print(f"{scale}x ({n} docs) {engine}: {got[engine]}")
            first = args.engines[0]
            for engine in args.engines[1:]:
                if _tree(d / first) != _tree(d / engine) or _tree(d / f"{first}-rej") != _tree(d / f"{engine}-rej"):
                    raise SystemExit(f"error: {scale}x: the {engine} outputs differ from the {first} engine's")
            for engine, m in got.items():
                name = f"{engine} {scale}x" + (f" w{args.workers}" if engine != "single" else "")
                base = got.get("single") if engine != "single" else None
                extra = {"docs": n, "docs_out": m["docs_out"], "verified_pairs": m["verified_pairs"]}
                results += [Result(name, "seconds", m["seconds"], "s", "single" if base else None,
                                   base["seconds"] if base else None, extra=extra),
                            Result(name, "driver_peak_rss_mb", round(m["driver_mb"], 1), "MB", extra=extra),
                            Result(name, "worker_peak_rss_mb", round(m["worker_mb"], 1), "MB", extra=extra)]
                if m["clusters_mb"] is not None:
                    results.append(Result(name, "clusters_task_peak_rss_mb", m["clusters_mb"], "MB", extra=extra))
            shutil.rmtree(d)
    plot(results, args.plot)
    print(f"plot: {args.plot}")
    return finish("dedup_scale", results, args)


if __name__ == "__main__":
    raise SystemExit(main())
