"""WARC/WET reading: record types, drops with reasons, byte caps, decompression bombs, truncation."""

import gzip
import zlib
from collections import Counter

from pipeline.web.warc import iter_payloads
from tests.pipeline.warcs import PROSE, page, response, warc_record


def _write(tmp_path, *records, name="x.warc.gz"):
    path = tmp_path / name
    path.write_bytes(b"".join(records))
    return path


def test_only_html_responses_are_yielded_and_the_rest_counted(tmp_path):
    html = page("Lighthouse", PROSE)
    path = _write(
        tmp_path,
        warc_record("warcinfo", None, b"software: test\r\n", "application/warc-fields", 0),
        warc_record("request", "http://a.example/", b"GET / HTTP/1.1\r\n\r\n", "application/http; msgtype=request", 1),
        response("http://a.example/", html, 2),
        response("http://b.example/x.pdf", b"%PDF-1.4 binary", 3, content_type="application/pdf"),
        response("http://c.example/gone", b"<html>gone</html>", 4, status="404 Not Found"),
        response("http://d.example/empty", b"   ", 5),
        warc_record("metadata", "http://a.example/", b"fetchTimeMs: 12\r\n", "application/warc-fields", 6),
    )
    drops = Counter()
    payloads = list(iter_payloads(path, drops))
    assert [p.url for p in payloads] == ["http://a.example/"]
    assert payloads[0].body == html
    assert payloads[0].charset == "utf-8"
    assert payloads[0].record_id == "<urn:uuid:00000000-0000-0000-0000-000000000003>"
    assert drops == Counter(warc_not_html=1, warc_http_status=1, warc_empty=1)


def test_wet_conversion_records_are_plain_text(tmp_path):
    path = _write(tmp_path, warc_record("conversion", "http://a.example/", PROSE[0].encode(), "text/plain", 1),
                  name="x.warc.wet.gz")
    (payload,) = iter_payloads(path, Counter())
    assert payload.kind == "text" and payload.body.decode() == PROSE[0]


def test_byte_cap_drops_large_records(tmp_path):
    path = _write(tmp_path, response("http://big.example/", page("Big", PROSE * 200), 1),
                  response("http://small.example/", page("Small", PROSE), 2))
    drops = Counter()
    assert [p.url for p in iter_payloads(path, drops, max_bytes=5000)] == ["http://small.example/"]
    assert drops == Counter(warc_too_large=1)


def test_content_encoding_is_undone_and_bombs_are_stopped(tmp_path):
    html = page("Zipped", PROSE)
    bomb = gzip.compress(b"<html>" + b" " * 50_000_000 + b"</html>")  # ~50 KB that expands to 50 MB
    path = _write(
        tmp_path,
        response("http://gz.example/", gzip.compress(html), 1, extra=("Content-Encoding: gzip",)),
        response("http://deflate.example/", zlib.compress(html), 2, extra=("Content-Encoding: deflate",)),
        response("http://bomb.example/", bomb, 3, extra=("Content-Encoding: gzip",)),
        response("http://br.example/", b"\x8b\x00", 4, extra=("Content-Encoding: br",)),
        response("http://bad.example/", b"not gzip at all", 5, extra=("Content-Encoding: gzip",)),
    )
    drops = Counter()
    payloads = list(iter_payloads(path, drops, max_bytes=1 << 20))
    assert [p.body for p in payloads] == [html, html]
    assert drops == Counter(warc_too_large=1, warc_bad_content_encoding=2)


def test_truncated_file_ends_with_a_warning(tmp_path, caplog):
    good = response("http://a.example/", page("A", PROSE), 1)
    cut = response("http://b.example/", page("B", PROSE * 20), 2)
    path = _write(tmp_path, good, cut[: len(cut) // 2])
    drops = Counter()
    payloads = list(iter_payloads(path, drops))
    assert [p.url for p in payloads] == ["http://a.example/"]
    assert sum(drops.values()) == 1
    assert str(path) in caplog.text


def test_garbage_file_does_not_raise(tmp_path):
    path = _write(tmp_path, b"this is not a warc file at all\n" * 100)
    drops = Counter()
    assert list(iter_payloads(path, drops)) == []
