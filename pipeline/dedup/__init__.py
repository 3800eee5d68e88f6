"""Exact and near-duplicate removal: MinHash, LSH banding and union-find (``minhash``) and the dedup stage
(``stage``, ``python -m pipeline.dedup.stage``).

CS336 assignment 4's ``exact_line_deduplication`` and ``minhash_deduplication`` are importable from here (the import
path they had before the split).
"""

from pipeline.dedup.stage import exact_line_deduplication, minhash_deduplication

__all__ = ["exact_line_deduplication", "minhash_deduplication"]
