"""params-cc.yaml (the real-crawl profile) merged onto params.yaml stays a valid drop-in for it, and its data stages
run on real pages: ../shared/data/web's Common Crawl sample, the wget captures and one file of the trafilatura
evaluation set, each stage's CLI run with ``--params params-cc.yaml`` in a folder laid out as the profile expects
(data/cc, data/labels), as ``make repro PARAMS=params-cc.yaml`` would run it (dvc itself is left out: ~2x slower)."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest
import yaml

from pipeline import classify, report
from pipeline.dedup import stage as dedup
from pipeline.filters import stage as filter_step
from pipeline.filters.stage import FilterConfig
from pipeline.web import extract
from tokenizer import shards
from tokenizer import train as train_tokenizer
from workbench.params import apply_section, read_params

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "params-cc.yaml"
CPU = yaml.safe_load((ROOT / "params.yaml").read_text())
CC = read_params(PROFILE)  # merged onto params.yaml, its base
SHARED = ROOT.parent / "shared" / "data"
DAVIDSON = SHARED / "toxicity" / "davidson_labeled_data.csv"
WEB = SHARED / "web"
SOME = [WEB / name for name in ("cc-main-2020-34-sample.warc.gz", "wget-sample-0000.warc.gz",
                                "wget-sample-0001.warc.gz", "trafilatura-pages-07.warc.gz")]
ADULT = {"http://0513mt.com/index.php/art/detail/id/8884.html", "http://05925.net/index.php/vod/type/id/53.html",
         "http://096355.com/video/11073.html?11073-0-2"}  # erotic stories, an adult video index, porn categories
CLASSIFIER_REASONS = {"quality": "quality_low", "toxicity": "toxicity_toxic", "nsfw": "nsfw_nsfw"}


def test_same_sections_and_keys_as_params_yaml():
    assert list(CC) == list(CPU)
    for section in CPU:
        if section != "classify":
            assert set(CC[section]) == set(CPU[section]), section
    assert set(CC["filter"]["steps"]) == set(CPU["filter"]["steps"])


def test_profile_sections_are_accepted_by_the_clis():
    assert classify.read_section(PROFILE)["quality"] is False
    values = apply_section(filter_step.main.parser(), "filter", PROFILE, ("steps",))
    enabled = [name for name, _ in FilterConfig(steps=values["steps"]).enabled()]
    assert enabled == ["langid", "gopher", "gopher_rep", "toxicity", "nsfw", "pii"]
    assert CC["extract"]["inputs"] == ["data/cc"]


def test_dvc_tracks_the_profile_crawl_folder():
    """DVC cannot interpolate a list into deps, so the extract stage depends on the first input: the sample crawl
    under params.yaml, the crawl folder under params-cc.yaml."""
    deps = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["extract"]["deps"]
    assert deps[0] == "${extract.inputs[0]}"
    assert CPU["extract"]["inputs"][0] == CPU["sample"]["out"]


def _layout(tmp_path: Path, warcs: list[Path]) -> None:
    (tmp_path / "data" / "cc").mkdir(parents=True)
    (tmp_path / "data" / "labels").mkdir(parents=True)
    for warc in warcs:
        (tmp_path / "data" / "cc" / warc.name).symlink_to(warc)
    (tmp_path / "data" / "labels" / "davidson_labeled_data.csv").symlink_to(DAVIDSON)


def _docs(folder: Path) -> dict[str, list[dict]]:
    out = {}
    for path in sorted(folder.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            out[path.name] = [json.loads(line) for line in fh]
    return out


def _run_profile(tmp_path: Path, monkeypatch, warcs: list[Path]) -> tuple[dict, dict]:
    """Every data stage of the profile in ``tmp_path``; (kept, rejected) documents of the filter, per file."""
    _layout(tmp_path, warcs)
    monkeypatch.chdir(tmp_path)
    params = ["--params", str(PROFILE)]
    for task in ("quality", "toxicity", "nsfw"):
        assert classify.main([*params, "--task", task, "--metrics", f"metrics/classifier_{task}.json"]) == 0
    # extract's folder input (data/cc) needs its directory support; the files by name run the same stage
    assert extract.main([*params, *sorted(f"data/cc/{w.name}" for w in warcs)]) == 0
    assert filter_step.main(params) == 0
    assert dedup.main(params) == 0
    assert train_tokenizer.main(params) == 0
    assert shards.main(params) == 0
    assert report.main(params) == 0
    return _docs(Path("data/filtered")), _docs(Path("data/rejected/filter"))


def _check_outputs(kept: dict, rejected: dict) -> None:
    """Real-label classifiers with their provenance, quality off; every classifier drop in rejected/ with its reason
    and score; the three adult pages dropped; token shards at the end."""
    assert not Path("data/classifiers/quality.bin").exists()
    assert json.loads(Path("metrics/classifier_quality.json").read_text())["accuracy"] is None
    davidson_sha = hashlib.sha256(DAVIDSON.read_bytes()).hexdigest()
    for task in ("toxicity", "nsfw"):
        sidecar = json.loads(Path(f"data/classifiers/{task}.bin.json").read_text())
        assert sidecar["trained_on"] == "real" and sidecar["recipe"] == "davidson"
        assert sidecar["inputs"] == [{"path": "data/labels/davidson_labeled_data.csv", "sha256": davidson_sha}]
        assert sidecar["model_sha256"] == hashlib.sha256(Path(f"data/classifiers/{task}.bin").read_bytes()).hexdigest()

    steps = json.loads(Path("metrics/details/filter.json").read_text())["steps"]
    assert "quality" not in steps and {"toxicity", "nsfw"} <= set(steps)
    by_classifiers = [d for docs in rejected.values() for d in docs if d["reason"] in CLASSIFIER_REASONS.values()]
    assert len(by_classifiers) == sum(sum(steps[t]["drops"].values()) for t in ("toxicity", "nsfw"))
    for doc in by_classifiers:
        assert doc[doc["reason"].split("_")[0]] >= 0.5
    for doc in (d for docs in kept.values() for d in docs):
        assert doc["toxicity"] < 0.5 and doc["nsfw"] < 0.5

    dropped_urls = {d["url"] for docs in rejected.values() for d in docs}
    assert ADULT <= dropped_urls, ADULT - dropped_urls
    assert not ADULT & {d["url"] for docs in kept.values() for d in docs}
    assert json.loads(Path("data/shards/meta.json").read_text())["train_tokens"] > 0


def _articles(kept: dict, rejected: dict) -> tuple[list[dict], list[dict]]:
    """English pages of the trafilatura evaluation set that reached the classifier steps, and those they dropped."""
    docs = [d for name in set(kept) | set(rejected) if name.startswith("trafilatura")
            for d in kept.get(name, []) + rejected.get(name, [])]
    reached = [d for d in docs if d.get("lang") == "en" and d.get("reason", "pii") in (
        "pii", *CLASSIFIER_REASONS.values())]
    return reached, [d for d in reached if d.get("reason") in CLASSIFIER_REASONS.values()]


@pytest.mark.skipif(not all(p.is_file() for p in [*SOME, DAVIDSON]), reason="../shared/data absent")
def test_the_data_stages_run_on_real_pages(tmp_path, monkeypatch, capsys):
    """Four files (124 pages): the stages, the provenance, the rejected records, the adult pages (~15 s)."""
    kept, rejected = _run_profile(tmp_path, monkeypatch, SOME)
    capsys.readouterr()
    _check_outputs(kept, rejected)
    reached, _ = _articles(kept, rejected)
    assert len(reached) >= 10


@pytest.mark.slow
@pytest.mark.skipif(not (WEB.is_dir() and DAVIDSON.is_file()), reason="../shared/data absent")
def test_classifiers_keep_the_curated_english_articles(tmp_path, monkeypatch, capsys):
    """All of ../shared/data/web (998 pages, ~35 s): the classifier steps drop <= 3% of the English pages of the
    trafilatura evaluation set that reach them (issue 20's goal; measured: 1 of 155)."""
    kept, rejected = _run_profile(tmp_path, monkeypatch, sorted(WEB.glob("*.warc.gz")))
    capsys.readouterr()
    _check_outputs(kept, rejected)
    reached, dropped = _articles(kept, rejected)
    print(f"{len(dropped)} of {len(reached)} English articles dropped by the classifier steps: "
          + ", ".join(f"{d['reason']} {d[d['reason'].split('_')[0]]} {d['url']}" for d in dropped))
    assert len(reached) >= 100 and len(dropped) <= 0.03 * len(reached)
