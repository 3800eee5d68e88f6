"""Bad input, one policy for every data stage (extract, filter, dedup, train-tokenizer, tokenize).

- A bad record (a line that is not a JSON document, a WARC record whose extraction crashed or hung) is skipped,
  counted (``bad_json``; ``extract_*`` for WARC records) and named ``file:line: problem`` in a warning.
- Invalid UTF-8 bytes (and lone surrogates) in a document's text are replaced (U+FFFD, ``?``); the document is
  kept, counted (``invalid_utf8``) and named ``file:line``.
- A file that cannot be read to its end (truncated or corrupt gzip, not a WARC, no permission) or that holds
  nothing is named with its problem (``bad_files``) in the stage's metrics and summary line.
- A stage none of whose input files could be read fails with one line (``error: no readable input: ...``, exit 2).

``InputIssues`` collects what a stage's readers met; its ``stats()`` are empty on clean input, so the outputs and
metrics of good input do not change.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

_WARN_LIMIT = 5  # records named one by one in warnings; the rest are counted
_NAME_LIMIT = 3  # files named in a summary line


@dataclass
class InputIssues:
    """What a stage's readers met: records skipped and repaired (``file:line: problem``), bad files
    (``file: problem``) and, among them, the files of which nothing could be read."""

    skipped: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    bad_files: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)

    def file_ended(self, path: Path | str, records: int, error: str | None = None, empty: str = "no documents"):
        """Record how reading ``path`` ended: ``records`` read, then ``error`` (what stopped it), if any."""
        if error and not records:
            self.bad_files.append(f"{path}: unreadable: {error}")
            self.unreadable.append(str(path))
        elif error:
            self.bad_files.append(f"{path}: cut short after {plural(records, 'record')}: {error}")
        elif not records:
            self.bad_files.append(f"{path}: {empty}")

    def stats(self, with_skipped: bool = False) -> dict:
        """The counts and names for the metrics, only those that are not zero; ``bad_json`` (the records skipped)
        too if ``with_skipped``, for the stages without a ``drops`` count of their own."""
        out = {"bad_json": len(self.skipped) if with_skipped else 0, "invalid_utf8": len(self.repaired),
               "bad_files": self.bad_files, "files_unreadable": len(self.unreadable)}
        return {k: v for k, v in out.items() if v}

    def warn(self, log: logging.Logger) -> None:
        """One warning per skipped or repaired record (the first few) and per bad file."""
        for kind, lines in (("skipped", self.skipped), ("repaired", self.repaired)):
            for line in lines[:_WARN_LIMIT]:
                log.warning("%s %s", kind, line)
            if len(lines) > _WARN_LIMIT:
                log.warning("%s %d more records", kind, len(lines) - _WARN_LIMIT)
        for line in self.bad_files:
            log.warning("bad file %s", line)


def require_readable(stats: dict, n_files: int) -> None:
    """A ValueError naming the bad files when ``stats`` (``InputIssues.stats()``, merged) say that none of the
    ``n_files`` inputs could be read."""
    if n_files and stats.get("files_unreadable", 0) >= n_files:
        raise ValueError(f"no readable input: {named(stats['bad_files'])}")


def merged_stats(per_file: Iterable[dict]) -> dict:
    """``InputIssues.stats()`` of several files (or stages' per-file stats holding them) added up."""
    out: dict = {}
    for stats in per_file:
        for key in ("invalid_utf8", "files_unreadable"):
            if stats.get(key):
                out[key] = out.get(key, 0) + stats[key]
        if stats.get("bad_files"):
            out.setdefault("bad_files", []).extend(stats["bad_files"])
    return out


def named(items: list[str], limit: int = _NAME_LIMIT) -> str:
    """``a; b; c and 2 more``."""
    shown = "; ".join(items[:limit])
    return f"{shown} and {len(items) - limit} more" if len(items) > limit else shown


def summary_note(stats: dict) -> str:
    """What a stage's summary line adds about bad input (nothing on clean input); ``bad_json`` is named here by
    the stages that have no ``drops`` to show it."""
    note = f"; {plural(stats['bad_json'], 'bad line')} skipped" if stats.get("bad_json") else ""
    if stats.get("invalid_utf8"):
        note += f"; {plural(stats['invalid_utf8'], 'document')} with invalid UTF-8 repaired"
    if bad := stats.get("bad_files"):
        note += f"; {plural(len(bad), 'bad file')}: {named(bad)}"
    return note


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
