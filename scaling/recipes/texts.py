"""The texts of a recipes comparison: one fixed validation text no recipe trains on, each recipe's training pool, and
the shards that pair a recipe's training tokens with the shared validation tokens.

The default validation text is a held-out share of the crawl's pages (by a hash of the page id, the same pages
whatever the extractor), cleaned by the base pipeline's filter: "what a good web page reads like", fixed before any
recipe runs. Every page of that share, and every other page whose text is an exact or near-duplicate of a
validation document (MinHash + verified Jaccard, the dedup stage's settings), is taken out of the pages the recipes
start from (decontamination). A user's own validation text (``validation: {path: ...}``) is used as it is; then an
overlap with a recipe's training documents is an error, never a silent leak (``check_overlap``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from pipeline.dedup.stage import near_duplicate_clusters
from scaling.recipes.spec import RecipeError
from workbench.documents import document_paths, from_generated_crawl, iter_texts
from workbench.files import read_json, write_json, write_jsonl
from workbench.ledger import record_path


def held_out(doc_id: str, fraction: float, seed: int) -> bool:
    """Whether a page belongs to the validation share (a hash of its id: the same pages for every extractor)."""
    digest = hashlib.blake2b(f"validation:{seed}:{doc_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") / 2**64 < fraction


def read_docs(path: str | Path) -> list[dict]:
    """Every document of a folder or file as {"id", "text"}."""
    return [{"id": doc_id, "text": text} for doc_id, text in iter_texts(path)]


def overlapping(candidates: list[dict], validation: list[dict]) -> list[tuple[int, str]]:
    """(index in ``candidates``, "exact" or "near-duplicate") for each candidate whose text is a copy or a
    near-duplicate of a validation document."""
    exact = {_digest(d["text"]) for d in validation}
    clusters = near_duplicate_clusters(validation + candidates)
    touched = set(clusters[: len(validation)])
    out = []
    for i, doc in enumerate(candidates):
        if _digest(doc["text"]) in exact:
            out.append((i, "exact"))
        elif clusters[len(validation) + i] in touched:
            out.append((i, "near-duplicate"))
    return out


def _digest(text: str) -> str:
    return hashlib.blake2b(" ".join(text.split()).encode(), digest_size=16).hexdigest()


def carry_provenance(documents: Path, out_file: Path) -> None:
    """Mark ``out_file`` as coming from the generated crawl when every documents file it was cut from does (the
    filter applies classifiers trained on generated text only there: workbench/documents.py)."""
    files = document_paths(documents)
    if files and all(from_generated_crawl(f) for f in files):
        write_json(record_path(out_file.parent, out_file.name), {"generated": True, "cut_from": str(documents)})


def split_pages(documents: Path, fraction: float, seed: int, validation_out: Path, pool_out: Path) -> dict:
    """The held-out pages to ``validation_out`` and the rest, decontaminated, to ``pool_out`` (each one jsonl.gz
    file, written atomically); returns the counts."""
    docs = read_docs(documents)
    if not docs:
        raise RecipeError(f"{documents}: no documents to split into validation and training pages")
    validation = [d for d in docs if held_out(d["id"], fraction, seed)]
    rest = [d for d in docs if not held_out(d["id"], fraction, seed)]
    if not validation:
        raise RecipeError(f"{documents}: validation fraction {fraction} holds out none of {len(docs)} pages")
    removed = {i for i, _ in overlapping(rest, validation)}
    write_jsonl(validation_out / "pages.jsonl.gz", validation)
    write_jsonl(pool_out / "pages.jsonl.gz", [d for i, d in enumerate(rest) if i not in removed])
    for out in (validation_out, pool_out):
        carry_provenance(documents, out / "pages.jsonl.gz")
    return {"pages": len(docs), "validation_pages": len(validation), "decontaminated": len(removed),
            "pool_pages": len(rest) - len(removed)}


def decontaminate(documents: Path, validation: list[dict], fraction: float, seed: int, out: Path) -> dict:
    """A recipe's own extraction without the held-out pages and their near-duplicates (its pool)."""
    docs = [d for d in read_docs(documents) if not held_out(d["id"], fraction, seed)]
    removed = {i for i, _ in overlapping(docs, validation)}
    write_jsonl(out / "pages.jsonl.gz", [d for i, d in enumerate(docs) if i not in removed])
    carry_provenance(documents, out / "pages.jsonl.gz")
    return {"pool_pages": len(docs) - len(removed), "decontaminated": len(removed)}


def check_overlap(recipe: str, training: Path, validation: list[dict]) -> None:
    """A RecipeError when any training document of ``recipe`` is a copy or near-duplicate of the validation text."""
    docs = read_docs(training)
    found = overlapping(docs, validation)
    if found:
        kinds = {k: sum(1 for _, x in found if x == k) for k in ("exact", "near-duplicate")}
        raise RecipeError(f"recipe '{recipe}': {len(found)} training document(s) overlap the validation text "
                          f"({kinds['exact']} exact, {kinds['near-duplicate']} near-duplicate; first: "
                          f"{docs[found[0][0]]['id']} in {training}): a model trained on them is scored on text it "
                          f"has seen; remove them or choose another validation text")


def assemble_shards(tokens: Path, validation_tokens: Path, out: Path, validation_bytes: int) -> dict:
    """``out``: the recipe's training tokens (train.bin, linked) beside the shared validation tokens (val.bin), with
    meta.json; the validation share of each (both were tokenized with val_fraction 0, so all is in train.bin)."""
    out.mkdir(parents=True, exist_ok=True)
    train_meta, val_meta = read_json(tokens / "meta.json"), read_json(validation_tokens / "meta.json")
    if train_meta["tokenizer_sha256"] != val_meta["tokenizer_sha256"]:
        raise RecipeError(f"{tokens} and {validation_tokens} were tokenized with different tokenizers")
    for name, source in (("train.bin", tokens / "train.bin"), ("val.bin", validation_tokens / "train.bin")):
        tmp = out / f".{name}.tmp"
        tmp.unlink(missing_ok=True)
        try:
            os.link(source, tmp)
        except OSError:
            shutil.copyfile(source, tmp)
        os.replace(tmp, out / name)
    meta = {**train_meta, "val_tokens": val_meta["train_tokens"], "val_docs": val_meta["train_docs"],
            "val_fraction": 0.0, "validation_bytes": validation_bytes, "validation": str(validation_tokens)}
    write_json(out / "meta.json", meta)
    return meta
