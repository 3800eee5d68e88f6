"""Failpoints: the instants the reliability suite (tests/reliability, bench/benchmarks/reliability.py) breaks a job at.

Every atomic write (``workbench.files.atomic_path``) passes ``at_write`` with its temporary file complete and not yet
renamed. With ``LMW_FAILPOINT_COUNTER`` set to a file, each pass appends one byte to it, so the writes of a job's
processes (its workers too) are counted together; ``LMW_FAULT`` then says what happens at the n-th:

- ``kill@n``: SIGKILL to the job's process group (the harness starts the job in a session of its own): a kill
  "while writing";
- ``enospc@n`` / ``erofs@n``: this write and every later one raises OSError (no space left on the device, a
  read-only file system), as a full or read-only disk does.

Unset, which is always outside the suite, ``at_write`` costs one environment lookup.
"""

from __future__ import annotations

import errno
import os
import signal
from pathlib import Path

FAULTS = {"enospc": errno.ENOSPC, "erofs": errno.EROFS}


def at_write(tmp: Path) -> None:
    """Count this write; kill the job or fail the write when ``LMW_FAULT`` says so."""
    counter = os.environ.get("LMW_FAILPOINT_COUNTER")
    if not counter:
        return
    with open(counter, "ab") as fh:
        fh.write(b".")
        fh.flush()
        count = fh.tell()  # O_APPEND: the counter's size after this process's byte, across every process
    kind, _, at = os.environ.get("LMW_FAULT", "").partition("@")
    if not at or count < int(at):
        return
    if kind == "kill" and count == int(at):
        os.killpg(os.getpgid(0), signal.SIGKILL)
    if kind in FAULTS:
        raise OSError(FAULTS[kind], os.strerror(FAULTS[kind]), str(tmp))
