"""Gopher's 80% alphabetic-word rule on real pages: the paper's words vs datatrove's tokens.

The pages of ``--web-dir`` (default ../shared/data/web/*.warc.gz: the trafilatura evaluation pages, the wget
captures, the Common Crawl sample) go through the extract stage; for each definition of ``alpha_words``
(pipeline/filters/quality_rules.py) this counts

- the English pages (kept by the default langid step) that the rule alone drops, over all pages and over the
  trafilatura evaluation pages (curated ordinary articles), and what the whole Gopher quality step drops of them;
- the obviously-bad pages (any language) that the rule alone, and the whole step, catch: ``BAD_PAGES``, labelled
  by hand after reading every page that either definition drops and all 16 pages of the Common Crawl sample (so a
  bad page that neither rule catches is listed only if it is in that sample).

    python -m bench.benchmarks.gopher_words [--web-dir ../shared/data/web] [--cache /tmp/gopher_words]
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench.tools.real_pages import RealPagesSettings, is_english, real_documents, real_warcs
from bench.tools.results import Result, finish, parse_bench
from pipeline.filters.quality_rules import ALPHA_WORDS, GopherQualityFilter, alpha_words_ratio

THRESHOLD = GopherQualityFilter.min_alpha_words_ratio
EVAL_PAGES = "trafilatura-pages-"  # the WARCs of trafilatura's evaluation set

# Pages no one would keep for training: spam, adult, error output, data dumps. url -> why.
BAD_PAGES = {
    "http://003338.cn/l41/481397.html": "scraped news spliced with mojibake and one-character 【】 spam",
    "http://035.psb556.com/24/i/u_1090813/article.html": "404 page in car-site navigation, gambling links",
    "http://037426.cn/": "chemical-company blurb on an unrelated spam domain",
    "http://041696.com/15477/list_6_4.html": "lottery-tip spam list (dates, user, clicks, title)",
    "http://044545.com/topic/20200207/015849.html": "gambling spam (QQ numbers, 'draw 067' riddles)",
    "http://0513mt.com/index.php/art/detail/id/8884.html": "pornographic story",
    "http://05925.net/index.php/vod/type/id/53.html": "adult video site disclaimer only",
    "http://06.live-radsport.ch/fahrerstatistik_801/Anthony_Ravard.html": "SQL error and an empty template",
    "http://06.live-radsport.ch/tippspiel/stats_140_petzi.html": "navigation menu and an empty statistics table",
    "http://0615235.com/02mjqjo%7Bibotij2.btq?odmbtt=106&tdmbtt=121": "product codes with click counts",
    "http://0755krk.com/76104/list_4_1.html": "lottery-tip spam list",
    "http://0760.jxtdw.com/area/sanxiang/": "job-listing table flattened to one field a line",
    "http://077678u.info/erxiaoshujinguang/list_6_2.html": "lottery-tip spam list",
    "http://096355.com/video/11073.html?11073-0-2": "adult video site",
    "https://blog.leichtathletik-ostalbkreis.de/2007/05/20/ergebnisse-rm-schuelerinnen-a-aalen-unterkochen-1952007/":
        "athletics results table: names, clubs, times",
    "http://www.seelenradio.de/nummer-zwei-leo/": "PHP warnings around two lines of text",
    "http://www.colours-of-the-soul.alhelm.net": "PHP 'Strict Standards' warnings, half the page",
}


def measure(docs: list[dict]) -> dict:
    """Per definition: English pages dropped by the rule (all / evaluation pages), by the whole Gopher step, and the
    bad pages the rule catches; plus each English page's ratios for the listing."""
    english = [d for d in docs if is_english(d)]
    bad = [d for d in docs if d["url"] in BAD_PAGES]
    out = {"docs": len(docs), "english": len(english), "english_eval": sum(EVAL_PAGES in d["warc"] for d in english),
           "bad": len(bad), "bad_labelled": len(BAD_PAGES), "rows": {}}
    ratio = {(d["id"], a): alpha_words_ratio(d["text"], a) for d in english + bad for a in ALPHA_WORDS}
    for a in ALPHA_WORDS:
        step = GopherQualityFilter(alpha_words=a)
        dropped = [d for d in english if (r := ratio[d["id"], a]) is not None and r < THRESHOLD]
        out[a] = {"english": len(dropped), "english_eval": sum(EVAL_PAGES in d["warc"] for d in dropped),
                  "gopher_step": sum(step.reject(dict(d)) is not None for d in english),
                  "bad": sum((r := ratio[d["id"], a]) is not None and r < THRESHOLD for d in bad),
                  "bad_step": sum(step.reject(dict(d)) is not None for d in bad),
                  "dropped": [(d["url"], ratio[d["id"], "paper"], ratio[d["id"], "datatrove"]) for d in dropped]}
    return out


def report(m: dict) -> str:
    lines = [f"{m['docs']} pages; {m['english']} English (default langid step), {m['english_eval']} of them "
             f"trafilatura evaluation pages; {m['bad']} of {m['bad_labelled']} hand-labelled bad pages found",
             f"rule: >= {THRESHOLD:.0%} of words contain a letter", "",
             "English pages dropped by the rule (all, trafilatura evaluation pages) and by the whole Gopher step;",
             "bad pages (any language) caught by the rule and by the whole step:", "",
             f"{'alpha_words':<12}{'English: rule':>16}{'eval pages':>14}{'step':>7}{'bad: rule':>12}{'step':>10}",
             "-" * 69]
    for a in ALPHA_WORDS:
        r = m[a]
        rule = f"{r['english']} ({r['english'] / max(m['english'], 1):.1%})"
        evals = f"{r['english_eval']} ({r['english_eval'] / max(m['english_eval'], 1):.1%})"
        lines.append(f"{a:<12}{rule:>16}{evals:>14}{r['gopher_step']:>7}{r['bad']:>7} / {m['bad']}"
                     f"{r['bad_step']:>5} / {m['bad']}")
    lines += ["", "English pages dropped by the paper definition (ratio paper / datatrove):"]
    lines += [f"  {p:.3f} / {d:.3f}  {url}" for url, p, d in m["paper"]["dropped"]]
    only = [row for row in m["datatrove"]["dropped"] if row[0] not in {r[0] for r in m["paper"]["dropped"]}]
    lines += [f"dropped by datatrove's tokens only: {len(only)}, e.g."]
    lines += [f"  {p:.3f} / {d:.3f}  {url}" for url, p, d in sorted(only, key=lambda r: r[2])[:8]]
    return "\n".join(lines)


@dataclass(frozen=True)
class GopherWordsBench(RealPagesSettings):
    """The real-pages settings alone: ``--web-dir``, ``--cache``, ``--workers``."""


def main(argv: list[str] | None = None) -> int:
    args = parse_bench(GopherWordsBench, argv)
    warcs = real_warcs(args)
    with tempfile.TemporaryDirectory() as tmp:
        m = measure(real_documents(warcs, args.cache or Path(tmp), args.workers))
    print(report(m))
    return finish("gopher_words", results_rows(m), args, "python -m bench.benchmarks.gopher_words", show=False)


def results_rows(m: dict) -> list[Result]:
    """Per definition: English pages the rule and the whole Gopher step drop, and bad pages each catches; the
    datatrove definition is the baseline (ratio = ours / datatrove's)."""
    rows = []
    for a in ALPHA_WORDS:
        base = m["datatrove"] if a != "datatrove" else None
        for key, metric, unit in (("english", "english_dropped_by_rule", f"of {m['english']} English pages"),
                                  ("english_eval", "eval_pages_dropped_by_rule", f"of {m['english_eval']} eval pages"),
                                  ("gopher_step", "english_dropped_by_step", f"of {m['english']} English pages"),
                                  ("bad", "bad_caught_by_rule", f"of {m['bad']} bad pages"),
                                  ("bad_step", "bad_caught_by_step", f"of {m['bad']} bad pages")):
            value = m[a][key]
            rows.append(Result(a, metric, value, unit, "datatrove" if base else None, base[key] if base else None,
                               value / base[key] if base and base[key] else None))
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
