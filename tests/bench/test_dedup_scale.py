"""bench.benchmarks.dedup_scale's input and plot: the replicas are the source's documents again (exact or with a few
words edited), and the plot draws every engine's rows."""

from __future__ import annotations

import gzip
import json

from bench.benchmarks.dedup_scale import plot, replicate
from bench.tools.results import Result
from workbench.files import write_jsonl


def test_replicas_are_exact_or_lightly_edited_copies(tmp_path):
    source = tmp_path / "src"
    docs = [{"id": f"d{i}", "text": " ".join(f"w{i}_{k}" for k in range(40))} for i in range(10)]
    write_jsonl(source / "a.jsonl.gz", docs)
    n = replicate(source, 3, tmp_path / "out", files=2)
    rows = [json.loads(line) for f in sorted((tmp_path / "out").glob("*.jsonl.gz"))
            for line in gzip.open(f, "rt", encoding="utf-8")]
    assert n == len(rows) == 30 and len({r["id"] for r in rows}) == 30
    by_id = {d["id"]: d["text"].split(" ") for d in docs}
    for row in rows:
        original, copy = by_id[row["id"].split("~")[0]], row["text"].split(" ")
        changed = sum(a != b for a, b in zip(original, copy, strict=True))
        assert changed <= 3 and (changed == 0 or not row["id"].endswith("~0"))  # replica 0 is the source itself


def test_plot_writes_a_png(tmp_path):
    rows = [Result(f"{engine} {k}x", metric, value * k, "s", extra={"docs": 100 * k})
            for engine in ("single", "sharded") for k in (1, 10)
            for metric, value in (("seconds", 1.0), ("driver_peak_rss_mb", 40.0), ("worker_peak_rss_mb", 50.0))]
    plot(rows, tmp_path / "p.png")
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
