"""The alignment tasks, their data and their verifiers: prompts (the R1-Zero and short templates), digits (the default
task: column addition/subtraction held out by problem, its scratchpad, teacher and verifier), arithmetic (the
generated word problems), datasets (loaders for the real sets under ../shared/data/alignment), rewards (the R1-Zero
reward and the GSM8K/MMLU answer parsers) and data (each loop's training data for its config)."""
