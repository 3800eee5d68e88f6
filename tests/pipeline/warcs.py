"""Hand-built WARC/WET records for tests: one gzip member per record, as Common Crawl writes them."""

from __future__ import annotations

import gzip
import uuid


def warc_record(warc_type: str, uri: str | None, block: bytes, content_type: str, n: int = 0) -> bytes:
    headers = [
        "WARC/1.0",
        f"WARC-Type: {warc_type}",
        f"WARC-Record-ID: <urn:uuid:{uuid.UUID(int=n + 1)}>",
        "WARC-Date: 2024-05-01T12:00:00Z",
    ]
    if uri:
        headers.append(f"WARC-Target-URI: {uri}")
    headers += [f"Content-Type: {content_type}", f"Content-Length: {len(block)}"]
    return gzip.compress(("\r\n".join(headers) + "\r\n\r\n").encode() + block + b"\r\n\r\n", mtime=0)


def http_response(body: bytes, content_type: str = "text/html; charset=utf-8", status: str = "200 OK",
                  extra: tuple[str, ...] = ()) -> bytes:
    lines = [f"HTTP/1.1 {status}", f"Content-Type: {content_type}", f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def response(uri: str, body: bytes, n: int = 0, **kw) -> bytes:
    return warc_record("response", uri, http_response(body, **kw), "application/http; msgtype=response", n)


def page(title: str, paragraphs: list[str], charset: str = "utf-8") -> bytes:
    """An HTML page with boilerplate (nav, cookie banner, footer) around an article."""
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    return (
        f"<!DOCTYPE html><html><head><meta charset='{charset}'><title>{title}</title></head><body>"
        "<nav><a href='/'>Home</a> <a href='/news'>News</a> <a href='/about'>About us</a></nav>"
        "<div class='cookie-banner'>We use cookies to improve your experience. Accept all cookies</div>"
        f"<main><article><h1>{title}</h1>{body}</article></main>"
        "<footer>Copyright 2024 Example Media. All rights reserved. Privacy policy. Imprint.</footer>"
        "</body></html>"
    ).encode(charset)


PROSE = [
    "The old lighthouse keeper climbed the spiral stairs every evening at dusk, counting each of the "
    "one hundred and twelve steps while the wind pressed against the narrow windows of the tower.",
    "From the gallery he could see the fishing boats returning to the harbour, their lanterns swaying "
    "above the dark water, and he wrote their names in a leather notebook that his father had kept before him.",
    "In winter the storms came from the north and the sea rose over the rocks, but the lamp never failed, "
    "because he cleaned the great lens each morning and trimmed the wicks with patient, careful hands.",
]
