"""Readers and writers at the edges of the pipeline: atomic files, gzip JSONL, stage metrics.

Every output is written to a temporary file beside its destination and renamed into place, so a
crash or a kill never leaves a half-written file under the final name (the rename is atomic on
POSIX). Gzip output uses ``mtime=0`` so the same records give the same bytes.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path in the destination folder; rename it to ``path`` on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    os.chmod(tmp, 0o644)  # mkstemp makes 0600; outputs are shared data
    tmp_path = Path(tmp)
    try:
        yield tmp_path
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
            raw = open(tmp, "wb")
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


def read_json(path: str | os.PathLike) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write pretty, key-sorted JSON atomically (stable diffs for DVC metrics)."""
    with atomic_open(path, "w") as fh:
        json.dump(obj, fh, indent=2, sort_keys=True, ensure_ascii=False)
        fh.write("\n")
