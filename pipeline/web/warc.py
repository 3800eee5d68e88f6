"""Stream payloads out of WARC (HTTP ``response``) and WET (``conversion``) files.

Built on FastWARC (resiliparse). Every record we cannot use is counted with a ``warc_*`` reason
instead of raising: a crawl file is hostile input. Payload bytes are capped (``max_bytes``) while
reading and while undoing HTTP ``Content-Encoding``, so neither a huge record nor a decompression
bomb can exhaust memory. A file whose last gzip member is truncated ends early with a warning; what stopped a
file early, or kept it from being read at all, is also handed to the caller (``problems``).

``warcinfo`` reads a file's leading ``warcinfo`` record (who wrote the file, for which crawl), and
``is_generated_crawl`` tells the project's own generated crawl (``software: lm-workbench pipeline.sample``,
pipeline/sample/pages.py) from real ones, so that models trained on generated text are not applied to real pages.
"""

from __future__ import annotations

import gzip
import io
import logging
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

HTML_TYPES = ("text/html", "application/xhtml+xml")
GENERATED_SOFTWARE = "lm-workbench pipeline.sample"  # the warcinfo `software` of the generated crawl


@dataclass(frozen=True)
class Payload:
    """One page to extract: raw HTML bytes (``kind="html"``) or already-plain WET text."""

    record_id: str
    url: str
    date: str
    kind: str
    body: bytes
    charset: str | None = None


def _bounded_decode(body: bytes, encoding: str, max_bytes: int) -> bytes | None:
    """Undo gzip/deflate transfer compression, returning None past ``max_bytes`` (a bomb)."""
    wbits = 47 if encoding in ("gzip", "x-gzip") else zlib.MAX_WBITS  # 47: auto gzip/zlib header
    try:
        d = zlib.decompressobj(wbits)
        out = d.decompress(body, max_bytes + 1)
    except zlib.error:
        if encoding != "deflate":
            raise
        d = zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate, as some servers send
        out = d.decompress(body, max_bytes + 1)
    return None if len(out) > max_bytes or d.unconsumed_tail else out


def warcinfo(path: str | Path) -> dict[str, str]:
    """The fields (``software``, ``isPartOf``, ...) of the file's first record when it is a ``warcinfo`` record;
    {} when it is not (WET files and wget captures have one; some WARCs do not), or the file is unreadable."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    try:
        with open(path, "rb") as fh:
            for record in ArchiveIterator(fh, parse_http=False):
                if record.record_type != WarcRecordType.warcinfo:
                    return {}
                block = record.reader.read(1 << 16).decode("utf-8", "replace")
                pairs = (line.split(":", 1) for line in block.splitlines() if ":" in line)
                return {key.strip(): value.strip() for key, value in pairs}
    except (OSError, ValueError, zlib.error):
        pass
    return {}


def is_generated_crawl(path: str | Path) -> bool:
    """True for a WARC written by ``python -m pipeline.sample`` (its warcinfo names our generator)."""
    return warcinfo(path).get("software", "").startswith(GENERATED_SOFTWARE)


def iter_payloads(path: str | Path, drops: Counter, max_bytes: int = 4 << 20,
                  problems: list[str] | None = None) -> Iterator[Payload]:
    """Yield the usable payloads of one WARC/WET file; count every skipped record in ``drops``. What stopped the
    file early (or kept it from being read at all: no access, empty, not a WARC) goes to ``problems``."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    problems = problems if problems is not None else []
    types = WarcRecordType.response | WarcRecordType.conversion
    seen = 0
    try:
        raw = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError as e:
        problems.append(f"{type(e).__name__}: {e}")
        log.warning("%s: cannot open: %s", path, e)
        return
    with raw:
        gzipped = raw.read(2) == b"\x1f\x8b"
        raw.seek(0)
        fh = _CutAwareGzip(raw) if gzipped else raw
        records = ArchiveIterator(fh, record_types=types, parse_http=True, auto_decode="none", stream_detect=False)
        try:
            for record in records:
                seen += 1
                payload = _payload(record, max_bytes)
                if isinstance(payload, Payload):
                    yield payload
                else:
                    drops[payload] += 1
        except (OSError, zlib.error) as e:  # corrupt gzip data or an unparseable record
            drops["warc_corrupt_file"] += 1
            problems += (not seen and _not_a_warc(path)) or [f"corrupt record {seen + 1} ({e})"]
            log.warning("%s: stopped reading at a corrupt record: %s", path, e)
        if gzipped and fh.cut:
            if not drops["warc_truncated"]:
                drops["warc_truncated"] += 1
            problems.append(f"truncated gzip at record {seen}")
            log.warning("%s: truncated gzip member; the file ends there", path)
    if not seen and not problems:
        problems += _not_a_warc(path)


def _not_a_warc(path: str | Path) -> list[str]:
    """Why a file that gave no record at all is not a WARC/WET file (none when it is one: no response records)."""
    with open(path, "rb") as raw:
        gzipped = raw.read(2) == b"\x1f\x8b"
        raw.seek(0)
        try:
            head = (gzip.GzipFile(fileobj=raw) if gzipped else raw).read(5)
        except (OSError, EOFError, zlib.error) as e:
            return [f"cannot decompress ({e})"]
    if not head:
        return ["empty file"]
    return [] if head == b"WARC/" else [f"not a WARC/WET file (starts with {head!r})"]


class _CutAwareGzip(io.RawIOBase):
    """A gzip stream that ends cleanly at a cut member and remembers it (``cut``).

    FastWARC's own inflater hides a cut member; Python's raises EOFError, which would also lose
    the records already buffered. Ending the stream instead lets the cut record show up short.
    """

    def __init__(self, raw):
        self._gz = gzip.GzipFile(fileobj=raw, mode="rb")
        self.cut = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self.cut:
            return 0
        try:  # read1: one inflate step, so a cut found later cannot lose bytes already inflated
            data = self._gz.read1(len(buffer))
            buffer[: len(data)] = data
            return len(data)
        except EOFError:
            self.cut = True
            return 0

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._gz.tell()

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._gz.seek(offset, whence)  # FastWARC only asks for the current position


def _payload(record, max_bytes: int) -> Payload | str:
    """The record's payload, or the reason it is skipped."""
    from fastwarc.warc import WarcRecordType

    record_id, url, date = (record.headers.get(k) or "" for k in ("WARC-Record-ID", "WARC-Target-URI", "WARC-Date"))
    body = record.reader.read(max_bytes + 1)
    if len(body) > max_bytes:
        return "warc_too_large"
    # After HTTP parsing, content_length is what is left of the block: a short read means the
    # file ended early (a truncated gzip member).
    if len(body) < record.content_length:
        return "warc_truncated"

    if record.record_type == WarcRecordType.conversion:
        return Payload(record_id, url, date, "text", body, "utf-8") if body.strip() else "warc_empty"

    if not record.is_http:
        return "warc_not_http"
    http = record.http_headers
    if http.status_code != 200:
        return "warc_http_status"
    content_type = (record.http_content_type or "").lower()
    if content_type and content_type not in HTML_TYPES:
        return "warc_not_html"
    encoding = (http.get("Content-Encoding") or "identity").strip().lower()
    if encoding in ("gzip", "x-gzip", "deflate"):
        try:
            body = _bounded_decode(body, encoding, max_bytes)
        except zlib.error:
            return "warc_bad_content_encoding"
        if body is None:
            return "warc_too_large"
    elif encoding not in ("identity", ""):
        return "warc_bad_content_encoding"
    if not body.strip():
        return "warc_empty"
    return Payload(record_id, url, date, "html", body, record.http_charset)
