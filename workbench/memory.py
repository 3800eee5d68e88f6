"""A process's peak resident memory, for the benchmarks and the tasks that report their own.

Linux keeps the peak as ``VmHWM`` in ``/proc/self/status`` and resets it when ``5`` is written to
``/proc/self/clear_refs`` (Linux >= 4.0), so a pool worker can measure one task at a time. Elsewhere the peak is
``ru_maxrss``, the process's lifetime high-water mark, which cannot be reset.
"""

from __future__ import annotations

import resource


def peak_rss_mb() -> float:
    """This process's peak RSS in MB: VmHWM where Linux has it, else ``ru_maxrss``."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak_rss() -> bool:
    """Restart this process's peak-RSS count; False where the platform cannot (the peak is then lifetime)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False
