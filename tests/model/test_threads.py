"""The CPU thread policy: cores free of other processes, from /proc/stat less this process's own time."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import torch

from model.training.threads import CpuThreads, busy_seconds, free_cores, threads_for, usable_cores

STAT = """cpu  900 10 100 5000 40 0 5 0 0 0
cpu0 400 5 50 2500 20 0 5 0 0 0
cpu1 500 5 50 2500 20 0 0 0 0 0
intr 1 2 3
"""


def test_busy_seconds_sums_the_allowed_cores_without_idle_and_iowait(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text(STAT)
    ticks = {0: 400 + 5 + 50 + 5, 1: 500 + 5 + 50}  # user nice system irq softirq...: not idle (2500), iowait (20)
    tick_s = busy_seconds([0], str(stat)) / ticks[0]
    assert busy_seconds([0, 1], str(stat)) == pytest.approx((ticks[0] + ticks[1]) * tick_s)
    assert busy_seconds([1], str(stat)) == pytest.approx(ticks[1] * tick_s)
    assert busy_seconds([0], str(tmp_path / "absent")) is None


@pytest.mark.parametrize(("others", "own", "n", "threads"), [
    (0.0, 1.9, 2, 2),   # quiet: our two threads are all the load
    (1.0, 1.0, 2, 1),   # one core kept busy by another process
    (2.0, 0.2, 2, 1),   # both busy: still one thread
    (0.3, 1.0, 2, 2),   # a light neighbour leaves the core mostly free
    (3.0, 2.0, 8, 5),
])
def test_threads_follow_the_cores_others_leave_free(others, own, n, threads):
    wall = 2.0
    free = free_cores(10.0, 5.0, wall, 10.0 + (others + own) * wall, 5.0 + own * wall, n)
    assert free == pytest.approx(n - others)
    assert threads_for(free, n) == threads


@pytest.mark.skipif(busy_seconds(usable_cores()) is None or len(usable_cores()) < 2, reason="needs /proc/stat, 2 cores")
def test_a_core_kept_busy_by_another_process_gets_no_thread():
    threads = torch.get_num_threads()
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)  # let it start
        policy = CpuThreads(probe_s=0.5)
        assert policy.threads <= len(policy.cores) - 1
    finally:
        spinner.kill()
        spinner.wait()
        torch.set_num_threads(threads)
