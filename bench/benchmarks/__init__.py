"""One benchmark per area: ours against the strongest baseline in the same run, rows under benchmarks/results/."""
