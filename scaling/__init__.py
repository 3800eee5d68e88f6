"""scaling package: budgeted sweeps (sweep); the laws, one module each (laws/); the runs and their layout (runs),
rolling-origin checks (rolling), prediction intervals (intervals), validity and selection (select), all behind
``predict.fit_and_predict``; the CLI (fit), its input files (data), its outputs (report), plots. Importing it
changes nothing; a fit sets OpenBLAS to one thread when it starts (blas)."""
