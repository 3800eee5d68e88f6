"""Classifier provenance: the generated crawl is recognisable from its warcinfo record, extraction carries that to
the documents, every trained model gets a sidecar (what it was trained on, with hashes; labels; metrics), and the
filter refuses a model trained on generated text on real documents unless told otherwise. Pretrained DCLM/Dolma
models (no sidecar) run on real documents by path."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import yaml

pytest.importorskip("fasttext")

from pipeline.classifiers.models import FastTextClassifier, provenance_path, trained_on_generated  # noqa: E402
from pipeline.classify import main as classify_main  # noqa: E402
from pipeline.filters.stage import FilterConfig, run_filter  # noqa: E402
from pipeline.filters.stage import main as filter_main  # noqa: E402
from pipeline.web.extract import ExtractConfig, run_extract  # noqa: E402
from pipeline.web.warc import is_generated_crawl, warcinfo  # noqa: E402
from tests.pipeline.warcs import PROSE, page, response, warc_record  # noqa: E402
from workbench.documents import from_generated_crawl  # noqa: E402
from workbench.files import read_jsonl, write_jsonl  # noqa: E402

CC_SAMPLE = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "web" / "cc-main-2020-34-sample.warc.gz"
SMALL = ["--dim", "8", "--bucket", "5000", "--epoch", "3"]
ARTICLE = " ".join(PROSE)
INSULT = "Shut up, nobody cares about your stupid sauce. You are such an idiot, moron. What a load of crap."


def _sha(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _warc(path: Path, *records: bytes) -> Path:
    path.write_bytes(b"".join(records))
    return path


def _nutch_warc(path: Path) -> Path:
    info = warc_record("warcinfo", None, b"isPartOf: CC-MAIN-2020-34\r\nsoftware: Apache Nutch 1.17 (modified)\r\n",
                       "application/warc-fields")
    return _warc(path, info, response("http://a.example/", page("A lighthouse", PROSE), 1))


@pytest.fixture(scope="module")
def generated_toxicity(tmp_path_factory) -> Path:
    """A toxicity model trained on 200 generated examples, with its sidecar."""
    out = tmp_path_factory.mktemp("generated") / "toxicity.bin"
    assert classify_main(["--task", "toxicity", "--generate", "200", "--out", str(out), *SMALL,
                          "--params", "none"]) == 0
    return out


def _real_docs(folder: Path) -> Path:
    write_jsonl(folder / "real.jsonl.gz", [{"id": "a", "url": "http://a.example/", "text": ARTICLE},
                                            {"id": "b", "url": "http://b.example/", "text": INSULT * 4}])
    return folder


# -- the generated crawl is recognisable ----------------------------------------------------------------------------
def test_warcinfo_tells_the_generated_crawl_from_real_ones(tmp_path, sample_crawl):
    assert warcinfo(sample_crawl.warc)["software"] == "lm-workbench pipeline.sample"
    assert is_generated_crawl(sample_crawl.warc)
    nutch = _nutch_warc(tmp_path / "nutch.warc.gz")
    assert warcinfo(nutch) == {"isPartOf": "CC-MAIN-2020-34", "software": "Apache Nutch 1.17 (modified)"}
    assert not is_generated_crawl(nutch)
    # no warcinfo record first (the trafilatura pages), garbage, a missing file: nothing to read, not generated
    bare = _warc(tmp_path / "bare.warc.gz", response("http://a.example/", page("A", PROSE), 1))
    garbage = _warc(tmp_path / "garbage.warc.gz", b"not a warc\n" * 50)
    for path in (bare, garbage, tmp_path / "missing.warc.gz"):
        assert warcinfo(path) == {} and not is_generated_crawl(path)
    if CC_SAMPLE.is_file():
        assert warcinfo(CC_SAMPLE)["isPartOf"] == "CC-MAIN-2020-34" and not is_generated_crawl(CC_SAMPLE)


def test_extraction_marks_documents_from_the_generated_crawl(tmp_path, sample_crawl):
    assert from_generated_crawl(sample_crawl.documents)
    copy = tmp_path / "copied" / sample_crawl.documents.name  # the same documents without the extract stage's marker
    copy.parent.mkdir()
    shutil.copy(sample_crawl.documents, copy)
    assert not from_generated_crawl(copy)
    run_extract([_nutch_warc(tmp_path / "nutch.warc.gz")], tmp_path / "docs", tmp_path / "m.json", ExtractConfig())
    assert json.loads((tmp_path / "docs" / "_done" / "nutch.jsonl.gz.json").read_text())["generated"] is False
    assert not from_generated_crawl(tmp_path / "docs" / "nutch.jsonl.gz")
    (tmp_path / "docs" / "_done" / "nutch.jsonl.gz.json").write_text("{not json")
    assert not from_generated_crawl(tmp_path / "docs" / "nutch.jsonl.gz")


# -- the sidecar ---------------------------------------------------------------------------------------------------
def test_a_generated_model_says_so_without_timings(tmp_path, generated_toxicity):
    side = json.loads(provenance_path(generated_toxicity).read_text())
    assert provenance_path(generated_toxicity).name == "toxicity.bin.json"
    assert side["trained_on"] == "generated" and trained_on_generated(generated_toxicity)
    assert side["generator"] == {"module": "pipeline.sample.labels", "examples": 200, "seed": 0}
    assert side["inputs"] == [] and side["real_data"] == []
    assert side["model_sha256"] == _sha(generated_toxicity)
    assert side["train_file"]["sha256"] == _sha(side["train_file"]["path"])
    assert side["labels"]["positive"] == "toxic" and set(side["labels"]["model"]) == {"toxic", "non-toxic"}
    assert side["held_out"]["n"] == 40 and 0.0 <= side["held_out"]["auc"] <= 1.0
    assert side["config"]["dim"] == 8
    out = tmp_path / "again.bin"  # same data and seed: the same sidecar, byte for byte (no timings in it)
    assert classify_main(["--task", "toxicity", "--generate", "200", "--out", str(out), *SMALL,
                          "--data-dir", str(generated_toxicity.parent / "labelled"), "--params", "none"]) == 0
    again = json.loads(provenance_path(out).read_text())
    assert {**again, "model": "toxicity.bin"} == side


def test_a_model_trained_on_files_names_them_with_their_hashes(tmp_path, capsys):
    lines = [f"__label__toxic {INSULT} {i}" for i in range(30)] + [f"__label__non-toxic {ARTICLE} {i}"
                                                                     for i in range(30)]
    train, valid, other = tmp_path / "t.train", tmp_path / "t.valid", tmp_path / "other.txt"
    train.write_text("\n".join(lines[5:25] + lines[35:55]) + "\n")
    valid.write_text("\n".join(lines[:5] + lines[30:35]) + "\n")
    other.write_text("\n".join(lines[25:30] + lines[55:]) + "\n")
    out = tmp_path / "tox.bin"
    assert classify_main(["--task", "toxicity", "--train", str(train), "--valid", str(valid), "--eval", str(other),
                          "--out", str(out), *SMALL, "--params", "none"]) == 0
    assert "on " + str(other) in capsys.readouterr().out
    side = json.loads(provenance_path(out).read_text())
    assert side["trained_on"] == "real" and side["recipe"] == "files" and "generator" not in side
    assert side["inputs"] == [{"path": str(train), "sha256": _sha(train)}, {"path": str(valid), "sha256": _sha(valid)}]
    held_out, cross = side["real_data"]
    assert held_out["n"] == 10 and held_out["data"].startswith("held-out")
    assert cross["data"] == str(other) and cross["sha256"] == _sha(other) and cross["n"] == 10
    assert cross["recipe"] == "fasttext" and not trained_on_generated(out)


# -- the filter's refusal -------------------------------------------------------------------------------------------
def _params(tmp_path: Path, steps: dict, **filter_keys) -> str:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"filter": {"steps": steps, **filter_keys}}))
    return str(path)


def test_the_filter_refuses_a_generated_model_on_real_documents(tmp_path, generated_toxicity, capsys):
    docs = _real_docs(tmp_path / "docs")
    steps = {"toxicity": {"model_path": str(generated_toxicity)}}
    outs = [tmp_path / "out", tmp_path / "rej", tmp_path / "m.json"]
    with pytest.raises(ValueError) as e:
        run_filter([docs], *outs, FilterConfig(steps=steps))
    msg = str(e.value)
    assert "\n" not in msg and str(generated_toxicity) in msg and "trained on generated text" in msg
    assert "real.jsonl.gz" in msg and "Run on real Common Crawl" in msg and "allow_generated_classifiers" in msg
    assert not outs[0].exists() and not outs[2].exists()  # refused before any task ran

    argv = [str(docs), "--out-dir", str(outs[0]), "--rejected-dir", str(outs[1]), "--metrics", str(outs[2])]
    assert filter_main([*argv, "--params", _params(tmp_path, steps)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: filter.steps.toxicity:") and len(err.strip().splitlines()) == 1

    # allowed explicitly: by the params key, by the flag, by the config
    assert filter_main([*argv, "--params", _params(tmp_path, steps, allow_generated_classifiers=True)]) == 0
    assert filter_main([*argv, "--force", "--allow-generated-classifiers", "--params", _params(tmp_path, steps)]) == 0
    m = run_filter([docs], *outs, FilterConfig(steps=steps, allow_generated_classifiers=True), force=True)
    assert m["docs_in"] == 2 and m["steps"]["toxicity"]["docs_in"] == 2


def test_the_filter_applies_a_generated_model_to_the_generated_crawl(tmp_path, generated_toxicity, sample_crawl):
    m = run_filter([sample_crawl.documents], tmp_path / "out", tmp_path / "rej", tmp_path / "m.json",
                   FilterConfig(steps={"toxicity": {"model_path": str(generated_toxicity)}}))
    assert m["steps"]["toxicity"]["docs_in"] == len(sample_crawl.docs)


@pytest.mark.parametrize("task,pos,neg,reason", [("quality", "hq", "cc", "quality_low"),  # DCLM's fastText labels
                                                 ("toxicity", "toxic", "non-toxic", "toxicity_toxic"),  # Dolma's
                                                 ("nsfw", "nsfw", "non-nsfw", "nsfw_nsfw")])
def test_a_pretrained_model_by_path_runs_on_real_documents(tmp_path, task, pos, neg, reason):
    """A model in DCLM's (``__label__hq``/``__label__cc``) or Dolma's Jigsaw label format, brought by path without a
    sidecar: the filter maps its labels, scores every document and drops with the step's reason."""
    good, bad = "alpha beta gamma delta", "omega sigma kappa zeta"
    hq, cc = (good, bad) if task == "quality" else (bad, good)  # quality keeps its positives; the others drop them
    lines = [f"__label__{pos} {hq} {i % 5}" for i in range(200)] + [f"__label__{neg} {cc} {i % 5}" for i in range(200)]
    (tmp_path / "t.txt").write_text("\n".join(lines) + "\n")
    model = tmp_path / "pretrained.bin"
    FastTextClassifier.train(tmp_path / "t.txt", model, dim=8, bucket=1000, epoch=5)
    assert not provenance_path(model).exists()
    write_jsonl(tmp_path / "docs" / "real.jsonl.gz", [{"id": "good", "url": "u", "text": good},
                                                      {"id": "bad", "url": "u", "text": bad}])
    m = run_filter([tmp_path / "docs"], tmp_path / "out", tmp_path / "rej", tmp_path / "m.json",
                   FilterConfig(steps={task: {"model_path": str(model), "threshold": 0.5}}))
    assert m["drops"] == {reason: 1}
    kept = list(read_jsonl(tmp_path / "out" / "real.jsonl.gz"))
    rejected = list(read_jsonl(tmp_path / "rej" / "real.jsonl.gz"))
    assert [d["id"] for d in kept] == ["good"] and [d["id"] for d in rejected] == ["bad"]
    assert rejected[0]["reason"] == reason and 0.0 <= rejected[0][task] <= 1.0
    assert (kept[0][task] > 0.5) == (task == "quality")
