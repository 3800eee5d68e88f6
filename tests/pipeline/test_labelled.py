"""The real-data recipes: Davidson's and Jigsaw's CSVs for toxicity and NSFW (hand-written rows with the labels we
expect), quality from reference pages vs random crawl pages (WARC, JSONL, .txt), the train-classifier CLI and
params section that pick them, and, on ../shared/data, in-domain and cross-domain AUC."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

pytest.importorskip("fasttext")

from pipeline.classifiers.labelled import (  # noqa: E402
    csv_examples,
    davidson_examples,
    jigsaw_examples,
    quality_examples,
    read_pages,
)
from pipeline.classifiers.models import provenance_path  # noqa: E402
from pipeline.classify import main  # noqa: E402
from tests.pipeline.warcs import PROSE, page, response  # noqa: E402
from workbench.files import details_path, write_jsonl  # noqa: E402

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
DAVIDSON = SHARED / "toxicity" / "davidson_labeled_data.csv"
JIGSAW = SHARED / "toxicity" / "jigsaw_train_head.csv"
SMALL = ["--dim", "8", "--bucket", "5000", "--epoch", "3"]
DAVIDSON_ROWS = [",count,hate_speech,offensive_language,neither,class,tweet",
                 '0,3,3,0,0,0,"hate @a"', '1,3,0,3,0,1,"offensive &amp; rude http://t.co/x"', '2,3,0,0,3,2,"nice day"']
JIGSAW_ROWS = ['"id","comment_text","toxic","severe_toxic","obscene","threat","insult","identity_hate"',
               '"1","thanks for the edit",0,0,0,0,0,0', '"2","you idiot",1,0,0,0,1,0',
               '"3","f*** this",1,0,1,0,0,0', '"4","a threat\nover two lines",0,0,0,1,0,0']


def _csv(path: Path, rows: list[str]) -> Path:
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_davidson_rows_map_to_toxicity_and_to_the_nsfw_proxy(tmp_path):
    path = _csv(tmp_path / "d.csv", DAVIDSON_ROWS)
    assert davidson_examples(path, "toxicity") == [("toxic", "hate @USER"), ("toxic", "offensive & rude URL"),
                                                   ("non-toxic", "nice day")]
    assert davidson_examples(path, "nsfw") == [("nsfw", "offensive & rude URL"), ("non-nsfw", "nice day")]
    with pytest.raises(ValueError, match="not quality"):
        davidson_examples(path, "quality")
    bad = _csv(tmp_path / "bad.csv", DAVIDSON_ROWS[:2] + ['1,3,0,3,0,7,"x"'])
    with pytest.raises(ValueError, match=r"bad.csv:3: class must be 0, 1 or 2"):
        davidson_examples(bad)


def test_jigsaw_rows_map_any_label_to_toxic_and_obscene_to_nsfw(tmp_path):
    path = _csv(tmp_path / "j.csv", JIGSAW_ROWS)
    assert jigsaw_examples(path, "toxicity") == [("non-toxic", "thanks for the edit"), ("toxic", "you idiot"),
                                                 ("toxic", "f*** this"), ("toxic", "a threat over two lines")]
    assert [lab for lab, _ in jigsaw_examples(path, "nsfw")] == ["non-nsfw", "non-nsfw", "nsfw", "non-nsfw"]
    assert csv_examples(path, "nsfw")[0] == "jigsaw" and csv_examples(_csv(tmp_path / "d.csv", DAVIDSON_ROWS),
                                                                      "nsfw")[0] == "davidson"
    with pytest.raises(ValueError, match="missing column"):
        jigsaw_examples(_csv(tmp_path / "x.csv", ['"id","comment_text","toxic"', '"1","a",0']))
    with pytest.raises(ValueError, match=r"y.csv:2: obscene must be 0 or 1"):
        jigsaw_examples(_csv(tmp_path / "y.csv", [JIGSAW_ROWS[0], '"1","a",0,0,-1,0,0,0']))
    with pytest.raises(ValueError, match="neither a Davidson"):
        csv_examples(_csv(tmp_path / "z.csv", ["a,b", "1,2"]), "toxicity")


def _pages(tmp_path: Path) -> tuple[Path, Path]:
    """Reference pages in three formats (a WARC, JSONL documents, a .txt page) and 60 crawl pages (JSONL)."""
    ref = tmp_path / "reference"
    ref.mkdir()
    (ref / "ref.warc.gz").write_bytes(b"".join(response(f"http://ref{i}.example/", page(f"Ref {i}", PROSE), i)
                                               for i in range(3)))
    write_jsonl(ref / "ref.jsonl.gz", [{"id": str(i), "text": f"reference document {i}. {PROSE[0]}"} for i in range(2)])
    (ref / "page.txt").write_text("A plain text reference page. " + PROSE[1], encoding="utf-8")
    (ref / "notes.md").write_text("not a page format")
    crawl = tmp_path / "crawl.jsonl"
    write_jsonl(crawl, [{"id": str(i), "text": f"cheap deals {i} click here now"} for i in range(60)])
    return ref, crawl


def test_pages_come_from_warc_jsonl_and_text_files_and_negatives_are_a_seeded_sample(tmp_path):
    ref, crawl = _pages(tmp_path)
    texts = read_pages([ref])
    assert len(texts) == 6 and sum("lighthouse" in t for t in texts) == 3 + 2 + 0  # extracted WARC pages + JSONL
    assert any(t.startswith("A plain text reference page.") for t in texts)
    sample = read_pages([crawl], limit=10, seed=3)
    assert len(sample) == len(set(sample)) == 10 and sample == read_pages([crawl], limit=10, seed=3)
    assert sample != read_pages([crawl], limit=10, seed=4)
    examples = quality_examples([ref], [crawl], seed=0)
    assert [lab for lab, _ in examples].count("wiki") == 6 and [lab for lab, _ in examples].count("cc") == 6
    with pytest.raises(FileNotFoundError, match="pages not found"):
        read_pages([tmp_path / "missing"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no WARC, WET, JSONL or .txt pages"):
        read_pages([tmp_path / "empty"])


def test_quality_recipe_trains_from_pages_and_records_every_input(tmp_path, capsys):
    ref, crawl = _pages(tmp_path)
    out = tmp_path / "quality.bin"
    assert main(["--task", "quality", "--positives", str(ref), "--negatives", str(crawl), "--out", str(out),
                 *SMALL, "--params", "none"]) == 0
    assert "real data" in capsys.readouterr().out
    side = json.loads(provenance_path(out).read_text())
    assert side["trained_on"] == "real" and side["recipe"] == "pages"
    names = [Path(i["path"]).name for i in side["inputs"]]
    assert names == ["page.txt", "ref.jsonl.gz", "ref.warc.gz", "crawl.jsonl"]
    assert all(i["sha256"] == hashlib.sha256(Path(i["path"]).read_bytes()).hexdigest() for i in side["inputs"])
    assert set(side["labels"]["model"]) == {"wiki", "cc"} and side["held_out"]["n"] == 2


def test_the_params_section_picks_the_recipe_per_task_or_switches_it_off(tmp_path, capsys):
    davidson = _csv(tmp_path / "d.csv", DAVIDSON_ROWS[:1] + DAVIDSON_ROWS[1:] * 10)
    jigsaw = _csv(tmp_path / "j.csv", JIGSAW_ROWS[:1] + JIGSAW_ROWS[1:] * 5)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"classify": {
        "seed": 1, "quality": False, "toxicity": {"davidson": str(davidson), "eval": [str(jigsaw)], "dim": 8},
        "nsfw": {"jigsaw": str(jigsaw), "dim": 8}}}))
    metrics = tmp_path / "q.json"
    assert main(["--task", "quality", "--metrics", str(metrics), "--params", str(params)]) == 0
    assert "quality: off" in capsys.readouterr().out
    assert json.loads(metrics.read_text()) == {"accuracy": None, "auc": None, "f1": None, "seconds": 0.0,
                                               "docs_per_s": None}
    assert json.loads(details_path(metrics).read_text())["off"] is True
    for task, recipe in (("toxicity", "davidson"), ("nsfw", "jigsaw")):
        out = tmp_path / f"{task}.bin"
        assert main(["--task", task, "--out", str(out), "--epoch", "2", "--params", str(params)]) == 0
        side = json.loads(provenance_path(out).read_text())
        assert side["recipe"] == recipe and side["config"]["dim"] == 8 and side["config"]["minn"] == 3
    side = json.loads(provenance_path(tmp_path / "toxicity.bin").read_text())
    assert side["real_data"][1]["data"] == str(jigsaw) and side["real_data"][1]["n"] == 20
    # a flag source wins over the section, also over `false`
    assert main(["--task", "quality", "--generate", "40", "--out", str(tmp_path / "q.bin"), *SMALL,
                 "--params", str(params)]) == 0


@pytest.mark.parametrize("argv,msg", [
    (["--task", "quality", "--jigsaw", "j.csv"], "--jigsaw trains toxicity or nsfw, not quality"),
    (["--task", "quality", "--positives", "ref"], "needs --negatives"),
    (["--task", "toxicity", "--positives", "ref", "--negatives", "crawl"], "--positives trains quality"),
    (["--davidson", "d.csv", "--jigsaw", "j.csv"], "at most one of"),
    (["--task", "toxicity", "--eval", "missing.csv"], "file not found: missing.csv"),
])
def test_recipe_usage_errors_exit_2_with_one_line(tmp_path, capsys, monkeypatch, argv, msg):
    monkeypatch.chdir(tmp_path)
    _csv(tmp_path / "d.csv", DAVIDSON_ROWS)
    _csv(tmp_path / "j.csv", JIGSAW_ROWS)
    with pytest.raises(SystemExit) as e:
        main([*argv, "--params", "none"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and msg in err and len([x for x in err.splitlines() if "error:" in x]) == 1


def test_an_unknown_per_task_key_is_named(tmp_path, capsys):
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"classify": {"toxicity": {"davidsn": "x.csv"}}}))
    with pytest.raises(SystemExit):
        main(["--params", str(params)])
    assert "davidsn" in capsys.readouterr().err


# -- on the real sets ----------------------------------------------------------------------------------------------
@pytest.mark.skipif(not (DAVIDSON.is_file() and JIGSAW.is_file()), reason="../shared/data/toxicity absent")
def test_davidson_toxicity_holds_on_jigsaw_comments(tmp_path, capsys):
    """Trained on tweets, scored on Wikipedia talk comments it never saw: issue 20's goal is AUC >= 0.75
    (measured 0.812; the generated-text model scores 0.54 there)."""
    out = tmp_path / "toxicity.bin"
    assert main(["--davidson", str(DAVIDSON), "--eval", str(JIGSAW), "--out", str(out), "--params", "none"]) == 0
    print(capsys.readouterr().out)
    held_out, jigsaw = json.loads(provenance_path(out).read_text())["real_data"]
    assert held_out["n"] == 4957 and held_out["auc"] >= 0.95
    assert jigsaw["n"] == 282 and jigsaw["recipe"] == "jigsaw" and jigsaw["auc"] >= 0.75


@pytest.mark.skipif(not (DAVIDSON.is_file() and JIGSAW.is_file()), reason="../shared/data/toxicity absent")
def test_jigsaw_recipe_on_the_282_row_sample(tmp_path, capsys):
    """The Jigsaw head has 29 toxic and 16 obscene rows: the recipe runs and reports (its AUCs are noise at this
    size; the full Kaggle train.csv is the real recipe), with the split sizes a stratified 20% gives."""
    for task, held_out_n, davidson_n in (("toxicity", 6 + 51, 24783), ("nsfw", 3 + 53, 23353)):
        out = tmp_path / f"{task}.bin"
        assert main(["--task", task, "--jigsaw", str(JIGSAW), "--eval", str(DAVIDSON), "--out", str(out),
                     "--params", "none"]) == 0
        held_out, davidson = json.loads(provenance_path(out).read_text())["real_data"]
        assert held_out["n"] == held_out_n and davidson["n"] == davidson_n
    capsys.readouterr()
