"""``python -m pipeline.classify``: the train-classifier stage. Trains a fastText classifier (pipeline/classifiers.py)
on labelled text, evaluates it on a held-out split and writes the model atomically.

Data: ``--train``/``--valid`` files (fastText format), ``--generate N`` labelled examples from the sample-crawl
generators (pipeline/sample/labels.py; the default) or ``--davidson`` (Davidson et al.'s tweets, toxicity).
Defaults come from the ``classify`` section of params.yaml, strictly: hyperparameters there apply to every task,
and a mapping named after a task (``classify.quality: {minn: 3}``) to that task only. The metrics file gets the
headline (accuracy, AUC, macro-F1, speed), ``details_path`` of it everything (per-class scores, the config).
Evaluation follows CS336 assignment 4: accuracy, macro and weighted F1, per-class precision/recall, ROC AUC.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from pipeline.classifiers import DAVIDSON_CONFIG, PREFIX, TASKS, FastTextClassifier, TrainConfig, task_spec
from pipeline.sample.labels import write_davidson_data, write_labelled_data, write_split
from workbench.files import write_metrics
from workbench.params import ParamsError, load_section, params_path

HYPERPARAMETERS = {"lr": (float, "learning rate"), "epoch": (int, "passes over the data"),
                   "word_ngrams": (int, "longest word n-gram"), "dim": (int, "vector size"),
                   "minn": (int, "shortest char n-gram (0 = none)"), "maxn": (int, "longest char n-gram"),
                   "bucket": (int, "hash buckets for n-grams"), "thread": (int, "threads (1 = reproducible)")}
SECTION_KEYS = ("task", "generate", "seed", "data_dir", "out", *HYPERPARAMETERS)  # and one mapping per task


# -- evaluation ----------------------------------------------------------------------------------------
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
    per_class, f1s, supports = {}, [], []
    for label in sorted(set(y_true) | set(y_pred)):
        tp = int(np.sum((y_pred == label) & (y_true == label)))
        n_pred, n_true = int(np.sum(y_pred == label)), int(np.sum(y_true == label))
        p = tp / n_pred if n_pred else 0.0
        r = tp / n_true if n_true else 0.0
        f1 = 2 * p * r / (p + r) if p + r else 0.0
        per_class[label] = {"precision": p, "recall": r, "f1": f1, "support": n_true}
        f1s.append(f1)
        supports.append(n_true)
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


def evaluate(model: FastTextClassifier, valid_file: str | Path, positive: str | None = None) -> dict:
    """Held-out metrics of ``model`` on a fastText-format file (labels mapped like the model's), plus
    ``auc`` of P(``positive``) when a positive label is named and docs/s of batched prediction."""
    raw, texts = read_labelled(valid_file)
    if not texts:
        raise ValueError(f"no labelled lines in {valid_file}")
    y_true = [model.canonical(lab) for lab in raw]
    t0 = time.perf_counter()
    proba = model.proba(texts)
    seconds = time.perf_counter() - t0
    y_pred = [model.labels[j] for j in proba.argmax(axis=1)]
    out = classification_metrics(y_true, y_pred)
    out["predict_docs_per_s"] = round(len(texts) / max(seconds, 1e-9), 1)
    if positive is not None and positive in model.labels:
        out["auc"] = roc_auc(proba[:, model.labels.index(positive)], [y == positive for y in y_true])
    return out


def run_train(task: str, *, train: Path | None = None, valid: Path | None = None, generate: int | None = None,
              davidson: Path | None = None, seed: int = 0, data_dir: Path | None = None, out: Path | None = None,
              config: TrainConfig | None = None) -> dict:
    """Build or read the labelled files, train, evaluate on the held-out file, save; return the metrics."""
    spec = task_spec(task)
    out = Path(out) if out is not None else spec.default_path
    data_dir = Path(data_dir) if data_dir is not None else out.parent / "labelled"
    t0 = time.perf_counter()
    if davidson is not None:
        train, valid = write_davidson_data(davidson, data_dir, seed)
    elif train is None:
        train, valid = write_labelled_data(data_dir, task, generate or 4000, seed)
    elif valid is None:
        labels, texts = read_labelled(train)
        train, valid = write_split(list(zip(labels, texts, strict=False)), data_dir, f"{task}-split", seed, 0.2)
    data_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    clf = FastTextClassifier.train(train, None, config or replace(spec.config, seed=seed), labels=spec.aliases,
                                   default=spec.negative)
    train_seconds = time.perf_counter() - t0
    metrics = evaluate(clf, valid, spec.positive)
    clf.save(out)
    return {"task": task, "model": str(out), "train_file": str(train), "valid_file": str(valid),
            "data_seconds": round(data_seconds, 3), "train_seconds": round(train_seconds, 3), **metrics}


def headline(metrics: dict) -> dict:
    """The numbers ``dvc metrics show`` prints for a classifier (the rest is in its details file)."""
    auc = metrics.get("auc")
    return {"accuracy": round(metrics["accuracy"], 4), "auc": round(auc, 4) if auc is not None else None,
            "f1": round(metrics["macro_f1"], 4),
            "seconds": round(metrics["data_seconds"] + metrics["train_seconds"], 3),
            "docs_per_s": metrics["predict_docs_per_s"]}


# -- CLI ---------------------------------------------------------------------------------------------------------
def read_section(path: str | Path) -> dict:
    """The ``classify`` section of ``path``; an unknown key, there or in a task's mapping, is a ParamsError."""
    section = load_section("classify", path, known=(*SECTION_KEYS, *TASKS))
    for task in TASKS:
        per_task = section.get(task)
        if per_task is None:
            continue
        if not isinstance(per_task, dict):
            raise ParamsError(f"{path}: classify.{task} must be a mapping of fastText settings, got {per_task!r}")
        unknown = sorted(set(per_task) - set(HYPERPARAMETERS))
        if unknown:
            raise ParamsError(f"{path}: section 'classify.{task}' has unknown key(s) {', '.join(unknown)} "
                              f"(known: {', '.join(HYPERPARAMETERS)})", unknown)
    return section


def _per_task(name: str, section: dict) -> str:
    """A hyperparameter's default for each task, for --help: the task's mapping in the section, else the section,
    else the task's built-in value."""
    values = {task: (section.get(task) or {}).get(name, section.get(name, getattr(spec.config, name)))
              for task, spec in TASKS.items()}
    if len(set(values.values())) == 1:
        return str(next(iter(values.values())))
    return ", ".join(f"{task} {value}" for task, value in values.items())


def build_parser(section: dict) -> argparse.ArgumentParser:
    """The CLI; each help line names the default a run would use, ``section``'s value where it has one."""
    def default(key: str, builtin) -> str:
        return f"(default: {section[key]}, classify.{key})" if key in section else f"(default: {builtin})"

    p = argparse.ArgumentParser(
        prog="python -m pipeline.classify",
        description="Train a fastText quality / toxicity / NSFW classifier, print its held-out accuracy and "
                    "macro-F1, and write the model atomically. Data: --train/--valid files (fastText format), "
                    "--generate N labelled examples from the sample-crawl generators (the default), or "
                    "--davidson CSV (toxicity). Defaults come from the `classify` section of params.yaml "
                    "(hyperparameters also per task: `classify.quality.minn`), else each task's built-in ones.")
    p.add_argument("--task", choices=sorted(TASKS),
                   help="what to classify " + default("task", "quality; toxicity with --davidson"))
    p.add_argument("--train", type=Path, help="fastText-format training file (`__label__x text` lines)")
    p.add_argument("--valid", type=Path, help="held-out file; with --train and no --valid, 20%% of --train is held out")
    p.add_argument("--generate", type=int, metavar="N",
                   help="generate N labelled examples " + default("generate", 4000))
    p.add_argument("--davidson", type=Path, metavar="CSV", help="Davidson et al. labeled_data.csv -> toxicity")
    p.add_argument("--seed", type=int, help="seed of the generated data, the split and fastText " + default("seed", 0))
    p.add_argument("--data-dir", type=Path, help="where generated/Davidson train+valid files go "
                                                 + default("data_dir", "<out folder>/labelled"))
    p.add_argument("--out", type=Path, help="model path " + default("out", "data/classifiers/<task>.bin"))
    p.add_argument("--metrics", type=Path, help="write held-out metrics JSON here (the headline; all of them in "
                                                "details/<name> beside it)")
    for name, (kind, what) in HYPERPARAMETERS.items():
        p.add_argument(f"--{name.replace('_', '-')}", type=kind,
                       help=f"fastText {what} (default: {_per_task(name, section)})")
    p.add_argument("--params", type=Path, default=Path("params.yaml"),
                   help="params file whose `classify` section gives the defaults (default: %(default)s)")
    p.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    return p


def _check_usage(parser: argparse.ArgumentParser, args: argparse.Namespace, task: str, generate: int) -> None:
    """parser.error (exit 2) on a combination of flags that cannot work."""
    if task not in TASKS:
        parser.error(f"--task must be one of {sorted(TASKS)}, got {task!r}")
    if args.davidson and task != "toxicity":
        parser.error(f"--davidson trains a toxicity classifier, not {task}")
    if sum(x is not None for x in (args.train, args.generate, args.davidson)) > 1:
        parser.error("give at most one of --train, --generate, --davidson")
    if args.valid is not None and args.train is None:
        parser.error("--valid needs --train")
    if args.train is None and args.davidson is None and generate < 10:
        parser.error(f"--generate must be >= 10, got {generate}")
    for path in (args.train, args.valid, args.davidson):
        if path is not None and not path.is_file():
            parser.error(f"file not found: {path}")


def _config(parser: argparse.ArgumentParser, args: argparse.Namespace, d: dict, task: str, seed: int) -> TrainConfig:
    """Hyperparameters: a flag, else the task's mapping in the section, else the section, else the built-in."""
    per_task = d.get(task) or {}  # e.g. classify.quality: {minn: 3}
    hyper = {k: v for k in HYPERPARAMETERS
             if (v := getattr(args, k) if getattr(args, k) is not None else per_task.get(k, d.get(k))) is not None}
    try:
        base = DAVIDSON_CONFIG if args.davidson else TASKS[task].config
        return TrainConfig(**{**asdict(base), "seed": seed, **hyper})
    except (TypeError, ValueError) as e:
        parser.error(str(e))


def _print_summary(task: str, m: dict, out: Path) -> None:
    per = "  ".join(f"{k}: P {v['precision']:.3f} R {v['recall']:.3f} F1 {v['f1']:.3f} (n={v['support']})"
                    for k, v in m["per_class"].items())
    print(f"{task}: held-out accuracy {m['accuracy']:.4f}  macro-F1 {m['macro_f1']:.4f}  weighted-F1 "
          f"{m['weighted_f1']:.4f}  AUC {m.get('auc', float('nan')):.4f}  (n={m['n']})")
    print(f"  {per}")
    print(f"  trained in {m['train_seconds']:.1f} s, predicts {m['predict_docs_per_s']:,.0f} docs/s -> {out}")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        d = read_section(params_path(argv))
    except ParamsError as e:
        build_parser({}).error(str(e))
    parser = build_parser(d)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    task = args.task or ("toxicity" if args.davidson else d.get("task", "quality"))
    generate = args.generate if args.generate is not None else int(d.get("generate", 4000))
    _check_usage(parser, args, task, generate)
    seed = args.seed if args.seed is not None else int(d.get("seed", 0))
    config = _config(parser, args, d, task, seed)
    out = args.out or (Path(d["out"].format(task=task)) if d.get("out") else TASKS[task].default_path)
    try:
        m = run_train(task, train=args.train, valid=args.valid, generate=generate, davidson=args.davidson,
                      seed=seed, data_dir=args.data_dir or d.get("data_dir"), out=out, config=config)
    except (ValueError, OSError, RuntimeError, UnicodeDecodeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    m["config"] = asdict(config)
    if args.metrics:
        write_metrics(args.metrics, m, headline(m))
    _print_summary(task, m, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
