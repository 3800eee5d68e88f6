"""``python -m pipeline.classify``: the train-classifier stage. Trains a fastText classifier
(pipeline/classifiers/models.py) on labelled text, evaluates it on a held-out split and writes the model atomically,
with a provenance sidecar beside it (``<model>.json``: generated or real data, the input files and their SHA-256,
labels, held-out metrics, metrics on real data).

Data (one source; pipeline/classifiers/labelled.py has the real sets): ``--generate N`` labelled examples from the
sample-crawl generators (pipeline/sample/labels.py; the default, a demonstration that says nothing about real pages),
``--train``/``--valid`` files (fastText format), ``--davidson CSV`` (Davidson et al.'s tweets: toxicity, or nsfw as
offensive vs neither), ``--jigsaw CSV`` (Jigsaw comments: toxicity, or nsfw = obscene), or ``--positives PAGES
--negatives PAGES`` (quality after CS336/DCLM: reference pages vs random crawl pages, WARC/WET/JSONL/.txt).
``--eval FILE`` also scores the model on other real labelled sets (cross-domain). Defaults come from the ``classify``
section of params.yaml, strictly: hyperparameters there apply to every task, a mapping named after a task
(``classify.toxicity: {davidson: labeled_data.csv, minn: 3}``) to that task only, and ``classify.<task>: false``
trains nothing for it. The metrics file gets the headline (accuracy, AUC, macro-F1, speed), ``details_path`` of it
everything. Evaluation follows CS336 assignment 4: accuracy, macro and weighted F1, per-class precision/recall, AUC.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from pipeline.classifiers.evaluate import evaluate, evaluate_on, read_labelled
from pipeline.classifiers.labelled import (
    davidson_examples,
    jigsaw_examples,
    page_files,
    quality_examples,
    write_split,
)
from pipeline.classifiers.models import (
    DAVIDSON_CONFIG,
    GENERATED,
    TASKS,
    FastTextClassifier,
    TrainConfig,
    provenance_path,
    task_spec,
)
from pipeline.sample.labels import write_labelled_data
from workbench.files import file_sha256, write_json, write_metrics
from workbench.params import (
    Checked,
    ParamsError,
    Parser,
    add_config_flags,
    add_params_flag,
    add_verbose_flag,
    config_from_args,
    load_section,
    params_path,
    setting,
)

HYPERPARAMETERS = ("lr", "epoch", "word_ngrams", "dim", "minn", "maxn", "bucket", "thread")  # fastText's
SOURCE_KEYS = ("train", "generate", "davidson", "jigsaw", "positives")  # one of them picks the data
DATA_KEYS = (*SOURCE_KEYS, "valid", "negatives", "max_pages", "eval")  # also per task: classify.<task>.<key>
SECTION_KEYS = ("task", "generate", "seed", "data_dir", "out", *HYPERPARAMETERS)  # and one mapping per task
SOURCES = ("generated", "files", "davidson", "jigsaw", "pages")


# -- data -------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Source(Checked):
    """Where a task's labelled data comes from. ``kind``: generated (``n`` examples), files (``paths`` = train
    [, valid] in fastText format), davidson / jigsaw (``paths`` = the CSV), pages (``paths`` = reference pages,
    ``negatives`` = crawl pages, at most ``n`` a class)."""

    kind: str = setting("generated", "what the data is", choices=SOURCES)
    paths: tuple[Path, ...] = setting((), "its files")
    negatives: tuple[Path, ...] = setting((), "pages: the crawl pages")
    n: int = setting(4000, "generated: examples; pages: most pages a class", at_least=1)


def write_data(task: str, source: Source, data_dir: Path, seed: int) -> tuple[Path, Path, list[Path]]:
    """The train and held-out files of ``source`` (written under ``data_dir`` unless given) and its input files."""
    if source.kind == "generated":
        return (*write_labelled_data(data_dir, task, source.n, seed), [])
    if source.kind == "files" and len(source.paths) == 2:
        return source.paths[0], source.paths[1], list(source.paths)
    if source.kind == "files":
        examples = list(zip(*read_labelled(source.paths[0]), strict=True))
    elif source.kind in ("davidson", "jigsaw"):
        examples = (davidson_examples if source.kind == "davidson" else jigsaw_examples)(source.paths[0], task)
    else:
        examples = quality_examples(source.paths, source.negatives, source.n, seed)
        inputs = page_files(source.paths) + page_files(source.negatives)
        return (*write_split(examples, data_dir, f"{task}-pages", seed, 0.2), inputs)
    stem = {"files": f"{task}-split", "davidson": "davidson" if task == "toxicity" else "davidson-nsfw"}.get(
        source.kind, f"{source.kind}-{task}")
    return (*write_split(examples, data_dir, stem, seed, 0.2), list(source.paths))


def provenance(task: str, source: Source, seed: int, clf: FastTextClassifier, out: Path, config: TrainConfig,
               files: tuple[Path, Path, list[Path]], metrics: dict, real: list[dict]) -> dict:
    """The model's sidecar: what it was trained on, its labels, its held-out metrics and metrics on real data."""
    spec = task_spec(task)
    train, valid, inputs = files
    held_out = {k: metrics[k] for k in ("n", "accuracy", "macro_f1", "weighted_f1", "auc", "per_class") if k in metrics}
    generated = source.kind == "generated"
    if not generated:  # the held-out split is real data too
        real = [{"data": f"held-out 20% of {source.kind}", "recipe": source.kind,
                 **{k: held_out[k] for k in ("n", "accuracy", "macro_f1", "auc") if k in held_out}}, *real]
    return {"task": task, "model": out.name, "model_sha256": file_sha256(out),
            "trained_on": GENERATED if generated else "real", "recipe": source.kind,
            "inputs": [{"path": str(p), "sha256": file_sha256(p)} for p in inputs],
            **({"generator": {"module": "pipeline.sample.labels", "examples": source.n, "seed": seed}} if generated
               else {}),
            "train_file": {"path": str(train), "sha256": file_sha256(train)},
            "valid_file": {"path": str(valid), "sha256": file_sha256(valid)},
            "labels": {"positive": spec.positive, "negative": spec.negative, "model": list(clf.raw_labels),
                       "aliases": dict(spec.aliases)},
            "config": asdict(config), "held_out": held_out, "real_data": real}


def train_source(task: str, source: Source, *, seed: int = 0, data_dir: Path | None = None, out: Path | None = None,
                 config: TrainConfig | None = None, evals=()) -> dict:
    """Build or read the labelled files of ``source``, train ``task``, evaluate on the held-out file (and
    ``evals``), save the model and its provenance sidecar; return the metrics. ``config`` defaults to the task's,
    or ``DAVIDSON_CONFIG`` for tweets and comments."""
    spec = task_spec(task)
    out = Path(out) if out is not None else spec.default_path
    data_dir = Path(data_dir) if data_dir is not None else out.parent / "labelled"
    t0 = time.perf_counter()
    files = write_data(task, source, data_dir, seed)
    data_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    config = config or replace(DAVIDSON_CONFIG if source.kind in ("davidson", "jigsaw") else spec.config, seed=seed)
    clf = FastTextClassifier.train(files[0], None, config, labels=spec.aliases, default=spec.negative)
    train_seconds = time.perf_counter() - t0
    metrics = evaluate(clf, files[1], spec.positive)
    real = evaluate_on(clf, task, evals)
    clf.save(out)
    sidecar = provenance(task, source, seed, clf, out, config, files, metrics, real)
    write_json(provenance_path(out), sidecar)
    return {"task": task, "model": str(out), "provenance": str(provenance_path(out)),
            "trained_on": sidecar["trained_on"], "train_file": str(files[0]), "valid_file": str(files[1]),
            "data_seconds": round(data_seconds, 3), "train_seconds": round(train_seconds, 3), **metrics,
            "real_data": sidecar["real_data"]}


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
        if per_task is None or per_task is False:
            continue
        if not isinstance(per_task, dict):
            raise ParamsError(f"{path}: classify.{task} must be false (off) or a mapping of fastText settings and "
                              f"data, got {per_task!r}")
        unknown = sorted(set(per_task) - set(HYPERPARAMETERS) - set(DATA_KEYS))
        if unknown:
            raise ParamsError(f"{path}: section 'classify.{task}' has unknown key(s) {', '.join(unknown)} "
                              f"(known: {', '.join((*HYPERPARAMETERS, *DATA_KEYS))})", unknown)
    return section


def _per_task(name: str, section: dict) -> str:
    """A hyperparameter's default for each task, for --help: the task's mapping in the section, else the section,
    else the task's built-in value."""
    values = {task: (section.get(task) or {}).get(name, section.get(name, getattr(spec.config, name)))
              for task, spec in TASKS.items()}
    if len(set(values.values())) == 1:
        return str(next(iter(values.values())))
    return ", ".join(f"{task} {value}" for task, value in values.items())


@dataclass(frozen=True)
class ClassifySettings:
    """The flags of ``python -m pipeline.classify``; None: the `classify` section's value (per task where it has one),
    else the task's built-in one (``build_parser`` says which in each help line)."""

    task: str | None = setting(None, "what to classify", choices=tuple(sorted(TASKS)))
    train: Path | None = setting(None, "fastText-format training file (`__label__x text` lines)")
    valid: Path | None = setting(None, "held-out file; with --train and no --valid, a fifth of --train is held out")
    generate: int | None = setting(None, "generate N labelled examples", metavar="N")
    davidson: Path | None = setting(None, "Davidson et al. labeled_data.csv: toxicity (hate + offensive vs neither) or "
                                         "nsfw (offensive vs neither)", metavar="CSV")
    jigsaw: Path | None = setting(None, "Jigsaw toxic-comment train.csv: toxicity (any label) or nsfw (obscene)",
                                 metavar="CSV")
    positives: tuple[str, ...] | None = setting(None, "quality: reference pages (`wiki`): WARC/WET/JSONL/.txt files or "
                                                      "folders of them", metavar="PAGES")
    negatives: tuple[str, ...] | None = setting(None, "quality: crawl pages (`cc`) drawn at random, as many as the "
                                                      "positives", metavar="PAGES")
    max_pages: int | None = setting(None, "quality: at most N pages a class", metavar="N")
    eval: tuple[str, ...] | None = setting(None, "also evaluate on these real labelled sets (Davidson/Jigsaw CSV or "
                                                 "fastText files)", metavar="FILE")
    seed: int | None = setting(None, "seed of the generated data, the split and fastText")
    data_dir: Path | None = setting(None, "where the train+valid files go")
    out: Path | None = setting(None, "model path")
    metrics: Path | None = setting(None, "write held-out metrics JSON here (the headline; all of them in "
                                        "details/<name> beside it)")
    lr: float | None = setting(None, "fastText learning rate")
    epoch: int | None = setting(None, "fastText passes over the data")
    word_ngrams: int | None = setting(None, "fastText longest word n-gram")
    dim: int | None = setting(None, "fastText vector size")
    minn: int | None = setting(None, "fastText shortest char n-gram (0 = none)")
    maxn: int | None = setting(None, "fastText longest char n-gram")
    bucket: int | None = setting(None, "fastText hash buckets for n-grams")
    thread: int | None = setting(None, "fastText threads (1 = reproducible)")


def build_parser(section: dict) -> argparse.ArgumentParser:
    """The CLI; each help line names the default a run would use, ``section``'s value where it has one."""
    def default(key: str, builtin) -> str:
        return f"(default: {section[key]}, classify.{key})" if key in section else f"(default: {builtin})"

    p = Parser(
        prog="python -m pipeline.classify",
        description="Train a fastText quality / toxicity / NSFW classifier, print its held-out accuracy and "
                    "macro-F1, and write the model atomically with a provenance sidecar (<model>.json). Data: "
                    "--generate N labelled examples from the sample-crawl generators (the default; a demonstration "
                    "only), --train/--valid files (fastText format), --davidson or --jigsaw CSV (toxicity, nsfw), "
                    "or --positives/--negatives pages (quality). Defaults come from the `classify` section of "
                    "params.yaml (also per task: `classify.toxicity: {davidson: CSV}`; `classify.quality: false` "
                    "trains nothing), else each task's built-in ones.")
    add_config_flags(p, ClassifySettings)
    shown = {"task": default("task", "quality; toxicity with --davidson/--jigsaw"),
             "generate": default("generate", 4000), "seed": default("seed", 0),
             "data_dir": default("data_dir", "<out folder>/labelled"),
             "out": default("out", "data/classifiers/<task>.bin"), "max_pages": "(default: 20000)",
             **{name: f"(default: {_per_task(name, section)})" for name in HYPERPARAMETERS}}
    for action in p._actions:  # the default a run would use, which the section may set per task
        if action.dest in shown:
            action.help = f"{action.setting.metadata['help']} {shown[action.dest]}"
    add_params_flag(p, "classify")
    add_verbose_flag(p)
    return p


def _paths(value) -> tuple[Path, ...]:
    return () if value is None else (Path(value),) if isinstance(value, (str, Path)) else tuple(map(Path, value))


def _data(args: argparse.Namespace, d: dict, task: str) -> dict | None:
    """The data settings of this run: the flags when any picks a source, else the task's mapping in the section;
    None when the section switches the task off (``classify.<task>: false``) and no flag picks a source."""
    flags = {k: getattr(args, k) for k in DATA_KEYS if getattr(args, k) is not None}
    if any(k in flags for k in SOURCE_KEYS):
        return flags
    if d.get(task) is False:
        return None
    return {**{k: v for k, v in (d.get(task) or {}).items() if k in DATA_KEYS}, **flags}


def _source(parser: argparse.ArgumentParser, data: dict, task: str, generate: int) -> Source:
    """The one data source ``data`` names; parser.error (exit 2) on a combination that cannot work."""
    picked = [k for k in SOURCE_KEYS if data.get(k) is not None]
    if len(picked) > 1:
        parser.error(f"give at most one of --train, --generate, --davidson, --jigsaw, --positives (got {picked})")
    kind = picked[0] if picked else "generate"
    if kind in ("davidson", "jigsaw") and task == "quality":
        parser.error(f"--{kind} trains toxicity or nsfw, not {task}")
    if kind == "positives" and (task != "quality" or data.get("negatives") is None):
        parser.error("--positives trains quality and needs --negatives (random crawl pages)")
    if data.get("valid") is not None and kind != "train":
        parser.error("--valid needs --train")
    n = int(data.get("generate", generate))
    if kind == "generate" and n < 10:
        parser.error(f"--generate must be >= 10, got {n}")
    for path in (p for key in ("train", "valid", "davidson", "jigsaw", "eval") for p in _paths(data.get(key))):
        if not path.is_file():
            parser.error(f"file not found: {path}")
    if kind == "train":
        return Source("files", _paths(data["train"]) + _paths(data.get("valid")))
    if kind in ("davidson", "jigsaw"):
        return Source(kind, _paths(data[kind]))
    if kind == "positives":
        return Source("pages", _paths(data["positives"]), _paths(data["negatives"]),
                      int(data.get("max_pages", 20_000)))
    return Source("generated", n=n)


def _config(parser: argparse.ArgumentParser, args: argparse.Namespace, d: dict, task: str, seed: int,
            source: Source) -> TrainConfig:
    """Hyperparameters: a flag, else the task's mapping in the section, else the section, else the built-in
    (tweets and comments: ``DAVIDSON_CONFIG``)."""
    per_task = d.get(task) or {}  # e.g. classify.quality: {minn: 3}
    hyper = {k: v for k in HYPERPARAMETERS
             if (v := getattr(args, k) if getattr(args, k) is not None else per_task.get(k, d.get(k))) is not None}
    try:
        base = DAVIDSON_CONFIG if source.kind in ("davidson", "jigsaw") else TASKS[task].config
        return TrainConfig(**{**asdict(base), "seed": seed, **hyper})
    except (TypeError, ValueError) as e:
        parser.error(str(e))


def _print_summary(task: str, m: dict, out: Path) -> None:
    per = "  ".join(f"{k}: P {v['precision']:.3f} R {v['recall']:.3f} F1 {v['f1']:.3f} (n={v['support']})"
                    for k, v in m["per_class"].items())
    print(f"{task}: held-out accuracy {m['accuracy']:.4f}  macro-F1 {m['macro_f1']:.4f}  weighted-F1 "
          f"{m['weighted_f1']:.4f}  AUC {m.get('auc', float('nan')):.4f}  (n={m['n']}, {m['trained_on']} data)")
    print(f"  {per}")
    for row in m["real_data"][1 if m["trained_on"] != GENERATED else 0:]:
        print(f"  on {row['data']}: AUC {row.get('auc', float('nan')):.4f}  accuracy {row['accuracy']:.4f}  "
              f"(n={row['n']})")
    print(f"  trained in {m['train_seconds']:.1f} s, predicts {m['predict_docs_per_s']:,.0f} docs/s -> {out} "
          f"(provenance: {m['provenance']})")


def _off(task: str, metrics: Path | None, params: Path) -> int:
    """``classify.<task>: false``: train nothing; the metrics file says so (DVC expects it)."""
    if metrics:
        write_metrics(metrics, {"task": task, "off": True},
                      {"accuracy": None, "auc": None, "f1": None, "seconds": 0.0, "docs_per_s": None})
    print(f"{task}: off (classify.{task}: false in {params}); no model trained")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        d = read_section(params_path(argv))
    except ParamsError as e:
        build_parser({}).error(str(e))
    parser = build_parser(d)
    args = parser.parse_args(argv)
    try:
        config_from_args(ClassifySettings, args)  # the settings' own checks (choices)
    except ValueError as exc:
        parser.error(str(exc))
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    task = args.task or ("toxicity" if args.davidson or args.jigsaw else d.get("task", "quality"))
    if task not in TASKS:
        parser.error(f"--task must be one of {sorted(TASKS)}, got {task!r}")
    data = _data(args, d, task)
    if data is None:
        return _off(task, args.metrics, args.params)
    source = _source(parser, data, task, int(d.get("generate", 4000)))
    seed = args.seed if args.seed is not None else int(d.get("seed", 0))
    config = _config(parser, args, d, task, seed, source)
    out = args.out or (Path(d["out"].format(task=task)) if d.get("out") else TASKS[task].default_path)
    try:
        m = train_source(task, source, seed=seed, data_dir=args.data_dir or d.get("data_dir"), out=out,
                         config=config, evals=_paths(data.get("eval")))
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
