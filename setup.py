"""Builds the optional compiled cores: the BPE core (``tokenizer._bpe_native`` from ``tokenizer/csrc``) and the
distilled extractor's block features and trees (``pipeline.web._blocks_native`` from ``pipeline/web/csrc``); the
project's metadata is in pyproject.toml. Without a C compiler a build is skipped (``optional=True``) and the code
falls back to its pure-Python reference (``workbench.native``). The sources' SHA-256 is compiled in, so a stale build
is detected and not used."""

import hashlib
from pathlib import Path

from setuptools import Extension, setup


def source_sha256(sources: list[str]) -> str:
    digest = hashlib.sha256()
    for path in sources:
        digest.update((Path(__file__).parent / path).read_bytes())
    return digest.hexdigest()


def extension(name: str, csrc: str, compiled: list[str], headers: list[str], *flags: str) -> Extension:
    sources = [csrc + f for f in compiled + headers]  # the order workbench.native hashes them in
    return Extension(name, sources=sources[:len(compiled)], depends=sources[len(compiled):],
                     define_macros=[("LMW_SOURCE_SHA256", f'"{source_sha256(sources)}"')],
                     extra_compile_args=["-O3", "-std=c11", *flags], optional=True)


setup(
    ext_modules=[
        extension("tokenizer._bpe_native", "tokenizer/csrc/", ["bpe_native.c", "bpe_train.c"],
                  ["bpe_train.h", "pretokenizer.h", "unicode_classes.h"]),
        # no fused multiply-add: the features must equal the NumPy reference's to the last bit
        extension("pipeline.web._blocks_native", "pipeline/web/csrc/", ["blocks_native.c"], [], "-ffp-contract=off"),
    ]
)
