"""Evaluating a fastText classifier: held-out metrics and metrics on other real labelled sets (cross-domain).

After CS336 assignment 4: accuracy, macro and support-weighted F1, per-class precision/recall/F1, and ROC AUC of the
positive label's probability. Labelled sets are fastText-format files or the real CSVs of
pipeline/classifiers/labelled.py.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from pipeline.classifiers.labelled import csv_examples
from pipeline.classifiers.models import PREFIX, FastTextClassifier, task_spec
from workbench.files import file_sha256


def read_labelled(path: str | Path) -> tuple[list[str], list[str]]:
    """(first label of each line, the rest of the line) from a fastText-format file; unlabelled lines skipped."""
    labels, texts = [], []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            words = line.split()
            tags = [w for w in words if w.startswith(PREFIX)]
            if tags:
                labels.append(tags[0][len(PREFIX):])
                texts.append(" ".join(w for w in words if not w.startswith(PREFIX)))
    return labels, texts


def classification_metrics(y_true: list[str], y_pred: list[str]) -> dict:
    """Accuracy, macro and support-weighted F1, and per-class precision/recall/F1/support (0 where undefined)."""
    y_true, y_pred = np.asarray(y_true, dtype=object), np.asarray(y_pred, dtype=object)
    if len(y_true) != len(y_pred):
        raise ValueError(f"y_true and y_pred differ in length: {len(y_true)} vs {len(y_pred)}")
    per_class = {}
    for label in sorted(set(y_true) | set(y_pred)):
        tp = int(np.sum((y_pred == label) & (y_true == label)))
        n_pred, n_true = int(np.sum(y_pred == label)), int(np.sum(y_true == label))
        p = tp / n_pred if n_pred else 0.0
        r = tp / n_true if n_true else 0.0
        f1 = 2 * p * r / (p + r) if p + r else 0.0
        per_class[label] = {"precision": p, "recall": r, "f1": f1, "support": n_true}
    f1s, supports = [c["f1"] for c in per_class.values()], [c["support"] for c in per_class.values()]
    n = len(y_true)
    return {"n": n, "accuracy": float(np.mean(y_true == y_pred)) if n else 0.0,
            "macro_f1": float(np.mean(f1s)) if f1s else 0.0,
            "weighted_f1": float(np.dot(f1s, supports) / n) if n else 0.0, "per_class": per_class}


def roc_auc(scores, positive) -> float:
    """Area under the ROC curve = P(score of a random positive > that of a random negative), ties 1/2."""
    scores, positive = np.asarray(scores, dtype=float), np.asarray(positive, dtype=bool)
    pos, neg = scores[positive], scores[~positive]
    if not len(pos) or not len(neg):
        return float("nan")
    order = np.sort(neg)
    below = np.searchsorted(order, pos, side="left")
    ties = np.searchsorted(order, pos, side="right") - below
    return float((below + 0.5 * ties).sum() / (len(pos) * len(neg)))


def evaluate_texts(model: FastTextClassifier, labels: list[str], texts: list[str], positive: str | None = None,
                   where: str = "the held-out set") -> dict:
    """Metrics of ``model`` on (label, text) pairs (labels mapped like the model's), plus ``auc`` of
    P(``positive``) when a positive label is named and docs/s of batched prediction."""
    if not texts:
        raise ValueError(f"no labelled examples in {where}")
    y_true = [model.canonical(lab) for lab in labels]
    t0 = time.perf_counter()
    proba = model.proba(texts)
    seconds = time.perf_counter() - t0
    y_pred = [model.labels[j] for j in proba.argmax(axis=1)]
    out = classification_metrics(y_true, y_pred)
    out["predict_docs_per_s"] = round(len(texts) / max(seconds, 1e-9), 1)
    if positive is not None and positive in model.labels:
        out["auc"] = roc_auc(proba[:, model.labels.index(positive)], [y == positive for y in y_true])
    return out


def evaluate(model: FastTextClassifier, valid_file: str | Path, positive: str | None = None) -> dict:
    """Held-out metrics of ``model`` on a fastText-format file (see ``evaluate_texts``)."""
    labels, texts = read_labelled(valid_file)
    return evaluate_texts(model, labels, texts, positive, str(valid_file))


def evaluate_on(model: FastTextClassifier, task: str, paths) -> list[dict]:
    """Metrics of ``model`` on other real labelled sets (cross-domain), one row per file, for the sidecar."""
    rows = []
    for path in paths:
        if str(path).endswith(".csv"):  # a Davidson or Jigsaw CSV, else a fastText-format file
            recipe, examples = csv_examples(path, task)
            labels, texts = [lab for lab, _ in examples], [t for _, t in examples]
        else:
            recipe, (labels, texts) = "fasttext", read_labelled(path)
        m = evaluate_texts(model, labels, texts, task_spec(task).positive, str(path))
        rows.append({"data": str(path), "recipe": recipe, "sha256": file_sha256(path),
                     **{k: m[k] for k in ("n", "accuracy", "macro_f1", "auc") if k in m}})
    return rows
