"""Gradient-boosted trees in NumPy: fitted by ``pipeline.web.distill``, evaluated by the ``distilled`` extractor.

Training (``fit``): logistic loss, second-order leaf values (XGBoost's, Chen and Guestrin 2016), each tree grown to
``depth`` levels on histograms of each feature over at most ``bins`` quantile bins (LightGBM's, Ke et al. 2017), with
L2 regularisation ``l2`` and shrinkage ``lr``; deterministic (no sampling), so the same data gives the same trees.
Every tree is complete (a node that cannot split passes its samples to its left child unchanged), so a forest is
four arrays and ``predict`` is ``depth`` vectorised steps over every tree at once (``margin_reference``), or the
compiled core's loop (``pipeline.web.native``), which gives the same margins to the last bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.web.native import NATIVE


@dataclass
class Forest:
    """``feature[t, node]`` and ``threshold[t, node]`` of each internal node (heap order: node i's children are
    2i+1 and 2i+2; go right when x > threshold), ``value[t, leaf]`` of each of the ``2**depth`` leaves, and the
    ``base`` log-odds every prediction starts from."""

    feature: np.ndarray
    threshold: np.ndarray
    value: np.ndarray
    base: float

    @property
    def depth(self) -> int:
        return int(np.log2(self.value.shape[1]))

    def margin(self, x: np.ndarray) -> np.ndarray:
        """The log-odds of each row of ``x`` (n, features)."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        if NATIVE is None or x.ndim != 2:
            return self.margin_reference(x)
        margin = NATIVE.forest_margin(x, x.shape[0], x.shape[1], self.feature, self.threshold, self.value,
                                      self.feature.shape[0], self.depth, self.base)
        return np.frombuffer(margin, dtype=np.float64)

    def margin_reference(self, x: np.ndarray) -> np.ndarray:
        """``margin`` in NumPy: every row down every tree at once, one level per step, on flat indices (a gather from
        a 1-D array is NumPy's cheapest)."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        n, trees, internal = x.shape[0], self.feature.shape[0], self.feature.shape[1]
        feature, threshold, values = self.feature.ravel(), self.threshold.ravel(), self.value.ravel()
        row_start = (np.arange(n) * x.shape[1])[:, None]
        tree_start = (np.arange(trees) * internal)[None, :]
        flat_x = x.ravel()
        node = np.zeros((n, trees), dtype=np.intp)
        for _ in range(self.depth):
            at = tree_start + node
            node = 2 * node + 1 + (flat_x[row_start + feature[at]] > threshold[at])
        leaf = (np.arange(trees) * (internal + 1))[None, :] + node - internal
        return self.base + values[leaf].sum(axis=1)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """P(keep) of each row."""
        return 1.0 / (1.0 + np.exp(-self.margin(x)))

    def to_json(self) -> dict:
        return {"base": round(float(self.base), 8), "feature": self.feature.tolist(),
                "threshold": [[float(np.float32(t)) for t in row] for row in self.threshold],
                "value": [[round(float(v), 8) for v in row] for row in self.value]}

    @classmethod
    def from_json(cls, data: dict) -> Forest:
        return cls(np.array(data["feature"], dtype=np.int64), np.array(data["threshold"], dtype=np.float32),
                   np.array(data["value"], dtype=np.float64), float(data["base"]))


def bin_edges(x: np.ndarray, bins: int) -> list[np.ndarray]:
    """Per feature, the distinct quantile cut points (at most ``bins - 1``)."""
    qs = np.linspace(0, 1, bins + 1)[1:-1]
    return [np.unique(np.quantile(x[:, j], qs, method="lower")) for j in range(x.shape[1])]


def fit(x: np.ndarray, y: np.ndarray, trees: int = 60, depth: int = 3, lr: float = 0.2, bins: int = 32,
        l2: float = 1.0, min_hessian: float = 1.0) -> Forest:
    """Fit a forest to 0/1 labels ``y`` (the module docstring)."""
    x = np.asarray(x, dtype=np.float32)
    edges = bin_edges(x, bins)
    binned = np.stack([np.searchsorted(e, x[:, j], side="left") for j, e in enumerate(edges)], axis=1)
    offsets = np.arange(x.shape[1]) * bins
    flat = binned + offsets  # one histogram index per (row, feature)
    prior = float(np.clip(y.mean(), 1e-6, 1 - 1e-6))
    base = float(np.log(prior / (1 - prior)))
    margin = np.full(len(y), base)
    internal = 2 ** depth - 1
    feature = np.zeros((trees, internal), dtype=np.int64)
    threshold = np.full((trees, internal), np.inf, dtype=np.float32)
    value = np.zeros((trees, 2 ** depth))
    for t in range(trees):
        p = 1.0 / (1.0 + np.exp(-margin))
        g, h = p - y, p * (1 - p)
        node = np.zeros(len(y), dtype=np.int64)
        for level in range(depth):
            for i in range(2 ** level - 1, 2 ** (level + 1) - 1):
                rows = np.flatnonzero(node == i)
                split = _best_split(flat[rows], g[rows], h[rows], x.shape[1], bins, l2, min_hessian)
                if split is not None:
                    j, b = split
                    feature[t, i] = j
                    threshold[t, i] = edges[j][b]
                right = rows[x[rows, feature[t, i]] > threshold[t, i]]
                node[rows] = 2 * i + 1
                node[right] = 2 * i + 2
        leaves = node - internal
        sums_g = np.bincount(leaves, weights=g, minlength=2 ** depth)
        sums_h = np.bincount(leaves, weights=h, minlength=2 ** depth)
        value[t] = -lr * sums_g / (sums_h + l2)
        margin += value[t][leaves]
    return Forest(feature, threshold, value, base)


def _best_split(flat: np.ndarray, g: np.ndarray, h: np.ndarray, n_features: int, n_bins: int, l2: float,
                min_hessian: float) -> tuple[int, int] | None:
    """(feature, bin) of the split with the largest gain (x > edges[feature][bin] goes right), or None."""
    if len(g) < 2:
        return None
    size = n_features * n_bins
    hist_g = np.bincount(flat.ravel(), weights=np.repeat(g, n_features), minlength=size).reshape(n_features, n_bins)
    hist_h = np.bincount(flat.ravel(), weights=np.repeat(h, n_features), minlength=size).reshape(n_features, n_bins)
    left_g, left_h = np.cumsum(hist_g, axis=1)[:, :-1], np.cumsum(hist_h, axis=1)[:, :-1]
    total_g, total_h = g.sum(), h.sum()
    right_g, right_h = total_g - left_g, total_h - left_h
    gain = left_g ** 2 / (left_h + l2) + right_g ** 2 / (right_h + l2) - total_g ** 2 / (total_h + l2)
    gain[(left_h < min_hessian) | (right_h < min_hessian)] = -np.inf
    best = int(np.argmax(gain))
    j, b = divmod(best, n_bins - 1)
    return (j, b) if np.isfinite(gain[j, b]) and gain[j, b] > 1e-9 else None
