"""Tables in the pages of docs/benchmarks/ generated from benchmarks/results/*.jsonl (bench.tools.results).

A generated section sits between two markers, in whichever page holds it (docs/benchmarks/README.md is the index of
the pages); everything between them is rewritten from the newest rows:

    <!-- results area=langid metrics=agreement,docs_per_s -->
    ...table, then one "measured on ... by `command`" line per run...
    <!-- /results -->

``metrics`` (optional) picks and orders the metrics; ``names`` (optional) picks and orders the rows (quote a list
whose names hold spaces: ``names="ours (cascade),plain trafilatura"``); ``commit`` (optional) takes the newest rows of
the run made at that commit instead of the newest rows overall (an earlier run quoted beside the latest one).

    python -m bench.tools.report            rewrite the sections in place, in every page
    python -m bench.tools.report --check    exit 1 when a page differs from what the results give, when a number in a
                                      generated section has no results row, or when a number outside them is a
                                      hand-typed figure citing no source (bench/tools/figures.py has the rule); what CI
                                      runs, via the tests, with --allow-section for sections still being converted
    python -m bench.tools.report --list     print the hand-typed figures per page and section, change nothing

``--doc`` (repeatable) names a page or a folder of pages (its *.md); the default is every page of docs/benchmarks/.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.tools.figures import SECTION, by_section, exempted, offenders
from bench.tools.results import RESULTS_DIR, latest, read_rows
from workbench.files import write_text
from workbench.params import parse_flags, setting

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "benchmarks"  # one page per area, README.md the index
INDEX = DOCS / "README.md"
NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?")


def fmt(value) -> str:
    """Four significant digits, thousands separated: 0.9554, 12.35, 1,740."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    v = float(value)
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if v == 0:
        return "0"
    return f"{v:.4g}"


def parse_spec(spec: str) -> dict[str, list[str] | str]:
    out = {}
    try:
        parts = shlex.split(spec)
    except ValueError as exc:
        raise ValueError(f"results marker {spec!r}: {exc}") from None
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep or key not in ("area", "metrics", "names", "commit"):
            raise ValueError(f"results marker: bad field {part!r} (expected area=, metrics=, names=, commit=)")
        out[key] = value if key in ("area", "commit") else value.split(",")
    if "area" not in out:
        raise ValueError(f"results marker {spec!r}: area= is required")
    return out


def render(spec: dict, rows: list[dict]) -> str:
    """The table of ``spec``'s area from the newest of ``rows`` (only those of ``spec``'s commit, when it names one)."""
    area, commit = spec["area"], spec.get("commit")
    rows = latest([r for r in rows if not commit or str(r.get("commit", "")).startswith(commit)])
    mine = [r for (a, _, _), r in rows.items() if a == area]
    if not mine:
        at = f" at commit {commit}" if commit else ""
        raise ValueError(f"results marker area={area}: no rows{at} in {RESULTS_DIR.relative_to(ROOT)}")
    metrics = spec.get("metrics") or list(dict.fromkeys(r["metric"] for r in mine))
    names = spec.get("names") or list(dict.fromkeys(r["name"] for r in mine))
    lines = ["| name | metric | value | unit | baseline | baseline value | ratio | repeats (min–max) |",
             "|---|---|---|---|---|---|---|---|"]
    runs = []
    for name in names:
        for metric in metrics:
            r = rows.get((area, name, metric))
            if r is None:
                continue
            spread = f"{r['repeats']} ({fmt(r['min'])}–{fmt(r['max'])})" if r.get("repeats", 1) > 1 else \
                str(r.get("repeats", 1))
            lines.append(f"| {name} | {metric} | {fmt(r['value'])} | {r.get('unit') or ''} | "
                         f"{r.get('baseline') or ''} | {fmt(r.get('baseline_value'))} | {fmt(r.get('ratio'))} | "
                         f"{spread} |")
            run = (r["date"], r["machine"], r["command"], r["commit"])
            if run not in runs:
                runs.append(run)
    lines.append("")
    lines += [f"Measured {date} on {machine_} by `{command}` (commit {commit})." for date, machine_, command, commit
              in runs]
    return "\n".join(lines) + "\n"


def pages(paths: list[Path] | None = None) -> list[Path]:
    """The markdown pages of ``paths`` (a folder stands for its *.md, sorted); default: docs/benchmarks/'s pages."""
    out = []
    for path in paths or [DOCS]:
        out += sorted(path.glob("*.md")) if path.is_dir() else [path]
    if not out:
        raise ValueError(f"no markdown pages in {', '.join(map(str, paths or [DOCS]))}")
    return out


def sections(docs: list[Path]) -> dict[str, list[Path]]:
    """Each results marker's spec -> the pages holding it (once each time it appears)."""
    out: dict[str, list[Path]] = {}
    for doc in docs:
        for m in SECTION.finditer(doc.read_text(encoding="utf-8")):
            out.setdefault(m.group("spec"), []).append(doc)
    return out


def generate(text: str, rows: list[dict]) -> str:
    return SECTION.sub(lambda m: m.group(1) + render(parse_spec(m.group("spec")), rows) + m.group(4), text)


def unbacked_numbers(text: str, rows: list[dict]) -> list[str]:
    """Numbers inside generated sections that no results row (value, baseline, ratio, spread, repeats, date,
    commit) accounts for: a figure typed by hand."""
    allowed = set()
    for r in rows:
        for key in ("value", "baseline_value", "ratio", "min", "max", "repeats"):
            if r.get(key) is not None:
                allowed.add(fmt(r[key]))
        allowed.update(NUMBER.findall(" ".join(str(r.get(k, "")) for k in ("date", "machine", "command", "commit",
                                                                           "name", "metric", "unit", "baseline"))))
    bad = []
    for m in SECTION.finditer(text):
        bad += [n for n in NUMBER.findall(m.group("body")) if n not in allowed]
    return bad


def list_figures(typed: dict[Path, dict]) -> int:
    for doc, by_title in typed.items():
        for section, found in by_title.items():
            print(f"## {section or '(top)'}: {len(found)} hand-typed figures ({doc})")
            print("".join(f"  line {o.line}: {o.figure}  | {o.text[:100]}\n" for o in found), end="")
    total = sum(len(found) for by_title in typed.values() for found in by_title.values())
    print(f"{total} hand-typed figures in {sum(map(len, typed.values()))} sections")
    return 0


@dataclass(frozen=True)
class ReportSettings:
    doc: tuple[Path, ...] = setting((), "a markdown page with results markers, or a folder of them (its *.md); "
                                        f"repeatable (default: every page of {DOCS.relative_to(ROOT)}/)",
                                    repeatable=True, metavar="PATH")
    results_dir: Path = setting(RESULTS_DIR, "folder of *.jsonl results")
    check: bool = setting(False, "change nothing; exit 1 when a page is out of date or holds a hand-typed figure")
    list: bool = setting(False, "print the hand-typed figures per section; change nothing")
    allow_section: tuple[str, ...] = setting((), "with --check: ignore hand-typed figures in this section (an h2 "
                                                 "title, or 'h2 / h3'); repeatable", repeatable=True, metavar="TITLE")


def main(argv: list[str] | None = None) -> int:
    args = parse_flags(ReportSettings, argv, prog="python -m bench.tools.report", description=__doc__.split("\n\n")[0])
    try:
        docs = pages(list(args.doc))
        texts = {doc: doc.read_text(encoding="utf-8") for doc in docs}
        typed = {doc: by_section(offenders(text)) for doc, text in texts.items()}
        if args.list:
            return list_figures({doc: found for doc, found in typed.items() if found})
        rows = read_rows(args.results_dir)
        new = {}
        for doc, text in texts.items():
            try:
                new[doc] = generate(text, rows)
            except ValueError as exc:
                raise ValueError(f"{doc}: {exc}") from None
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    count = sum(len(SECTION.findall(text)) for text in new.values())
    if args.check:
        failed = False
        for doc, text in texts.items():
            bad = unbacked_numbers(text, rows)
            if new[doc] != text or bad:
                print(f"error: {doc}: generated sections are out of date"
                      f"{'; numbers without a results row: ' + ', '.join(bad) if bad else ''}; "
                      "run python -m bench.tools.report", file=sys.stderr)
                failed = True
        for doc, by_title in typed.items():
            by_title = {k: v for k, v in by_title.items() if not exempted(k, args.allow_section)}
            if by_title:
                first = next(iter(by_title.values()))[0]
                print(f"error: {doc}:{first.line}: hand-typed figure {first.figure} in section "
                      f"'{first.section}' cites no source ({sum(map(len, by_title.values()))} in {len(by_title)} "
                      "sections; python -m bench.tools.report --list shows them)", file=sys.stderr)
                failed = True
        if failed:
            return 1
        print(f"{_where(docs)}: {count} generated sections match the results")
        return 0
    for doc, text in new.items():
        if text != texts[doc]:
            write_text(doc, text)
    print(f"{_where(docs)}: {count} generated sections written")
    return 0


def _where(docs: list[Path]) -> str:
    return str(docs[0]) if len(docs) == 1 else f"{len(docs)} pages under {os.path.commonpath(docs)}"


if __name__ == "__main__":
    raise SystemExit(main())
