"""What the benchmarks share and what turns runs into rows and docs: results, report, figures, timing, gpu_check."""
