"""Our filter chain vs datatrove's, like for like: the same pages, the same steps in the same order, one core.

Ours: ``extract_text`` (trafilatura) → the filter chain of ``params.yaml`` (langid, Gopher quality and repetition,
the fastText classifiers whose models exist, PII masking). datatrove (PyPI): its ``Trafilatura`` extractor (our
options) → the counterpart of each of our steps, in our order (bench/benchmarks/filter_datatrove.py):
``LanguageFilter`` on the same local lid.176 file, ``GopherQualityFilter``, ``GopherRepetitionFilter``, one
``FastTextClassifierFilter`` per classifier (our models and thresholds), ``PIIFormatter``. Our Gopher step runs with
``alpha_words: datatrove`` here so that both make the same decisions (``--alpha-words paper`` is params.yaml's default).

Both chains short-circuit: a page dropped by a step reaches no later step (ours breaks out of ``run_steps``;
datatrove's filters do not yield dropped documents to the next generator).

Two measurements, each as interleaved repeats (ours, datatrove, ours, ...) with the median and min–max:
- the whole chain: pages/s from the raw HTML bytes (decoding and extraction included);
- each step alone: docs/s on the same input for both, every page's extracted text (ours; the extraction step
  gets the HTML pages), not only what earlier steps kept.

    python -m bench.benchmarks.filter --web-dir ../shared/data/web --limit 600 [--repeats 3] [--no-record]
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bench.benchmarks.extract import DEFAULT_WEB
from bench.benchmarks.filter_datatrove import datatrove_extractor, datatrove_step, quiet_datatrove
from bench.tools.results import BenchSettings, Result, finish, interleaved, parse_bench
from pipeline.filters import stage as filter_stage
from pipeline.filters.stage import CLASSIFIER_STEPS, FilterConfig, build_steps
from pipeline.runtime.steps import run_steps
from pipeline.web.extract import decode_html, extract_text
from pipeline.web.warc import iter_payloads
from workbench.params import ParamsError, apply_section, setting, usage_error

SETS = {"real": "real pages", "generated": "generated crawl"}


def load_pages(warcs: list[Path], limit: int) -> list:
    pages = []
    for path in warcs:
        for payload in iter_payloads(path, Counter()):
            if payload.kind == "html":
                pages.append(payload)
                if len(pages) >= limit:
                    return pages
    return pages


class Chains:
    """Both chains built once (models loaded on first use), each runnable whole or one step at a time."""

    def __init__(self, steps_cfg: dict):
        from datatrove.data import Document

        quiet_datatrove()
        self.Document = Document
        self.ours = build_steps(FilterConfig(steps=steps_cfg))
        self.theirs = [datatrove_step(s) for s in self.ours]
        self.extractor = datatrove_extractor()

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.ours]

    def _documents(self, docs):
        return (self.Document(text=d["text"], id=d["id"], metadata={}) for d in docs)

    def ours_chain(self, pages) -> list[str]:
        """The ids of the pages our chain keeps."""
        docs = ({"id": p.record_id, "text": text} for p in pages
                if (text := extract_text(p.body, "trafilatura", p.charset)))
        return [d["id"] for d in run_steps(docs, self.ours, {})]

    def datatrove_chain(self, pages) -> list[str]:
        data = (self.Document(text=html, id=p.record_id, metadata={}) for p in pages
                if (html := decode_html(p.body, p.charset)) is not None)
        for step in [self.extractor, *self.theirs]:
            data = step.run(data, rank=0, world_size=1)
        return [d.id for d in data]

    def ours_step(self, i: int, docs) -> int:
        return sum(1 for _ in run_steps((dict(d) for d in docs), [self.ours[i]], {}))

    def datatrove_step(self, i: int, docs) -> int:
        return sum(1 for _ in self.theirs[i].run(self._documents(docs), rank=0, world_size=1))

    def ours_extract(self, pages) -> int:
        return sum(1 for p in pages if extract_text(p.body, "trafilatura", p.charset))

    def datatrove_extract(self, pages) -> int:
        data = (self.Document(text=html, id=p.record_id, metadata={}) for p in pages
                if (html := decode_html(p.body, p.charset)) is not None)
        return sum(1 for d in self.extractor.run(data, rank=0, world_size=1) if d.text)


def rate_result(name: str, metric: str, n: int, ours: list[float], theirs: list[float], unit: str) -> Result:
    """Items per second: the median over repeats, min–max, and the ratio of medians (> 1: ours is faster)."""
    rates, base = [n / t for t in ours], [n / t for t in theirs]
    return Result(name, metric, statistics.median(rates), unit, "datatrove", statistics.median(base),
                  repeats=len(rates), min=min(rates), median=statistics.median(rates), max=max(rates),
                  extra={"datatrove_min": min(base), "datatrove_max": max(base)})


def bench_set(label: str, pages: list, chains: Chains, repeats: int) -> list[Result]:
    """Each step alone (then the whole chain) on ``pages``, ours and datatrove's interleaved."""
    docs = [{"id": p.record_id, "text": t} for p in pages if (t := extract_text(p.body, "trafilatura", p.charset))]
    rows = []
    ours_t, dt_t = interleaved(lambda: chains.ours_extract(pages), lambda: chains.datatrove_extract(pages),
                               repeats, warmup=0)
    rows.append(rate_result(f"{label}/extract", "docs_per_s", len(pages), ours_t, dt_t, "pages/s"))
    for i, name in enumerate(chains.names):
        ours_t, dt_t = interleaved(lambda i=i: chains.ours_step(i, docs), lambda i=i: chains.datatrove_step(i, docs),
                                   repeats)
        rows.append(rate_result(f"{label}/{name}", "docs_per_s", len(docs), ours_t, dt_t, "docs/s"))
    kept = {}
    ours_t, dt_t = interleaved(lambda: kept.__setitem__("ours", chains.ours_chain(pages)),
                               lambda: kept.__setitem__("datatrove", chains.datatrove_chain(pages)), repeats, warmup=0)
    rows.append(rate_result(f"{label}/chain", "pages_per_s", len(pages), ours_t, dt_t, "pages/s"))
    ours_ids, dt_ids = set(kept["ours"]), set(kept["datatrove"])
    rows.append(Result(f"{label}/chain", "kept", len(ours_ids), f"of {len(pages)} pages", "datatrove", len(dt_ids),
                       extra={"only_ours": sorted(ours_ids - dt_ids), "only_datatrove": sorted(dt_ids - ours_ids)}))
    rows.append(Result(f"{label}/chain", "kept_by_one_only", len(ours_ids ^ dt_ids), "pages"))
    return rows


def format_rows(rows: list[Result]) -> str:
    lines = [f"{'step':<24}{'ours':>10}{'min-max':>18}{'datatrove':>11}{'min-max':>18}{'ours/dt':>9}"]
    for r in rows:
        if r.metric == "kept":
            lines.append(f"{r.name:<24}{'kept ' + str(int(r.value)):>10}{'':>18}{int(r.baseline_value):>11}"
                         f"   only ours: {r.extra['only_ours']}, only datatrove: {r.extra['only_datatrove']}")
        if r.baseline_value is None or r.metric == "kept":
            continue
        ours_range = f"{r.min:.1f}-{r.max:.1f}"
        dt_range = f"{r.extra['datatrove_min']:.1f}-{r.extra['datatrove_max']:.1f}"
        lines.append(f"{r.name:<24}{r.value:>10.1f}{ours_range:>18}{r.baseline_value:>11.1f}{dt_range:>18}"
                     f"{r.ratio:>8.2f}x")
    return "\n".join(lines)


def default_steps(params: Path, classifiers: Path, alpha_words: str = "datatrove") -> dict:
    """The chain of params.yaml's ``filter`` section (read as strictly as the filter stage reads it), without
    classifier steps whose model file is missing, and with the Gopher alpha-words rule set to ``alpha_words``."""
    steps = dict(apply_section(filter_stage.main.parser(), "filter", params, extra_keys=("steps",)).get("steps")
                 or FilterConfig().steps)
    for task in CLASSIFIER_STEPS:
        chosen = steps.get(task)
        if not chosen:
            continue
        chosen = dict(chosen) if isinstance(chosen, dict) else {}
        chosen.setdefault("model_path", str(classifiers / f"{task}.bin"))
        steps[task] = chosen if Path(chosen["model_path"]).is_file() else False
    if steps.get("gopher"):
        steps["gopher"] = {**(steps["gopher"] if isinstance(steps["gopher"], dict) else {}), "alpha_words": alpha_words}
    return steps


@dataclass(frozen=True)
class FilterBench(BenchSettings):
    web_dir: Path = setting(DEFAULT_WEB, "folder of real-page WARCs (*.warc.gz)")
    sample: Path = setting(Path("data/raw/sample.warc.gz"), "generated crawl WARC")
    limit: int = setting(600, "pages per input set", at_least=1)
    repeats: int = setting(3, "timed repeats of each side, interleaved", at_least=1)
    params: Path = setting(Path("params.yaml"), "params file with the filter chain")
    classifiers: Path = setting(Path("data/classifiers"), "trained models folder")
    alpha_words: str = setting("datatrove", "our Gopher alpha-words rule (datatrove: the same decisions as "
                                            "datatrove's filter)", choices=("datatrove", "paper"))


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(FilterBench, argv)
    if args.repeats < 3 and args.record:
        usage_error("--repeats: at least 3 for recorded rows (or --no-record)")
    try:
        chains = Chains(default_steps(args.params, args.classifiers, args.alpha_words))
    except ImportError as e:
        print(f"datatrove not installed ({e}): nothing to compare")
        return 0
    except (ParamsError, ValueError) as e:
        usage_error(str(e))
    sets = {"real": sorted(args.web_dir.glob("*.warc.gz")), "generated": [args.sample]}
    rows = []
    for label, warcs in sets.items():
        warcs = [w for w in warcs if w.is_file()]
        if not warcs:
            print(f"## {SETS[label]}: skipped (no WARC files)\n")
            continue
        pages = load_pages(warcs, args.limit)
        mine = bench_set(label, pages, chains, args.repeats)
        print(f"## {SETS[label]} ({len(pages)} pages, one core; docs/s, median of {args.repeats})\n"
              + format_rows(mine) + "\n", flush=True)
        rows += mine
    if not rows:
        return 0
    command = f"python -m bench.benchmarks.filter --limit {args.limit}" + (
        f" --alpha-words {args.alpha_words}" if args.alpha_words != "datatrove" else "")
    return finish("filter", rows, args, command)


if __name__ == "__main__":
    raise SystemExit(main())
