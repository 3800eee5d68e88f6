"""Labelled fastText data: the file format, the seeded split, and the real labelled sets the classifiers train on.

- ``davidson_examples``: Davidson et al. (2017), "Automated Hate Speech Detection and the Problem of Offensive
  Language" (``labeled_data.csv``: ``class`` 0 hate, 1 offensive, 2 neither; ``tweet``). toxicity: hate and
  offensive are ``toxic``; nsfw (a proxy): offensive is ``nsfw``, neither is ``non-nsfw``, hate is left out.
- ``jigsaw_examples``: the Jigsaw Toxic Comment Classification Challenge (``train.csv``: ``comment_text`` and six
  0/1 columns). toxicity: any of the six is ``toxic``; nsfw: ``obscene``, as Dolma's Jigsaw NSFW tagger.
- ``quality_examples``: CS336 assignment 4 / DCLM (Li et al. 2024): positives (``wiki``) are reference pages the
  user trusts, negatives (``cc``) pages drawn at random from a crawl, as many as there are positives. Pages come
  from WARC/WET files (main text extracted as the extract stage does), documents JSONL or plain ``.txt`` files.

Both CSV sets are short comments: neither says much about adult web pages, and the nsfw sets are obscene-language
proxies, not adult-content labels (docs/benchmarks/classifiers.md has what they measure on real
pages).
"""

from __future__ import annotations

import csv
import heapq
import html
import random
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from pipeline.classifiers.models import PREFIX, clean_text
from workbench.files import atomic_open, expand_inputs, read_jsonl

JIGSAW_COLUMNS = ("toxic", "severe_toxic", "obscene", "threat", "insult", "identity_hate")
PAGE_SUFFIXES = (".warc.gz", ".warc", ".wet.gz", ".wet", ".jsonl.gz", ".jsonl", ".txt")
_MENTION, _URL = re.compile(r"@\w+"), re.compile(r"(?:https?://|www\.)\S+", re.IGNORECASE)


def write_split(examples: list[tuple[str, str]], out_dir, stem: str, seed: int,
                valid_fraction: float) -> tuple[Path, Path]:
    """Shuffle each class with ``seed``, hold out ``valid_fraction`` of it (stratified), write both files."""
    if not 0.0 < valid_fraction < 1.0:
        raise ValueError(f"valid_fraction must be in (0, 1), got {valid_fraction}")
    rng, train, valid = random.Random(seed), [], []
    for label in sorted({lab for lab, _ in examples}):
        group = [ex for ex in examples if ex[0] == label]
        rng.shuffle(group)
        k = max(1, round(len(group) * valid_fraction)) if len(group) > 1 else 0
        valid += group[:k]
        train += group[k:]
    rng.shuffle(train)
    rng.shuffle(valid)
    out_dir = Path(out_dir)
    paths = out_dir / f"{stem}.train", out_dir / f"{stem}.valid"
    for path, rows in zip(paths, (train, valid), strict=False):
        with atomic_open(path) as fh:
            # one training line each: the text cleaned as for prediction
            fh.writelines(f"{PREFIX}{label} {clean_text(text)}\n" for label, text in rows)
    return paths


# -- tweets and comments ---------------------------------------------------------------------------------------
def clean_tweet(text: str) -> str:
    """Davidson tweet → text: HTML entities unescaped (some are escaped twice), @mentions → ``@USER``,
    URLs → ``URL``, whitespace runs (newlines included) → one space."""
    for _ in range(3):
        unescaped = html.unescape(text)
        if unescaped == text:
            break
        text = unescaped
    text = _URL.sub("URL", _MENTION.sub("@USER", text))
    return " ".join(text.split())


def _csv_rows(csv_path, needed: set[str], what: str) -> Iterator[tuple[int, dict]]:
    with open(csv_path, encoding="utf-8", errors="replace", newline="") as fh:
        reader = csv.DictReader(fh)
        missing = needed - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{csv_path}: missing column(s) {sorted(missing)} ({what})")
        yield from enumerate(reader, 2)


def davidson_examples(csv_path, task: str = "toxicity") -> list[tuple[str, str]]:
    """(label, cleaned tweet) for the rows of Davidson et al.'s ``labeled_data.csv`` that ``task`` uses."""
    if task not in ("toxicity", "nsfw"):
        raise ValueError(f"the Davidson tweets label toxicity or nsfw, not {task}")
    rows = []
    for lineno, row in _csv_rows(csv_path, {"class", "tweet"}, "Davidson labeled_data.csv has class and tweet"):
        if row["class"] not in ("0", "1", "2"):
            raise ValueError(f"{csv_path}:{lineno}: class must be 0, 1 or 2, got {row['class']!r}")
        text = clean_tweet(row["tweet"] or "")
        if task == "toxicity":
            rows.append(("non-toxic" if row["class"] == "2" else "toxic", text))
        elif row["class"] != "0":  # nsfw: offensive vs neither; hate speech is another question
            rows.append(("nsfw" if row["class"] == "1" else "non-nsfw", text))
    if not rows:
        raise ValueError(f"{csv_path}: no rows")
    return rows


def jigsaw_examples(csv_path, task: str = "toxicity") -> list[tuple[str, str]]:
    """(label, comment) for every row of a Jigsaw ``train.csv``: toxicity = any of the six labels, nsfw = obscene."""
    if task not in ("toxicity", "nsfw"):
        raise ValueError(f"the Jigsaw comments label toxicity or nsfw, not {task}")
    rows = []
    needed = {"comment_text", *JIGSAW_COLUMNS}
    for lineno, row in _csv_rows(csv_path, needed, "a Jigsaw train.csv has comment_text and the six labels"):
        flags = {}
        for column in JIGSAW_COLUMNS:
            if row[column] not in ("0", "1"):
                raise ValueError(f"{csv_path}:{lineno}: {column} must be 0 or 1, got {row[column]!r}")
            flags[column] = row[column] == "1"
        text = " ".join((row["comment_text"] or "").split())
        if task == "toxicity":
            rows.append(("toxic" if any(flags.values()) else "non-toxic", text))
        else:
            rows.append(("nsfw" if flags["obscene"] else "non-nsfw", text))
    if not rows:
        raise ValueError(f"{csv_path}: no rows")
    return rows


def csv_examples(csv_path, task: str) -> tuple[str, list[tuple[str, str]]]:
    """("davidson" | "jigsaw", examples) of a labelled CSV, told apart by its header."""
    with open(csv_path, encoding="utf-8", errors="replace", newline="") as fh:
        header = set(next(csv.reader(fh), []))
    if "tweet" in header:
        return "davidson", davidson_examples(csv_path, task)
    if "comment_text" in header:
        return "jigsaw", jigsaw_examples(csv_path, task)
    raise ValueError(f"{csv_path}: neither a Davidson (class, tweet) nor a Jigsaw (comment_text, ...) CSV")


# -- web pages (quality) ----------------------------------------------------------------------------------------
def page_files(paths) -> list[Path]:
    """The page files of ``paths`` (files, or folders searched for WARC/WET/JSONL/.txt files), in order."""
    files = expand_inputs(paths, lambda d: sorted(f for f in d.rglob("*") if f.is_file()
                                                   and f.name.endswith(PAGE_SUFFIXES)), "pages not found")
    if not files:
        raise ValueError(f"no WARC, WET, JSONL or .txt pages in {', '.join(map(str, paths))}")
    return files


def _file_pages(path: Path, drops: Counter) -> Iterator[str | bytes | tuple]:
    """A file's pages: text (JSONL, .txt), or (html bytes, charset) still to extract (WARC), or WET text."""
    name = path.name
    if name.endswith((".jsonl.gz", ".jsonl")):
        for doc in read_jsonl(path):
            if isinstance(doc.get("text"), str):
                yield doc["text"]
    elif name.endswith(".txt"):
        yield path.read_text(encoding="utf-8", errors="replace")
    else:
        from pipeline.web.warc import iter_payloads

        for payload in iter_payloads(path, drops):
            yield payload.body.decode("utf-8", "replace") if payload.kind == "text" else (payload.body, payload.charset)


def _text(page) -> str | None:
    if isinstance(page, tuple):
        from pipeline.web.extract import extract_text

        return extract_text(page[0], declared_charset=page[1])
    return page.strip() or None


def read_pages(paths, limit: int | None = None, seed: int = 0) -> list[str]:
    """The texts of the pages in ``paths``; with ``limit``, a uniform random sample of that many (seeded), drawn
    before extraction, so a big crawl costs one pass of reading and ``limit`` extractions."""
    drops: Counter = Counter()
    pages = (page for f in page_files(paths) for page in _file_pages(f, drops))
    if limit is None:
        return [t for t in map(_text, pages) if t]
    rng = random.Random(seed)
    keyed = ((rng.random(), i, page) for i, page in enumerate(pages))
    sample = heapq.nsmallest(int(limit * 1.25) + 5, keyed)  # a margin for pages with no main text
    sample.sort(key=lambda item: item[1])
    return [t for t in (_text(page) for _, _, page in sample) if t][:limit]


def quality_examples(positives, negatives, max_per_class: int = 20_000, seed: int = 0) -> list[tuple[str, str]]:
    """``wiki`` = every reference page of ``positives`` (at most ``max_per_class``, sampled), ``cc`` = as many
    pages drawn at random from ``negatives``."""
    pos = read_pages(positives, max_per_class, seed)
    if not pos:
        raise ValueError(f"no page with text in {', '.join(map(str, positives))}")
    neg = read_pages(negatives, len(pos), seed + 1)
    if not neg:
        raise ValueError(f"no page with text in {', '.join(map(str, negatives))}")
    return [("wiki", t) for t in pos] + [("cc", t) for t in neg]
