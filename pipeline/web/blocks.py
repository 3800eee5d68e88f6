"""A page cut into text blocks, and the features a block classifier reads: the ``distilled`` extractor's first half.

One lexbor parse (selectolax), then one walk down the body in document order that does not enter the subtrees that
never hold main text (``extract_cascade.DROP_TAGS``). A *block* is the text between two block-level boundaries (an
element such as ``p``, ``li``, ``div``, ``td``, a heading, or a ``br``): what boilerplate removal keeps or drops
whole (Kohlschütter et al. 2010, "Boilerplate detection using shallow text features"; Peters and Lecocq 2013,
dragnet). Each block carries what the walk saw around it: its tag, the landmark elements above it (``nav``,
``footer``, ``article`` ...), keywords of the class and id attributes on the way down (``comment``, ``share``,
``content`` ...), its depth, the characters inside links, and its two containers (the block-level elements above
its own). Inline elements join as written: ``Humes</a>: The`` is ``Humes: The``.

``features`` turns a page's blocks into one row per block (and gives their ``containers``): the block's own text
statistics (``text_stats``, one NumPy pass over the page; ``text_stats_reference`` is the same char by char), its tag
and context, its position on the page, its neighbours' length and link density (boilerplate comes in runs; main text
too), and its containers' size, link density and share of the page (the article is a container). The compiled core
(``pipeline.web.native``) computes them bit for bit as ``features_reference`` does, in microseconds a page instead of
NumPy's fixed cost per call.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field

import numpy as np

from pipeline.web.extract_cascade import DROP_TAGS
from pipeline.web.native import NATIVE

SKIP_TAGS = frozenset(DROP_TAGS)  # never main text: the walk does not go in
BLOCK_TAGS = frozenset({
    "p", "div", "li", "td", "th", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "dd", "dt", "dl",
    "section", "article", "header", "footer", "nav", "aside", "main", "ul", "ol", "table", "form", "figure",
    "figcaption", "caption", "address", "center", "fieldset", "details", "summary", "body", "br", "hr",
})
TAG_GROUPS = (("p",), ("div", "section", "center"), ("li", "dd", "dt"), ("td", "th", "tr", "caption"),
              ("h1", "h2", "h3"), ("h4", "h5", "h6"), ("pre",), ("blockquote",), ("figcaption", "address"))
TAG_GROUP = {tag: i for i, group in enumerate(TAG_GROUPS) for tag in group}
LANDMARKS = ("nav", "header", "footer", "aside", "article", "main", "form", "li", "table", "a", "figure", "h")
LANDMARK_BIT = {tag: 1 << i for i, tag in enumerate(LANDMARKS)}
LANDMARK_BIT.update({f"h{i}": LANDMARK_BIT["h"] for i in range(1, 7)}, ul=LANDMARK_BIT["li"], ol=LANDMARK_BIT["li"])
# class / id keywords, in groups: what a site's own markup says a block is
KEYWORDS = (
    ("comment", "reply", "respond", "disqus"), ("footer", "copyright", "imprint", "impressum", "legal"),
    ("nav", "menu", "breadcrumb", "pagination", "pager"), ("sidebar", "widget", "aside", "sidebox"),
    ("share", "social", "facebook", "twitter", "sharing"), ("related", "recommend", "more-", "popular", "teaser"),
    ("advert", "sponsor", "banner", "promo", "adsense", "-ad-", "ads"), ("cookie", "consent", "gdpr", "privacy"),
    ("author", "byline", "bio", "profile", "avatar"), ("subscribe", "newsletter", "signup", "login", "paywall"),
    ("tag", "categor", "label", "topic"), ("date", "time", "meta", "info", "published"),
    ("content", "article", "post", "entry", "story", "body", "text", "main", "blog"), ("caption", "credit", "photo"),
    ("header", "masthead", "logo", "title"),
)
KEYWORD_BIT = {word: 1 << i for i, words in enumerate(KEYWORDS) for word in words}
KEYWORD_RE = re.compile("|".join(map(re.escape, sorted(KEYWORD_BIT, key=len, reverse=True))))
# function words of the crawl's commonest languages: running text has many, menus and link lists few (jusText's
# stopword density, Pomikálek 2011)
STOPWORDS = frozenset("""
the of and to in a is that for it as with was on be by this are or from at an not but have has which you we they
der die das und in den von zu mit sich des auf für ist im dem nicht ein eine als auch es an werden aus er hat dass
le la les de des et en un une du est pour que qui dans pas par sur au il ne se
el la los las de y en un una que es por con para del se no lo al como
il di e che la per un una non con sono del della
de het een en van is dat op te voor met niet zijn
o a os as de e do da em um uma que para com não
i w z na do nie się jest to że o jak
""".split())


@dataclass
class Page:
    """A page's blocks in document order (parallel lists) and its visible characters."""

    texts: list[str] = field(default_factory=list)
    link_chars: list[int] = field(default_factory=list)
    tags: list[int] = field(default_factory=list)  # TAG_GROUP index, len(TAG_GROUPS): any other
    landmarks: list[int] = field(default_factory=list)  # LANDMARK_BIT bits of the elements above
    keywords: list[int] = field(default_factory=list)  # KEYWORDS bits of the class/id attributes above
    depths: list[int] = field(default_factory=list)
    links: list[int] = field(default_factory=list)  # <a> elements in the block
    # the block-level elements holding the block: the one above its own (its container) and the one above that
    parents: list[int] = field(default_factory=list)
    grandparents: list[int] = field(default_factory=list)


def _keyword_bits(attributes: dict) -> int:
    name, ident = attributes.get("class"), attributes.get("id")
    return (_bits_of(name) if name else 0) | (_bits_of(ident) if ident else 0)


@functools.lru_cache(maxsize=8192)
def _bits_of(names: str) -> int:
    """KEYWORDS bits of a class or id value (a site repeats its class names: cached)."""
    bits = 0
    for word in KEYWORD_RE.findall(names.lower()):
        bits |= KEYWORD_BIT[word]
    return bits


class _Walk:
    """One walk down the body: text nodes gather into the current block; a block-level element ends it."""

    def __init__(self):
        self.page = Page()
        self.parts: list[str] = []
        self.link_chars = self.links = 0
        self.context = (len(TAG_GROUPS), 0, 0, 0)  # the block's (tag, landmarks, keywords, depth) at its first text
        self.open_blocks = [0]  # ids of the block-level elements the walk is in (0: the body)
        self.blocks_seen = 0
        self.containers = (0, 0)  # (parent, grandparent) of the block at its first text

    def flush(self) -> None:
        if not self.parts:
            self.links = 0
            return
        text = " ".join("".join(self.parts).split())  # inline elements join as written: "Humes</a>: The"
        if text:
            tag, landmarks, keywords, depth = self.context
            page = self.page
            page.texts.append(text)
            page.link_chars.append(min(self.link_chars, len(text)))
            page.tags.append(tag)
            page.landmarks.append(landmarks)
            page.keywords.append(keywords)
            page.depths.append(depth)
            page.links.append(self.links)
            page.parents.append(self.containers[0])
            page.grandparents.append(self.containers[1])
        self.parts, self.link_chars, self.links = [], 0, 0

    def visit(self, node, block_tag: int, landmarks: int, keywords: int, depth: int, in_link: bool) -> None:
        for child in node.iter(include_text=True):
            tag = child.tag
            if tag == "-text":
                text = child.text_content
                if text and text.isspace():
                    if self.parts:  # the space between two inline elements
                        self.parts.append(" ")
                elif text:
                    if not self.parts:
                        self.context = (block_tag, landmarks, keywords, depth)
                        ids = self.open_blocks
                        self.containers = (ids[-2] if len(ids) > 1 else 0, ids[-3] if len(ids) > 2 else 0)
                    self.parts.append(text)
                    if in_link:
                        self.link_chars += len(text.strip())
                continue
            if not tag or tag[0] == "-" or tag in SKIP_TAGS:  # comments, doctype; scripts, styles, forms' controls
                continue
            attributes = child.attributes
            bits = _keyword_bits(attributes) if attributes else 0
            block = tag in BLOCK_TAGS
            if block:
                self.flush()
                self.blocks_seen += 1
                self.open_blocks.append(self.blocks_seen)
            if tag == "a":
                self.links += 1
            self.visit(child, TAG_GROUP.get(tag, len(TAG_GROUPS)) if block else block_tag,
                       landmarks | LANDMARK_BIT.get(tag, 0), keywords | bits, depth + 1, in_link or tag == "a")
            if block:
                self.flush()
                self.open_blocks.pop()


def page_blocks(html: str) -> Page:
    """The blocks of a decoded HTML page (none when it has no body)."""
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(html)
    walk = _Walk()
    if tree.body is None:
        return walk.page
    walk.visit(tree.body, len(TAG_GROUPS), 0, _keyword_bits(tree.body.attributes or {}), 0, False)
    walk.flush()
    return walk.page


FEATURE_NAMES = (
    "log_chars", "log_words", "link_density", "links", "punct_per_word", "digit_share", "upper_share",
    "ends_with_stop", "starts_upper", "mean_word_len", "pipe_or_bullet", "stopword_share", "depth",
    *(f"tag_{g[0]}" for g in TAG_GROUPS), "tag_other",
    *(f"in_{name}" for name in LANDMARKS), *(f"kw_{words[0]}" for words in KEYWORDS),
    "position", "chars_before_share", "page_log_chars", "page_log_blocks",
    "prev_log_chars", "prev_link_density", "next_log_chars", "next_link_density",
    "window_log_chars", "window_link_density", "share_of_page",
    "parent_log_chars", "parent_link_density", "parent_log_blocks", "parent_share",
    "grandparent_log_chars", "grandparent_link_density", "grandparent_log_blocks", "grandparent_share",
)
N_FEATURES = len(FEATURE_NAMES)


LETTERS = ((65, 90), (97, 122), (192, 214), (216, 246), (248, 591), (880, 1279), (0x3040, 0x30FF), (0x4E00, 0x9FFF))
UPPER = ((65, 90), (192, 214), (216, 222), (913, 937), (1040, 1071))
DIGITS = ((48, 57),)
SENTENCE_ENDS = frozenset(".!?。！？")
LAST_CHARS = frozenset(".!?:\"'”»)。")
SEPARATORS = frozenset("|•»")
STATS = 10  # the columns of text_stats


def _in(code: int, ranges: tuple[tuple[int, int], ...]) -> bool:
    return any(lo <= code <= hi for lo, hi in ranges)


def text_stats_reference(text: str) -> tuple[float, ...]:
    """One block's text statistics, char by char: log chars, log words, sentence ends per word, digit share,
    upper-case share of letters, ends like a sentence, starts upper-case, mean word length, two or more separators
    (a menu), stopword share. ``text_stats`` computes the same for a whole page at once."""
    words = text.split(" ")
    n, w = len(text), len(words)
    letters = sum(_in(ord(c), LETTERS) for c in text)
    return (math.log1p(n), math.log1p(w), sum(c in SENTENCE_ENDS for c in text) / w,
            sum(_in(ord(c), DIGITS) for c in text) / n, sum(_in(ord(c), UPPER) for c in text) / max(letters, 1),
            float(text[-1] in LAST_CHARS), float(_in(ord(text[0]), UPPER)), (n - w + 1) / w,
            float(sum(c in SEPARATORS for c in text) >= 2), sum(word.lower() in STOPWORDS for word in words) / w)


CHAR_CLASSES = (  # bit i of a code point's class: it is in the i-th set
    frozenset({32}), LETTERS, UPPER, DIGITS, SENTENCE_ENDS, LAST_CHARS, SEPARATORS)
SPACE, LETTER, UPPER_CASE, DIGIT, SENTENCE_END, LAST_CHAR, SEPARATOR = (1 << i for i in range(len(CHAR_CLASSES)))


@functools.cache
def char_classes() -> np.ndarray:
    """The class bits of every code point of the Basic Multilingual Plane (those above it have none): one gather
    classifies a page."""
    table = np.zeros(0x10000, dtype=np.uint8)
    for bit, members in enumerate(CHAR_CLASSES):
        if isinstance(members, tuple):  # code point ranges
            for lo, hi in members:
                table[lo:hi + 1] |= 1 << bit
        else:
            for c in members:
                table[c if isinstance(c, int) else ord(c)] |= 1 << bit
    return table


def text_stats(texts: list[str]) -> np.ndarray:
    """``text_stats_reference`` of every block of a page, (n, STATS), with a few NumPy passes over the page's code
    points (one gather of their classes, one sum per block) instead of a Python loop per character. Blocks are
    whitespace-normalised (single spaces)."""
    lengths = np.array([len(t) for t in texts], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    codes = np.frombuffer("".join(texts).encode("utf-32-le"), dtype=np.uint32)
    classes = char_classes()[np.minimum(codes, 0xFFFF)]
    bits = np.array([SPACE, LETTER, UPPER_CASE, DIGIT, SENTENCE_END, SEPARATOR], dtype=np.uint8)
    counts = np.add.reduceat(((classes[:, None] & bits) != 0).astype(np.int32), starts, axis=0)
    spaces, letters, upper, digits, sentence_ends, separators = counts.T
    words = spaces + 1
    stop = np.fromiter(map(STOPWORDS.__contains__, " ".join(texts).lower().split(" ")), dtype=bool,
                       count=words.sum())
    word_starts = np.concatenate([[0], np.cumsum(words)[:-1]])
    ends = starts + lengths - 1
    return np.stack([
        np.log1p(lengths), np.log1p(words), sentence_ends / words, digits / lengths, upper / np.maximum(letters, 1),
        (classes[ends] & LAST_CHAR) != 0, (classes[starts] & UPPER_CASE) != 0, (lengths - words + 1) / words,
        separators >= 2, np.add.reduceat(stop.astype(np.int64), word_starts) / words,
    ], axis=1).astype(np.float64)


def window_mean(values: np.ndarray, outside: float = 0.0) -> np.ndarray:
    """The mean of each value and the two on either side (``outside`` beyond the page's ends)."""
    padded = np.concatenate([[outside, outside], values, [outside, outside]])
    sums = np.concatenate([[0.0], np.cumsum(padded)])
    return (sums[5:] - sums[:-5]) / 5


def containers(page: Page) -> np.ndarray:
    """(n, 2): each block's parent and grandparent container as indices counting from 0 within the page."""
    ids = np.array([page.parents, page.grandparents], dtype=np.int64)
    return np.stack([np.unique(row, return_inverse=True)[1] for row in ids], axis=1)


def container_mean(values: np.ndarray, weights: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Each block's ``weights``-weighted mean of ``values`` over the blocks of its container ``group``."""
    total = np.bincount(group, weights=weights)
    return (np.bincount(group, weights=values * weights) / np.maximum(total, 1e-12))[group]


def _container_columns(group: np.ndarray, chars: np.ndarray, link_chars: np.ndarray) -> list[np.ndarray]:
    """A container's characters (log), link density, blocks (log) and share of the page, for each block."""
    total = np.bincount(group, weights=chars)
    links = np.bincount(group, weights=link_chars)
    blocks = np.bincount(group)
    return [np.log1p(total)[group], (links / total)[group], np.log1p(blocks)[group], (total / chars.sum())[group]]


@functools.cache
def _native_core():
    """The compiled core, given the character classes and stopwords once (None when it is not built)."""
    if NATIVE is not None:
        NATIVE.configure(char_classes().tobytes(), STOPWORDS)
    return NATIVE


def features(page: Page) -> tuple[np.ndarray, np.ndarray]:
    """(one row per block, ``FEATURE_NAMES``, float32; the blocks' ``containers``): the compiled core's, or
    ``features_reference``'s where it is not built."""
    core = _native_core()
    if core is None or not page.texts:
        groups = containers(page)
        return features_reference(page, groups), groups
    n = len(page.texts)
    x, groups = core.page_features(page.texts, page.link_chars, page.tags, page.landmarks, page.keywords,
                                   page.depths, page.links, page.parents, page.grandparents, len(TAG_GROUPS),
                                   len(LANDMARKS), len(KEYWORDS), N_FEATURES)
    return np.frombuffer(x, dtype=np.float32).reshape(n, N_FEATURES), np.frombuffer(groups, np.int64).reshape(n, 2)


def features_reference(page: Page, groups: np.ndarray | None = None) -> np.ndarray:
    """``features``' rows in NumPy; ``groups``: the page's ``containers`` when the caller has them."""
    n = len(page.texts)
    if not n:
        return np.zeros((0, N_FEATURES), dtype=np.float32)
    stats = text_stats(page.texts)
    chars = np.array([len(t) for t in page.texts], dtype=np.float64)
    link_density = np.array(page.link_chars, dtype=np.float64) / chars
    log_chars = stats[:, 0]
    tags = np.zeros((n, len(TAG_GROUPS) + 1))
    tags[np.arange(n), page.tags] = 1.0
    landmarks = (np.array(page.landmarks)[:, None] >> np.arange(len(LANDMARKS))) & 1
    keywords = (np.array(page.keywords)[:, None] >> np.arange(len(KEYWORDS))) & 1
    before = np.concatenate([[0.0], np.cumsum(chars)[:-1]]) / chars.sum()
    prev_c, next_c = np.concatenate([[0.0], log_chars[:-1]]), np.concatenate([log_chars[1:], [0.0]])
    prev_l, next_l = np.concatenate([[1.0], link_density[:-1]]), np.concatenate([link_density[1:], [1.0]])
    window_c, window_l = window_mean(log_chars), window_mean(link_density, outside=1.0)
    columns = [
        stats[:, 0:2], link_density[:, None], np.log1p(page.links)[:, None], stats[:, 2:10],
        np.array(page.depths, dtype=np.float64)[:, None] / 10.0, tags, landmarks, keywords,
        (np.arange(n) / n)[:, None], before[:, None], np.full((n, 1), math.log1p(chars.sum())),
        np.full((n, 1), math.log1p(n)), prev_c[:, None], prev_l[:, None], next_c[:, None], next_l[:, None],
        window_c[:, None], window_l[:, None], (chars / chars.sum())[:, None],
    ]
    groups = containers(page) if groups is None else groups
    link_chars = np.array(page.link_chars, dtype=np.float64)
    columns += [c[:, None] for level in (0, 1) for c in _container_columns(groups[:, level], chars, link_chars)]
    return np.hstack(columns).astype(np.float32)
