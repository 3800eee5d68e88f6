"""The ``distilled`` extractor: keep or drop each block of a page with trees distilled from trafilatura.

``pipeline.web.blocks`` cuts the page into blocks and computes their features; two forests of gradient-boosted trees
(``pipeline.web.trees``) give each block P(trafilatura keeps it): the first from the block's own features, the
second from those plus the first's probabilities around it (the block before and after, a window of five, the
page's mean, and the mean over each of its two containers), since main text and boilerplate come in runs and in
containers. The blocks above ``threshold`` (0.5 as distilled) are the text, one line each. A page the model is
unsure of goes to trafilatura: when the share of its characters in blocks whose probability is near one half
exceeds ``fallback_above``, or when the kept text is short (fewer than
``extract_cascade.MIN_CHARS`` characters), the page gets exactly ``--extractor trafilatura``'s text.

The weights ship as data (``distilled_model.json``, written by ``python -m pipeline.web.distill``, which says what
they were fitted on); evaluating them needs NumPy only.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.web.blocks import FEATURE_NAMES, Page, container_mean, features, page_blocks, window_mean
from pipeline.web.extract_cascade import MIN_CHARS
from pipeline.web.native import NATIVE
from pipeline.web.trees import Forest

MODEL_PATH = Path(__file__).with_name("distilled_model.json")
CONTEXT_NAMES = ("p_prev", "p_next", "p_window", "p_page", "p_self", "p_parent", "p_grandparent")
UNSURE_BAND = 0.25  # a probability within this of one half counts the block's characters as unsure
# trafilatura removes these elements before it looks for the main text (its MANUALLY_CLEANED): a block inside one is
# dropped whatever the trees say, as the teacher's own rule; on pages unlike any the trees learnt from they may not
REMOVED_BY_TEACHER = tuple(FEATURE_NAMES.index(f"in_{tag}") for tag in ("nav", "footer", "aside", "form"))


@dataclass
class Model:
    """The two forests, the keep threshold and the page-level fallback rule."""

    blocks: Forest
    context: Forest
    threshold: float
    fallback_above: float  # share of the page's characters in unsure blocks above which trafilatura decides
    provenance: dict

    @classmethod
    def from_json(cls, data: dict) -> Model:
        if tuple(data["features"]) != FEATURE_NAMES:
            raise ValueError("distilled_model.json was fitted on other block features: run python -m "
                             "pipeline.web.distill again")
        return cls(Forest.from_json(data["blocks"]), Forest.from_json(data["context"]), float(data["threshold"]),
                   float(data["fallback_above"]), data.get("provenance", {}))


@functools.lru_cache(maxsize=4)
def load_model(path: str | Path = MODEL_PATH) -> Model:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no distilled model (python -m pipeline.web.distill writes it)")
    return Model.from_json(json.loads(path.read_text(encoding="utf-8")))


def context_features(x: np.ndarray, p: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """``x`` with the first forest's probabilities around each block (``CONTEXT_NAMES``) appended: before and after
    it, in a window of five, on the page, its own, and its containers' (``groups``, ``blocks.containers``; means
    weighted by characters, since a container holding the main text holds it in its long blocks). The compiled
    core's, or ``context_features_reference``'s where it is not built."""
    n = len(p)
    if NATIVE is None or not n:
        return context_features_reference(x, p, groups)
    x = np.ascontiguousarray(x, dtype=np.float32)
    rows = NATIVE.context_features(x, n, x.shape[1], np.ascontiguousarray(p, dtype=np.float64),
                                   np.ascontiguousarray(groups, dtype=np.int64), FEATURE_NAMES.index("log_chars"))
    return np.frombuffer(rows, dtype=np.float32).reshape(n, x.shape[1] + len(CONTEXT_NAMES))


def context_features_reference(x: np.ndarray, p: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """``context_features`` in NumPy."""
    n = len(p)
    prev = np.concatenate([[0.0], p[:-1]])
    after = np.concatenate([p[1:], [0.0]])
    window = window_mean(p)
    page = np.full(n, p.mean() if n else 0.0)
    chars = np.expm1(x[:, FEATURE_NAMES.index("log_chars")].astype(np.float64))
    parent, grandparent = (container_mean(p, chars, groups[:, level]) for level in (0, 1))
    return np.hstack([x, np.stack([prev, after, window, page, p, parent, grandparent], axis=1)]).astype(np.float32)


def keep_probabilities(model: Model, x: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """P(keep) of each block (rows of ``features``; ``groups``: its ``containers``); 0 inside the elements
    trafilatura removes (``REMOVED_BY_TEACHER``)."""
    if not len(x):
        return np.zeros(0)
    p = model.context.predict(context_features(x, model.blocks.predict(x), groups))
    p[(x[:, REMOVED_BY_TEACHER] > 0).any(axis=1)] = 0.0
    return p


def unsure_share(p: np.ndarray, chars: np.ndarray) -> float:
    """The share of the page's characters in blocks whose P(keep) is within ``UNSURE_BAND`` of one half."""
    return float(chars[np.abs(p - 0.5) < UNSURE_BAND].sum() / max(chars.sum(), 1))


def kept_text(model: Model, page: Page, p: np.ndarray) -> tuple[str, bool]:
    """(the text of the blocks whose P(keep) ``p`` is above the threshold, whether trafilatura should decide this page
    instead: the text is short, or too much of the page is in unsure blocks)."""
    chars = np.array([len(t) for t in page.texts], dtype=np.float64)
    text = "\n".join(t for t, keep in zip(page.texts, p > model.threshold, strict=True) if keep)
    return text, len(text) < MIN_CHARS or unsure_share(p, chars) > model.fallback_above


def distilled_text(html: str, model: Model | None = None) -> tuple[str, bool]:
    """(the kept blocks' text, whether trafilatura should decide this page instead)."""
    model = model or load_model()
    page = page_blocks(html)
    if not page.texts:
        return "", True
    return kept_text(model, page, keep_probabilities(model, *features(page)))
