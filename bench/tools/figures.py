"""Hand-typed figures in the pages of docs/benchmarks/: numbers outside the generated sections that cite no source.

``python -m bench.tools.report --check`` applies the rule to every page of docs/benchmarks/ (bench.tools.report.pages),
one page's text at a time: a block cites only for itself, so a source never carries across pages.

The rule (also stated in docs/benchmarks/README.md, the index of the pages). Outside ``<!-- results ... -->``
sections, a *figure* is any number in the prose, the tables and the headings, except:

- numbers inside code (`` `...` `` spans, fenced blocks) and HTML comments: commands, flags and config values are
  quoted as code (`--limit 600`, `min_score: 0.65`);
- dates (2026-11-26) and years (1900-2099 written without a thousands comma);
- versions: a dotted number with two or more dots (3.11.7, 0.23.x), or one after ``v``/``version``/a package
  name (torch 2.13, Python 3.12, Triton 3.6.0);
- numbers glued to a name: hardware and identifiers (H200, d64, lid.176, ZeRO-1, FSDP2, top-2, 16k, 2-core);
- references: the numbers of issues, items, lines, sections, tables, appendices and runs (``line 12``,
  ``items 4, 5 and 10``, ``§7``, ``(a)``);
- the machine's description in a ``**Machine:**`` or ``**Date:**`` line.

A figure is allowed when its block cites an external source: a paragraph, list item or table containing
``source:`` followed by a URL or a paper/document name, or preceded by a ``<!-- source: ... -->`` line. A block is a
run of non-blank lines, cut where a list item starts (each item cites for itself); a table is one block.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SECTION = re.compile(r"(<!-- results (?P<spec>[^>]*?) -->\n)(?P<body>.*?)(<!-- /results -->)", re.S)
FENCE = re.compile(r"^```.*?^```[^\n]*$", re.S | re.M)
COMMENT = re.compile(r"<!--(?!\s*source:).*?-->", re.S)
CODE = re.compile(r"`[^`\n]*`")
DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
VERSION = re.compile(r"\b\d+(?:\.\d+){2,}(?:\.x)?\b|\b\d+\.\d+\.x\b|"
                     r"(?i:\b(?:v|version\s+|python\s+|torch\s+|triton\s+|cuda\s+|numpy\s+|datatrove\s+|datasketch\s+|"
                     r"trafilatura\s+|resiliparse\s+|tokenizers\s+|tiktoken\s+|langid\s+|fasttext-numpy2\s+))"
                     r"\d+(?:\.\d+)*")
REFERENCE = re.compile(r"(?i:\b(?:issues?|items?|lines?|sections?|tables?|steps? no\.|app\.|appendix|part|runs?)"
                       r"\s+|§|#)[A-Z]?\d+(?:\.\d+)*(?:(?:,\s*|\s+and\s+|\s*[–-]\s*)\d+)*")
ENUM = re.compile(r"^\s*\d+\.\s|\(\d+\)", re.M)  # list numbering: "1. ", "(3)"
YEAR = re.compile(r"(?<![\d,.])(?:19|20)\d\d(?![\d,.]\d)")
MACHINE_LINE = re.compile(r"^\s*-\s*\*\*(?:Machine|Date):\*\*.*$", re.M)
# a number not glued to a name on its left; on its right only a ratio mark ("1.5x") may touch it
FIGURE = re.compile(r"(?<![\w.\-/−])[-−]?\d+(?:,\d{3})*(?:\.\d+)?(?:e[+-]?\d+)?"
                    r"(?![\w.]*[A-Za-wyz_]|\.\d|-[A-Za-z]|\d|,\d)")  # |\d, ,\d: no backtracking into a number
SOURCE = re.compile(r"source:\s*\S", re.I)
HEADING = re.compile(r"^(#{2,3})\s+(.*)$", re.M)


@dataclass
class Offender:
    section: str  # "h2 title" or "h2 title / h3 title"
    line: int
    figure: str
    text: str  # the line, for the listing


def _blank(match: re.Match) -> str:
    """The match replaced by spaces, newlines kept: line numbers and offsets stay valid."""
    return re.sub(r"[^\n]", " ", match.group(0))


def strip_exempt(text: str) -> str:
    """``text`` with generated sections, code, comments, dates, versions, references and machine lines blanked."""
    for pattern in (SECTION, FENCE, COMMENT, CODE, MACHINE_LINE, DATE, VERSION, REFERENCE, ENUM, YEAR):
        text = pattern.sub(_blank, text)
    return text


def _sections(text: str) -> list[tuple[int, str]]:
    """(offset, "h2 / h3" title) where each level-2 or level-3 heading starts."""
    out, h2 = [(0, "")], ""
    for m in HEADING.finditer(text):
        if m.group(1) == "##":
            h2 = m.group(2).strip()
            out.append((m.start(), h2))
        else:
            out.append((m.start(), f"{h2} / {m.group(2).strip()}"))
    return out


def _blocks(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets of runs of non-blank lines."""
    runs = [(m.start(), m.end()) for m in re.finditer(r"(?:^[^\n]*\S[^\n]*\n?)+", text, re.M)]
    # a list item starts a block of its own: one cited item does not cite its neighbours
    items = [m.start() for m in re.finditer(r"^[ \t]*(?:[-*+]|\d+\.)[ \t]", text, re.M)]
    out = []
    for start, end in runs:
        cuts = [start] + [i for i in items if start < i < end] + [end]
        out += list(zip(cuts[:-1], cuts[1:], strict=True))
    return out


def _cited(raw: str, start: int, end: int) -> bool:
    """A block cites a source when it contains ``source:`` + something, or the line before it is a source comment."""
    if SOURCE.search(raw[start:end]):
        return True
    before = raw[:start].rstrip("\n").rsplit("\n", 1)[-1]
    return bool(re.match(r"\s*<!--\s*source:\s*\S", before))


def offenders(text: str) -> list[Offender]:
    """Every hand-typed figure of ``text`` outside generated sections whose block cites no source."""
    clean = strip_exempt(text)
    sections = _sections(text)
    out = []
    for start, end in _blocks(text):
        if _cited(text, start, end):
            continue
        for m in FIGURE.finditer(clean, start, end):
            title = [t for off, t in sections if off <= m.start()][-1]
            line = text.count("\n", 0, m.start()) + 1
            out.append(Offender(title, line, m.group(0), text.splitlines()[line - 1].strip()))
    return out


def by_section(found: list[Offender]) -> dict[str, list[Offender]]:
    out: dict[str, list[Offender]] = {}
    for o in found:
        out.setdefault(o.section, []).append(o)
    return out


def exempted(section: str, allowed: list[str]) -> bool:
    """``section`` ("h2 / h3") is one of ``allowed``: an exact h2 title covers its h3s; "h2 / h3" covers one h3."""
    return any(section == a or section.startswith(a + " / ") for a in allowed)
