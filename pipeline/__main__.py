"""``python -m pipeline <step>``: extract, filter, dedup, train-classifier, report, train-tokenizer, tokenize.

A thin dispatcher: each step is its own command (``python -m pipeline.web.extract`` ...), which reads its defaults
from a section of ``params.yaml`` (``--params`` picks another file) and lets a flag override every default.
``--params`` and ``-v`` given before the step name are passed on to it. Exit 0 on success, 2 on bad usage or input.
"""

from __future__ import annotations

import sys

from pipeline import classify, report
from pipeline.dedup import stage as dedup
from pipeline.filters import stage as filter_step
from pipeline.web import extract
from tokenizer import shards
from tokenizer import train as train_tokenizer
from workbench.params import invoked_as, parse_dispatch

# step name -> (its main, one line of help)
STEPS = {
    "extract": (extract.main, "WARC/WET files -> documents (gzip JSONL): pipeline.web.extract"),
    "filter": (filter_step.main,
               "documents -> kept + rejected (langid, Gopher, classifiers, PII): pipeline.filters.stage"),
    "dedup": (dedup.main, "exact + MinHash LSH near-duplicate removal across all documents: pipeline.dedup.stage"),
    "train-classifier": (classify.main, "train a fastText quality/toxicity/nsfw classifier: pipeline.classify"),
    "report": (report.main, "data funnel CSV + PNG from the stage metrics: pipeline.report"),
    "train-tokenizer": (train_tokenizer.main, "train a byte-level BPE on documents: tokenizer.train"),
    "tokenize": (shards.main, "documents -> train.bin/val.bin token shards: tokenizer.shards"),
}


def main(argv: list[str] | None = None) -> int:
    step, args = parse_dispatch(sys.argv[1:] if argv is None else argv, "python -m pipeline",
                                __doc__.split("\n\n")[0], {name: text for name, (_, text) in STEPS.items()})
    token = invoked_as.set(f"python -m pipeline {step}")
    try:
        return STEPS[step][0](args)
    finally:
        invoked_as.reset(token)


if __name__ == "__main__":
    raise SystemExit(main())
