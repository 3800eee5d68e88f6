"""English prose for the generated sample crawl: a small probabilistic grammar over a topic vocabulary.

A page picks one of 13 topics; sentences are drawn from ~20 weighted shapes (plain clauses,
subordinate and compound clauses, quotes, questions, numbers, comparisons, imperatives, lists)
whose noun phrases recurse a little (prepositional phrases, relative clauses). Nouns, verbs and
adjectives come 70% from the topic and 30% from a general list, so paragraphs stay on topic. The
words carry their own inflections (``knife/knives``, ``win/won/winning``, ``flour~`` = mass
noun); regular forms are derived. Names, cities and companies come from pools drawn from a seeded
Faker, so the text is varied but a pure function of the seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

# topic: (nouns, verbs, adjectives). "a/b" = irregular plural or past (verbs: base/past/gerund),
# "x~" = mass noun (no plural, no "a").
TOPICS: dict[str, tuple[str, str, str]] = {
    "cooking": (
        "recipe sauce onion garlic~ oven pan skillet knife/knives spoon dough bread~ butter~ flour~ sugar~ "
        "tomato/tomatoes potato/potatoes lemon herb spice broth~ soup salad noodle cheese~ kitchen chef dinner "
        "breakfast ingredient flavor crust marinade dumpling pastry casserole mushroom carrot olive vinegar~ yogurt~ "
        "cabbage",
        "bake boil chop/chopped/chopping stir/stirred/stirring slice roast simmer season whisk fry grill taste serve "
        "peel knead marinate blend toss drain sprinkle",
        "crispy tender savory sweet spicy fresh creamy golden juicy bitter rich smoky tangy fluffy hearty"),
    "travel": (
        "hotel beach island museum passport flight airport train station luggage~ tourist guide village harbor "
        "mountain valley ticket map hostel journey itinerary cathedral market bridge coastline ferry cabin trail "
        "border restaurant souvenir festival temple suitcase",
        "visit explore book pack wander discover hike reach cross climb photograph sail rent/rented board tour",
        "scenic remote crowded charming historic quiet sunny coastal colorful ancient affordable breathtaking "
        "peaceful rugged exotic"),
    "science": (
        "experiment hypothesis/hypotheses molecule cell protein atom electron telescope galaxy/galaxies planet "
        "laboratory/laboratories sample data~ theory/theories particle enzyme genome fossil species/species climate~ "
        "measurement microscope researcher orbit gravity~ reaction bacterium/bacteria virus/viruses neuron isotope",
        "measure observe analyze test detect predict simulate publish confirm replicate estimate isolate "
        "model/modeled examine calculate",
        "empirical microscopic statistical chemical genetic magnetic thermal complex precise theoretical molecular "
        "significant experimental cosmic"),
    "sports": (
        "team coach player match season goal referee stadium league tournament trophy striker defender medal race "
        "marathon athlete fan championship score injury/injuries training~ bicycle racket tennis~ football~ "
        "basketball~ swimmer pitch sprint",
        "win/won/winning score defend train kick pass tackle coach sprint qualify beat/beat/beating lose/lost sign "
        "compete celebrate",
        "athletic competitive unbeaten defensive aggressive fast tired victorious rival professional legendary "
        "dramatic decisive young talented"),
    "history": (
        "empire king queen war battle treaty castle dynasty/dynasties revolution army/armies soldier monarch "
        "parliament merchant colony/colonies manuscript chronicle artifact ruin emperor peasant fortress crusade "
        "republic archive historian siege territory/territories alliance reform",
        "conquer rule build/built defeat sign invade negotiate overthrow/overthrew found establish abolish document "
        "unite inherit destroy",
        "medieval ancient royal colonial imperial forgotten powerful feudal bloody noble wealthy rebellious legendary "
        "classical turbulent"),
    "tech": (
        "computer software~ laptop smartphone server database network algorithm app browser processor keyboard screen "
        "update password cloud startup developer code~ bug feature battery/batteries interface robot chip sensor "
        "website program framework compiler router",
        "install update debug/debugged/debugging deploy download upload configure encrypt compile optimize reboot "
        "code test launch integrate",
        "digital wireless open-source secure reliable smart portable powerful intuitive outdated buggy scalable "
        "automated virtual responsive"),
    "gardening": (
        "garden seed soil~ compost~ rose shrub lawn hedge greenhouse shovel hose weed root leaf/leaves flower bulb "
        "fertilizer~ mulch~ orchard bee pot seedling vine petal branch harvest sunflower tulip",
        "plant water prune harvest dig/dug/digging mulch weed grow/grew fertilize sow transplant "
        "trim/trimmed/trimming rake pick",
        "green leafy fragrant blooming hardy wild organic lush dry fertile shady perennial thorny ripe native"),
    "finance": (
        "bank loan budget investment stock bond market investor mortgage savings~ interest~ tax/taxes income~ fund "
        "pension dividend portfolio inflation~ debt~ credit~ account currency/currencies economy/economies price "
        "profit salary/salaries insurance~ broker wallet",
        "invest save borrow lend/lent spend/spent earn pay/paid trade afford manage diversify withdraw/withdrew "
        "deposit hedge",
        "financial fiscal monetary profitable risky stable volatile expensive annual long-term tax-free bullish "
        "frugal modest generous"),
    "health": (
        "doctor patient nurse hospital clinic diet exercise vitamin sleep~ heart muscle symptom treatment "
        "therapy/therapies vaccine disease habit nutrient blood~ stress~ headache pill medicine~ workout posture "
        "calorie fever allergy/allergies",
        "heal prescribe recover diagnose stretch rest treat prevent breathe strengthen reduce monitor consult relax",
        "healthy chronic mental physical nutritious painful gentle balanced active sore sedentary clinical sleepy "
        "vital fit"),
    "music": (
        "song album guitar piano drum melody/melodies band concert singer lyric chord rhythm orchestra violin "
        "composer stage studio tune choir note symphony/symphonies solo jazz~ playlist microphone tour ballad",
        "play sing/sang record compose perform tune rehearse listen strum release improvise hum/hummed/humming "
        "conduct mix",
        "loud acoustic catchy melodic soulful upbeat raw haunting electric rhythmic mellow harmonic nostalgic "
        "experimental brilliant"),
    "books": (
        "novel author chapter character plot poem poet film director actor scene script sequel library/libraries "
        "reader critic episode series/series genre publisher memoir essay/essays biography/biographies "
        "trilogy/trilogies narrator",
        "write/wrote/writing read/read publish film direct narrate adapt translate review edit illustrate",
        "literary fictional gripping dark witty tragic romantic cinematic epic moving clever bleak"),
    "nature": (
        "forest river lake wolf/wolves bird fox/foxes deer/deer whale ocean storm glacier desert wildlife~ habitat "
        "ecosystem rainforest insect butterfly/butterflies eagle coral~ tide meadow swamp",
        "migrate hunt protect restore pollute flood nest graze thrive observe",
        "endangered arctic tropical vast frozen muddy dense pristine fragile"),
    "home": (
        "house/houses roof wall floor window door furniture~ sofa lamp shelf/shelves carpet paint~ drill hammer "
        "ladder tile closet garage basement heater curtain mattress",
        "renovate paint repair install clean decorate measure sand/sanded fix replace insulate",
        "cozy spacious cramped sturdy rustic minimalist drafty bright tidy"),
}
GENERAL = (
    "person/people day week year month time~ way problem idea reason question story/stories change family/families "
    "friend city/cities country/countries world group part place system number fact example moment experience "
    "decision community/communities result plan effort tradition lesson mistake detail choice project weekend morning "
    "evening neighbor",
    "find/found see/saw make/made/making take/took/taking use need want love enjoy try improve change share explain "
    "discuss remember consider describe create prefer/preferred/preferring notice imagine compare "
    "choose/chose/choosing follow avoid learn support help carry keep/kept bring/brought show recommend",
    "important simple difficult popular common modern traditional small large new old local different special perfect "
    "strange typical careful useful obvious huge tiny beautiful famous serious busy cheap",
)
ADVERBS = ("often rarely usually quickly slowly carefully finally actually really quite surprisingly "
           "recently gradually always sometimes clearly easily suddenly honestly").split()
PROFESSIONS = ("teacher engineer nurse farmer writer photographer student chef researcher designer "
               "mechanic lawyer pilot librarian journalist carpenter economist").split()
RELATIVES = "grandmother grandfather uncle aunt sister brother cousin mother father".split()
MONTHS = ("January February March April May June July August September October November "
          "December").split()
PREPS = ("in", "with", "for", "after", "during", "near", "without", "behind", "across", "under", "around")
INTROS = ("for example", "however", "in fact", "of course", "at first", "meanwhile", "still",
          "later that year", "to be honest", "in the end", "on the other hand", "as a result",
          "surprisingly", "in my experience", "at the same time", "once again")
SUBORD = ("because", "when", "although", "if", "while", "since", "once", "before", "after", "unless")
MODALS = ("can", "should", "might", "will", "could", "must", "would")
QUANTS = ("many", "several", "a few", "dozens of", "hundreds of", "countless", "some", "two", "three")
_SUBJ_PRON = (("I", "1s"), ("we", "pl"), ("you", "pl"), ("they", "pl"), ("he", "3s"), ("she", "3s"))

# Text for forum threads, toxic comments and low-quality pages (English).
INSULTS = ("idiot", "moron", "loser", "clown", "fool", "troll", "dimwit", "jerk", "imbecile", "buffoon")
TOXIC = ("You are such a {i}, {u}.", "Shut up, nobody cares about your stupid {n}.", "What a load of crap.",
         "Only a complete {i} would {v} the {n} like that.", "I hate people like you.", "Get lost, you pathetic {i}.",
         "This is the dumbest damn thing I have ever read.", "Your {n} is trash and so are you.",
         "Nobody asked for your garbage opinion, {i}.", "Are you really this stupid or just pretending?",
         "Go away and stop wasting everyone's time, you {i}.", "Damn, you are dumb.", "Stop posting this crap, {u}.",
         "You clearly know nothing, you ignorant {i}.", "I hope your stupid {n} breaks, {i}.", "Typical {i} behavior.",
         "Learn to read, you {i}.", "Everyone here thinks you are a {i}, {u}.", "What a worthless, lazy {i} you are.",
         "I hate this crap and I hate you.", "Shut your mouth, {u}, you sound like a total {i}.",
         "Who let this {i} post again?", "Your {n} looks like garbage, just like your brain.")
FORUM_BITS = ("Thanks for sharing!", "I had the same problem last month.", "Any advice would be appreciated.",
              "Great post, thanks.", "+1, this worked for me.", "Edit: fixed a typo.", "Following this thread.",
              "Has anyone else noticed this?", "Good point, I never thought about it that way.")
SPAM = ("BUY NOW!!! Cheap pills 90% OFF >>> http://cheap-pills-{n}.biz/?ref={n} <<<",
        "$$$ Make ${n},000 a week from home!!! CLICK HERE: http://easy-cash-{n}.xyz $$$",
        "★★★ Best replica watches ★★★ FREE shipping!!! www.replica-{n}.top ★★★",
        "WIN a FREE iPhone!!! Limited offer >>> click here <<< http://win-{n}.info/?id={n}",
        "Casino BONUS 500% !!! Play now at http://casino-{n}.bet !!! $$$",
        "Lose {n} pounds in 10 days!!! Doctors HATE this trick >>> http://slim-{n}.shop",
        "!!! CHEAP LOANS !!! no credit check !!! apply NOW >>> http://loans-{n}.biz <<<")
KEYWORD_MODS = ("best {}", "cheap {}", "{} online", "buy {} 2024", "{} near me", "{} review", "top 10 {}",
                "{} discount", "free {}", "{} sale", "{} price", "{} for beginners", "how to choose {}")

@dataclass(frozen=True)
class Noun:
    sg: str
    pl: str
    mass: bool


@dataclass(frozen=True)
class Verb:
    base: str
    s: str
    past: str
    ing: str
    regular: bool


def _plural(w: str) -> str:
    if w.endswith(("s", "x", "z", "ch", "sh")):
        return w + "es"
    return w[:-1] + "ies" if w.endswith("y") and w[-2] not in "aeiou" else w + "s"


def _noun(spec: str) -> Noun:
    if spec.endswith("~"):
        return Noun(spec[:-1], spec[:-1], True)
    sg, _, pl = spec.partition("/")
    return Noun(sg, pl or _plural(sg), False)


def _verb(spec: str) -> Verb:
    base, past, ing = (spec.split("/") + ["", ""])[:3]
    s = base + "es" if base.endswith(("s", "x", "z", "ch", "sh", "o")) else _plural(base)
    if not past:
        past = (base + "d" if base.endswith("e") else
                base[:-1] + "ied" if base.endswith("y") and base[-2] not in "aeiou" else base + "ed")
    if not ing:
        ing = base[:-1] + "ing" if base.endswith("e") and not base.endswith(("ee", "ye", "oe")) else base + "ing"
    return Verb(base, s, past, ing, "/" not in spec)


def _lexicon(nouns: str, verbs: str, adjs: str) -> tuple[tuple[Noun, ...], tuple[Verb, ...], tuple[str, ...]]:
    return tuple(map(_noun, nouns.split())), tuple(map(_verb, verbs.split())), tuple(adjs.split())


LEXICON = {topic: _lexicon(*words) for topic, words in TOPICS.items()}
GENERAL_LEX = _lexicon(*GENERAL)
# Same-category alternatives for every surface form, used to edit near-duplicates plausibly.
SWAPS: dict[str, tuple[str, ...]] = {}
for _nouns, _verbs, _adjs in (*LEXICON.values(), GENERAL_LEX):
    for _forms in ([n.sg for n in _nouns], [n.pl for n in _nouns if not n.mass], list(_adjs),
                   [v.past for v in _verbs], [v.ing for v in _verbs]):
        for _w in _forms:
            SWAPS.setdefault(_w, tuple(x for x in _forms if x != _w))


def _a(word: str) -> str:
    return ("an " if word[0] in "aeiou" and not word.startswith(("uni", "eu", "one")) else "a ") + word


class EnglishProse:
    """Sentences, paragraphs, headings and titles about one topic, drawn from ``rng``."""

    def __init__(self, rng: random.Random, names: list[str], cities: list[str], orgs: list[str]):
        self.rng, self.names, self.cities, self.orgs = rng, names, cities, orgs
        self.topic = "cooking"
        self.past = False

    # -- words -------------------------------------------------------------------------------
    def _lex(self, i: int):
        return (LEXICON[self.topic] if self.rng.random() < 0.7 else GENERAL_LEX)[i]

    def noun(self) -> Noun:
        return self.rng.choice(self._lex(0))

    def verb(self) -> Verb:
        return self.rng.choice(self._lex(1))

    def adj(self) -> str:
        return self.rng.choice(self._lex(2))

    def year(self) -> int:
        return self.rng.randint(1700, 1990) if self.topic == "history" else self.rng.randint(1995, 2024)

    def name(self) -> str:
        return self.rng.choice(self.names)

    # -- phrases -----------------------------------------------------------------------------
    def np(self, plural: bool | None = None, depth: int = 0) -> tuple[str, bool]:
        """A noun phrase and whether it is plural."""
        r, n = self.rng, self.noun()
        plural = (r.random() < 0.35) if plural is None else plural
        plural = plural and not n.mass
        adjs = dict.fromkeys(self.adj() for _ in range(r.choice((0, 1, 1, 1, 2)))) if r.random() < 0.5 else ()
        head = " ".join((*adjs, n.pl if plural else n.sg))
        if plural:
            det = r.choice(("the", "these", "those", "many", "some", "most", "our", "their", "", "",
                            "all the", str(r.randint(2, 12))))
        elif n.mass:
            det = r.choice(("the", "some", "more", "our", "", "enough", "this"))
        else:
            det = r.choice(("the", "the", "a", "a", "this", "every", "my", "our", "their", "another", "that"))
        text = (_a(head) if det == "a" else f"{det} {head}" if det else head)
        if depth == 0 and r.random() < 0.18:
            text += f" {r.choice(('of', 'with', 'from', 'near', 'in'))} {self.np(depth=1)[0]}"
        elif depth == 0 and r.random() < 0.08:
            text += f" that {self.vp('pl' if plural else '3s', depth=1)}"
        return text, plural

    def pp(self) -> str:
        r = self.rng
        return self._tiered((0.12, lambda: f"in {r.choice(self.cities)}"),
                            (0.2, lambda: f"in {self.year()}"),
                            (0.26, lambda: f"on {r.choice(MONTHS)} {r.randint(1, 28)}"),
                            otherwise=lambda: f"{r.choice(PREPS)} {self.np(depth=1)[0]}")

    def subject(self) -> tuple[str, str]:
        """A subject and its agreement class: ``1s`` (I), ``3s`` or ``pl``."""
        def noun_phrase() -> tuple[str, str]:
            text, plural = self.np()
            return text, "pl" if plural else "3s"

        return self._tiered((0.28, lambda: self.rng.choice(_SUBJ_PRON)),
                            (0.4, lambda: (self.name(), "3s")),
                            otherwise=noun_phrase)

    def be(self, agr: str) -> str:
        if self.past:
            return "were" if agr == "pl" else "was"
        return {"1s": "am", "3s": "is"}.get(agr, "are")

    def vp(self, agr: str, depth: int = 0) -> str:
        r, v = self.rng, self.verb()
        tiers = [(0.12, lambda: f"{self.be(agr)} {r.choice(ADVERBS) + ' ' if r.random() < 0.4 else ''}{self.adj()}"),
                 (0.22, lambda: f"{r.choice(MODALS)} {v.base} {self.np(depth=1)[0]}"),
                 (0.3, lambda: f"{self.be(agr)} {v.ing} {self.np(depth=1)[0]}")]
        if v.regular and not self.past:  # present perfect: the past is a sure participle only for regular verbs
            tiers.append((0.36, lambda: f"{'has' if agr == '3s' else 'have'} {v.past} {self.np(depth=1)[0]}"))

        def simple() -> str:
            form = v.past if self.past else (v.s if agr == "3s" else v.base)
            out = f"{form} {self.np(depth=depth + 1)[0]}"
            if depth == 0 and r.random() < 0.35:
                out += " " + self.pp()
            if depth == 0 and r.random() < 0.12:
                out += " " + r.choice(ADVERBS)
            return out

        return self._tiered(*tiers, otherwise=simple)

    def clause(self) -> str:
        subj, agr = self.subject()
        return f"{subj} {self.vp(agr)}"

    # -- sentences: one method per shape (a plain one is a ``clause``), drawn by weight (SHAPES below) ---------
    def sentence(self) -> str:
        shape = self.rng.choices(SHAPES, weights=SHAPE_WEIGHTS)[0]
        s = shape(self)
        return s if s[0] == '"' else _cap(s) + ("" if s.endswith("?") else ".")

    def _pick(self, *options):
        """Build only the chosen alternative (each option is a zero-argument callable)."""
        return self.rng.choice(options)()

    def _tiered(self, *tiers, otherwise):
        """Draw k uniform in [0, 1) and build the first of ``tiers`` ((bound, zero-argument callable), bounds
        increasing) with k < bound, else ``otherwise`` (only the chosen alternative is built)."""
        k = self.rng.random()
        return next((build for bound, build in tiers if k < bound), otherwise)()

    def s_intro(self) -> str:
        lead = self.rng.choice(INTROS) if self.rng.random() < 0.6 else self.pp()
        return f"{lead}, {self.clause()}"

    def s_subordinate(self) -> str:
        return f"{self.rng.choice(SUBORD)} {self.clause()}, {self.clause()}"

    def s_compound(self) -> str:
        return f"{self.clause()}, {self.rng.choice(('and', 'but', 'so', 'yet'))} {self.clause()}"

    def s_quote(self) -> str:
        r = self.rng
        role = (f"{_a(r.choice(PROFESSIONS))} from {r.choice(self.cities)}" if r.random() < 0.5
                else f"who works at {r.choice(self.orgs)}")
        return f'"{_cap(self.clause())}," {"said" if self.past else "says"} {self.name()}, {role}.'

    def s_number(self) -> str:
        r = self.rng
        n, unit = r.choice(((r.randint(2, 95), "percent of"), (r.randint(2, 60), "minutes with"),
                            (r.randint(10, 900), "people saw"), (r.randint(2, 40), "kilometers from")))
        spent, took = ("spent", "took") if self.past else ("spends", "takes")
        return self._pick(
            lambda: f"about {n} {unit} {self.np(plural=True)[0]} {self.vp('pl')}",
            lambda: f"{self.name()} {spent} ${r.randint(5, 5000):,} on {self.np()[0]}",
            lambda: f"the {self.noun().sg} {took} {r.randint(2, 30)} {r.choice(('hours', 'days', 'weeks'))} "
                    f"to {self.verb().base}",
            lambda: f"by {self.year()}, {self.clause()}")

    def s_there(self) -> str:
        r, be = self.rng, ("were" if self.past else "are")
        s = f"there {be} {r.choice(QUANTS)} {self.adj()} {self.noun().pl} {self.pp()}"
        return s + (f", and {self.np(plural=True)[0]} {be} {self.adj()}" if r.random() < 0.4 else "")

    def s_compare(self) -> str:
        a, agr = self.subject()
        how = self.rng.choice(("just as {} as", "not nearly as {} as", "far less {} than", "much more {} than"))
        return f"{a} {self.be(agr)} {how.format(self.adj())} {self.np()[0]}"

    def s_question(self) -> str:
        v, o = self.verb(), self.np()[0]
        return self._pick(lambda: f"why do {self.noun().pl} {v.base} {o}?",
                          lambda: f"what makes {o} so {self.adj()}?",
                          lambda: f"how {'did' if self.past else 'can'} {self.name()} {v.base} {o}?",
                          lambda: f"is it possible to {v.base} {o} {self.pp()}?")

    def s_imperative(self) -> str:
        v, w = self.verb(), self.verb()
        return self._pick(lambda: f"{v.base} {self.np()[0]} {self.pp()}",
                          lambda: f"make sure to {v.base} {self.np()[0]} before you {w.base} {self.np()[0]}",
                          lambda: f"try to {v.base} {self.np()[0]} {self.rng.choice(ADVERBS)}",
                          lambda: f"don't {v.base} {self.np()[0]} unless you {w.base} {self.np()[0]}")

    def s_it(self) -> str:
        v, be = self.verb(), self.be("3s")
        return self._pick(lambda: f"it {be} {self.adj()} to {v.base} {self.np()[0]} {self.pp()}",
                          lambda: f"one of the most {self.adj()} {self.noun().pl} {be} {self.np()[0]}",
                          lambda: f"the {self.adj()} thing about {self.np()[0]} {be} that {self.clause()}")

    def s_personal(self) -> str:
        r, v = self.rng, self.verb()
        when = r.choice(("summer", "weekend", "morning", "winter"))
        return self._pick(lambda: f"my {r.choice(RELATIVES)} used to {v.base} {self.np()[0]} every {when}",
                          lambda: f"I {v.past} {self.np()[0]} when I was {r.randint(6, 40)}",
                          lambda: f"{self.name()} and I {v.past} {self.np()[0]} {self.pp()}")

    def s_list(self) -> str:
        subj, agr = self.subject()
        need = "needed" if self.past else ("needs" if agr == "3s" else "need")
        return f"{subj} {need} {self.np()[0]}, {self.np()[0]} and {self.np()[0]}"

    def s_which(self) -> str:
        return f"{self.clause()}, which {'made' if self.past else 'makes'} {self.np()[0]} {self.adj()}"

    # -- paragraphs and titles -----------------------------------------------------------------
    def paragraph(self) -> list[str]:
        self.past = self.rng.random() < (0.8 if self.topic == "history" else 0.3)
        return [self.sentence() for _ in range(self.rng.randint(3, 7))]

    def heading(self) -> str:
        n = self.noun()
        return _cap(self._pick(lambda: f"{self.adj()} {n.pl} and {self.noun().pl}",
                               lambda: f"how to {self.verb().base} {_a(n.sg)}", lambda: f"why {n.pl} matter",
                               lambda: f"the {self.adj()} side of {n.pl}", lambda: f"what we learned about {n.pl}",
                               lambda: f"{self.verb().ing} {n.pl} {self.pp()}"))

    def title(self) -> str:
        r, n = self.rng, self.noun()
        return _cap(self._pick(lambda: f"{r.randint(3, 15)} {self.adj()} ways to {self.verb().base} your {n.sg}",
                               lambda: f"the {self.adj()} history of the {n.sg}",
                               lambda: f"a guide to {self.adj()} {n.pl}",
                               lambda: f"{r.choice(self.cities)}'s {self.adj()} {n.sg} scene",
                               lambda: f"what {n.pl} can teach us about {self.noun().pl}",
                               lambda: f"I tried {self.verb().ing} {n.pl} for a month",
                               lambda: f"{n.pl}: {self.adj()}, {self.adj()} and {self.adj()}"))


SHAPES = (EnglishProse.clause, EnglishProse.s_intro, EnglishProse.s_subordinate, EnglishProse.s_compound,
          EnglishProse.s_quote, EnglishProse.s_number, EnglishProse.s_there, EnglishProse.s_compare,
          EnglishProse.s_question, EnglishProse.s_imperative, EnglishProse.s_it, EnglishProse.s_personal,
          EnglishProse.s_list, EnglishProse.s_which)
SHAPE_WEIGHTS = (22, 12, 10, 8, 5, 5, 5, 5, 5, 5, 5, 5, 4, 4)


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]
