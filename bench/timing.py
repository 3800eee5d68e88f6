"""Shared by the model and kernel benchmarks: the median timer and the plain-text table."""

from __future__ import annotations

import statistics
import time

import torch


def timed(fn, warmup: int, iters: int, device: torch.device) -> float:
    """Median seconds of ``fn()`` over ``iters`` calls after ``warmup`` untimed calls."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def format_table(headers: list[str], rows: list[list]) -> str:
    """Columns padded to their widest cell (the first left-aligned, the rest right-aligned), a rule under the
    header."""
    cells = [headers, *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=False)))
             for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def table(title: str, headers: list[str], rows: list[list]) -> str:
    """``format_table`` under a title, after a blank line."""
    return f"\n{title}\n" + format_table(headers, rows)
