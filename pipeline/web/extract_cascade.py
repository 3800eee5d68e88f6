"""The ``cascade`` extractor's parts: a lexbor pre-pass, trafilatura's fast mode, and when to fall back.

1. ``prune_html`` parses the page once with lexbor (selectolax) and removes what cannot hold main content: scripts,
   styles, embedded objects and form controls; ``nav``/``header``/``footer``/``aside`` unless they sit inside (or
   hold) an ``article``/``main``; hidden elements; comment sections. Its byproduct is the length of the page's
   visible text, measured on the same parse.
2. trafilatura runs on the smaller page with ``fast=True`` (no readability / justext comparison).
3. ``needs_fallback`` says when that result looks unreliable (short, or a small share of the page's text); the
   caller then runs full trafilatura on the original page, so a routed page gets exactly ``--extractor
   trafilatura``'s text.

The thresholds were chosen on the validation half of trafilatura's evaluation pages (``bench.benchmarks.extract``); the
measured speed and quality, and what else was tried, are in docs/benchmarks/pipeline.md ("Extraction" and its
decision log).
"""

from __future__ import annotations

# elements whose subtree is never main text
DROP_TAGS = ["script", "style", "noscript", "template", "iframe", "svg", "canvas", "object", "embed", "select",
             "button", "input", "textarea"]
BOILERPLATE = "nav, footer, header, aside"  # removed unless inside or around the article
ARTICLE = ("article", "main")
HIDDEN = '[hidden], [aria-hidden="true"], [style*="display:none"], [style*="display: none"]'
COMMENTS = "#comments, #disqus_thread, .comments, .comment-list, #respond, .comments-area"

MIN_CHARS = 200  # a fast result shorter than this goes to full trafilatura
MIN_PAGE_SHARE = 0.1  # ... and so does one shorter than this share of the page's visible text


def _inside_article(node) -> bool:
    parent = node.parent
    while parent is not None and parent.tag not in ("body", "html"):
        if parent.tag in ARTICLE:
            return True
        parent = parent.parent
    return False


def prune_html(html: str) -> tuple[str, int]:
    """(the page without the subtrees that cannot hold main content, the characters of its visible text)."""
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(html)
    body = tree.body
    if body is None:
        return html, len(html)
    tree.strip_tags(DROP_TAGS)
    page_chars = len(body.text(separator=" "))
    for node in body.css(BOILERPLATE):
        if node.parent is None or _inside_article(node) or node.css_first(", ".join(ARTICLE)) is not None:
            continue
        node.decompose()
    for selector in (HIDDEN, COMMENTS):
        for node in body.css(selector):
            node.decompose()
    return tree.html or "", page_chars


def fast_text(html: str) -> tuple[str, int]:
    """(trafilatura fast mode's text of the pruned page, the page's visible characters)."""
    import trafilatura

    pruned, page_chars = prune_html(html)
    text = trafilatura.extract(pruned, fast=True, include_comments=False, include_tables=True, deduplicate=False)
    return (text or "").strip(), page_chars


def needs_fallback(text: str, page_chars: int) -> bool:
    """Whether the fast result looks unreliable: too short, or a small share of the page's text."""
    return len(text) < MIN_CHARS or len(text) < MIN_PAGE_SHARE * page_chars
