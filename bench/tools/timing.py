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


def event_times_ms(fn, warmup: int, iters: int) -> list[float]:
    """Milliseconds of each of ``iters`` calls of ``fn()`` on the current CUDA stream, by CUDA events (one
    pair per call, read after a single synchronize), after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    torch.cuda.synchronize()
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in events]


def percentiles(values: list[float], points=(20, 50, 80)) -> tuple[float, ...]:
    """Nearest-rank-interpolated percentiles (numpy's default 'linear'), e.g. (p20, median, p80)."""
    ordered = sorted(values)
    out = []
    for p in points:
        pos = (len(ordered) - 1) * p / 100
        lo = int(pos)
        hi = min(lo + 1, len(ordered) - 1)
        out.append(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo))
    return tuple(out)


def peak_memory_mb(fn, device: torch.device) -> float | None:
    """Peak memory above what was allocated before one call of ``fn`` (CUDA only)."""
    if device.type != "cuda":
        return None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2**20


def cuda_graph_ms(fn, warmup: int = 5, iters: int = 20) -> float | None:
    """Median ms of ``fn()`` replayed from a CUDA graph (launch costs gone: what the kernels themselves take);
    None, with the reason printed, where the call cannot be captured."""
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        return percentiles(event_times_ms(graph.replay, warmup, iters))[1]
    except Exception as exc:  # noqa: BLE001 - a capture failure is a finding, not a crash
        print(f"  (CUDA graph capture failed: {type(exc).__name__}: {str(exc).splitlines()[0][:120]})")
        return None
