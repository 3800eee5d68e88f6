"""Generated labelled fastText training data for the embedded classifiers (quality, toxicity, NSFW).

The generated sets come from the same text generators as the sample crawl (``pipeline.sample.crawl.World``:
the English grammar prose of ``pipeline.sample.text`` plus Faker text in seven other languages, the crawl's
spam lines, keyword modifiers, insults and forum bits, planted PII sentences, the site boilerplate
strings of ``pipeline.sample.pages``), drawn from seed streams of their own (hashes of ``sample_labels:<task>:<seed>``),
so no example is a page of a crawl generated with a small seed. Each example is the *extracted text* a
page would give, one line per block, as trafilatura or resiliparse would print it:

- quality (after CS336 assignment 4 and DCLM's ``hq``/``cc`` classifier): ``wiki`` = long well-formed
  articles (sometimes with a little boilerplate left by the extractor) and discussion threads; ``cc`` =
  the crawl's low-quality kinds (spam, keyword lists, short pages, repeated lines, boilerplate only,
  teaser lists) plus "page not found" shells and boilerplate-heavy pages around a scrap of prose;
- toxicity (after Dolma's Jigsaw taggers): ``toxic`` = forum threads or single comments with the synthetic
  insults planted the way the crawl plants them (some with one insulting post only); ``non-toxic`` = the
  same kinds of threads without them, articles, low-quality pages, threads and articles in other languages;
- nsfw: the crawl has no adult content, so ``nsfw`` is a mild synthetic class: adult-site spam pages and
  adult keyword lists (ad vocabulary only, nothing graphic); ``non-nsfw`` = articles, threads, ordinary
  spam and keyword lists (hard negatives: spam is not adult content), the other low-quality kinds.

A bag-of-words classifier cannot see repetition (a line repeated 40 times averages to that line), so
``repeated_lines`` examples cap held-out quality accuracy near 0.93-0.95; Gopher's repetition rules catch them.

These are the embedded default's demonstration data: models trained on them say nothing about real pages, and their
provenance sidecar says ``generated`` so the filter refuses them on real crawls. The real labelled sets (Davidson,
Jigsaw, reference pages) are in pipeline/classifiers/labelled.py.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from pipeline.classifiers.labelled import write_split
from pipeline.classifiers.models import task_spec
from pipeline.sample.crawl import LANGS, PII_RATE, World
from pipeline.sample.pages import UI
from pipeline.sample.text import FORUM_BITS, KEYWORD_MODS, LEXICON, SPAM, TOPICS

# Mild adult-site spam: vocabulary and ad phrasing only. {c} city, {n} number, {a} adjective.
ADULT = ("Hot singles in {c} are waiting to chat with you tonight >>> http://hot-singles-{n}.xxx",
         "18+ ONLY!!! Sexy webcam models live now, free registration >>> http://live-cams-{n}.xxx",
         "XXX videos: {n},000 free adult clips updated daily at www.xxx-tube-{n}.com",
         "Naughty {a} models want to meet you, no credit card needed!!! click here <<<",
         "WARNING: this site contains adult content and nudity. You must be 18 or older to enter.",
         "Discreet escort service in {c}, call now, open 24/7 >>> http://escorts-{n}.sex",
         "Sexy lingerie photo gallery, uncensored and free, new nude pics every day",
         "Adult dating with no strings attached: hookups in {c} tonight, 100% discreet",
         "Top 10 porn sites of 2024 ranked, free XXX access >>> http://best-porn-{n}.xxx",
         "Erotic massage and strip club deals in {c}, VIP entry for adults only",
         "Lonely {a} wives near you want to flirt, 18+ only >>> http://flirt-{n}.xxx",
         "NSFW: uncensored nude webcam shows, {n} models online right now",
         "Enter (18+) | Leave", "Explicit adult content. Viewer discretion is advised.")
ADULT_MODS = ("free {} videos", "sexy {}", "{} xxx", "nude {}", "{} porn", "live {} webcam", "hot {} 18+",
              "{} escort", "naughty {}", "{} adult dating", "uncensored {}", "{} hookup")
ADULT_NOUNS = ("singles", "models", "women", "couples", "amateurs", "webcams", "chat", "wives", "babes", "strippers")


def label_seed(task: str, seed: int) -> int:
    """The seed of the labelled-data stream for ``task``: far from the small seeds crawls use."""
    return int.from_bytes(hashlib.sha256(f"sample_labels:{task}:{seed}".encode()).digest()[:8], "big")


@functools.lru_cache(maxsize=1)
def _world():
    """The ``World`` all labelled data is drawn from (Faker pools for eight locales, sites: ~1 s to build)."""
    return World(label_seed("world", 0))


class LabelledText:
    """Extracted-text versions of the crawl's page kinds, drawn from one shared ``World`` (deterministic).

    The world's pools (names, users, cities, sites) are fixed; its random streams (the shared ``random.Random``
    and each Faker's) are reseeded from ``label_seed(task, seed)``, so a task's data depends on the task and the
    seed only, whatever was generated before it in the process.
    """

    def __init__(self, task: str, seed: int):
        self.w = _world()
        stream = label_seed(task, seed)
        self.w.rng.seed(stream)
        for i, fake in enumerate(self.w.fakers.values()):
            fake.seed_instance(stream + i)
        self.w.prose.topic, self.w.prose.past = "cooking", False
        self.r = self.w.rng

    def lang(self, en_share: float | None = None) -> str:
        r = self.r
        if en_share is not None:
            return "en" if r.random() < en_share else r.choice([k for k in LANGS if k != "en"])
        return r.choices(tuple(LANGS), weights=tuple(LANGS.values()))[0]

    # -- boilerplate (site chrome an extractor may leave behind) ---------------------------------------
    def chrome(self, lang: str, k: int | None = None) -> list[str]:
        r, ui, site = self.r, UI[lang], self.w.site(lang)
        blocks = [[site.name], [ui[x] for x in ("home", "nav2", "nav3", "nav4", "nav5", "nav6")],
                  [ui["search"]], [ui["home"], "›", ui["nav2"]], [ui["cookie"], ui["accept"], ui["settings"]],
                  [ui["share"], "Facebook", "X", "WhatsApp", "E-mail"], [ui["popular"], *site.popular],
                  [ui["newsletter"], ui["subscribe"]], [ui["related"], *(self.w.title(lang) for _ in range(3))],
                  [ui["about"], ui["contact"], ui["privacy"], ui["terms"]], [f"© 2024 {site.name}. {ui['rights']}"]]
        picked = sorted(r.sample(range(len(blocks)), k if k is not None else r.randint(3, len(blocks))))
        return [line for i in picked for line in blocks[i]]

    # -- high-quality kinds ---------------------------------------------------------------------------
    def article(self, lang: str) -> str:
        r, w = self.r, self.w
        lines = [w.title(lang)]
        for i in range(r.randint(2, 5)):
            if i and (lang == "en" or r.random() < 0.5):
                lines.append(w.prose.heading() if lang == "en" else w.title(lang))
            lines += [" ".join(w.paragraph(lang)) for _ in range(r.randint(1, 3))]
        if r.random() < PII_RATE:  # the crawl plants e-mails, phones and IPs in a quarter of its articles
            i = r.randrange(1, len(lines))
            lines[i] = f"{lines[i]} {w.pii(lang)[1]}"
        if r.random() < 0.25:  # a little chrome left by the extractor
            chrome = self.chrome(lang, r.randint(1, 2))
            lines = chrome + lines if r.random() < 0.5 else lines + chrome
        return "\n".join(lines)

    def forum(self, lang: str, toxic: bool = False, posts: int | None = None, rate: float = 0.6) -> str:
        """A thread as extracted: title, then posts (with date lines). A toxic one has insults in its second
        post (its only one, if single) and in a share ``rate`` of the later ones (the crawl's is 0.6)."""
        r, w = self.r, self.w
        title = w.title(lang)
        if lang == "en":
            title = r.choice(("Question about {}?", "Has anyone tried {}?", "Help with {}", "{}: what do you think?")
                             ).format(f"{w.prose.adj()} {w.prose.noun().pl}")
        lines, dates = [title], r.random() < 0.6
        n = posts or r.randint(3, 9)
        for i in range(n):
            text = [w.sentence(lang) for _ in range(r.randint(1, 4))]
            if lang == "en" and r.random() < 0.4:
                text.insert(r.randint(0, len(text)), r.choice(FORUM_BITS))
            if toxic and (i == 1 or i > 1 and r.random() < rate or n == 1):
                w.plant_insults(text)
            if r.random() < PII_RATE / 3:
                text.append(w.pii(lang)[1])
            if dates:
                lines.append(f"{w.date()} {r.randint(0, 23):02d}:{r.randint(0, 59):02d}")
            lines.append(" ".join(text))
        if n > 1 and r.random() < 0.3:  # extractors sometimes put the first post above the title
            lines.insert(0, lines.pop(2 if dates else 1))
        return "\n".join(lines)

    # -- low-quality kinds (pipeline/sample/crawl.py LOW_QUALITY, text only) ------------------------------------
    def spam(self) -> str:
        r = self.r
        return "\n".join(["!!! BEST DEALS !!! CHEAP !!!"] + [r.choice(SPAM).format(n=r.randint(2, 999))
                                                             for _ in range(r.randint(5, 40))])

    def keyword_list(self, mods=None, nouns=None) -> str:
        r = self.r
        nouns = nouns or [n.pl for n in LEXICON[r.choice(tuple(TOPICS))][0] if not n.mass]
        terms = [r.choice(mods or KEYWORD_MODS).format(r.choice(nouns)) for _ in range(r.randint(15, 120))]
        return f"Best {r.choice(nouns)} 2024 cheap online\n{', '.join(terms)}"

    def short(self, lang: str) -> str:
        return "\n".join([self.w.title(lang)] + [self.w.sentence(lang) for _ in range(self.r.randint(1, 2))])

    def repeated_lines(self, lang: str) -> str:
        line = self.w.sentence(lang)
        return "\n".join([self.w.title(lang)] + [line] * self.r.randint(1, 40))

    def boilerplate_only(self, lang: str) -> str:
        return "\n".join(self.chrome(lang) + [self.w.title(lang)])

    def teaser_list(self, lang: str) -> str:
        r, w = self.r, self.w
        lines = [w.title(lang)]
        for _ in range(r.randint(5, 20)):
            if r.random() < 0.5:
                lines.append(w.title(lang))
            lines.append(w.sentence(lang)[:r.randint(40, 90)].rstrip() + "…")
        return "\n".join(lines)

    def not_found(self, lang: str) -> str:
        ui = UI[lang]
        return "\n".join(self.chrome(lang, self.r.randint(0, 4)) + [ui["notfound"], ui["notfound_text"]])

    def boilerplate_heavy(self, lang: str) -> str:
        """A scrap of prose (one or two sentences) drowned in site chrome."""
        r = self.r
        scrap = " ".join(self.w.sentence(lang) for _ in range(r.randint(1, 2)))
        lines = self.chrome(lang, r.randint(5, 11))
        lines.insert(r.randint(0, len(lines)), scrap)
        return "\n".join(lines)

    def adult(self) -> str:
        r, w = self.r, self.w
        lines = [r.choice(("XXX Free Adult Videos", "Hot Singles Near You", "18+ Live Cams", "Adult Dating"))]
        for _ in range(r.randint(3, 25)):
            lines.append(r.choice(ADULT).format(c=r.choice(w.cities["en"]), n=r.randint(2, 999),
                                                a=r.choice(("bored", "local", "shy", "wild", "single"))))
        return "\n".join(lines)

    # -- one labelled example per task ------------------------------------------------------------------
    def quality(self, positive: bool) -> str:
        r = self.r
        if positive:
            return self.article(self.lang()) if r.random() < 0.8 else self.forum(self.lang(), r.random() < 0.4)
        return self.low_quality(self.lang())

    def low_quality(self, lang: str) -> str:
        """One of the crawl's low-quality kinds (spam and keyword lists are English there too)."""
        kind = self.r.choice(("spam", "keyword_list", "short", "repeated_lines", "boilerplate_only", "teaser_list",
                              "not_found", "boilerplate_heavy"))
        return getattr(self, kind)() if kind in ("spam", "keyword_list") else getattr(self, kind)(lang)

    def toxicity(self, positive: bool) -> str:
        r = self.r
        if positive:  # a share of threads with a single insulting post: one insult must be enough
            posts = 1 if r.random() < 0.2 else None
            return self.forum("en", toxic=True, posts=posts, rate=r.choice((0.6, 0.3, 0.0)))
        k = r.random()
        if k < 0.4:
            return self.forum("en", posts=1 if r.random() < 0.2 else None)
        if k < 0.6:
            return self.article("en")
        if k < 0.85:
            return self.low_quality("en")
        return self.forum(self.lang(en_share=0.0)) if k < 0.93 else self.article(self.lang(en_share=0.0))

    def nsfw(self, positive: bool) -> str:
        r = self.r
        if positive:  # (a thread with one adult comment in it is too mixed to call: the filter is for adult sites)
            return self.adult() if r.random() < 0.75 else self.keyword_list(ADULT_MODS, ADULT_NOUNS)
        k = r.random()
        if k < 0.3:
            return self.article(self.lang(en_share=0.8))
        if k < 0.5:
            return self.forum("en", toxic=r.random() < 0.2, posts=1 if r.random() < 0.2 else None)
        if k < 0.6:
            return self.spam()
        return self.keyword_list() if k < 0.7 else self.low_quality(self.lang(en_share=0.8))


def labelled_examples(task: str, n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` (label, text) examples for ``task``, alternating positive and negative (balanced), seeded."""
    spec = task_spec(task)  # a ValueError for an unknown task
    if n < 2:
        raise ValueError(f"n must be >= 2 (one example per class), got {n}")
    gen, (pos, neg) = LabelledText(task, seed), (spec.positive, spec.negative)
    make = getattr(gen, task)
    return [(pos, make(True)) if i % 2 == 0 else (neg, make(False)) for i in range(n)]


def write_labelled_data(out_dir, task: str, n: int, seed: int = 0) -> tuple[Path, Path]:
    """Write ``<task>.train`` and ``<task>.valid`` (fastText format, 20% held out) under ``out_dir``; their paths."""
    return write_split(labelled_examples(task, n, seed), out_dir, task, seed, 0.2)
