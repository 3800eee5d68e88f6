"""What was tried on the way to the ``cascade`` extractor, re-measured as results rows.

docs/benchmarks/pipeline.md (its decision log) explains each step; this prints and records the figures it quotes:

* ``sizes``: the evaluation pages (``bench.benchmarks.extract.load_eval_pages``) and the pages of each fixed half.
* ``profile``: cProfile of ``--extractor trafilatura`` (our decoding, then ``trafilatura.extract`` with our options)
  over every evaluation page: the share of the profiled time spent inside each named function (cumulative, so the
  parts nest: the XPath pruning runs inside the main extractor, among others), and the number of justext calls.
* ``tried``: on the validation half only (where the choices were made), every page through each variant in turn
  (order rotating page by page), timed per page; then, from those per-page texts and times, without running
  anything again: the pre-pass cost, the quality of each variant, a grid search of the cascade's fallback rule (the
  cheapest rule reaching the issue's kept bar), a Resiliparse-first oracle and a cheap agreement rule. "Simulated"
  speed-ups are full trafilatura's summed seconds over the summed seconds the rule would spend on the same pages.

    python -m bench.experiments.extract_explore [--only sizes profile tried] [--web-dir ../shared/data/web]
"""

from __future__ import annotations

import cProfile
import logging
import pstats
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.benchmarks.extract import DEFAULT_WEB, HALVES, _trafilatura, eval_half, load_eval_pages
from bench.tools.results import BenchSettings, Result, finish, parse_bench
from pipeline.web.extract import decode_html, extract_text, main_text
from pipeline.web.extract_cascade import MIN_CHARS, MIN_PAGE_SHARE, prune_html
from workbench.params import setting, usage_error

AREA = "extract_explore"
KEPT_BAR = 0.933  # the quality bar for kept content (and dropped >= 0.900)
PARTS = ("sizes", "profile", "tried")
# (file the function is defined in, function name) -> the part of trafilatura's time it stands for
PROFILED = {
    ("trafilatura/external.py", "try_readability"): "readability comparison",
    ("trafilatura/external.py", "try_justext"): "justext",
    ("trafilatura/main_extractor.py", "extract_content"): "main extractor",
    ("trafilatura/htmlprocessing.py", "prune_unwanted_nodes"): "XPath pruning (prune_unwanted_nodes)",
    ("trafilatura/baseline.py", "baseline"): "baseline text dump",
    ("trafilatura/baseline.py", "html2txt"): "html2txt page text (escalation)",
    ("copy.py", "copy"): "tree copies (copy.copy)",
    ("trafilatura/utils.py", "load_html"): "lxml parsing (load_html)",
    ("lxml/html/__init__.py", "lookup"): "lxml.html element-class lookup",
    ("pipeline/web/extract.py", "decode_html"): "our decoding",
}
LENGTHS = range(0, 3001, 100)  # the cascade grid: minimum characters of the fast text ...
SHARES = [i / 20 for i in range(15)]  # ... and minimum share of the page's text (0 to 0.7)
TOLERANCES = (0.1, 0.25, 0.5)  # agreement rule: Resiliparse where its length is within this share of the fast text's


def size_rows(pages, read: int) -> list[Result]:
    halves = [eval_half(expect["url"]) for _, _, expect in pages]
    unit = f"pages with an evaluation entry, of {read} read"
    return [Result("evaluation pages", "pages", len(pages), unit)] + [
        Result("evaluation pages", f"{h}_pages", halves.count(h), unit) for h in HALVES]


def profile_shares(stats: pstats.Stats) -> tuple[float, dict[str, float], int]:
    """(total profiled seconds, cumulative seconds per ``PROFILED`` part, justext calls) from ``stats``."""
    total = stats.total_tt
    parts = dict.fromkeys(PROFILED.values(), 0.0)
    justext_calls = 0
    for (filename, _, func), (_, ncalls, _, cumtime, _) in stats.stats.items():
        for (suffix, name), part in PROFILED.items():
            if func == name and filename.replace("\\", "/").endswith(suffix):
                parts[part] += cumtime
                justext_calls += ncalls if part == "justext" else 0
    return total, parts, justext_calls


def profile_rows(pages) -> list[Result]:
    profiler = cProfile.Profile()
    profiler.enable()
    for html, charset, _ in pages:
        extract_text(html, "trafilatura", charset)
    profiler.disable()
    total, parts, justext_calls = profile_shares(pstats.Stats(profiler))
    unit = f"share of the profiled time, {len(pages)} pages"
    rows = [Result(part, "time_share", round(seconds / total, 3), unit) for part, seconds in parts.items()]
    rows.append(Result("justext", "calls", justext_calls, f"on {len(pages)} pages"))
    # fast=True skips readability and justext: removing their whole share bounds its speed-up
    skipped = parts["readability comparison"] + parts["justext"]
    rows.append(Result("fast=True, at most", "speedup_bound", round(total / (total - skipped), 2),
                       "x, profiled time / (time - readability - justext)"))
    return rows


@dataclass
class PageRun:
    """One validation page through every variant: seconds, snippets kept / dropped, text lengths."""
    n_with: int
    n_without: int
    seconds: dict[str, float] = field(default_factory=dict)
    kept: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)
    length: dict[str, int] = field(default_factory=dict)
    page_chars: int = 0  # visible text of the page, from the pre-pass's lexbor parse


def _reserialized(html: str) -> str:
    """The page through lexbor with only scripts and styles removed: what re-serializing alone does."""
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(html)
    tree.strip_tags(["script", "style"])
    return tree.html or ""


def run_page(html: str, expect: dict, shift: int) -> PageRun:
    """Every variant on one page, the order rotated by ``shift``; the pre-pass and trafilatura on its output run as
    one turn, timed apart."""
    run = PageRun(len(expect["with"]), len(expect["without"]))
    pruned: list[str] = []

    def prepass():
        page, run.page_chars = prune_html(html)
        pruned.append(page)
        return ""

    steps = {
        "full": [("full", lambda: main_text(html, "trafilatura"))],
        "fast": [("fast", lambda: _trafilatura(html, fast=True))],
        "resiliparse": [("resiliparse", lambda: main_text(html, "resiliparse"))],
        "reserialized+fast": [("reserialized+fast", lambda: _trafilatura(_reserialized(html), fast=True))],
        "prepass": [("prepass", prepass), ("prepass+fast", lambda: _trafilatura(pruned[0], fast=True))],
    }
    turns = list(steps)
    shift %= len(turns)
    for turn in turns[shift:] + turns[:shift]:
        for name, fn in steps[turn]:
            start = time.perf_counter()
            text = (fn() or "").strip()
            run.seconds[name] = time.perf_counter() - start
            run.kept[name] = sum(s in text for s in expect["with"])
            run.dropped[name] = sum(s not in text for s in expect["without"])
            run.length[name] = len(text)
    return run


def _quality(runs: list[PageRun], choice) -> tuple[float, float]:
    """(kept, dropped) shares when page ``i`` takes the text of variant ``choice(run)``."""
    kept = sum(r.kept[choice(r)] for r in runs) / max(sum(r.n_with for r in runs), 1)
    dropped = sum(r.dropped[choice(r)] for r in runs) / max(sum(r.n_without for r in runs), 1)
    return kept, dropped


def cascade_rule(runs: list[PageRun], min_chars: int, share: float, denominator: str) -> dict:
    """The cascade with this fallback rule, simulated on ``runs``: routed pages, kept, dropped, speed-up.
    ``denominator``: "page" (the pre-pass's visible text, free) or "resiliparse" (its text: a second parse)."""
    def routed(r: PageRun) -> bool:
        whole = r.page_chars if denominator == "page" else r.length["resiliparse"]
        return r.length["prepass+fast"] < min_chars or r.length["prepass+fast"] < share * whole

    cost = sum(r.seconds["prepass"] + r.seconds["prepass+fast"] + r.seconds["full"] * routed(r)
               + r.seconds["resiliparse"] * (denominator == "resiliparse") for r in runs)
    kept, dropped = _quality(runs, lambda r: "full" if routed(r) else "prepass+fast")
    return {"min_chars": min_chars, "share": share, "routed": sum(map(routed, runs)), "kept": kept,
            "dropped": dropped, "speedup": sum(r.seconds["full"] for r in runs) / cost}


def cheapest_rule(runs: list[PageRun], denominator: str) -> dict:
    """The fastest rule of the grid whose kept reaches ``KEPT_BAR`` (ties: fewer routed pages)."""
    rules = [cascade_rule(runs, n, s, denominator) for n in LENGTHS for s in SHARES]
    return max((r for r in rules if r["kept"] >= KEPT_BAR), key=lambda r: (r["speedup"], -r["routed"]))


def resiliparse_first(runs: list[PageRun], use) -> dict:
    """Resiliparse on every page, full trafilatura where ``use(run)`` is false: kept, dropped, speed-up, pages."""
    cost = sum(r.seconds["resiliparse"] + r.seconds["full"] * (not use(r)) for r in runs)
    kept, dropped = _quality(runs, lambda r: "resiliparse" if use(r) else "full")
    return {"pages": sum(map(use, runs)), "kept": kept, "dropped": dropped,
            "speedup": sum(r.seconds["full"] for r in runs) / cost}


def tried_rows(runs: list[PageRun]) -> list[Result]:
    n = len(runs)
    pages = f"of {n} validation pages"
    rows = [Result("lexbor pre-pass (prune_html)", "ms_per_page",
                   round(1e3 * sum(r.seconds["prepass"] for r in runs) / n, 2), f"ms, mean of {n} validation pages")]
    labels = {"full": "trafilatura (full)", "fast": "trafilatura fast=True", "prepass+fast": "smart pre-pass + fast",
              "reserialized+fast": "re-serialized only + fast", "resiliparse": "resiliparse"}
    for variant, label in labels.items():
        kept, dropped = _quality(runs, lambda r, v=variant: v)
        vs = ("trafilatura fast=True", round(_quality(runs, lambda r: "fast")[0], 4)) if "+" in variant else ()
        rows += [Result(label, "kept_validation", round(kept, 4), "share of snippets", *vs),
                 Result(label, "dropped_validation", round(dropped, 4), "share of snippets")]
    rules = {"cascade grid (lexbor visible text)": cheapest_rule(runs, "page"),
             "cascade as shipped (lexbor visible text)": cascade_rule(runs, MIN_CHARS, MIN_PAGE_SHARE, "page"),
             "cascade grid (Resiliparse text)": cheapest_rule(runs, "resiliparse")}
    for name, rule in rules.items():
        rows += [Result(name, "min_chars", rule["min_chars"], "characters"),
                 Result(name, "min_share", rule["share"], "of the denominator"),
                 Result(name, "routed_pages", rule["routed"], pages),
                 Result(name, "kept_validation", round(rule["kept"], 4), "share of snippets"),
                 Result(name, "dropped_validation", round(rule["dropped"], 4), "share of snippets"),
                 Result(name, "simulated_speedup", round(rule["speedup"], 3), "x full trafilatura")]
    oracle = resiliparse_first(runs, lambda r: r.kept["resiliparse"] >= r.kept["full"]
                               and r.dropped["resiliparse"] >= r.dropped["full"])
    rows += [Result("resiliparse oracle", "resiliparse_pages", oracle["pages"], pages),
             Result("resiliparse oracle", "simulated_speedup", round(oracle["speedup"], 3), "x full trafilatura")]
    for tol in TOLERANCES:
        def agrees(r, tol=tol):
            return abs(r.length["resiliparse"] - r.length["prepass+fast"]) <= tol * r.length["prepass+fast"]
        rule = resiliparse_first(runs, agrees)
        name = f"resiliparse where its length is within {tol:g} of the fast text's"
        rows += [Result(name, "kept_validation", round(rule["kept"], 4), "share of snippets"),
                 Result(name, "dropped_validation", round(rule["dropped"], 4), "share of snippets"),
                 Result(name, "resiliparse_pages", rule["pages"], pages)]
    return rows


@dataclass(frozen=True)
class ExtractExploreSettings(BenchSettings):
    web_dir: Path = setting(DEFAULT_WEB, "folder with trafilatura-pages-*.warc.gz and trafilatura-evaldata.json")
    only: tuple[str, ...] = setting((), "run only these parts (default: all)", choices=PARTS)
    limit: int | None = setting(None, "only the first N pages (a smoke run; not recorded)", at_least=1)


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(ExtractExploreSettings, argv)
    if not (args.web_dir / "trafilatura-evaldata.json").is_file():
        usage_error(f"{args.web_dir}/trafilatura-evaldata.json not found")
    logging.getLogger("trafilatura").setLevel(logging.CRITICAL)
    pages, read = load_eval_pages(args.web_dir)
    pages = pages[:args.limit]
    rows: list[Result] = []
    parts = args.only or PARTS
    if "sizes" in parts:
        rows += size_rows(pages, read)
    if "profile" in parts:
        rows += profile_rows(pages)
    if "tried" in parts:
        validation = [(decode_html(h, cs), e) for h, cs, e in pages if eval_half(e["url"]) == "validation"]
        rows += tried_rows([run_page(h, e, i) for i, (h, e) in enumerate(validation) if h is not None])
    for r in rows:
        print(f"{r.name:<66}{r.metric:<20}{r.value:>10}  {r.unit}" + (f"  (vs {r.baseline_value})" if r.baseline
                                                                     else ""))
    command = "python -m bench.experiments.extract_explore" + (f" --only {' '.join(parts)}" if args.only else "")
    return finish(AREA, rows, args, command, show=False, record_rows=args.record and args.limit is None)


if __name__ == "__main__":
    raise SystemExit(main())
