"""workbench.memory: the peak RSS follows a real allocation, and a reset lets it start again below it."""

import sys

import pytest

from workbench.memory import peak_rss_mb, reset_peak_rss


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM and clear_refs are Linux's")
def test_the_peak_sees_an_allocation_and_a_reset_forgets_it():
    assert reset_peak_rss()  # earlier tests in this process may have set a higher peak
    before = peak_rss_mb()
    block = bytearray(200 * 2**20)  # 200 MB, touched page by page
    block[::4096] = b"x" * len(block[::4096])
    raised = peak_rss_mb()
    assert raised >= before + 150
    del block
    assert reset_peak_rss()
    assert peak_rss_mb() < raised - 150
