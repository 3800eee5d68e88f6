"""Kernel tests run on CUDA when present, else under the Triton CPU interpreter.

TRITON_INTERPRET must be set before triton is first imported, hence here at collection time.

``sample_crawl``: one generated crawl, extracted once per test session, with its ground-truth manifest (the
pipeline tests and the tokenizer's native-core test read it)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@dataclass(frozen=True)
class SampleCrawl:
    warc: Path
    manifest: dict[str, dict]  # record id -> manifest entry (the truth about that page)
    documents: Path  # extracted documents (gzip JSONL), `id` = record id
    docs: list[dict]  # the same documents, loaded


@pytest.fixture(scope="session")
def sample_crawl(tmp_path_factory) -> SampleCrawl:
    """600 generated pages (seed 7), extracted with trafilatura: ~15 s once per session."""
    pytest.importorskip("faker")
    pytest.importorskip("trafilatura")
    from pipeline.sample.crawl import generate_sample
    from pipeline.web.extract import ExtractConfig, output_name, run_extract
    from workbench.files import read_jsonl

    root = tmp_path_factory.mktemp("sample_crawl")
    warc, manifest_path = root / "sample.warc.gz", root / "manifest.jsonl"
    generate_sample(warc, manifest_path, pages=600, seed=7)
    run_extract([warc], root / "documents", root / "extract.json", ExtractConfig(extractor="trafilatura", workers=1))
    documents = root / "documents" / output_name(warc)
    manifest = {}
    for line in manifest_path.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        manifest[entry["record_id"]] = entry
    return SampleCrawl(warc, manifest, documents, list(read_jsonl(documents)))
