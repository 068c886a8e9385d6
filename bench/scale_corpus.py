"""A synthetic corpus whose names grow with it the way real corpora's do, for bench/scale.py (issue 38).

    from scale_corpus import documents, cached_corpus
    for document in documents(count=1000, seed=1): ...       # in memory: text and the names it mentions
    folder, figures, _ = cached_corpus(work, count=1000, seed=1)  # on disk, once per (count, seed)

No network and no shared data: a seeded `random.Random(seed)` and this file's own word lists (invented words
from syllables for names, plain English for the prose around them).

How names grow. Every document is about a topic; topics are drawn from a Pitman-Yor process (a Chinese
restaurant with a discount), so a few topics are large and new ones keep coming, about as the square root of
the documents. Each topic has its own Pitman-Yor restaurant of entities (its community of related names), and
when a topic needs a name it has not used yet it asks a global Pitman-Yor restaurant, which gives a name some
other topic already uses (in proportion to how many topics use it) or a brand-new one. This hierarchy (as
in hierarchical Pitman-Yor language models) gives what real corpora show: the number of distinct names
grows as a power of the corpus (Heaps' law), their frequencies follow a power law (Zipf: many names seen
once, a few seen everywhere, which link topics), and names of a topic co-occur. A document draws its cast
(3 names plus one per 100 words) from its topic, a third of it from a second topic in 30% of documents,
and its sentences mention the cast, the first drawn most often.

The text. Documents of 200 to 4,000 words (log-normal, median 700), in paragraphs of 3 to 7 sentences made
from templates with slots for English words and for names. A sentence holds no name (45%) or 1 to 3 (0.9 on
average). Names are Capitalized Multi-Word proper names as the fast method's rule-based extractor
(graphrag_lite/nlp/extractor.py) finds them: persons "Mara Velling" or "Dr. Ilse Varnok" (a common given name
or an honorific types them PERSON), organizations "Brask Shipping Company", "University of Ostra" (a company
suffix types them), places "Ostra", "Port Aldermere", always after in/at/near/from/to (which types them GEO),
events "Halvard Accord". No sentence starts with a name and no two names touch, so every mention is found as
written (tests/test_scale_corpus.py checks it); nor does "and" join two names, which the offline fake model's
extraction (graphrag_lite/fake/extraction.py) would take for one name, as it would a name after a capitalised
sentence start (templates start with a word and a lower-case one). Documents are drawn one after another from
one generator: the first N documents of a larger corpus of the same seed are the corpus of N.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from graphrag_lite.nlp.extractor import CONNECTORS, DATE_WORDS, STARTERS
from graphrag_lite.nlp.extractor import HONORIFICS as EXTRACTOR_HONORIFICS

# --- the processes' parameters ------------------------------------------------------------------------
TOPIC_DISCOUNT, TOPIC_CONCENTRATION = 0.5, 5.0
TOPIC_NAME_DISCOUNT, TOPIC_NAME_CONCENTRATION = 0.7, 30.0
GLOBAL_DISCOUNT, GLOBAL_CONCENTRATION = 0.9, 500.0
SECOND_TOPIC = 0.3  # share of documents that also draw a third of their cast from a second topic
MEDIAN_WORDS, WORDS_SIGMA, MIN_WORDS, MAX_WORDS = 700, 0.7, 200, 4000
NAMES_PER_SENTENCE = (0.45, 0.30, 0.18, 0.07)  # probabilities of 0, 1, 2, 3 names
KINDS = {"PERSON": 0.45, "ORGANIZATION": 0.25, "GEO": 0.15, "EVENT": 0.15}
DOCUMENTS_PER_FOLDER = 1000

# --- word lists (our own) ------------------------------------------------------------------------------
NOUNS = """plan report meeting harvest market river road bridge engine letter council season storm trade
contract budget schedule shipment factory archive festival museum harbour crop drought election survey
vote census treaty loan strike debate method sample theory record journey voyage cargo fleet garden
library audit policy reform vaccine outbreak clinic ward lecture course thesis grant patent prototype
software network server database protocol signal circuit battery turbine reactor pipeline mine quarry
forest orchard vineyard bakery brewery kitchen recipe menu exhibit painting sculpture novel poem
chapter verse song album concert stage rehearsal audience ticket salary pension tax tariff deficit
surplus loss profit share dividend merger lawsuit verdict appeal hearing witness testimony evidence
inquiry scandal rumour proposal agreement dispute border tunnel canal dam well reservoir flood frost
drill path""".split()  # noqa: SIM905
ADJECTIVES = """new old large small early late quiet busy costly cheap careful sudden gradual annual
weekly formal informal public private local regional remote urban rural northern southern eastern western
final initial modest ambitious bold cautious fragile sturdy narrow broad bright dim steady uneven
familiar strange rare common minor major brief lengthy detailed vague fair harsh gentle rapid slow
crowded empty heavy light useful costly clever simple complex urgent routine""".split()  # noqa: SIM905
VERBS = """approved delayed reviewed funded opened closed rebuilt repaired described questioned supported
rejected signed drafted announced cancelled expanded reduced measured studied visited inspected praised
criticised moved carried shipped stored sold bought leased rented planned organised hosted attended
recorded published printed translated discussed debated settled challenged defended examined tested
finished started resumed postponed doubled halved managed owned ran restored painted""".split()  # noqa: SIM905
ADVERBS = """quickly slowly quietly openly again twice early late carefully briefly eventually finally
reluctantly gladly jointly separately abruptly steadily""".split()  # noqa: SIM905
CUES = ("in", "at", "near", "from", "to", "through")  # words that make the extractor type a place GEO

ONSETS = ("b", "br", "d", "dr", "f", "g", "gr", "h", "k", "kr", "l", "m", "n", "p", "pr", "r", "s", "st", "t",
          "tr", "v", "w", "z", "th", "sk", "c", "al", "el", "or", "ost")
VOWELS = ("a", "e", "i", "o", "u", "a", "e", "o", "ai", "ei", "au")
CODAS = ("", "", "", "n", "r", "l", "s", "nd", "rk", "ll", "m", "st", "v")
ENDINGS = ("", "", "", "son", "berg", "ard", "ell", "ing", "ov", "mere", "ford", "holm", "vik", "dale", "ton")
GIVEN_NAMES = """John Mary James Anna Peter Sarah Thomas Elizabeth David Laura Michael Julia Daniel Sophia
Robert Olivia Henry Alice Charles Emma George Ellen Samuel Martha Joseph Susan Paul Catherine Andrew Margaret
Mara Ilse Signe Lena Anouk Yara Noor Saskia Inka Marit Elif Runa Fenna Ines Livia Britt Dagny Freya Tomas Oren
Davor Piet Rasmus Emil Teodor Bram Leif Joost Kasimir Aurel Hugo Matteo Anselm Cyril Edvin Gustav Kaspar Magnus
Pavel Stellan Ulrik Alvar Cosmo Esko Florian""".split()  # noqa: SIM905
HONORIFICS = ("Dr.", "Professor", "Captain", "Judge")
SECTORS = ("Logistics", "Insurance", "Shipping", "Energy", "Textiles", "Mining", "Software", "Transit",
           "Fisheries", "Media", "Chemicals", "Foods")
ORG_SUFFIXES = ("Company", "Group", "Foundation", "Institute", "Agency", "Society", "Council", "Bank",
                "Corporation")
PLACE_FORMS = ("{}", "{}", "{}", "Port {}", "Lake {}", "{} Valley", "{} Bay", "Mount {}", "{} Springs")
EVENT_WORDS = ("Accord", "Summit", "Festival", "Treaty", "Initiative", "Project", "Expedition", "Reform")

# Templates: {n} noun, {a} adjective, {v} verb, {r} adverb, {A} a name (person, organization or event),
# {P} a place (after a cue the template writes). None starts with a name; no two names touch, nor are
# they joined by "and" (the fake model's extraction would take "A and B" for one name).
TEMPLATES = """The {a} {n} {v} the {n} {r}.
After the {n}, the {a} {n} {v} a {a} {n} and the {n} {v} {r}.
In the {a} {n}, the {n} {v} the {n} of the {n}.
It was a {a} {n}, and the {n} {v} the {a} {n} before the {n} {v} {r}.
Most of the {n} {v} the {a} {n} without a {a} {n}.
Some said the {n} {v} the {n} because the {a} {n} {v} the {n}.
The {a} {n} was {v} by {A} after the {n}.
According to {A}, the {n} {v} the {a} {n}.
Later that {n}, {A} {v} the {a} {n} {r}.
The {n} of {A} {v} the {a} {n}.
The {a} {n} {v} in {P} during the {n}.
A {a} {n} was {v} near {P} {r}.
Travellers from {P} {v} the {a} {n}.
The {n} was {v} by {A}, while {A} {v} the {a} {n}.
After the {n}, {A} {v} {A} about the {a} {n}.
According to {A}, {A} {v} the {n} {r}.
Last {n}, {A} {v} the {a} {n} in {P}.
The {a} {n} at {P} was {v} by {A}.
Officials said {A} {v} the {n} near {P}.
The {n} {v} from {P} to {P} {r}.
A {a} {n} linked the {n} in {P} with the {n} near {P}.
The {n} {v} {A}, {A} as well as {A} in the {a} {n}.
Apart from {A}, the {n} {v} {A} together with {A}.
The {n} was {v} by {A} with {A} in {P} {r}.
At the {n} near {P}, {A} {v} {A}.
The {a} {n} {v} by {A} ran from {P} to {P}.
The {n} went through {P}, near {P}, then into {P}.""".splitlines()
SLOT = re.compile(r"\{(\w)\}")
ARTICLE = re.compile(r"\b([Aa]) (?=[aeiou])")  # "a" before a vowel is "an"


@dataclass(frozen=True)
class Template:
    pieces: tuple[str, ...]  # literal text and slot letters, alternating: literal, slot, literal, ...
    names: int
    places: int


def compile_templates() -> dict[tuple[int, int], list[Template]]:
    """The templates by (names, places) they hold."""
    grouped: dict[tuple[int, int], list[Template]] = {}
    for line in TEMPLATES:
        pieces = tuple(SLOT.split(line))
        template = Template(pieces, pieces[1::2].count("A"), pieces[1::2].count("P"))
        grouped.setdefault((template.names, template.places), []).append(template)
    return grouped


class Restaurant:
    """A Pitman-Yor process over items (one table per item): the next draw is a new item, made by `new`, with
    probability (concentration + discount * items) / (concentration + draws), else an item already drawn, in
    proportion to its draws less the discount (a random earlier draw, kept with probability
    (count - discount) / count)."""

    def __init__(self, discount: float, concentration: float) -> None:
        self.discount, self.concentration = discount, concentration
        self.draws: list[int] = []
        self.counts: Counter[int] = Counter()

    def draw(self, rng: random.Random, new: Callable[[], int]) -> int:
        fresh = self.concentration + self.discount * len(self.counts)
        if not self.draws or rng.random() * (self.concentration + len(self.draws)) < fresh:
            item = new()
        else:
            while True:
                item = rng.choice(self.draws)
                if rng.random() * self.counts[item] < self.counts[item] - self.discount:
                    break
        self.draws.append(item)
        self.counts[item] += 1
        return item


@dataclass
class Document:
    number: int
    text: str
    names: list[str]  # the names it mentions, each once, in order of first mention
    topic: int


class World:
    """The names, topics and restaurants, grown as documents are drawn."""

    def __init__(self, seed: int, max_names: int | None = None) -> None:
        self.rng = random.Random(seed)
        self.max_names = max_names  # past it, a "new" name is one of those already made: a graph that stops growing
        self.names: list[str] = []
        self.places: list[bool] = []  # whether each name is a place
        self.taken: set[str] = set()
        self.surnames: list[str] = []
        self.topics = Restaurant(TOPIC_DISCOUNT, TOPIC_CONCENTRATION)
        self.topic_names: list[Restaurant] = []
        self.global_names = Restaurant(GLOBAL_DISCOUNT, GLOBAL_CONCENTRATION)
        self.templates = compile_templates()

    def new_topic(self) -> int:
        self.topic_names.append(Restaurant(TOPIC_NAME_DISCOUNT, TOPIC_NAME_CONCENTRATION))
        return len(self.topic_names) - 1

    def name_of_topic(self, topic: int) -> int:
        return self.topic_names[topic].draw(self.rng, lambda: self.global_names.draw(self.rng, self.new_name))

    def new_name(self) -> int:
        """A name no entity has yet, of a kind drawn by KINDS (past max_names, one drawn among the names)."""
        if self.max_names is not None and len(self.names) >= self.max_names:
            return self.rng.randrange(len(self.names))
        kind = self.rng.choices(list(KINDS), weights=list(KINDS.values()))[0]
        while (name := self.spell(kind)) in self.taken:
            pass
        self.taken.add(name)
        self.names.append(name)
        self.places.append(kind == "GEO")
        return len(self.names) - 1

    def spell(self, kind: str) -> str:
        rng = self.rng
        if kind == "PERSON":
            if self.surnames and rng.random() < 0.3:  # families: surnames are shared
                surname = rng.choice(self.surnames)
            else:
                surname = invented_word(rng)
                self.surnames.append(surname)
            title = rng.choice(HONORIFICS) + " " if rng.random() < 0.1 else ""
            return f"{title}{rng.choice(GIVEN_NAMES)} {surname}"
        word = invented_word(rng)
        if kind == "ORGANIZATION":
            form = rng.random()
            if form < 0.15:
                return f"University of {word}"
            sector = rng.choice(SECTORS) + " " if form < 0.6 else ""
            return f"{word} {sector}{rng.choice(ORG_SUFFIXES)}"
        if kind == "GEO":
            return rng.choice(PLACE_FORMS).format(word)
        return f"{word} {rng.choice(EVENT_WORDS)}"

    def document(self, number: int) -> Document:
        rng = self.rng
        topic = self.topics.draw(rng, self.new_topic)
        words = min(MAX_WORDS, max(MIN_WORDS, round(rng.lognormvariate(math.log(MEDIAN_WORDS), WORDS_SIGMA))))
        cast = self.cast(topic, 3 + words // 100)
        mentioned: dict[str, None] = {}
        paragraphs: list[str] = []
        written = 0
        while written < words:
            sentences = [self.sentence(cast, mentioned) for _ in range(rng.randint(3, 7))]
            written += sum(s.count(" ") + 1 for s in sentences)
            paragraphs.append(" ".join(sentences))
        return Document(number, "\n\n".join(paragraphs) + "\n", list(mentioned), topic)

    def cast(self, topic: int, size: int) -> list[int]:
        """The names a document draws from its topic (a third from a second topic, sometimes), each once."""
        second = self.topics.draw(self.rng, self.new_topic) if self.rng.random() < SECOND_TOPIC else topic
        cast: dict[int, None] = {}
        for draw in range(4 * size):  # a small topic may not have `size` names yet: it gets new ones
            if len(cast) == size:
                break
            cast[self.name_of_topic(second if draw % 3 == 2 else topic)] = None
        return list(cast)

    def sentence(self, cast: list[int], mentioned: dict[str, None]) -> str:
        rng = self.rng
        count = min(len(cast), rng.choices(range(len(NAMES_PER_SENTENCE)), weights=NAMES_PER_SENTENCE)[0])
        chosen: dict[int, None] = {}
        while len(chosen) < count:  # Zipf within the document: the first drawn name the most mentioned
            chosen[cast[int((len(cast) + 1) ** rng.random()) - 1]] = None
        names = [n for n in chosen if not self.places[n]]
        places = [n for n in chosen if self.places[n]]
        template = rng.choice(self.templates[(len(names), len(places))])
        fill = {"A": iter(names), "P": iter(places)}
        out = []
        for position, piece in enumerate(template.pieces):
            if position % 2 == 0:
                out.append(piece)
            elif piece in fill:
                name = self.names[next(fill[piece])]
                mentioned[name] = None
                out.append(name)
            else:
                out.append(rng.choice(WORDS[piece]))
        return ARTICLE.sub(r"\1n ", "".join(out))


WORDS = {"n": NOUNS, "a": ADJECTIVES, "v": VERBS, "r": ADVERBS}
# an invented word is never one the prose writes in lower case, nor one the extractor treats apart (sentence
# starters, dates, honorifics, connectors): the extractor would not find it as a name
NOT_NAMES = frozenset(w.lower() for w in [*NOUNS, *ADJECTIVES, *VERBS, *ADVERBS, *CUES, *re.findall(r"[A-Za-z]+",
                      " ".join(TEMPLATES)), *STARTERS, *DATE_WORDS, *EXTRACTOR_HONORIFICS, *CONNECTORS])


def invented_word(rng: random.Random) -> str:
    syllables = rng.choice((1, 2, 2, 2, 3))
    word = "".join(rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS) for _ in range(syllables))
    word += rng.choice(ENDINGS) if len(word) < 9 else ""
    return word.capitalize() if len(word) > 2 and word not in NOT_NAMES else invented_word(rng)


def documents(count: int, seed: int, max_names: int | None = None) -> Iterator[Document]:
    """The corpus of `count` documents of `seed`, one document at a time."""
    world = World(seed, max_names)
    for number in range(count):
        yield world.document(number)


def document_path(folder: Path, number: int) -> Path:
    return folder / f"{number // DOCUMENTS_PER_FOLDER:03d}" / f"doc-{number:06d}.txt"


def write_corpus(folder: Path, count: int, seed: int, max_names: int | None = None) -> dict:
    """Write the corpus into `folder` (one text file a document, a thousand a subfolder); its figures."""
    frequency: Counter[str] = Counter()  # documents mentioning each name
    topics: set[int] = set()
    words = mentions = size = 0
    for document in documents(count, seed, max_names):
        path = document_path(folder, document.number)
        path.parent.mkdir(parents=True, exist_ok=True)
        size += path.write_text(document.text, encoding="utf-8")
        frequency.update(document.names)
        topics.add(document.topic)
        words += len(document.text.split())
        mentions += len(document.names)
    return {"documents": count, "seed": seed, "words": words, "characters": size, "topics": len(topics),
            "distinct_names": len(frequency), "names_in_2_documents_or_more": sum(n >= 2 for n in frequency.values()),
            "names_in_one_document": sum(n == 1 for n in frequency.values()),
            "document_mentions": mentions, "most_documents_of_a_name": max(frequency.values(), default=0)}


def cached_corpus(work: Path, count: int, seed: int, max_names: int | None = None) -> tuple[Path, dict, bool]:
    """The folder of the corpus's documents under `work`, written once per (count, seed) and version of this
    file (figures in corpus.json, written last: a folder without it is an interrupted write, written again),
    its figures, and whether it was written now."""
    version = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:8]  # an edited generator writes anew
    capped = "" if max_names is None else f"-names{max_names}"
    folder = work / f"corpus-n{count}-seed{seed}{capped}-{version}"
    figures_file = folder / "corpus.json"
    if figures_file.is_file():
        return folder / "documents", json.loads(figures_file.read_text(encoding="utf-8")), False
    shutil.rmtree(folder, ignore_errors=True)
    figures = write_corpus(folder / "documents", count, seed, max_names)
    figures_file.write_text(json.dumps(figures, indent=1), encoding="utf-8")
    return folder / "documents", figures, True
