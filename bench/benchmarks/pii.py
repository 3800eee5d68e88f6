"""Phone masks on real pages: how many numbers ``pipeline.filters.pii`` masks as phones, each with its context, to
judge.

The pages of ``--web-dir`` (default ../shared/data/web/*.warc.gz) go through the extract stage; every phone mask
is listed with 30 characters either side. ``--baseline FILE`` counts the masks of another ``pii.py`` (an older
revision) on the same documents, e.g. ``git show main:pipeline/filters/pii.py > /tmp/pii_main.py``.

    python -m bench.benchmarks.pii [--web-dir ../shared/data/web] [--baseline /tmp/pii_main.py | --baseline-rev 39a6c80]
                        [--show 40]

The counts go to benchmarks/results/pii.jsonl (``--no-record``: print only), for ``python -m bench.tools.report``.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bench.tools.real_pages import RealPagesSettings, real_documents, real_warcs
from bench.tools.results import ROOT, Result, finish, parse_bench
from pipeline.filters.pii import mask_phone_numbers, phone_number_spans
from workbench.params import setting, usage_error


def phone_masks(docs: list[dict], context: int = 30) -> list[tuple[str, str, str]]:
    """(url, masked number, the number in its context) for every phone mask in ``docs``."""
    out = []
    for doc in docs:
        text = doc["text"]
        for start, end in phone_number_spans(text):
            around = f"{text[max(0, start - context):start]}[{text[start:end]}]{text[end:end + context]}"
            out.append((doc["url"], text[start:end], " ".join(around.split())))
    return out


def load_masker(path: Path):
    """``mask_phone_numbers`` of the ``pii.py`` at ``path``."""
    spec = importlib.util.spec_from_file_location("pii_baseline", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module.mask_phone_numbers


@dataclass(frozen=True)
class PiiBench(RealPagesSettings):
    baseline: Path | None = setting(None, "another pii.py whose phone masks to count on the same pages", exists=True)
    baseline_rev: str | None = setting(None, "the same for pipeline/filters/pii.py at this git revision "
                                             "(git show REV:...)")
    show: int = setting(1000, "list at most this many masks", at_least=0)


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(PiiBench, argv)
    warcs = real_warcs(args)
    baseline = args.baseline
    with tempfile.TemporaryDirectory() as tmp:
        if args.baseline_rev:
            shown = subprocess.run(["git", "show", f"{args.baseline_rev}:pipeline/filters/pii.py"], cwd=ROOT,
                                   capture_output=True, text=True)
            if shown.returncode:
                usage_error(f"--baseline-rev {args.baseline_rev}: {shown.stderr.strip()}")
            baseline = Path(tmp) / "pii_baseline.py"
            baseline.write_text(shown.stdout, encoding="utf-8")
        docs = real_documents(warcs, args.cache or Path(tmp), args.workers)
        before = load_masker(baseline) if baseline else None
    masks = phone_masks(docs)
    assert len(masks) == sum(mask_phone_numbers(d["text"])[1] for d in docs)
    pages = Counter(url for url, _, _ in masks)
    print(f"{len(docs)} pages: {len(masks)} phone masks on {len(pages)} pages")
    base_name = base_count = None
    if before is not None:
        base_name = f"pii.py@{args.baseline_rev}" if args.baseline_rev else f"pii.py from {args.baseline}"
        base_count = sum(before(d["text"])[1] for d in docs)
        print(f"baseline {base_name}: {base_count} phone masks")
    for url, _, around in masks[:args.show]:
        print(f"  {url[:60]:<60}  {around}")
    command = "python -m bench.benchmarks.pii" + (f" --baseline-rev {args.baseline_rev}" if args.baseline_rev else "")
    rows = [Result("ours", "phone_masks", len(masks), f"on {len(docs)} pages", base_name, base_count),
            Result("ours", "pages_with_phone_masks", len(pages), f"of {len(docs)} pages")]
    return finish("pii", rows, args, command)


if __name__ == "__main__":
    raise SystemExit(main())
