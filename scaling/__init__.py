"""scaling package: budgeted sweeps (sweep); the laws, one module each (laws/); the runs and their layout (runs),
rolling-origin checks (rolling), prediction intervals (intervals), validity and selection (select), all behind
``predict.fit_and_predict``; the CLI (fit), its input files (data), its outputs (report), plots."""

import os

# L-BFGS-B calls OpenBLAS on 5×5 systems; on a busy 2-core box its threads make each fit ~30× slower. OpenBLAS
# reads this once, when numpy first loads it, so it must be set before any numpy/scipy import: a package's
# __init__ runs before any of its modules (`python -m scaling.fit`, `from scaling.fit import …`), which makes
# this the one place that covers every entry point. It has no effect if numpy was already imported by the
# caller; a value the user set wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
