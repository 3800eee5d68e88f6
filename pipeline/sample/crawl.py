"""Generate the embedded sample crawl: a seeded, realistic synthetic Common Crawl WARC plus a manifest.

``python -m pipeline.sample`` writes ``sample.warc.gz`` (warcinfo, then request + response records,
some metadata records, one gzip member each, as Common Crawl does) and ``manifest.jsonl``, which
says truthfully what every response carries, so each later stage can be tested against it:

- languages: ~70% English (grammar prose, ``pipeline.sample.text``), the rest de/fr/es/it/ru/ja/zh (Faker
  locale words plus natural sentence frames), each in its usual charsets, declared in the HTTP
  header, a ``<meta>`` tag, or both;
- low quality (~15%): spam, keyword lists, short pages, repeated lines, boilerplate only, teaser
  lists ending in "…"; toxic forum threads (~5%, mild synthetic insults); planted PII (~20%:
  e-mails, phones, IPv4) and, in ~30% of English articles and threads, PII look-alikes that must
  survive masking (versions, builds, dates, times, prices, ISBNs, order numbers; manifest field
  ``pii_lookalikes``); exact (~5%) and near (~5%) duplicates; broken records (~3%): bad charset,
  truncated HTML, non-HTML payloads, empty bodies, 404 and 301.

Same seed ⇒ same bytes: every draw comes from one ``random.Random(seed)`` (plus Faker instances
seeded from it, and a second generator seeded from ``f"lookalikes-{seed}"`` for the look-alikes, so
planting them leaves the other draws alone); record ids are UUIDs from the first generator, dates
start from a seeded 2024 day.
"""

from __future__ import annotations

import argparse
import copy
import random
import re
import time
import unicodedata
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from html import escape
from pathlib import Path

from tqdm import tqdm

from pipeline.sample.pages import (
    CHARSETS,
    FRAMES,
    LOOKALIKE_FRAMES,
    PII_FRAMES,
    SERVERS,
    UI,
    Site,
    article_body,
    encode_page,
    forum_body,
    jpeg_bytes,
    json_bytes,
    lookalike_value,
    page_records,
    pdf_bytes,
    pii_value,
    record_id,
    redirect_html,
    render_page,
    warcinfo_record,
)
from pipeline.sample.text import FORUM_BITS, INSULTS, KEYWORD_MODS, LEXICON, SPAM, SWAPS, TOPICS, TOXIC, EnglishProse
from workbench.files import atomic_path, write_jsonl
from workbench.params import ParamsError, apply_section, build_config_parser, params_path, setting

LANGS = {"en": 0.70, "de": 0.06, "fr": 0.05, "es": 0.05, "ru": 0.04, "ja": 0.04, "zh": 0.04, "it": 0.02}
LOCALES = {"en": "en_US", "de": "de_DE", "fr": "fr_FR", "es": "es_ES", "it": "it_IT", "ru": "ru_RU",
           "ja": "ja_JP", "zh": "zh_CN"}
# Page kinds and their shares; PII is planted on top, in ~25% of articles and forum threads.
KINDS = {"article": 0.60, "forum": 0.07, "toxic": 0.05, "low": 0.15, "duplicate": 0.05, "near_duplicate": 0.05,
         "broken": 0.03}
PII_RATE = 0.25
LOOKALIKE_RATE = 0.30  # English articles and threads that carry 1-3 PII look-alikes


Page = tuple  # (manifest entry, payload bytes, HTTP content type[, extra HTTP headers])
_WORD = re.compile(r"^(\W*)([A-Za-z][A-Za-z'-]*)(\W*)$")


def _weighted(rng, table: dict):
    return rng.choices(tuple(table), weights=tuple(table.values()))[0]


def _slug(text: str) -> str:
    ascii_ = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    return re.sub(r"[^a-z0-9]+", "-", ascii_).strip("-")[:60]


def _cities(fake, rng: random.Random, n: int) -> list[str]:
    """``n`` city names. Faker's it_IT keeps its cities in a list built from a set, so ``fake.city()`` there
    depends on PYTHONHASHSEED; sample such lists sorted instead."""
    known = getattr(fake.provider("faker.providers.address"), "cities", None)
    pool = sorted(set(known or ()))
    return [rng.choice(pool) for _ in range(n)] if pool else [fake.city() for _ in range(n)]


class World:
    """The generator's state: one seeded RNG, Faker pools, sites, and what can be duplicated."""

    def __init__(self, seed: int):
        from faker import Faker

        self.rng = r = random.Random(seed)
        self.look_rng = random.Random(f"lookalikes-{seed}")  # str seeds hash with SHA-512: stable across processes
        self.fakers, self.names, self.cities = {}, {}, {}
        for lang, locale in LOCALES.items():
            fake = Faker(locale)
            fake.seed_instance(r.getrandbits(64))
            self.fakers[lang] = fake
            self.names[lang] = [fake.name() for _ in range(300)]
            self.cities[lang] = _cities(fake, r, 100)
        en = self.fakers["en"]
        self.users = [en.user_name() for _ in range(400)]
        self.first_last = [(en.first_name(), en.last_name()) for _ in range(300)]
        self.prose = EnglishProse(r, self.names["en"], self.cities["en"], [en.company() for _ in range(150)])
        self.domains: set[str] = set()
        self.sites = {lang: [self._site(lang) for _ in range(120 if lang == "en" else 20)] for lang in LOCALES}
        self.t = datetime(2024, 1, 8) + timedelta(days=r.randint(0, 300), seconds=r.randint(0, 86399))
        self.urls: set[str] = set()
        self.originals: list[tuple[dict, bytes, str]] = []  # (manifest entry, payload, content type)
        self.en_articles: list[dict] = []  # state to re-render near-duplicates

    def ip(self) -> str:
        r = self.rng
        first = r.choice((23, 45, 66, 81, 91, 104, 142, 151, 178, 185, 203, 212))
        return f"{first}.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}"

    def _site(self, lang: str) -> Site:
        r, fake = self.rng, self.fakers[lang]
        domain = fake.domain_name()
        while domain in self.domains:
            domain = domain.replace(".", f"{r.randint(2, 99)}.", 1)
        self.domains.add(domain)
        label = domain.split(".")[0].replace("-", " ").title()
        popular = tuple(self.title(lang) for _ in range(5))
        return Site(domain, label, lang, r.randrange(3), r.choice(SERVERS), self.ip(), popular, r.random() < 0.4)

    def site(self, lang: str) -> Site:
        return self.rng.choice(self.sites[lang])

    def url(self, site: Site, title: str, section: str = "blog", ext: str = "/") -> str:
        """A new URL on ``site``: a slug of the title (an id for non-Latin titles) under a dated section."""
        r = self.rng
        slug = _slug(title) if site.lang not in ("ru", "ja", "zh") else ""
        host = f"{'www.' if r.random() < 0.6 else ''}{site.domain}"
        base = f"https://{host}/{section}/{r.randint(2019, 2024)}/{r.randint(1, 12):02d}/"
        url = base + (f"{slug}{ext}" if slug else f"{r.randint(10000, 999999)}{'.html' if ext == '/' else ext}")
        while url in self.urls:
            url = base + f"{slug or 'p'}-{r.randint(2, 9999)}{ext}"
        self.urls.add(url)
        return url

    # -- text in any language -----------------------------------------------------------------
    def sentence(self, lang: str) -> str:
        if lang == "en":
            return self.prose.sentence()
        r, fake = self.rng, self.fakers[lang]
        if r.random() < 0.25:
            return r.choice(FRAMES[lang]).format(name=r.choice(self.names[lang]), city=r.choice(self.cities[lang]),
                                                 year=r.randint(1990, 2024), n=r.randint(2, 900), w=fake.word())
        return fake.sentence(nb_words=r.randint(6, 14))

    def paragraph(self, lang: str) -> list[str]:
        if lang == "en":
            return self.prose.paragraph()
        return [self.sentence(lang) for _ in range(self.rng.randint(3, 7))]

    def title(self, lang: str) -> str:
        if lang == "en":
            self.prose.topic = self.rng.choice(tuple(TOPICS))
            return self.prose.title()
        return self.fakers[lang].sentence(nb_words=self.rng.randint(3, 6)).rstrip(".。")

    def date(self) -> str:
        r = self.rng
        return f"{r.randint(2019, 2024)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}"

    def pii(self, lang: str) -> tuple[dict, str]:
        """One planted PII item and the sentence that carries it."""
        r = self.rng
        kind = r.choices(("email", "phone", "ip"), weights=(0.45, 0.4, 0.15))[0]
        ip = self.ip() if r.random() < 0.7 else f"192.168.{r.randint(0, 20)}.{r.randint(2, 254)}"
        value = pii_value(r, kind, lang, r.choice(self.first_last), ip)
        frames = PII_FRAMES[lang][("email", "phone", "ip").index(kind)]
        return {"type": kind, "value": value}, r.choice(frames).format(v=value)

    def lookalikes(self, lang: str) -> list[tuple[str, str]]:
        """PII look-alikes to plant on one English page: (value, sentence that carries it); none ~70% of the time."""
        r = self.look_rng
        if lang != "en" or r.random() >= LOOKALIKE_RATE:
            return []
        out = []
        for kind in r.sample(tuple(LOOKALIKE_FRAMES), r.randint(1, 3)):
            value = lookalike_value(r, kind)
            out.append((value, r.choice(LOOKALIKE_FRAMES[kind]).format(v=value)))
        return out

    def plant_insults(self, text: list[str]) -> None:
        """Insert one or two synthetic insults at random places among a post's sentences ``text``."""
        r = self.rng
        for _ in range(r.randint(1, 2)):
            text.insert(r.randint(0, len(text)), r.choice(TOXIC).format(
                i=r.choice(INSULTS), u=r.choice(self.users), n=self.prose.noun().sg, v=self.prose.verb().base))


def _entry(**fields) -> dict:
    """A manifest entry with every field present, in a fixed order."""
    return dict(record_id=None, url=None, status=200, content_type=None, page_type="article", lang=None,
                charset=None, declared_charset=None, meta_charset=None, title=None, topic=None, quality="high",
                low_quality_kind=None, toxic=False, pii=[], pii_lookalikes=[], duplicate_of=None,
                near_duplicate_of=None, broken=None) | fields


def _html_response(w: World, site: Site, url: str, html: str, entry: dict) -> Page:
    body, ctype, charset, declared, meta = encode_page(w.rng, html, site.lang)
    entry.update(url=url, content_type=ctype, charset=charset, declared_charset=declared, meta_charset=meta)
    return entry, body, ctype


# -- page kinds: each returns (manifest entry, payload bytes, content type[, extra HTTP headers]) -------------
def article(w: World, lang: str, pii: bool, keep: bool = True) -> Page:
    """A long-form article inside full site boilerplate; English ones are kept for near-duplicates."""
    r, site = w.rng, w.site(lang)
    title = w.title(lang)
    topic = w.prose.topic if lang == "en" else None
    sections = []
    for i in range(r.randint(2, 5)):
        heading = None if i == 0 or lang != "en" and r.random() < 0.5 else (
            w.prose.heading() if lang == "en" else w.title(lang))
        sections.append((heading, [w.paragraph(lang) for _ in range(r.randint(1, 3))]))
    items = []
    for _ in range(r.randint(1, 2) if pii else 0):
        item, sentence = w.pii(lang)
        p = r.choice([p for _, ps in sections for p in ps])
        p.insert(r.randint(0, len(p)), sentence)
        items.append(item)
    looks = w.lookalikes(lang)
    for _, sentence in looks:
        p = w.look_rng.choice([p for _, ps in sections for p in ps])
        p.insert(w.look_rng.randint(0, len(p)), sentence)
    state = dict(site=site, url=w.url(site, title), title=title, sections=sections, seed=r.getrandbits(32),
                 author=r.choice(w.names[lang]), date=w.date(), topic=topic,
                 related=[w.title(lang) for _ in range(r.randint(2, 5))])
    entry = _entry(lang=lang, title=title, topic=topic, pii=items, pii_lookalikes=[v for v, _ in looks])
    if lang == "en" and keep:
        w.en_articles.append(dict(state, entry=entry))
    return _render_article(w, state, entry)


def _render_article(w: World, s: dict, entry: dict) -> Page:
    body = article_body(s["sections"], zh_ja=s["site"].lang in ("zh", "ja"))
    html = render_page(s["site"], s["url"], s["title"], body, random.Random(s["seed"]), author=s["author"],
                       date=s["date"], related=s["related"])
    return _html_response(w, s["site"], s["url"], html, entry)


def forum(w: World, lang: str, pii: bool, toxic: bool = False) -> Page:
    """A discussion thread; a toxic one has insults in the second post and in ~60% of the later ones."""
    r, site = w.rng, w.site(lang)
    title = w.title(lang)
    if lang == "en":
        title = r.choice(("Question about {}?", "Has anyone tried {}?", "Help with {}", "{}: what do you think?")
                         ).format(f"{w.prose.adj()} {w.prose.noun().pl}")
    posts, items = [], []
    for i in range(r.randint(3, 9)):
        text = [w.sentence(lang) for _ in range(r.randint(1, 4))]
        if lang == "en" and r.random() < 0.4:
            text.insert(r.randint(0, len(text)), r.choice(FORUM_BITS))
        if toxic and (i == 1 or i > 1 and r.random() < 0.6):
            w.plant_insults(text)
        if pii and (not items or r.random() < 0.2):
            item, sentence = w.pii(lang)
            text.append(sentence)
            items.append(item)
        when = f"{w.date()} {r.randint(0, 23):02d}:{r.randint(0, 59):02d}"
        posts.append((r.choice(w.users), when, " ".join(text)))
    looks = w.lookalikes(lang)
    for _, sentence in looks:
        i = w.look_rng.randrange(len(posts))
        posts[i] = (*posts[i][:2], f"{posts[i][2]} {sentence}")
    url = w.url(site, title, "forum/thread")
    html = render_page(site, url, title, forum_body(posts, UI[lang]), r, kind="forum")
    return _html_response(w, site, url, html, _entry(page_type="forum", lang=lang, title=title, toxic=toxic,
                                                     pii=items, pii_lookalikes=[v for v, _ in looks]))


# Low-quality pages: each returns (lang, title, main HTML); `low_quality` wraps them in a site.
def spam(w: World) -> tuple[str, str, str]:
    r = w.rng
    lines = [escape(r.choice(SPAM).format(n=r.randint(2, 999)), quote=False) for _ in range(r.randint(12, 40))]
    return "en", "!!! BEST DEALS !!! CHEAP !!!", "<br>\n".join(lines)


def keyword_list(w: World) -> tuple[str, str, str]:
    r = w.rng
    nouns = [n for n in LEXICON[r.choice(tuple(TOPICS))][0] if not n.mass]
    terms = [r.choice(KEYWORD_MODS).format(r.choice(nouns).pl) for _ in range(r.randint(40, 120))]
    return "en", f"Best {r.choice(nouns).pl} 2024 cheap online", f"<p>{', '.join(terms)}</p>"


def short(w: World) -> tuple[str, str, str]:
    lang = _weighted(w.rng, LANGS)
    return lang, w.title(lang), "".join(f"<p>{escape(w.sentence(lang), quote=False)}</p>"
                                        for _ in range(w.rng.randint(1, 2)))


def repeated_lines(w: World) -> tuple[str, str, str]:
    lang = _weighted(w.rng, LANGS)
    line = f"<p>{escape(w.sentence(lang), quote=False)}</p>"
    return lang, w.title(lang), "\n".join([line] * w.rng.randint(20, 60))


def boilerplate_only(w: World) -> tuple[str, str, str]:
    lang = _weighted(w.rng, LANGS)
    return lang, w.title(lang), ""


def teaser_list(w: World) -> tuple[str, str, str]:
    """Excerpts cut off with an ellipsis (Gopher's ellipsis-line rule)."""
    r, lang = w.rng, _weighted(w.rng, LANGS)
    items = [f'<div class="teaser"><h3><a href="/p/{r.randint(1, 9999)}/">{escape(w.title(lang), quote=False)}</a>'
             f"</h3><p>{escape(w.sentence(lang)[:r.randint(40, 90)].rstrip(), quote=False)}…</p></div>"
             for _ in range(r.randint(10, 20))]
    return lang, w.title(lang), "\n".join(items)


LOW_QUALITY = {f.__name__: f for f in (spam, keyword_list, short, repeated_lines, boilerplate_only, teaser_list)}


def low_quality(w: World, kind: str) -> Page:
    r = w.rng
    lang, title, main = LOW_QUALITY[kind](w)
    site = w.site(lang)
    url = w.url(site, title, "page")
    related = [w.title(lang) for _ in range(r.randint(3, 8))] if kind == "boilerplate_only" else ()
    page_type = "article" if kind == "short" else "listing"
    html = render_page(site, url, title, main, r, kind=page_type, related=related, cookie=kind != "spam")
    entry = _entry(page_type=page_type, lang=lang, title=title, quality="low", low_quality_kind=kind)
    return _html_response(w, site, url, html, entry)


def duplicate(w: World) -> Page:
    """A byte-identical payload at another URL (a tracking parameter, AMP path, plain http, or a mirror)."""
    r = w.rng
    orig, payload, ctype = r.choice(w.originals)
    url = orig["url"]
    url = r.choice((f"{url}?utm_source=newsletter&utm_medium=email", f"{url}amp/", url.replace("https:", "http:", 1),
                    f"{url}?replytocom={r.randint(100, 9999)}",
                    url.replace("://", "://mirror.", 1).replace("mirror.www.", "mirror.")))
    while url in w.urls:
        url += f"&p={r.randint(1, 99)}" if "?" in url else f"?p={r.randint(1, 99)}"
    w.urls.add(url)
    return (dict(orig, url=url, duplicate_of=orig["record_id"], pii=list(orig["pii"]),
                 pii_lookalikes=list(orig["pii_lookalikes"])), payload, ctype)


def near_duplicate(w: World) -> Page:
    """An edited copy of an English article: a few words swapped, a sentence or two added or dropped."""
    r = w.rng
    orig = r.choice(w.en_articles)
    s = copy.deepcopy({k: v for k, v in orig.items() if k != "entry"})
    values = [p["value"] for p in orig["entry"]["pii"]]
    paragraphs = [p for _, ps in s["sections"] for p in ps]
    n_words = sum(len(x.split()) for p in paragraphs for x in p)
    w.prose.topic = s["topic"]
    for _ in range(max(1, n_words // 100)):  # swap words for others of the same class
        p = r.choice(paragraphs)
        i = r.randrange(len(p))
        if any(v in p[i] for v in values):
            continue
        tokens = p[i].split(" ")
        spots = [(j, m) for j, t in enumerate(tokens) if (m := _WORD.match(t)) and m.group(2).lower() in SWAPS]
        if spots:
            j, m = r.choice(spots)
            new = r.choice(SWAPS[m.group(2).lower()])
            tokens[j] = m.group(1) + (new.capitalize() if m.group(2)[0].isupper() else new) + m.group(3)
            p[i] = " ".join(tokens)
    for _ in range(1 if n_words < 300 else r.randint(1, 2)):  # add a sentence or two
        p = r.choice(paragraphs)
        p.insert(r.randint(0, len(p)), w.prose.sentence())
    if n_words > 300 and r.random() < 0.3:  # and drop one
        p = max(paragraphs, key=len)
        i = r.randrange(len(p))
        if not any(v in p[i] for v in values):
            del p[i]
    if r.random() < 0.5:  # scraped onto another site, with its own boilerplate
        s["site"], s["seed"] = w.site("en"), r.getrandbits(32)
    s["url"] = w.url(s["site"], s["title"], r.choice(("blog", "news", "archive")))
    text = " ".join(x for p in paragraphs for x in p)
    entry = _entry(lang="en", title=s["title"], topic=s["topic"], near_duplicate_of=orig["entry"]["record_id"],
                   pii=[p for p in orig["entry"]["pii"] if p["value"] in text],
                   pii_lookalikes=[v for v in orig["entry"]["pii_lookalikes"] if v in text])
    return _render_article(w, s, entry)


# Broken records: each returns a Page whose manifest entry says how it is broken.
def bad_charset(w: World, lang: str) -> Page:
    """Legacy bytes declared utf-8, utf-8 bytes declared legacy, or invalid bytes spliced into utf-8."""
    r = w.rng
    lang = lang if lang != "en" else r.choice(("de", "fr", "ru", "ja", "zh"))
    entry, body, _ = article(w, lang, pii=False, keep=False)
    html = body.decode(entry["charset"])
    variant = r.choice(("legacy_as_utf8", "utf8_as_legacy", "invalid_bytes"))
    legacy = next(c for c in CHARSETS[lang] if c != "utf-8")
    true, declared = {"legacy_as_utf8": (legacy, "utf-8"), "utf8_as_legacy": ("utf-8", legacy),
                      "invalid_bytes": ("utf-8", "utf-8")}[variant]
    for label in {entry["declared_charset"], entry["meta_charset"]} - {None}:
        html = html.replace(f"charset={label}", f"charset={declared}").replace(f'"{label}"', f'"{declared}"')
    body = html.encode(true, errors="xmlcharrefreplace")
    if variant == "invalid_bytes":  # bytes that are invalid UTF-8 at the start of some paragraphs
        starts = [m.end() for m in re.finditer(b"<p>", body)]
        for at in sorted(r.sample(starts, min(len(starts), r.randint(2, 6))), reverse=True):
            body = body[:at] + r.choice((b"\xff\xfe", b"\xc3\x28", b"\x81\x8d\x90", b"\xed\xa0\x80")) + body[at:]
    ctype = f"text/html; charset={declared}" if entry["declared_charset"] else "text/html"
    entry.update(quality="low", broken="bad_charset", charset=true, content_type=ctype,
                 declared_charset=declared if entry["declared_charset"] else None,
                 meta_charset=declared if entry["meta_charset"] else None)
    return entry, body, ctype


def truncated_html(w: World, lang: str) -> Page:
    """An article cut off inside a tag, somewhere in its middle."""
    r = w.rng
    entry, body, ctype = article(w, lang, pii=False, keep=False)
    cut = body.index(b"<", r.randint(len(body) // 3, len(body) * 4 // 5)) + r.randint(1, 2)
    entry.update(quality="low", broken="truncated_html")
    return entry, body[:cut], ctype


def non_html(w: World, lang: str) -> Page:
    """A PDF, a JPEG or a JSON API answer where a page was expected."""
    r = w.rng
    fmt = r.choice(("pdf", "jpeg", "json"))
    url = w.url(w.site(lang), w.title(lang), "files", ext={"pdf": ".pdf", "jpeg": ".jpg", "json": ".json"}[fmt])
    if fmt == "pdf":
        body, ctype = pdf_bytes(r, w.title("en")), "application/pdf"
    elif fmt == "jpeg":
        body, ctype = jpeg_bytes(r), "image/jpeg"
    else:
        body = json_bytes(r, [w.fakers[lang].word() for _ in range(r.randint(3, 12))])
        ctype = "application/json; charset=utf-8"
    entry = _entry(url=url, content_type=ctype, page_type=fmt, charset="utf-8" if fmt == "json" else None,
                   quality="low", broken="non_html")
    return entry, body, ctype


def empty_body(w: World, lang: str) -> Page:
    ctype = "text/html; charset=utf-8"
    entry = _entry(url=w.url(w.site(lang), w.title(lang)), content_type=ctype, page_type="empty", charset="utf-8",
                   declared_charset="utf-8", quality="low", broken="empty_body")
    return entry, b"", ctype


def http_404(w: World, lang: str) -> Page:
    """The site's own "page not found" page, in its language."""
    site, ui = w.site(lang), UI[lang]
    url = w.url(site, w.title(lang))
    html = render_page(site, url, ui["notfound"], f"<p>{ui['notfound_text']}</p>", w.rng, kind="listing")
    entry = _entry(status=404, page_type="error", lang=lang, title=ui["notfound"], quality="low", broken="http_404")
    return _html_response(w, site, url, html, entry)


def http_301(w: World, lang: str) -> Page:
    """Apache's redirect stub, with a Location header to the www/non-www twin."""
    url = w.url(w.site(lang), w.title(lang))
    target = url.replace("://www.", "://", 1) if "://www." in url else url.replace("://", "://www.", 1)
    ctype = "text/html; charset=iso-8859-1"
    entry = _entry(url=url, status=301, content_type=ctype, page_type="redirect", lang="en", charset="iso-8859-1",
                   declared_charset="iso-8859-1", title="301 Moved Permanently", quality="low", broken="http_301")
    return entry, redirect_html(target), ctype, [("Location", target)]


BROKEN = {f.__name__: f for f in (bad_charset, truncated_html, non_html, empty_body, http_404, http_301)}


def next_page(w: World) -> Page:
    """Draw one page kind and build it."""
    r = w.rng
    kind, lang, pii = _weighted(r, KINDS), _weighted(r, LANGS), r.random() < PII_RATE
    if kind == "duplicate" and not w.originals or kind == "near_duplicate" and not w.en_articles:
        kind = "article"
    if kind == "article":
        return article(w, lang, pii)
    if kind in ("forum", "toxic"):
        return forum(w, "en" if kind == "toxic" else lang, pii, toxic=kind == "toxic")
    if kind == "low":
        return low_quality(w, r.choice(tuple(LOW_QUALITY)))
    if kind == "duplicate":
        return duplicate(w)
    if kind == "near_duplicate":
        return near_duplicate(w)
    return BROKEN[r.choice(tuple(BROKEN))](w, lang)


def generate_sample(warc_path, manifest_path, pages: int = 3000, seed: int = 0, progress: bool = False) -> dict:
    """Write the sample WARC and its manifest; return counts of what was planted."""
    if pages < 1:
        raise ValueError(f"pages must be >= 1, got {pages}")
    w = World(seed)
    r = w.rng
    servers = {s.domain: s for sites in w.sites.values() for s in sites}
    info_id, manifest, n_records = record_id(r), [], 1
    with atomic_path(warc_path) as tmp, open(tmp, "wb") as fh:
        fh.write(warcinfo_record(info_id, w.t, seed, pages))
        for _ in tqdm(range(pages), desc="sample", unit="page", disable=not progress):
            entry, body, ctype, *extra = next_page(w)
            w.t += timedelta(seconds=r.randint(1, 40))
            host = entry["url"].split("/")[2].removeprefix("www.").removeprefix("mirror.")
            site = servers.get(host) or Site(host, host, "en", 0, r.choice(SERVERS), w.ip(), (), False)
            entry["record_id"] = record_id(r)
            records, n = page_records(r, info_id=info_id, resp_id=entry["record_id"], t=w.t, site=site,
                                      url=entry["url"], status=entry["status"], ctype=ctype, body=body,
                                      lang=entry["lang"] or "en", charset=entry["charset"], extra=sum(extra, []))
            fh.write(records)
            n_records += n
            manifest.append(entry)
            if (entry["status"] == 200 and body and ctype.startswith("text/html") and not entry["broken"]
                    and not entry["duplicate_of"] and not entry["near_duplicate_of"]):
                w.originals.append((entry, body, ctype))
    write_jsonl(manifest_path, manifest)
    return summarize(manifest, n_records, Path(warc_path).stat().st_size)


def summarize(manifest: list[dict], records: int, nbytes: int) -> dict:
    """Counts of what the manifest says was planted."""
    count = Counter
    return {"pages": len(manifest), "records": records, "bytes": nbytes,
            "lang": dict(count(m["lang"] for m in manifest).most_common()),
            "quality": dict(count(m["quality"] for m in manifest)),
            "low_quality": dict(count(m["low_quality_kind"] for m in manifest if m["low_quality_kind"]).most_common()),
            "toxic": sum(m["toxic"] for m in manifest), "pii": sum(bool(m["pii"]) for m in manifest),
            "pii_lookalikes": sum(bool(m["pii_lookalikes"]) for m in manifest),
            "duplicates": sum(bool(m["duplicate_of"]) for m in manifest),
            "near_duplicates": sum(bool(m["near_duplicate_of"]) for m in manifest),
            "broken": dict(count(m["broken"] for m in manifest if m["broken"]).most_common())}


@dataclass(frozen=True)
class SampleSettings:
    out: str = setting("data/raw/sample.warc.gz", "where to write the gzip WARC (one gzip member per record)")
    manifest: str = setting("data/raw/manifest.jsonl", "where to write the JSONL manifest: one object per response "
                                                       "record saying what it carries")
    pages: int = setting(3000, "number of pages (request+response pairs), >= 1")
    seed: int = setting(0, "random seed; the same seed gives the same bytes")


def build_parser() -> argparse.ArgumentParser:
    return build_config_parser(SampleSettings, "sample", "python -m pipeline.sample", __doc__.split("\n\n")[0])


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    try:
        apply_section(ap, "sample", params_path(argv))
    except ParamsError as e:
        ap.error(str(e))
    args = ap.parse_args(argv)
    if args.pages < 1:
        ap.error(f"--pages must be >= 1, got {args.pages}")
    start = time.perf_counter()
    s = generate_sample(args.out, args.manifest, pages=args.pages, seed=args.seed, progress=True)
    n = s["pages"]
    shares = {"en": s["lang"].get("en", 0), "low": s["quality"].get("low", 0), "toxic": s["toxic"], "pii": s["pii"],
              "dup": s["duplicates"], "near-dup": s["near_duplicates"], "broken": sum(s["broken"].values())}
    print(f"sample: {n} pages, {s['records']} records, {s['bytes'] / 1e6:.1f} MB -> {args.out} in "
          f"{time.perf_counter() - start:.1f}s | " + ", ".join(f"{k} {100 * v / n:.0f}%" for k, v in shares.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
