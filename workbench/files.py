"""Atomic files: every output is written beside its destination and renamed into place.

A crash or a kill never leaves a half-written file under the final name (``os.replace`` is atomic on POSIX).
Gzip output uses ``mtime=0`` so the same records give the same bytes; JSON can be key-sorted for stable diffs.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import io
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from workbench import failpoints


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path in the destination folder; fsync it and rename it to ``path`` on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    os.chmod(tmp, 0o644)  # mkstemp makes 0600; outputs are shared data
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        if tmp_path.is_file():
            with open(tmp_path, "rb") as fh:
                os.fsync(fh.fileno())
        failpoints.at_write(tmp_path)
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open a file for writing that appears under ``path`` only once it was closed cleanly.

    ``.gz`` paths are gzip-compressed deterministically (no timestamp in the header).
    """
    binary = "b" in mode
    with atomic_path(path) as tmp:
        if str(path).endswith(".gz"):
            raw = open(tmp, "wb")  # noqa: SIM115 - closed below, after the gzip stream
            gz = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0, filename="")
            fh: IO = gz if binary else io.TextIOWrapper(gz, encoding=encoding, newline="\n")
            try:
                yield fh
            finally:
                fh.close()
                raw.close()
        else:
            with open(tmp, mode, encoding=None if binary else encoding) as fh:
                yield fh


WRITE_ERRORS = (errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EDQUOT)  # the disk, not the program


def write_error(exc: BaseException) -> str | None:
    """The one line a CLI prints for a disk that cannot take its output (full, read-only, not writable): the path and
    what to do, for ``exc`` or an error it was raised from; None for any other error. Outputs are atomic and the
    stages resumable, so the same command continues once the disk is fixed."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in WRITE_ERRORS:
            return (f"{exc.filename or 'the output folder'}: {exc.strerror or os.strerror(exc.errno)}: free space or "
                    "make it writable, then run the same command again to continue")
        exc = exc.__cause__ or exc.__context__
    return None


def error_line(exc: BaseException, *bad_input: type[BaseException]) -> str | None:
    """The one line a CLI prints before it exits 2: bad input (a ValueError, a missing file or one of the
    ``bad_input`` types) says itself, a disk that cannot take the output says ``write_error``'s line; None for
    anything else, a bug that should raise."""
    if isinstance(exc, (ValueError, FileNotFoundError, *bad_input)):
        return str(exc)
    return write_error(exc)


def exit_on_error(exc: BaseException, *bad_input: type[BaseException]) -> int:
    """A CLI's ending on ``exc``: ``error_line`` on stderr and the exit status 2, or ``exc`` raised again."""
    if (line := error_line(exc, *bad_input)) is None:
        raise exc
    print(f"error: {line}", file=sys.stderr)
    return 2


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    with atomic_open(path, "wb") as fh:
        fh.write(data)
    return Path(path)


def write_text(path: str | os.PathLike, text: str) -> Path:
    with atomic_open(path, "w") as fh:
        fh.write(text)
    return Path(path)


def write_json(path: str | os.PathLike, obj: Any, sort_keys: bool = True) -> Path:
    """Pretty JSON, written atomically; key-sorted by default (stable diffs for DVC metrics)."""
    return write_text(path, json.dumps(obj, indent=2, sort_keys=sort_keys, ensure_ascii=False) + "\n")


def read_json(path: str | os.PathLike) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def write_jsonl(path: str | os.PathLike, records: Iterable[dict[str, Any]]) -> int:
    """Write records as (gzip) JSONL atomically; return how many were written."""
    n = 0
    with atomic_open(path, "w") as fh:
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            n += 1
    return n


def read_jsonl(path: str | os.PathLike) -> Iterator[dict[str, Any]]:
    """Stream records from a (gzip) JSONL file. A bad line raises ValueError naming file and line."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{lineno}: invalid JSON: {e.msg}") from None


def file_sha256(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def tokenizer_identity(tokenizer_dir: str | os.PathLike, vocab: str | os.PathLike | None = None,
                       merges: str | os.PathLike | None = None) -> dict:
    """What a run records of the tokenizer its shards were encoded with, and what generate, export and the alignment
    loaders check a given tokenizer against: {"vocab_size": entries of vocab.json, "sha256": of vocab.json's bytes
    then merges.txt's}. ``vocab`` and ``merges`` name the two files where they are not ``tokenizer_dir``'s
    vocab.json and merges.txt (GPT-2's gpt2_vocab.json)."""
    root = Path(tokenizer_dir)
    vocab, merges = Path(vocab or root / "vocab.json"), Path(merges or root / "merges.txt")
    digest = hashlib.sha256()
    for path in (vocab, merges):
        if not path.is_file():
            raise FileNotFoundError(f"{path}: missing (expected a tokenizer folder with vocab.json and merges.txt)")
        digest.update(path.read_bytes())
    return {"vocab_size": len(json.loads(vocab.read_text(encoding="utf-8"))), "sha256": digest.hexdigest()}


def expand_inputs(inputs: Iterable[str | os.PathLike], list_folder: Callable[[Path], list[Path]],
                  missing: str = "input not found") -> list[Path]:
    """The files of ``inputs``, in order: a file as given, a folder as ``list_folder(folder)``. A path that does
    not exist is a FileNotFoundError ``"<missing>: <path>"``; an empty result is the caller's to judge."""
    files = []
    for p in map(Path, inputs):
        if p.is_dir():
            files += list_folder(p)
        elif p.is_file():
            files.append(p)
        else:
            raise FileNotFoundError(f"{missing}: {p}")
    return files


def check_unique_outputs(files: list[Path], output_name: Callable[[Path], str]) -> None:
    """ValueError when two input files would write the same output name."""
    names = [output_name(f) for f in files]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"two inputs would write the same output name {dupes[0]!r}")


def remove_stale_temps_of(*paths: str | os.PathLike) -> None:
    """Remove the temporary files (``atomic_path``'s ``.<name>.<random>.tmp``) that killed writes of ``paths`` left,
    for a file in a folder no stage cleans as its own (metrics/, a results CSV, a report). Only the job that owns a
    file writes it, so none of these is another writer's open file."""
    for path in map(Path, paths):
        for stale in path.parent.glob(f".{path.name}.*.tmp") if path.parent.is_dir() else ():
            stale.unlink(missing_ok=True)


def details_path(metrics_path: str | os.PathLike) -> Path:
    """Where a stage's detailed statistics go beside its DVC metrics: metrics/x.json -> metrics/details/x.json."""
    path = Path(metrics_path)
    return path.parent / "details" / path.name


def write_metrics(metrics_path: str | os.PathLike, stats: dict, headline: dict) -> Path:
    """Write the full ``stats`` to ``details_path(metrics_path)`` and the flat ``headline`` to ``metrics_path``
    (the file DVC shows); returns the metrics path. The temporary files a killed earlier write of these two left
    go first: the metrics folder is shared, so no stage's cleanup of its own folders reaches them."""
    remove_stale_temps_of(details_path(metrics_path), metrics_path)
    write_json(details_path(metrics_path), stats)
    return write_json(metrics_path, headline)
