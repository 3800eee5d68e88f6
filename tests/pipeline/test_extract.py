"""Text extraction: decoding, main text vs boilerplate, time limits, the stage end to end."""

import json
import os
import signal
import time
from pathlib import Path

import pytest

import pipeline.web.extract as extract
from pipeline.web.extract import ExtractConfig, decode_html, extract_text, run_extract
from pipeline.web.warc import Payload
from tests.pipeline.warcs import PROSE, page, response
from workbench.files import details_path, read_jsonl

SHARED_WEB = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "web"
RUSSIAN = "Старый смотритель маяка каждый вечер поднимался по винтовой лестнице и считал ступени."
JAPANESE = "灯台守は毎晩らせん階段を上り、百十二段の階段を数えながら海を見下ろしていました。"


@pytest.mark.parametrize("extractor", ["trafilatura", "resiliparse", "cascade"])
def test_extract_text_keeps_article_and_drops_boilerplate(extractor):
    text = extract_text(page("The Lighthouse Keeper", PROSE), extractor)
    assert PROSE[0] in text and PROSE[2] in text
    assert "We use cookies" not in text
    assert "All rights reserved" not in text


@pytest.mark.parametrize("charset,text", [("windows-1251", RUSSIAN), ("koi8-r", RUSSIAN),
                                          ("shift_jis", JAPANESE), ("euc-jp", JAPANESE)])
def test_decode_with_declared_or_detected_charset(charset, text):
    html = f"<html><body><p>{text * 3}</p></body></html>".encode(charset)
    assert decode_html(html, charset) == html.decode(charset)
    assert text in decode_html(html, None)  # detection alone


def test_utf8_is_tried_first_even_if_declared_otherwise():
    html = f"<p>{RUSSIAN}</p>".encode()
    assert decode_html(html, "iso-8859-1") == html.decode("utf-8")


def test_undecodable_bytes_give_none():
    assert extract_text(bytes(range(256)) * 200) is None
    assert extract_text(b"") is None
    assert extract_text(b"<html><body></body></html>") is None


def _payload(body: bytes, kind="html") -> Payload:
    return Payload("<urn:uuid:1>", "http://a.example/", "2024-05-01T12:00:00Z", kind, body, None)


def test_slow_extraction_hits_the_time_limit(monkeypatch):
    monkeypatch.setattr(extract, "main_text", lambda html, extractor: time.sleep(2))
    extract._init_worker(ExtractConfig(timeout_s=0.05))
    start = time.perf_counter()
    assert extract._extract_one(_payload(page("Slow", PROSE))) == "extract_timeout"
    assert time.perf_counter() - start < 1.0


def test_extractor_exception_is_counted_not_raised(monkeypatch):
    def boom(html, extractor):
        raise RecursionError("pathological nesting")

    monkeypatch.setattr(extract, "main_text", boom)
    extract._init_worker(ExtractConfig())
    assert extract._extract_one(_payload(page("Boom", PROSE))) == "extract_error"


def _crawl(tmp_path) -> Path:
    records = [response(f"http://site{i}.example/", page(f"Page {i}", PROSE[i % 3:] + [f"Page number {i}."]), i)
               for i in range(12)]
    records.append(response("http://bad.example/", bytes(range(256)) * 100, 99, content_type="text/html"))
    path = tmp_path / "crawl.warc.gz"
    path.write_bytes(b"".join(records))
    return path


def test_run_extract_writes_documents_metrics_and_is_idempotent(tmp_path):
    warc = _crawl(tmp_path)
    out, metrics_path = tmp_path / "docs", tmp_path / "metrics" / "extract.json"
    metrics = run_extract([warc], out, metrics_path, ExtractConfig(workers=2))
    docs = list(read_jsonl(out / "crawl.jsonl.gz"))
    assert [d["url"] for d in docs] == [f"http://site{i}.example/" for i in range(12)]
    assert all(d["text"].endswith(f"Page number {i}.") for i, d in enumerate(docs))
    assert set(docs[0]) >= {"id", "url", "text"}
    assert metrics["records_read"] == 13 and metrics["docs_out"] == 12
    assert metrics["drops"] == {"extract_undecodable": 1}
    assert json.loads(details_path(metrics_path).read_text()) == metrics
    before = (out / "crawl.jsonl.gz").read_bytes()
    serial = run_extract([warc], tmp_path / "serial", tmp_path / "m.json", ExtractConfig(workers=1))
    assert (tmp_path / "serial" / "crawl.jsonl.gz").read_bytes() == before
    mtime = (out / "crawl.jsonl.gz").stat().st_mtime_ns
    assert run_extract([warc], out, metrics_path, ExtractConfig(workers=2))["docs_out"] == serial["docs_out"]
    assert (out / "crawl.jsonl.gz").stat().st_mtime_ns == mtime  # resumed: not redone


def test_missing_input_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.warc.gz"):
        run_extract([tmp_path / "nope.warc.gz"], tmp_path, tmp_path / "m.json", ExtractConfig())


def test_config_validation_names_the_field():
    with pytest.raises(ValueError, match="extract.extractor"):
        ExtractConfig(extractor="magic")
    with pytest.raises(ValueError, match="extract.workers"):
        ExtractConfig(workers=0)


@pytest.mark.skipif(not SHARED_WEB.is_dir(), reason="../shared/data/web not present")
@pytest.mark.parametrize("extractor", ["trafilatura", "resiliparse", "cascade"])
def test_every_shared_warc_extracts_without_crashing(tmp_path, extractor):
    inputs = sorted(SHARED_WEB.glob("*.warc.gz"))
    m = run_extract(inputs, tmp_path / "docs", tmp_path / "m.json", ExtractConfig(extractor=extractor, workers=2))
    assert m["files"] == len(inputs) == 11
    assert m["records_read"] == 998
    assert m["docs_out"] > 900
    assert not {k for k in m["drops"] if k in ("extract_error", "extract_timeout", "warc_corrupt_file")}


def test_many_inputs_are_spread_over_workers_by_file(tmp_path):
    inputs = []
    for k in range(3):
        path = tmp_path / f"part-{k}.warc.gz"
        path.write_bytes(b"".join(response(f"http://s{k}.example/{i}", page(f"P{k}.{i}", PROSE), i) for i in range(4)))
        inputs.append(path)
    serial = run_extract(inputs, tmp_path / "serial", tmp_path / "s.json", ExtractConfig(workers=1))
    parallel = run_extract(inputs, tmp_path / "parallel", tmp_path / "p.json", ExtractConfig(workers=2))
    assert serial["docs_out"] == parallel["docs_out"] == 12 and parallel["files"] == 3
    for k in range(3):
        name = f"part-{k}.jsonl.gz"
        assert (tmp_path / "serial" / name).read_bytes() == (tmp_path / "parallel" / name).read_bytes()


# -- workers that die or hang ------------------------------------------------------------------------------------
def _misbehaving_on(marker: str, how: str):
    """main_text, except on the page holding ``marker``: SIGKILL its own process, or hang where SIGALRM cannot
    reach it (blocked, as in C code that never returns to the interpreter)."""
    real = extract.main_text

    def fake(html, extractor):
        if marker in html:
            if how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
            time.sleep(60)
        return real(html, extractor)

    return fake


@pytest.mark.timeout(120, method="thread")  # a regression hangs: fail instead
@pytest.mark.parametrize("how,reason,workers", [("kill", "extract_crash", 1), ("kill", "extract_crash", 2),
                                                ("hang", "extract_timeout", 2)])
def test_a_killed_or_hung_worker_costs_one_record_and_the_stage_completes(tmp_path, monkeypatch, caplog, how,
                                                                          reason, workers):
    warc = _crawl(tmp_path)
    cfg = ExtractConfig(workers=workers, timeout_s=1.0)  # a hung worker is killed at kill_after_s(1.0) = 2 s
    clean = run_extract([warc], tmp_path / "clean", tmp_path / "clean.json", cfg)
    monkeypatch.setattr(extract, "main_text", _misbehaving_on("Page number 5.", how))
    start = time.perf_counter()
    m = run_extract([warc], tmp_path / "out", tmp_path / "m.json", cfg)
    assert time.perf_counter() - start < 30  # not the 60 s hang
    assert m["drops"] == {reason: 1, "extract_undecodable": 1}
    assert m["docs_out"] == clean["docs_out"] - 1 and m["records_read"] == clean["records_read"]
    expected = [d for d in read_jsonl(tmp_path / "clean" / "crawl.jsonl.gz") if d["url"] != "http://site5.example/"]
    assert list(read_jsonl(tmp_path / "out" / "crawl.jsonl.gz")) == expected
    assert any("crawl.warc.gz: record <urn:uuid:" in r.message and "http://site5.example/" in r.message
               and reason in r.message for r in caplog.records)
