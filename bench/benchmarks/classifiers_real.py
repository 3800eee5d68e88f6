"""The classifiers on real data: every number of docs/benchmarks/classifiers.md, in one run.

``labels``: toxicity and NSFW trained on Davidson et al.'s tweets, on the Jigsaw comments (``obscene`` for NSFW) and
on the generated labelled text (the default pipeline's), each scored on a held-out 20% of its own set (in-domain)
and on the whole other set (cross-domain). Hyperparameters are the recipe's defaults (``DAVIDSON_CONFIG``, chosen
on Davidson's held-out split); nothing is tuned on the evaluation sets.

``crawl``: the data stages of params-cc.yaml (train-classifier ×3, extract, filter) on ../shared/data/web, run as
DVC would run them (each CLI with ``--params params-cc.yaml`` in a scratch folder laid out as the profile expects:
data/cc, data/labels): how many English pages of the trafilatura evaluation set (curated articles) the classifier
steps drop, with reason and score, and which step drops the Common Crawl sample's three adult pages. For contrast,
what the generated-text models (refused by the filter on real pages) would drop.

    python -m bench.benchmarks.classifiers_real                 # both parts, ~70 s on 2 cores
    python -m bench.benchmarks.classifiers_real --only labels

Each run appends its rows to benchmarks/results/classifiers_real.jsonl (bench.tools.results); ``python -m
bench.tools.report`` puts them into docs/benchmarks/classifiers.md.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bench.tools.results import BenchSettings, Result, finish, parse_bench
from pipeline import classify
from pipeline.classifiers.models import FastTextClassifier, load_task_model
from pipeline.classify import Source, train_source
from pipeline.filters import stage as filter_step
from pipeline.web import extract
from workbench.params import setting, usage_error

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"
PARTS = ("labels", "crawl")
PROFILE = ROOT / "params-cc.yaml"
ADULT_HOSTS = ("0513mt.com", "05925.net", "096355.com")  # the adult pages of cc-main-2020-34-sample.warc.gz
CLASSIFIER_REASONS = ("quality_", "toxicity_", "nsfw_")


# -- labels: in-domain and cross-domain AUC ------------------------------------------------------------------------
def label_rows(davidson: Path, jigsaw: Path, scratch: Path) -> list[dict]:
    rows = []
    for task in ("toxicity", "nsfw"):
        for name, source, other in (("Davidson", Source("davidson", (davidson,)), jigsaw),
                                    ("Jigsaw", Source("jigsaw", (jigsaw,)), davidson),
                                    ("generated", Source("generated", n=4000), None)):
            evals = (other,) if other else (davidson, jigsaw)
            m = train_source(task, source, out=scratch / f"{task}-{name}.bin", evals=evals)
            cross = {Path(r["data"]).name: r for r in m["real_data"] if not r["data"].startswith("held-out")}
            rows.append({"task": task, "trained on": name, "n train": sum(1 for _ in open(m["train_file"])),
                         "held-out AUC": m.get("auc"), "held-out n": m["n"],
                         "Davidson AUC": cross.get(davidson.name, {}).get("auc"),
                         "Davidson n": cross.get(davidson.name, {}).get("n"),
                         "Jigsaw AUC": cross.get(jigsaw.name, {}).get("auc"),
                         "Jigsaw n": cross.get(jigsaw.name, {}).get("n")})
    return rows


def format_label_rows(rows: list[dict]) -> str:
    def auc(r, key):
        return f"{r[key + ' AUC']:.3f} (n={r[key + ' n']})" if r[key + " AUC"] is not None else "-"

    lines = [f"{'task':<9}{'trained on':<11}{'n train':>8}  {'held-out (in-domain)':<22}{'on Davidson':<20}"
             f"{'on Jigsaw':<16}"]
    for r in rows:
        lines.append(f"{r['task']:<9}{r['trained on']:<11}{r['n train']:>8}  {auc(r, 'held-out'):<22}"
                     f"{auc(r, 'Davidson'):<20}{auc(r, 'Jigsaw'):<16}")
    return "\n".join(lines)


# -- crawl: the params-cc.yaml data stages on the real pages ---------------------------------------------------------
@contextlib.contextmanager
def profile_folder(warcs: list[Path], davidson: Path, scratch: Path):
    """``scratch`` laid out as params-cc.yaml expects (data/cc, data/labels), as the working directory."""
    (scratch / "data" / "cc").mkdir(parents=True, exist_ok=True)
    (scratch / "data" / "labels").mkdir(parents=True, exist_ok=True)
    for w in warcs:
        (scratch / "data" / "cc" / w.name).unlink(missing_ok=True)
        (scratch / "data" / "cc" / w.name).symlink_to(w.resolve())
    (scratch / "data" / "labels" / "davidson_labeled_data.csv").unlink(missing_ok=True)
    (scratch / "data" / "labels" / "davidson_labeled_data.csv").symlink_to(davidson.resolve())
    cwd = Path.cwd()
    os.chdir(scratch)
    try:
        yield scratch
    finally:
        os.chdir(cwd)


def run_profile_stages(warcs: list[Path], profile: Path = PROFILE) -> None:
    """train-classifier ×3, extract, filter with ``--params profile`` in the current folder (the profile's layout).
    Extract gets the WARC files by name: a folder input needs extract's directory support."""
    params = ["--params", str(profile)]
    for task in ("quality", "toxicity", "nsfw"):
        assert classify.main([*params, "--task", task, "--metrics", f"metrics/classifier_{task}.json"]) == 0
    assert extract.main([*params, *(f"data/cc/{w.name}" for w in warcs)]) == 0
    assert filter_step.main(params) == 0


def read_outputs(folder: Path) -> list[dict]:
    """Every document the filter saw, with the file it came from: kept ones with reason None, then the rejected."""
    docs = []
    for kind in ("filtered", "rejected/filter"):
        for path in sorted((folder / "data" / kind).glob("*.jsonl.gz")):
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                for line in fh:
                    doc = {"reason": None, **json.loads(line), "file": path.name}
                    docs.append(doc)
    return docs


def crawl_report(docs: list[dict], generated: dict[str, FastTextClassifier], real: dict[str, FastTextClassifier],
                 thresholds: dict[str, float]) -> dict:
    traf_en = [d for d in docs if d["file"].startswith("trafilatura") and d.get("lang") == "en"]
    reached = [d for d in traf_en if d["reason"] is None or d["reason"].startswith(CLASSIFIER_REASONS + ("pii",))]
    dropped = [d for d in traf_en if d["reason"] and d["reason"].startswith(CLASSIFIER_REASONS)]
    adult = [d for d in docs if any(h in d["url"] for h in ADULT_HOSTS)]
    texts = [d["text"] for d in traf_en]

    def flagged(models):
        return {task: int(sum(s >= thresholds.get(task, 0.5) for s in clf.scores(texts, positive)))
                for task, (clf, positive) in models.items()}

    return {"english_pages": len(traf_en), "reached_classifiers": len(reached), "dropped": [
                {"url": d["url"], "reason": d["reason"], "score": d.get(d["reason"].split("_")[0])} for d in dropped],
            "adult": [{"url": d["url"], "reason": d["reason"], "lang": d.get("lang"),
                       **{task: round(float(clf.scores([d["text"]], pos)[0]), 4) for task, (clf, pos) in
                          real.items()}} for d in adult],
            "real_on_all_english": flagged(real), "generated_on_all_english": flagged(generated)}


def crawl_part(web: Path, davidson: Path, scratch: Path) -> dict:
    warcs = sorted(web.glob("*.warc.gz"))
    with profile_folder(warcs, davidson, scratch / "cc") as folder:
        run_profile_stages(warcs)
        real = {t: (load_task_model(t, f"data/classifiers/{t}.bin"), p) for t, p in (("toxicity", "toxic"),
                                                                                      ("nsfw", "nsfw"))}
        docs = read_outputs(folder)
    generated = {}
    for task, positive in (("quality", "wiki"), ("toxicity", "toxic"), ("nsfw", "nsfw")):
        train_source(task, Source("generated", n=4000), out=scratch / "generated" / f"{task}.bin")
        generated[task] = (load_task_model(task, scratch / "generated" / f"{task}.bin"), positive)
    return crawl_report(docs, generated, real, {"toxicity": 0.5, "nsfw": 0.5, "quality": 0.5})


def format_crawl(r: dict) -> str:
    n, reached, dropped = r["english_pages"], r["reached_classifiers"], r["dropped"]
    lines = [f"trafilatura evaluation set: {n} English pages, {reached} reach the classifier steps (after Gopher); "
             f"the classifier steps drop {len(dropped)} = {len(dropped) / max(reached, 1):.1%} of those "
             f"({len(dropped) / max(n, 1):.1%} of the English pages)"]
    lines += [f"  dropped: {d['reason']} score {d['score']}  {d['url']}" for d in dropped]
    lines.append("Common Crawl sample, adult pages:")
    lines += [f"  {a['url']}: {a['reason'] or 'kept'} (lang {a['lang']}); would score "
              + ", ".join(f"{t} {a[t]}" for t in ("toxicity", "nsfw")) for a in r["adult"]]
    lines.append(f"all {n} English pages scored directly (no Gopher), >= 0.5: real-label models "
                 f"{r['real_on_all_english']}; generated-text models (refused on real pages) "
                 f"{r['generated_on_all_english']} (quality: < 0.5 counts as dropped -> "
                 f"{n - r['generated_on_all_english']['quality']})")
    return "\n".join(lines)


def label_results(rows: list[dict]) -> list[Result]:
    """AUC per (task, training set): held-out, on Davidson, on Jigsaw; cross-domain against the generated model."""
    generated = {r["task"]: r for r in rows if r["trained on"] == "generated"}
    out = []
    for r in rows:
        name = f"{r['task']}/{r['trained on'].lower()}"
        if r["held-out AUC"] is not None:
            out.append(Result(name, "heldout_auc", r["held-out AUC"], f"n={r['held-out n']}"))
        for data in ("Davidson", "Jigsaw"):
            if r[f"{data} AUC"] is None:
                continue
            base = generated[r["task"]] if r["trained on"] != "generated" else None
            out.append(Result(name, f"{data.lower()}_auc", r[f"{data} AUC"], f"n={r[f'{data} n']}",
                              f"{r['task']}/generated" if base else None, base[f"{data} AUC"] if base else None))
    return out


def crawl_results(r: dict) -> list[Result]:
    n, reached, dropped = r["english_pages"], r["reached_classifiers"], len(r["dropped"])
    out = [Result("params-cc", "english_articles", n, "trafilatura set, lang en"),
           Result("params-cc", "reached_classifiers", reached, "after Gopher"),
           Result("params-cc", "classifier_drops", dropped, "pages"),
           Result("params-cc", "classifier_drop_rate", dropped / max(reached, 1), "of those reached (goal <= 0.03)"),
           Result("params-cc", "adult_pages_dropped", sum(a["reason"] is not None for a in r["adult"]),
                  f"of {len(r['adult'])}: " + ", ".join(f"{reason} {k}" for reason, k in
                                                      sorted(Counter(a["reason"] for a in r["adult"]).items())))]
    for a in r["adult"]:  # what the classifiers would say, had langid let them through
        name = f"adult/{a['url'].split('/')[2]}"
        out += [Result(name, f"{task}_score", a[task], "threshold 0.5") for task in ("toxicity", "nsfw")]
    for task, flagged in r["real_on_all_english"].items():
        out.append(Result("davidson-models", f"{task}_flagged", flagged, f"of {n} English, no Gopher",
                          "generated-models", r["generated_on_all_english"][task]))
    out.append(Result("generated-models", "quality_dropped", n - r["generated_on_all_english"]["quality"],
                      f"of {n} English, no Gopher"))
    return out


@dataclass(frozen=True)
class ClassifiersRealBench(BenchSettings):
    data: Path = setting(SHARED, "the shared data folder")
    only: tuple[str, ...] = setting(PARTS, "parts to run: labelled sets and/or the real-crawl profile",
                                    choices=PARTS, nonempty=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(ClassifiersRealBench, argv)
    davidson = args.data / "toxicity" / "davidson_labeled_data.csv"
    jigsaw = args.data / "toxicity" / "jigsaw_train_head.csv"
    missing = [p for p in (davidson, jigsaw, args.data / "web") if not p.exists()]
    if missing:
        usage_error(f"{missing[0]} not found (--data points at the shared data folder)")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        if "labels" in args.only:
            print("## Toxicity and NSFW on real labels: AUC in-domain (held-out 20%) and cross-domain (whole set)\n")
            rows = label_rows(davidson, jigsaw, scratch)
            print(format_label_rows(rows) + "\n")
            results += label_results(rows)
        if "crawl" in args.only:
            print("## params-cc.yaml's data stages on ../shared/data/web\n")
            report = crawl_part(args.data / "web", davidson, scratch)
            print(format_crawl(report))
            results += crawl_results(report)
    command = "python -m bench.benchmarks.classifiers_real" + (
        f" --only {' '.join(args.only)}" if argv and "--only" in argv else "")
    return finish("classifiers_real", results, args, command)


if __name__ == "__main__":
    raise SystemExit(main())
