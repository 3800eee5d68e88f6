"""Tables in docs/benchmarks.md generated from benchmarks/results/*.jsonl (bench.tools.results).

A generated section sits between two markers; everything between them is rewritten from the newest rows:

    <!-- results area=langid metrics=agreement,docs_per_s -->
    ...table, then one "measured on ... by `command`" line per run...
    <!-- /results -->

``metrics`` (optional) picks and orders the metrics; ``names`` (optional) picks and orders the rows (quote a list
whose names hold spaces: ``names="ours (cascade),plain trafilatura"``); ``commit`` (optional) takes the newest rows of
the run made at that commit instead of the newest rows overall (an earlier run quoted beside the latest one).

    python -m bench.tools.report            rewrite the sections in place
    python -m bench.tools.report --check    exit 1 when the doc differs from what the results give, when a number in a
                                      generated section has no results row, or when a number outside them is a
                                      hand-typed figure citing no source (bench/tools/figures.py has the rule); what CI
                                      runs, via the tests, with --allow-section for sections still being converted
    python -m bench.tools.report --list     print the hand-typed figures per section, change nothing
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from pathlib import Path

from bench.tools.figures import SECTION, by_section, exempted, offenders
from bench.tools.results import RESULTS_DIR, latest, read_rows
from workbench.files import write_text

DOC = Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md"
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
        raise ValueError(f"results marker area={area}: no rows{at} in {RESULTS_DIR.relative_to(DOC.parent.parent)}")
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


def list_figures(typed: dict) -> int:
    for section, found in typed.items():
        print(f"## {section or '(top)'}: {len(found)} hand-typed figures")
        print("".join(f"  line {o.line}: {o.figure}  | {o.text[:100]}\n" for o in found), end="")
    print(f"{sum(map(len, typed.values()))} hand-typed figures in {len(typed)} sections")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        prog="python -m bench.tools.report", description=__doc__.split("\n\n")[0])
    ap.add_argument("--doc", type=Path, default=DOC, help="markdown file with results markers (%(default)s)")
    ap.add_argument("--results-dir", type=Path, default=RESULTS_DIR, help="folder of *.jsonl results")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 when the doc is out of date or "
                    "holds a hand-typed figure")
    ap.add_argument("--list", action="store_true", help="print the hand-typed figures per section; change nothing")
    ap.add_argument("--allow-section", action="append", default=[], metavar="TITLE",
                    help="with --check: ignore hand-typed figures in this section (an h2 title, or 'h2 / h3')")
    args = ap.parse_args(argv)
    try:
        text = args.doc.read_text(encoding="utf-8")
        typed = by_section(offenders(text))
        if args.list:
            return list_figures(typed)
        rows = read_rows(args.results_dir)
        new = generate(text, rows)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.check:
        bad = unbacked_numbers(text, rows)
        if new != text or bad:
            print(f"error: {args.doc}: generated sections are out of date"
                  f"{'; numbers without a results row: ' + ', '.join(bad) if bad else ''}; "
                  "run python -m bench.tools.report", file=sys.stderr)
            return 1
        typed = {k: v for k, v in typed.items() if not exempted(k, args.allow_section)}
        if typed:
            first = next(iter(typed.values()))[0]
            print(f"error: {args.doc}:{first.line}: hand-typed figure {first.figure} in section "
                  f"'{first.section}' cites no source ({sum(map(len, typed.values()))} in {len(typed)} sections; "
                  "python -m bench.tools.report --list shows them)", file=sys.stderr)
            return 1
        print(f"{args.doc}: {len(SECTION.findall(text))} generated sections match the results")
        return 0
    if new != text:
        write_text(args.doc, new)
    print(f"{args.doc}: {len(SECTION.findall(new))} generated sections written")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
