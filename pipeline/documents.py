"""Documents files, shared by the steps that read them: which files an input names, the output name each one
gets, a tolerant reader that skips (and reports) lines that are not documents (filter, dedup), and a strict
stream of (id, text) pairs (train-tokenizer, tokenize).

A documents file is JSONL, gzipped when its name ends in ``.gz``: one JSON object per line with a string ``text``.
The tokenizer steps also read plain ``.txt`` corpora whose documents are separated by ``<|endoftext|>``.

Provenance: the extract stage writes ``_stats/<name>.json`` beside each documents file, with ``"generated": true``
when its input was the generated crawl (``from_generated_crawl``); documents made any other way count as real.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

from workbench.files import read_json, read_jsonl

EOT = "<|endoftext|>"


def output_name(path: Path) -> str:
    """The file name a step writes for input ``path``: the same name, ``.jsonl.gz`` added when it has none."""
    return path.name if path.name.endswith((".jsonl.gz", ".jsonl")) else f"{path.name}.jsonl.gz"


def input_files(inputs: list[Path]) -> list[Path]:
    """Every documents file of ``inputs`` (files, or folders of ``*.jsonl.gz`` / ``*.jsonl``), in order.

    A missing input, no documents at all, or two inputs with the same output name are one-line errors."""
    files = []
    for p in inputs:
        p = Path(p)
        if p.is_dir():
            files += sorted(p.glob("*.jsonl.gz")) + sorted(p.glob("*.jsonl"))
        elif p.is_file():
            files.append(p)
        else:
            raise FileNotFoundError(f"input not found: {p}")
    if not files:
        raise FileNotFoundError(f"no .jsonl/.jsonl.gz documents in {', '.join(map(str, inputs))}")
    names = [output_name(f) for f in files]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"two inputs would write the same output name {dupes[0]!r}")
    return files


def from_generated_crawl(path: Path) -> bool:
    """True when the extract stage wrote documents file ``path`` from the generated crawl (its ``_stats`` marker
    says ``"generated": true``); False for anything else, unreadable or missing markers included."""
    marker = Path(path).parent / "_stats" / f"{Path(path).name}.json"
    try:
        stats = read_json(marker)
    except (OSError, ValueError):
        return False
    return isinstance(stats, dict) and stats.get("generated") is True


def read_documents(path: Path, bad: list[str]) -> Iterator[dict]:
    """Documents of a gzip/plain JSONL file; a line that is not a JSON object with a string ``text`` is skipped
    and recorded in ``bad`` as ``file:line: problem``. An unreadable (e.g. truncated gzip) tail ends the file.
    Invalid UTF-8 bytes and lone surrogates (from ``\\udcff`` escapes) become U+FFFD / "?" rather than errors."""
    opener = gzip.open if str(path).endswith(".gz") else open
    lineno = 0
    try:
        with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    doc = json.loads(line)
                except json.JSONDecodeError as e:
                    bad.append(f"{path}:{lineno}: invalid JSON ({e.msg})")
                    continue
                if not isinstance(doc, dict) or not isinstance(doc.get("text"), str):
                    bad.append(f"{path}:{lineno}: not a document (needs a string 'text')")
                    continue
                try:
                    doc["text"].encode("utf-8")
                except UnicodeEncodeError:
                    doc["text"] = doc["text"].encode("utf-8", "replace").decode("utf-8")
                yield doc
    except (OSError, EOFError, UnicodeError) as e:
        bad.append(f"{path}:{lineno + 1}: unreadable ({type(e).__name__}: {e})")


def document_paths(input_path: str | Path) -> list[Path]:
    """A documents file (``.jsonl.gz``, or plain ``.txt`` with documents separated by
    ``<|endoftext|>``), or every ``*.jsonl.gz`` in a folder (sorted)."""
    path = Path(input_path)
    if path.is_dir():
        paths = sorted(path.glob("*.jsonl.gz"))
    elif path.is_file():
        paths = [path]
    else:
        raise FileNotFoundError(f"documents not found: {path}")
    if not paths:
        raise FileNotFoundError(f"no *.jsonl.gz documents in {path}")
    return paths


def iter_texts(input_path: str | Path) -> Iterator[tuple[str, str]]:
    """(id, text) of every document, in file order."""
    for path in document_paths(input_path):
        if path.suffix == ".txt":
            yield from _iter_txt(path)
            continue
        for lineno, doc in enumerate(read_jsonl(path), 1):
            if not isinstance(doc.get("text"), str):
                raise ValueError(f"{path}:{lineno}: document has no string 'text'")
            yield str(doc.get("id", f"{path.name}:{lineno}")), doc["text"]


def _iter_txt(path: Path) -> Iterator[tuple[str, str]]:
    """Documents of a TinyStories-style text file: stories separated by ``<|endoftext|>``."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    for index, doc in enumerate(text.split(EOT)):
        if doc.strip():
            yield f"{path.name}:{index}", doc.strip()
