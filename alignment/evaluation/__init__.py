"""What judges and summarizes evaluation results: refusal (the safety judge and the Wilson interval of its rate) and
stats (SE, a bootstrap interval and pass@k over problems; mean ± sd over seeds). Greedy evaluation itself is the
command ``python -m alignment.evaluate``."""
