"""python -m scaling.recipes: recipes files checked key by key, one validation text no recipe trains on (checked
against a naive scan), per-recipe caching, and bad input as one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from scaling.recipes.run import main
from scaling.recipes.spec import RecipeError, load_spec
from scaling.recipes.texts import check_overlap, held_out, overlapping, read_docs
from workbench.files import write_jsonl

ROOT = Path(__file__).resolve().parents[2]


def recipes_file(tmp_path: Path, recipes: dict, **extra) -> Path:
    path = tmp_path / "recipes.yaml"
    path.write_text(yaml.safe_dump({"base": str(ROOT / "params.yaml"), "out_dir": str(tmp_path / "out"),
                                    "recipes": recipes, **extra}))
    return path


@pytest.mark.parametrize("recipes,message", [
    ({"a": {}, "b": {"filter.steps.qualty.threshold": 0.9}}, "unknown key 'filter.steps.qualty.threshold' (nearest: "
                                                              "filter.steps.quality.threshold)"),
    ({"a": {}, "b": {"dedup.jacard_threshold": 0.7}}, "(nearest: dedup.jaccard_threshold)"),
    ({"a": {}, "b": {"train.lr": 0.1}}, "'train.lr' is not a data setting"),
    ({"a": {}}, "needs two or more named recipes"),
    ({"a": {}, "b/c": {}}, "a name of letters, digits"),
])
def test_a_bad_recipe_names_the_key(tmp_path, recipes, message):
    with pytest.raises(RecipeError, match=None) as info:
        load_spec(recipes_file(tmp_path, recipes))
    assert message in str(info.value) and str(tmp_path / "recipes.yaml") in str(info.value)


def test_two_recipes_of_one_name_are_an_error_not_the_last_one_winning(tmp_path):
    path = tmp_path / "recipes.yaml"
    path.write_text(f"base: {ROOT / 'params.yaml'}\nrecipes:\n  a: {{}}\n  b: {{dedup: false}}\n  a: {{}}\n")
    with pytest.raises(RecipeError, match="line 5: 'a' is given twice"):
        load_spec(path)


def test_overlays_apply_to_the_base_as_written(tmp_path):
    spec = load_spec(recipes_file(tmp_path, {"a": {}, "strict": {"filter": {"steps": {"quality": {"threshold": 0.9}}}},
                                             "c4": {"filter.steps.c4.filter_no_terminal_punct": False},
                                             "raw": {"dedup": False}}))
    base = yaml.safe_load((ROOT / "params.yaml").read_text())
    assert spec.recipes["a"].params == base
    assert spec.recipes["strict"].params["filter"]["steps"]["quality"] == {**base["filter"]["steps"]["quality"],
                                                                           "threshold": 0.9}
    assert spec.recipes["c4"].params["filter"]["steps"]["c4"] == {"filter_no_terminal_punct": False}  # false -> on
    assert spec.recipes["raw"].skipped == ("dedup",)
    assert spec.recipes["strict"].params["dedup"] == base["dedup"]


def test_held_out_share_is_stable_and_about_the_fraction():
    ids = [f"<urn:uuid:{i}>" for i in range(4000)]
    share = sum(held_out(i, 0.05, 0) for i in ids) / len(ids)
    assert 0.04 < share < 0.06
    assert [held_out(i, 0.05, 0) for i in ids[:50]] == [held_out(i, 0.05, 0) for i in ids[:50]]
    assert [held_out(i, 0.05, 1) for i in ids] != [held_out(i, 0.05, 0) for i in ids]


def test_overlap_finds_copies_and_near_copies_a_naive_jaccard_finds(tmp_path):
    words = [f"w{i}" for i in range(400)]
    base = " ".join(words)
    near = " ".join(words[:390] + ["x", "y", "z"] + words[393:])  # 3 of 400 words changed: Jaccard of 5-grams ~0.93
    other = " ".join(f"v{i}" for i in range(400))
    validation = [{"id": "v1", "text": base}]
    candidates = [{"id": "c1", "text": "  " + base.replace(" ", "\n", 3)}, {"id": "c2", "text": near},
                  {"id": "c3", "text": other}]

    def shingles(text):
        t = text.split()
        return {tuple(t[i:i + 5]) for i in range(len(t) - 4)}

    naive = [len(shingles(c["text"]) & shingles(base)) / len(shingles(c["text"]) | shingles(base)) for c in candidates]
    assert naive[0] == 1.0 and naive[1] > 0.8 and naive[2] == 0.0
    assert overlapping(candidates, validation) == [(0, "exact"), (1, "near-duplicate")]
    write_jsonl(tmp_path / "train" / "docs.jsonl.gz", candidates)
    with pytest.raises(RecipeError, match=r"recipe 'r': 2 training document\(s\) overlap the validation text "
                                          r"\(1 exact, 1 near-duplicate; first: c1"):
        check_overlap("r", tmp_path / "train", validation)


@pytest.fixture(scope="module")
def crawl_base(sample_crawl, tmp_path_factory):
    """A base params file over the session's generated crawl: a tokenizer trained on it, a filter of rules only
    (no classifiers), and a two-budget ladder of tiny models."""
    from tokenizer.train import train_tokenizer

    root = tmp_path_factory.mktemp("recipes_base")
    train_tokenizer(sample_crawl.documents, root / "tok", 300, ["<|endoftext|>"])
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["extract"]["out_dir"] = str(sample_crawl.documents.parent)
    params["tokenizer"]["out_dir"] = str(root / "tok")
    params["filter"]["steps"] = {"gopher": {"alpha_words": "paper"}, "gopher_rep": True}
    params["filter"]["workers"] = params["dedup"]["workers"] = params["shards"]["workers"] = 1
    params["sweep"] |= {"budgets": [2e8, 4e8, 8e8], "shapes": [[8, 1, 1], [12, 1, 1], [16, 1, 1]], "workers": 1,
                        "min_run_steps": 1, "max_run_steps": 0, "branches": False, "total_flops": 1e11}
    params["train"] |= {"batch_size": 4, "model": {"d_model": 16, "n_heads": 1, "context_length": 32,
                                                   "attention": "sdpa"}, "eval_interval": 1000, "eval_batches": 2,
                        "warmup_steps": 2, "ckpt_interval": 1000}
    path = root / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    return path


def crawl_recipes(tmp_path: Path, base: Path, recipes: dict, **extra) -> Path:
    path = tmp_path / "recipes.yaml"
    path.write_text(yaml.safe_dump({"base": str(base), "out_dir": str(tmp_path / "out"), "recipes": recipes,
                                    "validation": {"fraction": 0.1, "seed": 0}, **extra}))
    return path


def test_no_recipe_trains_on_the_validation_text_and_only_a_changed_recipe_reruns(crawl_base, tmp_path, capsys):
    path = crawl_recipes(tmp_path, crawl_base, {"rules": {}, "raw": {"dedup": False}})
    assert main([str(path), "--only-data"]) == 0
    out = tmp_path / "out"
    validation = read_docs(out / "_validation" / "pages")
    held = {d["id"] for d in validation}
    assert held and all(held_out(i, 0.1, 0) for i in held)
    texts = {" ".join(d["text"].split()) for d in validation}
    for recipe, folder in (("rules", "deduped"), ("raw", "filtered")):
        docs = read_docs(out / recipe / folder)
        assert docs and not held & {d["id"] for d in docs}  # no held-out page
        assert not texts & {" ".join(d["text"].split()) for d in docs}  # and no copy of one, whatever its id
        meta = json.loads((out / recipe / "shards" / "meta.json").read_text())
        scored = json.loads((out / "_validation" / "tokens" / "meta.json").read_text())
        assert meta["val_tokens"] == scored["train_tokens"] > 0
        assert (out / recipe / "shards" / "val.bin").read_bytes() == (out / "_validation" / "tokens" /
                                                                      "train.bin").read_bytes()
    raw_tokens = json.loads((out / "raw" / "shards" / "meta.json").read_text())["train_tokens"]
    assert raw_tokens > json.loads((out / "rules" / "shards" / "meta.json").read_text())["train_tokens"]
    kept = (out / "rules" / "deduped" / "_done" / "dedup.json").stat().st_mtime_ns
    capsys.readouterr()
    path = crawl_recipes(tmp_path, crawl_base, {"rules": {}, "raw": {"dedup": False, "filter.steps.gopher": False}})
    assert main([str(path), "--only-data"]) == 0
    assert (out / "rules" / "deduped" / "_done" / "dedup.json").stat().st_mtime_ns == kept  # untouched
    assert json.loads((out / "raw" / "shards" / "meta.json").read_text())["train_tokens"] > raw_tokens  # refiltered
    assert "raw: settings changed since its data were made" in capsys.readouterr().out


def test_a_recipe_that_cannot_supply_the_ladder_is_one_line_naming_its_epochs(crawl_base, tmp_path, capsys):
    path = crawl_recipes(tmp_path, crawl_base, {"rules": {}, "tiny": {"filter.steps.gopher.min_doc_words": 5000}},
                         max_epochs=2)
    assert main([str(path), "--only-data"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and "recipe 'tiny'" in err[0] and "epochs, beyond max_epochs 2" in err[0], err


def test_the_ladders_and_the_comparison_run_and_resume(crawl_base, tmp_path, capsys):
    path = crawl_recipes(tmp_path, crawl_base, {"rules": {}, "raw": {"dedup": False}})
    assert main([str(path), "--bootstrap", "20", "--metrics", str(tmp_path / "m.json")]) in (0, 3)
    out = tmp_path / "out"
    import pandas as pd

    runs = pd.read_csv(out / "runs.csv")
    assert set(runs["recipe"]) == {"rules", "raw"}
    validation_bytes = sum(len(d["text"].encode()) for d in read_docs(out / "_validation" / "filtered"))
    val_tokens = json.loads((out / "_validation" / "tokens" / "meta.json").read_text())["train_tokens"]
    bits_per_byte = runs["loss_nats"] * val_tokens / validation_bytes / 0.6931471805599453
    assert runs["loss"].to_numpy() == pytest.approx(bits_per_byte.to_numpy())
    assert (out / "compare" / "compare.json").is_file()
    first = (out / "rules" / "sweep" / "results.csv").read_bytes()
    capsys.readouterr()
    assert main([str(path), "--bootstrap", "20", "--metrics", ""]) in (0, 3)
    assert "(0 new)" in capsys.readouterr().out  # every ladder run was found finished
    assert (out / "rules" / "sweep" / "results.csv").read_bytes() == first


def test_a_validation_text_that_overlaps_a_recipe_is_one_line_and_exit_2(crawl_base, tmp_path, capsys):
    path = crawl_recipes(tmp_path, crawl_base, {"rules": {}, "raw": {"dedup": False}})
    assert main([str(path), "--only-data"]) == 0
    trained = read_docs(tmp_path / "out" / "rules" / "deduped")[:3]
    own = tmp_path / "my_validation.jsonl"
    write_jsonl(own, [{"id": f"v{i}", "text": d["text"]} for i, d in enumerate(trained)])
    capsys.readouterr()
    path = crawl_recipes(tmp_path, crawl_base, {"rules": {}, "raw": {"dedup": False}}, validation={"path": str(own)})
    assert main([str(path), "--only-data"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and "overlap the validation text" in err[0], err
    assert int(err[0].split(" exact")[0].rsplit("(", 1)[1]) >= 3  # at least the three copied documents
