"""Every command of the project by what it is for: the CLI that reads each params.yaml section, and the packages whose
modules run as ``python -m`` (the lower packages know none of this: nothing of ours is imported by name from below)."""

from __future__ import annotations

# params.yaml section -> the CLI that reads it (workbench.params.SECTIONS names the same sections)
SECTION_CLIS = {
    "sample": "pipeline.sample.crawl", "extract": "pipeline.web.extract", "filter": "pipeline.filters.stage",
    "classify": "pipeline.classify", "dedup": "pipeline.dedup.stage", "report": "pipeline.report",
    "tokenizer": "tokenizer.train", "shards": "tokenizer.shards", "train": "model.train",
    "sweep": "scaling.sweep", "scaling_fit": "scaling.fit",
    "alignment": "alignment.sft",  # what sft, dpo, grpo, rft and alignment_report inherit (SECTION_BASES)
    "sft": "alignment.sft", "dpo": "alignment.dpo",
    "grpo": "alignment.grpo", "rft": "alignment.rft", "alignment_report": "alignment.report",
    "leaderboard": "leaderboard.report",
}
# the packages of the user-facing CLIs (docs/cli.md), then bench's too (the flag check covers every CLI)
USER_PACKAGES = ("pipeline", "tokenizer", "model", "scaling", "alignment", "leaderboard", "workbench", "lmw_kernels",
                 "lmw_cli")
ALL_PACKAGES = (*USER_PACKAGES, "bench")
NOT_CLIS = {"tokenizer.csrc.gen_unicode_classes", "pipeline.__main__"}  # a code generator; the dispatcher
