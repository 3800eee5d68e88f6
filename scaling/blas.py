"""One OpenBLAS thread for the fits, set when a fit starts rather than when ``scaling`` is imported.

L-BFGS-B calls OpenBLAS on 5x5 systems; on a busy 2-core machine OpenBLAS's own threads make each fit about 30x
slower. ``one_blas_thread`` sets every OpenBLAS the process has loaded (NumPy's and SciPy's wheels each bring one,
under prefixed names) to one thread, once per process, found through ``/proc/self/maps`` and called through
ctypes, as threadpoolctl does. Elsewhere than Linux it finds none; ``OPENBLAS_NUM_THREADS=1`` in the environment
does the same there.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

SETTERS = ("openblas_set_num_threads", "openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
           "scipy_openblas_set_num_threads64_")


def loaded_openblas(maps: Path = Path("/proc/self/maps")) -> list[str]:
    """The files of the OpenBLAS libraries this process has loaded (none where ``maps`` cannot be read)."""
    try:
        lines = maps.read_text().splitlines()
    except OSError:
        return []
    paths = (line.split(maxsplit=5)[-1] for line in lines if line.count(" ") >= 5)
    return sorted({p for p in paths if "openblas" in Path(p).name and ".so" in Path(p).name})


def _call(path: str, names: tuple[str, ...], *args) -> list[int]:
    lib = ctypes.CDLL(path)
    return [getattr(lib, name)(*args) for name in names if hasattr(lib, name)]


@functools.cache
def one_blas_thread() -> int:
    """Every loaded OpenBLAS set to one thread, once per process; how many libraries were set."""
    import numpy  # noqa: F401 - its OpenBLAS and SciPy's are loaded by the time a fit calls this
    import scipy.linalg  # noqa: F401

    return sum(bool(_call(path, SETTERS, 1)) for path in loaded_openblas())


def blas_threads() -> list[int]:
    """The thread count each loaded OpenBLAS reports."""
    getters = tuple(name.replace("set_num_threads", "get_num_threads") for name in SETTERS)
    return [n for path in loaded_openblas() for n in _call(path, getters)]
