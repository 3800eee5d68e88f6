"""Documents files, shared by the steps that read them: which files an input names, the output name each one
gets, and the reader every documents stage uses (filter directly; train-tokenizer and tokenize through the stream
of (id, text) pairs), which applies the bad-input policy of ``workbench.bad_input``.

A documents file is JSONL, gzipped when its name ends in ``.gz``: one JSON object per line with a string ``text``.
The tokenizer steps also read plain ``.txt`` corpora whose documents are separated by ``<|endoftext|>``.

Provenance: the extract stage's record of each documents file (``_done/<name>.json`` beside it, workbench/ledger.py)
says ``"generated": true`` when its input was the generated crawl (``from_generated_crawl``); documents made any
other way count as real.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from pathlib import Path

from workbench.bad_input import InputIssues
from workbench.files import check_unique_outputs, expand_inputs, read_json
from workbench.ledger import record_path

EOT = "<|endoftext|>"


def output_name(path: Path) -> str:
    """The file name a step writes for input ``path``: the same name, ``.jsonl.gz`` added when it has none."""
    return path.name if path.name.endswith((".jsonl.gz", ".jsonl")) else f"{path.name}.jsonl.gz"


def input_files(inputs: list[Path]) -> list[Path]:
    """Every documents file of ``inputs`` (files, or folders of ``*.jsonl.gz`` / ``*.jsonl``), in order.

    A missing input, no documents at all, or two inputs with the same output name are one-line errors."""
    files = expand_inputs(inputs, lambda d: sorted(d.glob("*.jsonl.gz")) + sorted(d.glob("*.jsonl")))
    if not files:
        raise FileNotFoundError(f"no .jsonl/.jsonl.gz documents in {', '.join(map(str, inputs))}")
    check_unique_outputs(files, output_name)
    return files


def from_generated_crawl(path: Path) -> bool:
    """True when the extract stage wrote documents file ``path`` from the generated crawl (its record says
    ``"generated": true``); False for anything else, unreadable or missing records included."""
    try:
        stats = read_json(record_path(Path(path).parent, Path(path).name))
    except (OSError, ValueError):
        return False
    return isinstance(stats, dict) and stats.get("generated") is True


def read_documents(path: Path, issues: InputIssues) -> Iterator[dict]:
    """Documents of a gzip/plain JSONL file, by the bad-input policy of ``workbench.bad_input`` (``read_lines``)."""
    return (doc for _, doc, _ in read_lines(path, issues))


def read_lines(path: Path, issues: InputIssues) -> Iterator[tuple[bytes, dict, bool]]:
    """(line, document, clean) of every document of a gzip/plain JSONL file, by the bad-input policy of
    ``workbench.bad_input``: a line that is not a JSON object with a string ``text`` is skipped and recorded in
    ``issues.skipped`` as ``file:line: problem``; invalid UTF-8 bytes and lone surrogates (from ``\\udcff`` escapes)
    become U+FFFD / "?" and the line is recorded in ``issues.repaired`` (``clean`` False: its bytes cannot be copied
    as they are); an unreadable (e.g. truncated gzip) tail ends the file; a file that gave no document is recorded
    in ``issues.bad_files``."""
    opener = gzip.open if str(path).endswith(".gz") else open
    lineno = docs = 0
    error = None
    try:
        with opener(path, "rb") as fh:
            for lineno, raw in enumerate(fh, 1):
                if not raw.strip():
                    continue
                doc, clean, problem = parse_document_line(raw)
                if doc is None:
                    issues.skipped.append(f"{path}:{lineno}: {problem}")
                    continue
                if not clean:
                    issues.repaired.append(f"{path}:{lineno}: {problem}")
                docs += 1
                yield raw, doc, clean
    except (OSError, EOFError, zlib.error) as e:
        error = f"{type(e).__name__}: {e}"
        issues.skipped.append(f"{path}:{lineno + 1}: unreadable ({error})")
    issues.file_ended(path, docs, error and f"line {lineno + 1}: {error}")


def parse_document_line(line: bytes) -> tuple[dict | None, bool, str]:
    """(document or None, clean, problem) for one JSONL line: it must be a JSON object with a string ``text``;
    invalid UTF-8 and lone surrogates in the text become U+FFFD / "?" (the problem of a document kept). ``clean``:
    none of that happened, so the line's bytes can be copied as they are."""
    try:
        text, clean = line.decode("utf-8"), True
    except UnicodeDecodeError:
        text, clean = line.decode("utf-8", "replace"), False
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        return None, False, f"invalid JSON ({e.msg})"
    if not isinstance(doc, dict) or not isinstance(doc.get("text"), str):
        return None, False, "not a document (needs a string 'text')"
    try:
        doc["text"].encode("utf-8")
    except UnicodeEncodeError:
        doc["text"], clean = doc["text"].encode("utf-8", "replace").decode("utf-8"), False
    return doc, clean, "" if clean else "invalid UTF-8 replaced"


def document_paths(input_path: str | Path) -> list[Path]:
    """A documents file (``.jsonl.gz``, or plain ``.txt`` with documents separated by
    ``<|endoftext|>``), or every ``*.jsonl.gz`` in a folder (sorted)."""
    path = Path(input_path)
    paths = expand_inputs([path], lambda folder: sorted(folder.glob("*.jsonl.gz")), missing="documents not found")
    if not paths:
        raise FileNotFoundError(f"no *.jsonl.gz documents in {path}")
    return paths


def iter_texts(input_path: str | Path, issues: InputIssues | None = None) -> Iterator[tuple[str, str]]:
    """(id, text) of every document, in file order; bad lines and files are skipped and recorded in ``issues``
    (``read_documents``). A document without ``id`` is named ``<file name>:<its number in the file>``."""
    issues = issues if issues is not None else InputIssues()
    for path in document_paths(input_path):
        if path.suffix == ".txt":
            yield from _iter_txt(path)
            continue
        for number, doc in enumerate(read_documents(path, issues), 1):
            yield str(doc.get("id", f"{path.name}:{number}")), doc["text"]


def _iter_txt(path: Path) -> Iterator[tuple[str, str]]:
    """Documents of a TinyStories-style text file: stories separated by ``<|endoftext|>``."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    for index, doc in enumerate(text.split(EOT)):
        if doc.strip():
            yield f"{path.name}:{index}", doc.strip()
