"""Builds the optional compiled BPE core (``tokenizer._bpe_native`` from ``tokenizer/csrc``); the project's metadata is
in pyproject.toml. Without a C compiler the build is skipped (``optional=True``) and ``tokenizer.native`` falls back
to the pure-Python reference. The sources' SHA-256 is compiled in, so a stale build is detected and not used."""

import hashlib
from pathlib import Path

from setuptools import Extension, setup

CSRC = "tokenizer/csrc/"
SOURCES = [CSRC + name for name in (
    "bpe_native.c", "bpe_train.c", "bpe_train.h", "pretokenizer.h", "unicode_classes.h")]


def source_sha256() -> str:
    digest = hashlib.sha256()
    for path in SOURCES:
        digest.update((Path(__file__).parent / path).read_bytes())
    return digest.hexdigest()


setup(
    ext_modules=[
        Extension(
            "tokenizer._bpe_native",
            sources=SOURCES[:2],
            depends=SOURCES[2:],
            define_macros=[("LMW_SOURCE_SHA256", f'"{source_sha256()}"')],
            extra_compile_args=["-O3", "-std=c11"],
            optional=True,
        )
    ]
)
