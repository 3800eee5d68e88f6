"""fastText classifiers: metrics vs hand-computed values, reproducible training, held-out accuracy on generated
labels, ranking of the sample crawl's ground truth, pretrained-label mapping, the filter step, the CLI, Davidson."""

import json
import math
import pickle
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fasttext")

import pipeline.classifiers.models as classify  # noqa: E402
from pipeline.classifiers.evaluate import classification_metrics, evaluate, roc_auc  # noqa: E402
from pipeline.classifiers.labelled import clean_tweet, davidson_examples, write_split  # noqa: E402
from pipeline.classifiers.models import TASKS, ClassifierFilter, FastTextClassifier, TrainConfig, clean_text  # noqa: E402
from pipeline.classify import main  # noqa: E402
from pipeline.runtime.steps import StepStats, run_steps  # noqa: E402
from pipeline.sample.labels import labelled_examples, write_labelled_data  # noqa: E402
from workbench.files import details_path  # noqa: E402

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
DAVIDSON = SHARED / "toxicity" / "davidson_labeled_data.csv"
SMALL = dict(dim=16, bucket=50_000, epoch=10)  # test-sized models (~3 MB, < 1 s to train)
FLOORS = {"quality": 0.85, "toxicity": 0.9, "nsfw": 0.93}  # measured 0.93 / 0.93 / 1.00 at n=1600
INSULT = "Shut up, nobody cares about your stupid sauce. You are such an idiot, moron. What a load of crap."
ADULT = "XXX adult videos, sexy webcam models, hot singles 18+ only >>> http://hot-singles-1.xxx"
ARTICLE = ("The history of the bridge\nThe old bridge across the river was built in 1820 by a local merchant. "
           "Historians have studied its stones, its arches and the records of the town council for decades. "
           "Today the bridge carries bicycles and people on foot, and every summer the town holds a festival on it.")


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """One small model per task, trained on 1,600 generated examples (20% held out): ~5 s for all three."""
    root = tmp_path_factory.mktemp("classifiers")
    out = {}
    for task, spec in TASKS.items():
        train, valid = write_labelled_data(root / "labelled", task, 1600, seed=0)
        clf = FastTextClassifier.train(train, root / f"{task}.bin", spec.config, labels=spec.aliases,
                                       default=spec.negative, **SMALL)
        out[task] = (clf, evaluate(clf, valid, spec.positive), root / f"{task}.bin")
    return out


@pytest.fixture
def fresh_task_models():
    """Give each test its own CS336-API model table, restored afterwards."""
    saved = dict(classify._PATHS), dict(classify._MODELS)
    classify._PATHS.clear()
    classify._MODELS.clear()
    yield
    classify._PATHS.clear()
    classify._MODELS.clear()
    classify._PATHS.update(saved[0])
    classify._MODELS.update(saved[1])


# -- pure helpers against hand-computed references --------------------------------------------------------
def test_clean_text_gives_one_line_of_valid_utf8():
    assert clean_text("  a\nb\r\n\tc  ") == "a b c"
    assert clean_text("x\ud800y") == "x?y"  # lone surrogate replaced, encodable again
    assert clean_text(b"caf\xc3\xa9 \xff") == "café \ufffd"
    assert clean_text(None) == "" and clean_text("   \n ") == ""
    assert clean_text("see __label__toxic here") == "see label toxic here"
    assert clean_text("abcdef", max_chars=3) == "abc"


def test_classification_metrics_match_hand_computed_values():
    # a: tp 2, predicted 3, true 3 -> P = R = F1 = 2/3;  b: tp 1, predicted 2, true 2 -> 1/2;  c: never predicted
    y_true = ["a", "a", "a", "b", "b", "c"]
    y_pred = ["a", "a", "b", "b", "a", "b"]
    m = classification_metrics(y_true, y_pred)
    assert m["n"] == 6 and m["accuracy"] == pytest.approx(3 / 6)
    assert m["per_class"]["a"] == pytest.approx({"precision": 2 / 3, "recall": 2 / 3, "f1": 2 / 3, "support": 3})
    assert m["per_class"]["b"]["precision"] == pytest.approx(1 / 3)  # b predicted 3 times, right once
    assert m["per_class"]["b"]["recall"] == pytest.approx(1 / 2)
    f1_b = 2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2)
    assert m["per_class"]["c"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    assert m["macro_f1"] == pytest.approx((2 / 3 + f1_b + 0) / 3)
    assert m["weighted_f1"] == pytest.approx((3 * 2 / 3 + 2 * f1_b) / 6)


def test_metrics_match_sklearn_when_installed():
    sk = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    y_true = list(rng.choice(["x", "y", "z"], 200))
    y_pred = list(rng.choice(["x", "y", "z"], 200))
    m = classification_metrics(y_true, y_pred)
    assert m["macro_f1"] == pytest.approx(sk.f1_score(y_true, y_pred, average="macro"))
    assert m["weighted_f1"] == pytest.approx(sk.f1_score(y_true, y_pred, average="weighted"))
    s, pos = rng.random(200), rng.random(200) < 0.3
    assert roc_auc(s, pos) == pytest.approx(sk.roc_auc_score(pos, s))


def test_roc_auc_matches_naive_pair_count():
    rng = np.random.default_rng(1)
    scores = rng.integers(0, 5, 60).astype(float)  # many ties
    positive = rng.random(60) < 0.4
    pairs = [(1.0 if p > q else 0.5 if p == q else 0.0) for p in scores[positive] for q in scores[~positive]]
    assert roc_auc(scores, positive) == pytest.approx(sum(pairs) / len(pairs))
    assert roc_auc([0.1, 0.9], [False, True]) == 1.0
    assert math.isnan(roc_auc([0.3, 0.4], [True, True]))


# -- labelled data -----------------------------------------------------------------------------------------
def test_labelled_data_is_seeded_balanced_and_split(tmp_path):
    a = write_labelled_data(tmp_path / "a", "toxicity", 200, seed=0)
    b = write_labelled_data(tmp_path / "b", "toxicity", 200, seed=0)
    c = write_labelled_data(tmp_path / "c", "toxicity", 200, seed=1)
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
    assert a[0].read_bytes() != c[0].read_bytes()
    train, valid = (p.read_text(encoding="utf-8").splitlines() for p in a)
    assert (len(train), len(valid)) == (160, 40)
    for lines in (train, valid):
        labels = [line.split(" ", 1)[0] for line in lines]
        assert labels.count("__label__toxic") == labels.count("__label__non-toxic")
    assert not set(train) & set(valid)
    # one task's data does not depend on what was generated before it in the process
    assert labelled_examples("nsfw", 20, 0) == (labelled_examples("quality", 5, 1), labelled_examples("nsfw", 20, 0))[1]


def test_labelled_data_is_held_out_from_the_crawl(sample_crawl):
    """No paragraph of a generated article is one of the crawl's (spam lines are templates: they may repeat)."""
    crawl = {line for d in sample_crawl.docs if sample_crawl.manifest[d["id"]]["page_type"] == "article"
             for line in d["text"].splitlines() if len(line) > 80}
    generated = {line for label, text in labelled_examples("quality", 400, 0) if label == "wiki"
                 for line in text.splitlines() if len(line) > 80}
    assert len(crawl) > 300 and len(generated) > 300 and not crawl & generated


# -- training ----------------------------------------------------------------------------------------------
def test_training_is_reproducible_within_one_process(tmp_path):
    """fasttext-numpy2 leaves most of the input matrix uninitialised; the second model trained in a process
    used to start from the first one's freed memory (other weights, or "Encountered NaN")."""
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(300)]
    lines = [f"__label__{'ab'[i % 2]} {' '.join(rng.choice(words, 12))} {'ab'[i % 2]}x" for i in range(2000)]
    train = _write(tmp_path / "t.txt", lines)
    cfg = TrainConfig(dim=8, bucket=2000, epoch=3, minn=2, maxn=4)
    blobs = []
    for i in range(3):
        FastTextClassifier.train(train, tmp_path / f"m{i}.bin", cfg)
        FastTextClassifier.train(train, None, cfg, seed=i + 1)  # something else in between
        blobs.append((tmp_path / f"m{i}.bin").read_bytes())
    assert blobs[0] == blobs[1] == blobs[2]
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave nothing behind


def test_train_config_is_validated():
    with pytest.raises(ValueError, match="TrainConfig.epoch"):
        TrainConfig(epoch=0)
    with pytest.raises(ValueError, match="TrainConfig.minn/maxn"):
        TrainConfig(minn=4, maxn=2)
    with pytest.raises(ValueError, match="TrainConfig.lr"):
        TrainConfig(lr=-1.0)


@pytest.mark.parametrize("task", sorted(TASKS))
def test_generated_tasks_reach_held_out_accuracy(models, task):
    _, m, _ = models[task]
    print(f"{task}: held-out accuracy {m['accuracy']:.3f} macro-F1 {m['macro_f1']:.3f} AUC {m['auc']:.3f} "
          f"(n={m['n']}), {m['predict_docs_per_s']:.0f} docs/s")
    assert m["n"] == 320
    assert m["accuracy"] >= FLOORS[task] and m["macro_f1"] >= FLOORS[task] - 0.01


# -- the sample crawl's ground truth -------------------------------------------------------------------------
def test_quality_ranks_low_quality_crawl_pages_below_high(models, sample_crawl):
    clf = models["quality"][0]
    entries = [sample_crawl.manifest[d["id"]] for d in sample_crawl.docs]
    scores = clf.scores([d["text"] for d in sample_crawl.docs], "wiki")
    high = np.array([e["quality"] == "high" for e in entries])
    en = np.array([e["lang"] == "en" and not e["broken"] for e in entries])  # the filter runs after langid
    auc_all, auc_en = roc_auc(scores, high), roc_auc(scores[en], high[en])
    acc = float(np.mean((scores >= 0.5) == high))
    print(f"quality on the crawl: AUC {auc_all:.3f} (English, unbroken: {auc_en:.3f}), accuracy {acc:.3f}")
    assert auc_en >= 0.9 and auc_all >= 0.85 and acc >= 0.85


def test_toxicity_ranks_toxic_threads_above_the_rest(models, sample_crawl):
    clf = models["toxicity"][0]
    toxic = np.array([sample_crawl.manifest[d["id"]]["toxic"] for d in sample_crawl.docs])
    scores = clf.scores([d["text"] for d in sample_crawl.docs], "toxic")
    auc, acc = roc_auc(scores, toxic), float(np.mean((scores > 0.5) == toxic))
    print(f"toxicity on the crawl: AUC {auc:.3f}, accuracy {acc:.3f} ({toxic.sum()} toxic of {len(toxic)})")
    assert toxic.sum() > 5 and auc >= 0.9 and acc >= 0.95


def test_nsfw_flags_adult_spam_and_almost_nothing_in_the_crawl(models, sample_crawl):
    clf = models["nsfw"][0]
    scores = clf.scores([d["text"] for d in sample_crawl.docs], "nsfw")  # the crawl has no adult content
    print(f"nsfw on the crawl: {np.mean(scores > 0.5):.3f} flagged")
    assert np.mean(scores > 0.5) <= 0.03
    assert clf.predict("\n".join([ADULT] * 3))[0] == "nsfw"
    assert clf.predict(ARTICLE)[0] == "non-nsfw"


@pytest.mark.skipif(not (SHARED / "quality").is_dir(), reason="shared quality fixtures absent")
def test_quality_on_the_cs336_reference_pages(models):
    """CS336 assignment 4's fixtures: a Stanford Encyclopedia article (wiki) and a forum shell (cc)."""
    clf = models["quality"][0]
    wiki = (SHARED / "quality" / "high_quality_wiki_reference.txt").read_text(encoding="utf-8")
    cc = (SHARED / "quality" / "low_quality_cc.txt").read_text(encoding="utf-8")
    assert clf.predict(wiki)[0] == "wiki" and clf.predict(cc)[0] == "cc"


# -- CS336 functions, pretrained label names, missing models --------------------------------------------------
@pytest.mark.parametrize("task,pos,neg,fn,expect", [
    ("quality", "hq", "cc", "classify_quality", ("wiki", "cc")),  # DCLM's names
    ("toxicity", "toxic", "non-toxic", "classify_toxic_speech", ("toxic", "non-toxic")),  # Dolma Jigsaw's
    ("nsfw", "nsfw", "non-nsfw", "classify_nsfw", ("nsfw", "non-nsfw")),
])
def test_pretrained_model_labels_map_to_ours(tmp_path, fresh_task_models, task, pos, neg, fn, expect):
    lines = [f"__label__{pos} alpha beta gamma {i % 7}" for i in range(200)]
    lines += [f"__label__{neg} delta epsilon zeta {i % 7}" for i in range(200)]
    path = tmp_path / "pretrained.bin"
    FastTextClassifier.train(_write(tmp_path / "t.txt", lines), path, dim=8, bucket=1000, epoch=5)
    classify.set_model(task, path)
    label, score = getattr(classify, fn)("alpha beta\ngamma")
    assert label == expect[0] and 0.5 < score <= 1.0
    assert getattr(classify, fn)("delta zeta")[0] == expect[1]
    assert getattr(classify, fn)("")[0] == expect[1]  # no words: the negative label


def test_extra_label_names_and_a_model_without_our_labels(tmp_path, fresh_task_models):
    lines = [f"__label__{lab} {w} {w}" for lab, w in (("good", "fine"), ("bad", "junk")) for _ in range(50)]
    path = tmp_path / "odd.bin"
    FastTextClassifier.train(_write(tmp_path / "t.txt", lines), path, dim=8, bucket=1000, epoch=5)
    classify.set_model("quality", path, labels={"good": "wiki", "bad": "cc"})
    assert classify.classify_quality("fine fine")[0] == "wiki"
    classify.set_model("quality", path)
    with pytest.raises(ValueError, match="needs label 'wiki'"):
        classify.classify_quality("fine")


def test_missing_model_is_a_one_line_error_naming_the_path(tmp_path, fresh_task_models):
    missing = tmp_path / "nope" / "toxicity.bin"
    classify.set_model("toxicity", missing)
    with pytest.raises(FileNotFoundError) as e:
        classify.classify_toxic_speech("hello")
    assert str(missing) in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ValueError, match="task must be one of"):
        classify.set_model("spam", missing)
    junk = _write(tmp_path / "junk.bin", ["not a model"])
    with pytest.raises(ValueError, match="not a fastText model"):
        FastTextClassifier.load(junk)


# -- the filter step -------------------------------------------------------------------------------------
def test_classifier_filter_annotates_scores_and_rejects_with_reasons(models):
    steps = [ClassifierFilter(task, models[task][2], 0.5) for task in ("nsfw", "toxicity", "quality")]
    article = next(text for label, text in labelled_examples("quality", 10, seed=99) if label == "wiki")
    spam = "\n".join(["!!! BEST DEALS !!! CHEAP !!!"] + ["BUY NOW!!! Cheap pills 90% OFF >>> http://p.biz <<<"] * 9)
    docs = [{"id": "ok", "url": "u", "text": article}, {"id": "spam", "url": "u", "text": spam},
            {"id": "toxic", "url": "u", "text": article + "\n" + INSULT * 3},
            {"id": "adult", "url": "u", "text": article.split("\n")[0] + "\n" + "\n".join([ADULT] * 6)}]
    stats, rejected = {}, []
    kept = list(run_steps(docs, steps, stats, rejected.append))
    assert [d["id"] for d in kept] == ["ok"]
    assert {d["id"]: d["reason"] for d in rejected} == {"spam": "quality_low", "toxic": "toxicity_toxic",
                                                        "adult": "nsfw_nsfw"}
    ok = kept[0]
    assert ok["quality"] >= 0.5 and ok["toxicity"] < 0.5 and ok["nsfw"] < 0.5
    assert isinstance(stats["nsfw"], StepStats) and stats["nsfw"].docs_in == 4 and stats["quality"].docs_in == 2
    assert [s.name for s in steps] == ["nsfw", "toxicity", "quality"]
    # picklable for process pools: the model reloads on first use
    clone = pickle.loads(pickle.dumps(steps[1]))  # toxicity
    assert clone._clf is None and clone.reject({"text": INSULT * 3}) == "toxicity_toxic"
    with pytest.raises(ValueError, match="threshold"):
        ClassifierFilter("quality", threshold=1.5)


# -- robustness ------------------------------------------------------------------------------------------
def test_bad_input_never_crashes(models, tmp_path):
    junk = [b"\x00\xff\xfe binary \x80\x81".decode("latin-1"), "", " \n\t ", "\ud800\udfff lone surrogates",
            "x" * 10_000_000, "word " * 2_000_000, None, b"\xff\xfe\x00bytes", "\x00" * 100, "__label__toxic"]
    for task, (clf, _, _path) in models.items():
        t0 = time.perf_counter()
        out = clf.predict_batch(junk)
        assert time.perf_counter() - t0 < 5
        assert len(out) == len(junk)
        assert all(label in clf.labels and 0.0 <= p <= 1.0 for label, p in out)
        step = ClassifierFilter(task, classifier=clf)
        for text in junk:
            doc = {"id": "x", "url": "u", "text": text}
            assert step.reject(doc) in (None, TASKS[task].reason) and 0.0 <= doc[task] <= 1.0
        assert step.reject({"id": "no text"}) in (None, TASKS[task].reason)
    assert models["toxicity"][0].predict("")[0] == "non-toxic"
    with pytest.raises(ValueError, match="missing or empty"):
        FastTextClassifier.train(_write(tmp_path / "empty.txt", []))
    bad = tmp_path / "bad.valid"  # invalid UTF-8 and unlabelled lines in a held-out file
    bad.write_bytes(b"__label__toxic you idiot \xff\xfe\n\nno label here\n__label__non-toxic hello there\n")
    assert evaluate(models["toxicity"][0], bad)["n"] == 2


# -- CLI -----------------------------------------------------------------------------------------------------
def test_cli_trains_reports_and_writes_atomically(tmp_path, capsys):
    out, metrics = tmp_path / "models" / "nsfw.bin", tmp_path / "nsfw.json"
    rc = main(["--task", "nsfw", "--generate", "400", "--seed", "1", "--out", str(out), "--metrics", str(metrics),
               "--dim", "8", "--bucket", "5000", "--epoch", "5", "--params", "none"])
    printed = capsys.readouterr().out
    assert rc == 0 and "held-out accuracy" in printed and "macro-F1" in printed
    assert out.is_file() and not list(out.parent.glob(".*.tmp"))
    assert (out.parent / "labelled" / "nsfw.train").is_file()
    m = json.loads(details_path(metrics).read_text())
    assert m["accuracy"] >= 0.8 and m["n"] == 80 and m["config"]["dim"] == 8
    # --train without --valid holds out a seeded 20% of it
    rc = main(["--task", "nsfw", "--train", str(out.parent / "labelled" / "nsfw.train"), "--out", str(out),
               "--dim", "8", "--bucket", "5000", "--epoch", "5", "--params", "none"])
    assert rc == 0 and FastTextClassifier.load(out).labels


@pytest.mark.parametrize("argv,msg", [
    (["--train", "/nonexistent/train.txt"], "file not found"),
    (["--task", "quality", "--davidson", "x.csv"], "toxicity"),
    (["--generate", "3"], "--generate"),
    (["--lr", "-1"], "TrainConfig.lr"),
    (["--task", "spam"], "--task must be one of nsfw, quality, toxicity, got 'spam'"),
    (["--valid", "v.txt"], "--valid needs --train"),
])
def test_cli_bad_usage_exits_2_with_one_error_line(tmp_path, capsys, argv, msg):
    with pytest.raises(SystemExit) as e:
        main(argv + ["--params", "none", "--out", str(tmp_path / "m.bin")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and msg in err
    assert len([line for line in err.splitlines() if "error:" in line]) == 1


def test_cli_bad_input_file_exits_2(tmp_path, capsys):
    bad = _write(tmp_path / "bad.csv", ["a,b", "1,2"])
    rc = main(["--davidson", str(bad), "--out", str(tmp_path / "m.bin"), "--params", "none"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error:") and "missing column" in err and len(err.splitlines()) == 1


# -- Davidson et al. (2017) -------------------------------------------------------------------------------------
def test_clean_tweet_normalizes_entities_mentions_and_urls():
    assert clean_tweet("RT @mayasolovely: a &amp; b\n&#8220;c&#8221; http://t.co/xYz") == "RT @USER: a & b “c” URL"
    assert clean_tweet("&amp;#8220;quoted&amp;#8221; www.x.com/a @a_b1") == "“quoted” URL @USER"


def test_davidson_labels_and_stratified_split(tmp_path):
    csv_path = tmp_path / "d.csv"
    rows = [",count,hate_speech,offensive_language,neither,class,tweet"]
    rows += [f'{i},3,0,0,3,{i % 3},"tweet {i} @u{i}"' for i in range(30)]
    _write(csv_path, rows)
    ex = davidson_examples(csv_path)
    assert [lab for lab, _ in ex[:3]] == ["toxic", "toxic", "non-toxic"] and ex[0][1] == "tweet 0 @USER"
    train, valid = write_split(ex, tmp_path / "out", "davidson", 0, 0.2)
    v = valid.read_text().splitlines()
    assert len(v) == 6 and sum(line.startswith("__label__toxic") for line in v) == 4  # 20% of 20 and of 10
    assert len(train.read_text().splitlines()) == 24


@pytest.mark.skipif(not DAVIDSON.is_file(), reason=f"{DAVIDSON} absent")
def test_davidson_recipe_on_the_real_tweets(tmp_path, capsys):
    """Binary toxic (hate + offensive) vs neither, 80/20 stratified: ~0.95 accuracy, macro-F1 ~0.91,
    weighted F1 ~0.95 (the paper's 3-class logistic regression: weighted F1 0.90)."""
    metrics = tmp_path / "davidson.json"
    rc = main(["--davidson", str(DAVIDSON), "--out", str(tmp_path / "davidson.bin"), "--metrics", str(metrics),
               "--params", "none"])
    print(capsys.readouterr().out)
    m = json.loads(details_path(metrics).read_text())
    assert rc == 0 and m["n"] == 4957
    assert m["accuracy"] >= 0.9 and m["macro_f1"] >= 0.8 and m["weighted_f1"] >= 0.9
