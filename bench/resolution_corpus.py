"""A synthetic entity-resolution corpus with known truth (issue 13, part 5).

    from resolution_corpus import generate
    corpus = generate(seed=1)
    merge_graph(corpus.entities, corpus.relationships, resolve=True)

What it stands for: the output of an extraction model that extracts every name correctly, with the right
type, from ~150 documents about ~400 invented entities. The extraction is given, so whatever a benchmark
measures on these tables is entity resolution alone (and the clustering after it), not extraction.

The world, drawn from a seeded `random.Random(seed)` and this file's own word lists (invented words from
syllables, plus plain English generic words):
- 25 groups (topics: fisheries, rail, film, ...), each with 6 persons, 4 organizations, 3 places (GEO) and
  3 events: 400 entities.
- Every entity is written under 1-3 names, in the patterns writers use:
  persons: full name / surname / title + surname ("Mara Velling" / "Velling" / "Dr. Velling"; titles are
    honorifics that normalization strips, or roles that it keeps: "Senator Velling"), and title + full name;
  organizations: in full, shortened and as their first word ("Northwind Logistics Group" / "Northwind
    Logistics" / "Northwind"), with a company suffix ("Brask Textiles Inc." / "Brask Textiles"), acronyms
    ("Coastal Fisheries Authority" / "CFA");
  places: with and without their generic word ("Port Aldermere" / "Aldermere" / "the Port of Aldermere",
    "Lake Ostra" / "Ostra", "Ostra River" / "Ostra", "Republic of Veskaria" / "Veskaria");
  events: a word dropped from the middle ("Halvard Climate Summit" / "Halvard Summit"), a year in front
    ("2019 Halvard Climate Summit"), an article ("the Halvard Summit").
- Hard negatives, different entities of one group whose names share words: organizations sharing a first
  word ("Northwind Logistics" / "Northwind Bank"), persons sharing a surname ("Mara Velling" / "Tomas
  Velling"), places sharing their proper word ("Lake Ostra" / "Ostra River"), events differing in one middle
  word or the year ("Halvard Climate Summit" / "Halvard Trade Summit", "2019 ..." / "2021 ..."), and a place
  with a feature named after it (the town "Ostra" / "Lake Ostra", as Michigan / Lake Michigan). As a careful
  writer would, they are never written under the shared part alone, so every name denotes one entity (a
  name's normalized form, too, belongs to one entity: the truth is a function of the name).
- 6 documents (text units) per group; each mentions ~7 entities of its group and often one or two of a
  neighbouring group; an entity's names vary between documents (each of its names is used somewhere): a
  document writes the full name alone, or the full name and then a short one, or a short one alone (a
  well-known short name, or a later chunk of a long text). Relationships link co-mentioned entities (a
  spanning tree of the document's entities plus some more pairs), written with the names the document uses.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field

import pandas as pd

from graphrag_lite.graph.resolution import edit_distance
from graphrag_lite.names import normalize_name

TYPES = ("PERSON", "ORGANIZATION", "GEO", "EVENT")
PER_GROUP = {"PERSON": 6, "ORGANIZATION": 4, "GEO": 3, "EVENT": 3}
GROUPS = 25
DOCS_PER_GROUP = 6
INTRODUCED = 0.8  # the share of short names first used where the full name is (else alone, as later uses may be)
ENTITY_COLUMNS = ["text_unit_id", "name", "type", "description"]
RELATIONSHIP_COLUMNS = ["text_unit_id", "source", "target", "description", "strength"]

# --- word lists (our own) -------------------------------------------------------------------------------
ONSETS = ("b", "br", "d", "dr", "f", "g", "gr", "h", "k", "kr", "l", "m", "n", "p", "pr", "r", "s", "st", "t",
          "tr", "v", "w", "z", "th", "sk", "c", "ost", "al", "el", "or")
VOWELS = ("a", "e", "i", "o", "u", "a", "e", "o", "ai", "ei", "au")
CODAS = ("", "", "", "n", "r", "l", "s", "nd", "rk", "ll", "m", "st", "v")
ENDINGS = {
    "surname": ("", "son", "berg", "ard", "ell", "ing", "ov", "ez", "wick", "ley", "ander", "mann"),
    "place": ("", "mere", "ford", "holm", "vik", "dale", "stad", "wyn", "ora", "by", "haven", "ton"),
    "org": ("", "ex", "ia", "on", "wind", "ico", "ara", "line", "way", "gate"),
}
FIRST_NAMES_F = ("Mara", "Ilse", "Signe", "Lena", "Anouk", "Yara", "Noor", "Saskia", "Inka", "Marit", "Elif",
                 "Runa", "Fenna", "Ines", "Livia", "Britt", "Dagny", "Freya", "Halle", "Jorun", "Linnea", "Nadia",
                 "Odile", "Rosalind", "Tove", "Vesna", "Xenia", "Zora", "Beatrix", "Delphine", "Greta", "Katya")
FIRST_NAMES_M = ("Tomas", "Oren", "Davor", "Piet", "Rasmus", "Emil", "Teodor", "Bram", "Leif", "Joost",
                 "Kasimir", "Aurel", "Hugo", "Matteo", "Anselm", "Cyril", "Edvin", "Gustav", "Ivo", "Kaspar",
                 "Magnus", "Pavel", "Stellan", "Ulrik", "Wilhelm", "Yusuf", "Alvar", "Cosmo", "Esko", "Florian")
HONORIFIC_TITLES = ("Dr.", "Professor", "Captain", "General")  # stripped by normalize_name
ROLE_TITLES = ("Senator", "Mayor", "Judge", "Minister", "Inspector", "Commissioner")  # kept: part of the name
COMPANY_TAILS = ("Group", "Holdings", "Partners", "Corporation", "Inc.", "Ltd", "Company", "Trust", "Industries")
GENERAL_SECTORS = ("Logistics", "Bank", "Insurance", "Consulting", "Foods", "Motors", "Media", "Software",
                   "Construction", "Security", "Chemicals", "Shipyards", "Airlines", "Brewing", "Realty")
ACRONYM_ADJECTIVES = ("Coastal", "National", "Regional", "Northern", "Central", "United", "Independent",
                      "Federal", "Southern", "Royal", "Western", "Eastern", "Joint", "Continental")
ACRONYM_BODIES = ("Authority", "Council", "Agency", "Institute", "Board", "Commission", "Federation", "Union",
                  "League", "Bureau", "Association", "Foundation", "Directorate", "Alliance")
PLACE_PREFIXES = ("Port", "Lake", "Mount", "Fort", "Cape")
PLACE_SUFFIXES = ("River", "Bay", "Valley", "Island", "City", "Province", "Forest", "Heights", "Springs")
PLACE_KINDS = {"Port": "a port town", "Lake": "a lake", "Mount": "a mountain", "Fort": "a fortified town",
               "Cape": "a headland", "River": "a river", "Bay": "a bay", "Valley": "a valley", "Island": "an island",
               "City": "a city", "Province": "a province", "Forest": "a forest", "Heights": "a hill district",
               "Springs": "a spa town"}
COUNTRY_FORMS = ("Republic", "Kingdom", "Duchy")
EVENT_KINDS = ("Summit", "Conference", "Forum", "Festival", "Fair", "Congress", "Symposium", "Games", "Expo",
               "Assembly", "Convention", "Exhibition")
YEARS = tuple(range(1998, 2025))
# topic: (event topic words, organization sectors, acronym domain words, person roles)
THEMES = {
    "fisheries": (("Fisheries", "Ocean"), ("Seafoods", "Trawling"), ("Fisheries", "Marine"),
                  ("trawler captain", "marine biologist", "harbour master", "fish buyer")),
    "climate": (("Climate", "Carbon"), ("Energy", "Solar"), ("Climate", "Environmental"),
                ("climate scientist", "negotiator", "energy analyst", "activist")),
    "rail": (("Rail", "Transit"), ("Railways", "Rolling Stock"), ("Rail", "Transport"),
             ("railway engineer", "signal technician", "transport planner", "train driver")),
    "shipping": (("Maritime", "Port"), ("Shipping", "Containers"), ("Shipping", "Maritime"),
                 ("ship owner", "freight broker", "customs officer", "pilot")),
    "health": (("Health", "Vaccine"), ("Pharmaceuticals", "Diagnostics"), ("Health", "Medical"),
               ("epidemiologist", "nurse", "hospital director", "virologist")),
    "mining": (("Mining", "Minerals"), ("Minerals", "Metals"), ("Mining", "Geological"),
               ("geologist", "mine manager", "union organiser", "surveyor")),
    "textiles": (("Textile", "Fashion"), ("Textiles", "Weaving"), ("Textile", "Garment"),
                 ("designer", "mill owner", "weaver", "buyer")),
    "banking": (("Finance", "Banking"), ("Capital", "Savings"), ("Banking", "Financial"),
                ("banker", "regulator", "economist", "auditor")),
    "education": (("Education", "Teaching"), ("Learning", "Textbooks"), ("Education", "Schools"),
                  ("headteacher", "professor of pedagogy", "school inspector", "student leader")),
    "aviation": (("Aviation", "Air"), ("Airways", "Avionics"), ("Aviation", "Airspace"),
                 ("test pilot", "air traffic controller", "aircraft engineer", "airport manager")),
    "agriculture": (("Harvest", "Farming"), ("Farms", "Seeds"), ("Agricultural", "Farmers"),
                    ("farmer", "agronomist", "cooperative chair", "veterinarian")),
    "water": (("Water", "River"), ("Waterworks", "Pumps"), ("Water", "Drainage"),
              ("hydrologist", "dam engineer", "water inspector", "flood planner")),
    "film": (("Film", "Cinema"), ("Pictures", "Studios"), ("Film", "Cinema"),
             ("film director", "actor", "producer", "screenwriter")),
    "music": (("Music", "Jazz"), ("Records", "Instruments"), ("Music", "Orchestral"),
              ("composer", "conductor", "singer", "violinist")),
    "publishing": (("Book", "Literary"), ("Press", "Printing"), ("Publishing", "Literary"),
                   ("novelist", "editor", "literary agent", "translator")),
    "forestry": (("Forestry", "Timber"), ("Timber", "Lumber"), ("Forestry", "Woodland"),
                 ("forester", "sawmill owner", "ecologist", "ranger")),
    "telecom": (("Telecom", "Broadband"), ("Telecom", "Networks"), ("Communications", "Telecom"),
                ("network engineer", "spectrum regulator", "telecom executive", "cable installer")),
    "archaeology": (("Heritage", "Archaeology"), ("Excavations", "Restoration"), ("Heritage", "Antiquities"),
                    ("archaeologist", "museum curator", "conservator", "historian")),
    "space": (("Space", "Orbital"), ("Aerospace", "Rocketry"), ("Space", "Astronomical"),
              ("astronaut", "astronomer", "rocket engineer", "mission controller")),
    "wine": (("Wine", "Vintage"), ("Vineyards", "Cellars"), ("Viticulture", "Wine"),
             ("winemaker", "sommelier", "vineyard owner", "wine critic")),
    "chess": (("Chess", "Rapid"), ("Games", "Puzzles"), ("Chess", "Gaming"),
              ("grandmaster", "chess arbiter", "chess coach", "tournament director")),
    "architecture": (("Design", "Architecture"), ("Architects", "Builders"), ("Architecture", "Planning"),
                     ("architect", "urban planner", "structural engineer", "critic")),
    "medicine": (("Medical", "Surgery"), ("Biotech", "Therapeutics"), ("Medical", "Surgical"),
                 ("surgeon", "pharmacologist", "clinical researcher", "hospital chaplain")),
    "athletics": (("Athletics", "Marathon"), ("Sports", "Footwear"), ("Athletics", "Olympic"),
                  ("sprinter", "coach", "marathon runner", "sports doctor")),
    "journalism": (("Press", "Media"), ("Newspapers", "Broadcasting"), ("Journalism", "Press"),
                   ("journalist", "news editor", "photographer", "columnist")),
}
ACTIONS = ("was named in a report on {topic}", "spoke about {topic} at a public hearing",
           "was criticised over {topic}", "announced new plans for {topic}", "was praised for work on {topic}",
           "was linked to a dispute over {topic}", "signed an agreement on {topic}",
           "was mentioned in coverage of {topic}")
RELATIONS = {
    ("PERSON", "PERSON"): ("works with", "succeeded", "criticised", "advised", "co-authored a report with"),
    ("PERSON", "ORGANIZATION"): ("works for", "leads", "advises", "founded", "left"),
    ("PERSON", "GEO"): ("lives in", "was born in", "represents", "visited"),
    ("PERSON", "EVENT"): ("spoke at", "organised", "attended", "chaired"),
    ("ORGANIZATION", "ORGANIZATION"): ("partners with", "competes with", "acquired a stake in", "funds"),
    ("ORGANIZATION", "GEO"): ("is based in", "operates in", "opened an office in"),
    ("ORGANIZATION", "EVENT"): ("sponsored", "organised", "exhibited at"),
    ("GEO", "GEO"): ("borders", "is near", "is linked by road to"),
    ("GEO", "EVENT"): ("hosted", "was the venue of"),
    ("EVENT", "EVENT"): ("followed", "was held alongside"),
}


@dataclass
class TrueEntity:
    id: str
    type: str
    group: int
    names: list[str]  # every name it is written under, the first its full name
    patterns: dict[str, str]  # name -> alias pattern ("full", "surname", "acronym", ...)
    description: str


@dataclass
class Corpus:
    """Raw extraction tables in merge_graph's shape, and the truth behind them."""
    entities: pd.DataFrame  # text_unit_id, name, type, description
    relationships: pd.DataFrame  # text_unit_id, source, target, description, strength
    name_to_entity: dict[str, str]  # every name in the tables -> true entity id
    truth: dict[str, TrueEntity]  # entity id -> entity (type, group, names, patterns)
    hard_negatives: list[tuple[str, str, str]]  # (entity id, entity id, kind)
    groups: list[str] = field(default_factory=list)  # topic of each group

    @property
    def entity_type(self) -> dict[str, str]:
        return {e.id: e.type for e in self.truth.values()}

    @property
    def entity_group(self) -> dict[str, int]:
        return {e.id: e.group for e in self.truth.values()}


class _Words:
    """Invented words, none a near-spelling of another (no two within two edits with the same first letter),
    so no accidental look-alike names."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: dict[str, list[str]] = defaultdict(list)  # first letter -> words

    def new(self, kind: str) -> str:
        for _ in range(1000):
            syllables = [self.rng.choice(ONSETS) + self.rng.choice(VOWELS) + self.rng.choice(CODAS)
                         for _ in range(self.rng.choice((1, 1, 2)))]
            word = "".join(syllables) + self.rng.choice(ENDINGS[kind])
            word = word[0].upper() + word[1:]
            if self._ok(word.upper()):
                self.used[word[0].upper()].append(word.upper())
                return word
        raise RuntimeError("word list exhausted")

    def _ok(self, word: str) -> bool:
        if not 4 <= len(word) <= 11 or set(word) <= set("IVXLCDM") or \
                any(a == b == c for a, b, c in zip(word, word[1:], word[2:], strict=False)):
            return False
        return all(edit_distance(word, other, 2) > 2 for other in self.used[word[0]])


class _Builder:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.words = _Words(self.rng)
        self.truth: dict[str, TrueEntity] = {}
        self.keys: dict[str, str] = {}  # normalized name -> entity id (a name denotes one entity)
        self.acronyms: set[str] = set()
        self.postings: dict[tuple[str, str], list[frozenset[str]]] = defaultdict(list)  # (type, word) -> names
        self.hard_negatives: list[tuple[str, str, str]] = []

    def add(self, type_: str, group: int, names: list[tuple[str, str]], description: str,
            nested: bool = False) -> str | None:
        """Register an entity under (name, pattern) pairs, the first its full name; None if a name's
        normalized form is taken by another entity (the caller draws again). `nested`: a name may contain
        another entity's, or lie within it (a hard negative that is never written in a shortened form)."""
        keys = list(dict.fromkeys(normalize_name(n) for n in dict(names)))
        if any(k in self.keys or (not nested and self._contains_or_within(type_, k)) for k in keys):
            return None
        entity_id = f"{type_[0]}{len(self.truth):03d}"
        for k in keys:
            self.keys[k] = entity_id
            for word in k.split():
                self.postings[(type_, word)].append(frozenset(k.split()))
        self.truth[entity_id] = TrueEntity(entity_id, type_, group, [n for n, _ in names], dict(names), description)
        return entity_id

    def _contains_or_within(self, type_: str, key: str) -> bool:
        """Whether the words of `key` are all in another entity's name of this type, or the reverse: then
        the shorter name would denote either ("Halvard Summit" beside two Halvard summits), and the truth
        would be a guess."""
        words = frozenset(key.split())
        return any(words <= other or other <= words for word in words for other in self.postings[(type_, word)])

    def pick(self, options: list[tuple[str, str, int]], count: int) -> list[tuple[str, str]]:
        """The full name (the first option) and `count - 1` of the other forms, drawn by weight."""
        chosen, rest = [options[0][:2]], list(options[1:])
        while len(chosen) < count and rest:
            i = self.rng.choices(range(len(rest)), weights=[w for *_, w in rest])[0]
            chosen.append(rest.pop(i)[:2])
        return chosen

    def name_count(self) -> int:
        return self.rng.choices((1, 2, 3), weights=(10, 45, 45))[0]

    # --- persons ---
    def persons(self, group: int, topic: str, count: int, shared_surname: bool) -> None:
        roles = THEMES[topic][3]
        made = 0
        if shared_surname:  # two people of one family: written only under their full names
            surname = self.words.new("surname")
            first_a, first_b = self._two_first_names()
            ids = []
            for first in (first_a, first_b):
                full = f"{first} {surname}"
                names = [(full, "full")]
                if self.rng.random() < 0.5:
                    names.append((f"{self.rng.choice(HONORIFIC_TITLES)} {full}", "title+full"))
                ids.append(self.add("PERSON", group, names, _a(self.rng.choice(roles))))
            self.hard_negatives.append((ids[0], ids[1], "persons sharing a surname"))
            made = 2
        while made < count:
            first = self.rng.choice(FIRST_NAMES_F + FIRST_NAMES_M)
            surname = self.words.new("surname")
            full = f"{first} {surname}"
            if self.rng.random() < 0.2:
                title, title_kind = self.rng.choice(ROLE_TITLES), "role+surname"
            elif first in FIRST_NAMES_F and self.rng.random() < 0.3:
                title, title_kind = self.rng.choice(("Ms.", "Mrs.")), "title+surname"
            elif self.rng.random() < 0.3:
                title, title_kind = "Mr." if first in FIRST_NAMES_M else "Ms.", "title+surname"
            else:
                title, title_kind = self.rng.choice(HONORIFIC_TITLES), "title+surname"
            options = [(full, "full", 0), (surname, "surname", 3), (f"{title} {surname}", title_kind, 3),
                       (f"{title} {full}", "title+full", 1)]
            if self.add("PERSON", group, self.pick(options, self.name_count()), _a(self.rng.choice(roles))):
                made += 1

    def _two_first_names(self) -> tuple[str, str]:
        pool = FIRST_NAMES_F + FIRST_NAMES_M
        while True:
            a, b = self.rng.sample(pool, 2)
            if a[0] != b[0]:
                return a, b

    # --- organizations ---
    def organizations(self, group: int, topic: str, count: int, shared_first_word: bool) -> None:
        sectors = list(THEMES[topic][1])
        made = 0
        if shared_first_word:  # "Northwind Logistics" / "Northwind Bank": never written as "Northwind" alone
            core = self.words.new("org")
            sector_a, sector_b = self.rng.sample([*sectors, *GENERAL_SECTORS], 2)
            ids = []
            for sector in (sector_a, sector_b):
                tail = self.rng.choice(COMPANY_TAILS)
                names = [(f"{core} {sector} {tail}", "full"), (f"{core} {sector}", "shortened")]
                ids.append(self.add("ORGANIZATION", group, names[:self.rng.choice((1, 2, 2))],
                                    f"a {sector.lower()} business"))
            self.hard_negatives.append((ids[0], ids[1], "organizations sharing a first word"))
            made = 2
        while made < count:
            kind = self.rng.choices(("business", "plain", "acronym", "single"), weights=(40, 17, 35, 8))[0]
            sector = self.rng.choice([*sectors, *sectors, *GENERAL_SECTORS])
            if kind == "business":
                core, tail = self.words.new("org"), self.rng.choice(COMPANY_TAILS)
                options = [(f"{core} {sector} {tail}", "full", 0), (f"{core} {sector}", "shortened", 1),
                           (core, "first word", 1)]
                names = self.pick(options, self.name_count())
                description = f"a {sector.lower()} business"
            elif kind == "plain":
                core = self.words.new("org")
                names = self.pick([(f"{core} {sector}", "full", 0), (core, "first word", 1)], self.name_count())
                description = f"a {sector.lower()} business"
            elif kind == "acronym":
                full = self._acronym_name(topic)
                if full is None:
                    continue
                words, acronym = full
                names = [(words, "full"), (acronym, "acronym")][:self.rng.choice((1, 2, 2, 2, 2))]
                description = f"a public body for {THEMES[topic][2][0].lower()} matters"
            else:
                names = [(self.words.new("org"), "full")]
                description = f"a {sector.lower()} firm"
            if self.add("ORGANIZATION", group, names, description):
                made += 1

    def _acronym_name(self, topic: str) -> tuple[str, str] | None:
        adjective = self.rng.choice(ACRONYM_ADJECTIVES)
        domain = self.rng.choice(THEMES[topic][2])
        body = self.rng.choice(ACRONYM_BODIES)
        if self.rng.random() < 0.25:  # "Institute for Marine Research" style: the "for" is not in the acronym
            field_ = self.rng.choice(("Research", "Studies", "Affairs", "Standards"))
            full = f"{body} for {domain} {field_}"
            acronym = body[0] + domain[0] + field_[0]
        else:
            full = f"{adjective} {domain} {body}"
            acronym = adjective[0] + domain[0] + body[0]
        if acronym in self.acronyms:
            return None
        self.acronyms.add(acronym)
        return full, acronym

    # --- places ---
    def places(self, group: int, count: int, shared_word: bool, named_after: bool) -> list[str]:
        """Places of the group; returns their proper words (events are named after some)."""
        cores = []
        made = 0
        if named_after:  # the town "Ostra" and "Lake Ostra" near it: two places, each written in full only
            core = self.words.new("place")
            generic = self.rng.choice(("Lake", "Mount", "Cape", "River", "Bay", "City"))
            feature = f"{generic} {core}" if generic in PLACE_PREFIXES else f"{core} {generic}"
            ids = [self.add("GEO", group, [(core, "full")], "a town"),
                   self.add("GEO", group, [(feature, "full")], PLACE_KINDS[generic], nested=True)]
            if None not in ids:
                self.hard_negatives.append((ids[0], ids[1], "a place and a feature named after it"))
                made = 2
        if shared_word and not made:  # "Lake Ostra" / "Ostra River": never written as "Ostra" alone
            core = self.words.new("place")
            prefix, suffix = self.rng.choice(PLACE_PREFIXES), self.rng.choice(PLACE_SUFFIXES)
            ids = [self.add("GEO", group, [(f"{prefix} {core}", "full")], PLACE_KINDS[prefix]),
                   self.add("GEO", group, [(f"{core} {suffix}", "full")], PLACE_KINDS[suffix])]
            self.hard_negatives.append((ids[0], ids[1], "places sharing their proper word"))
            cores.append(core)
            made = 2
        while made < count:
            core = self.words.new("place")
            kind = self.rng.choices(("prefix", "suffix", "country", "town"), weights=(37, 37, 12, 14))[0]
            if kind == "prefix":
                generic = self.rng.choice(PLACE_PREFIXES)
                options = [(f"{generic} {core}", "full", 0), (core, "without generic word", 3)]
                if generic == "Port":
                    options.append((f"the Port of {core}", "with 'of'", 1))
                description = PLACE_KINDS[generic]
            elif kind == "suffix":
                generic = self.rng.choice(PLACE_SUFFIXES)
                options = [(f"{core} {generic}", "full", 0), (core, "without generic word", 1)]
                description = PLACE_KINDS[generic]
            elif kind == "country":
                form = self.rng.choice(COUNTRY_FORMS)
                options = [(f"{form} of {core}", "full", 0), (core, "without generic word", 1)]
                description = f"a small {form.lower()}"
            else:
                options = [(core, "full", 0)]
                description = "a town"
            if self.add("GEO", group, self.pick(options, self.name_count()), description):
                cores.append(core)
                made += 1
        return cores

    # --- events ---
    def events(self, group: int, topic: str, count: int, place_cores: list[str], shared: bool) -> None:
        topics = THEMES[topic][0]
        made = 0
        if shared:  # same place and kind; a different middle word or year: never written in the short form
            core = self.rng.choice(place_cores) if place_cores else self.words.new("place")
            kind = self.rng.choice(EVENT_KINDS)
            if self.rng.random() < 0.5:
                first, second = [f"{core} {t} {kind}" for t in self._two_topics(topics)]
                label = "events differing in a middle word"
            else:
                year_a, year_b = self.rng.sample(YEARS, 2)
                t = self.rng.choice(topics)
                first, second = f"{year_a} {core} {t} {kind}", f"{year_b} {core} {t} {kind}"
                label = "events differing in the year"
            ids = [self.add("EVENT", group, [(name, "full")], _a(kind.lower())) for name in (first, second)]
            if None in ids:  # taken by an earlier event: fall back to plain events
                for entity_id in ids:
                    if entity_id:
                        made += 1
            else:
                self.hard_negatives.append((ids[0], ids[1], label))
                made = 2
        while made < count:
            core = self.rng.choice(place_cores) if place_cores and self.rng.random() < 0.6 \
                else self.words.new("place")
            kind, t = self.rng.choice(EVENT_KINDS), self.rng.choice(topics)
            year = self.rng.choice(YEARS)
            options = [(f"{core} {t} {kind}", "full", 0), (f"{core} {kind}", "dropped middle word", 3),
                       (f"the {core} {kind}", "dropped middle word", 1)]
            names = self.pick(options, self.name_count())
            if self.rng.random() < 0.25:  # the year in front of the full name, as a further form
                names.append((f"{year} {core} {t} {kind}", "year in front"))
                names = names[:3]
            if self.add("EVENT", group, names, _a(f"{kind.lower()} on {t.lower()} matters first held in {year}")):
                made += 1

    def _two_topics(self, topics: tuple[str, ...]) -> tuple[str, str]:
        extra = ("Trade", "Youth", "Winter", "Summer", "Science", "Policy", "Innovation")
        return tuple(self.rng.sample([*topics, *extra], 2))  # type: ignore[return-value]


def _a(phrase: str) -> str:
    return f"{'an' if phrase[0] in 'aeiou' else 'a'} {phrase}"


def generate(seed: int = 1, groups: int = GROUPS, docs_per_group: int = DOCS_PER_GROUP) -> Corpus:
    """The corpus for a seed: the same tables and truth for the same seed, in any process."""
    builder = _Builder(seed)
    rng = builder.rng
    topics = list(THEMES)[:groups] if groups <= len(THEMES) else [list(THEMES)[g % len(THEMES)]
                                                                    for g in range(groups)]
    rng.shuffle(topics)
    # hard negatives: about a third of the groups for persons and organizations, a fifth for places and events
    hard = {kind: set(rng.sample(range(groups), max(1, round(groups * share))))
            for kind, share in (("PERSON", 0.32), ("ORGANIZATION", 0.32), ("GEO", 0.2), ("EVENT", 0.2),
                                ("GEO named after", 0.2))}
    for g, topic in enumerate(topics):
        builder.persons(g, topic, PER_GROUP["PERSON"], g in hard["PERSON"])
        builder.organizations(g, topic, PER_GROUP["ORGANIZATION"], g in hard["ORGANIZATION"])
        cores = builder.places(g, PER_GROUP["GEO"], g in hard["GEO"], g in hard["GEO named after"])
        builder.events(g, topic, PER_GROUP["EVENT"], cores, g in hard["EVENT"])

    by_group: dict[int, list[str]] = defaultdict(list)
    for entity in builder.truth.values():
        by_group[entity.group].append(entity.id)
    entity_rows: list[tuple[str, str, str, str]] = []
    relationship_rows: list[tuple[str, str, str, str, float]] = []
    for g in range(groups):
        docs = [f"doc-{g:02d}-{d}" for d in range(docs_per_group)]
        mentions: dict[str, list[str]] = {doc: [] for doc in docs}  # doc -> entity ids
        for entity_id in by_group[g]:
            entity = builder.truth[entity_id]
            k = min(docs_per_group, max(len(entity.names), rng.choice((1, 2, 2, 3, 3, 4))))
            for doc in sorted(rng.sample(docs, k)):
                mentions[doc].append(entity_id)
        for doc in docs:  # every document about at least three of its group's entities
            while len(mentions[doc]) < 3:
                extra = rng.choice(by_group[g])
                if extra not in mentions[doc]:
                    mentions[doc].append(extra)
        names_by_doc = _assign_names(builder, rng, mentions)
        neighbour = (g + rng.choice((-1, 1))) % groups
        for doc in docs:
            visitors = [e for e in rng.sample(by_group[neighbour], rng.choice((0, 1, 1, 2)))
                        if e not in mentions[doc]]
            for entity_id in visitors:  # an entity of a neighbouring topic, under any of its names
                names = builder.truth[entity_id].names
                names_by_doc[doc][entity_id] = [names[0] if rng.random() < 0.7 else rng.choice(names)]
            _write_document(builder, rng, topics[g], doc, names_by_doc[doc], visitors, entity_rows,
                            relationship_rows)

    used = {name for _, name, _, _ in entity_rows}
    name_to_entity = {n: e.id for e in builder.truth.values() for n in e.names if n in used}
    for entity in builder.truth.values():  # the truth lists the names the tables use
        entity.names = [n for n in entity.names if n in used]
        entity.patterns = {n: p for n, p in entity.patterns.items() if n in used}
    hard_negatives = [(a, b, kind) for a, b, kind in builder.hard_negatives if a and b]
    return Corpus(pd.DataFrame(entity_rows, columns=ENTITY_COLUMNS),
                  pd.DataFrame(relationship_rows, columns=RELATIONSHIP_COLUMNS),
                  name_to_entity, builder.truth, hard_negatives, topics)


def _assign_names(builder: _Builder, rng: random.Random,
                  mentions: dict[str, list[str]]) -> dict[str, dict[str, list[str]]]:
    """The names each document uses for each entity it mentions, as a writer would: the full name alone
    (40%), the full name and then a short one (35%), or a short one alone (25%: a well-known short name, or a
    later chunk of a long text). Every name of an entity is used somewhere, its full name included, and the
    first use of a short name is mostly (INTRODUCED) beside the full name."""
    docs_of: dict[str, list[str]] = defaultdict(list)
    for doc, ids in mentions.items():
        for entity_id in ids:
            docs_of[entity_id].append(doc)
    result: dict[str, dict[str, list[str]]] = {doc: {} for doc in mentions}
    for entity_id, docs in docs_of.items():
        full, *shorts = builder.truth[entity_id].names
        unused = rng.sample(shorts, len(shorts))
        for doc in docs:
            r = rng.random()
            if not shorts or r < 0.4:
                result[doc][entity_id] = [full]
                continue
            if unused:  # a short name's first use: mostly where the writer introduces it after the full name
                short = unused.pop()
                result[doc][entity_id] = [full, short] if r < 0.75 or rng.random() < INTRODUCED else [short]
            else:
                short = rng.choice(shorts)
                result[doc][entity_id] = [full, short] if r < 0.75 else [short]
        for short in unused:  # more names than documents: the full name, then this one, somewhere
            doc = rng.choice(docs)
            result[doc][entity_id] = list(dict.fromkeys([full, *result[doc][entity_id], short]))
        if not any(full in result[doc][entity_id] for doc in docs):
            result[docs[0]][entity_id].insert(0, full)
    return result


def _write_document(builder: _Builder, rng: random.Random, topic: str, doc: str, names: dict[str, list[str]],
                    visitors: list[str], entity_rows: list, relationship_rows: list) -> None:
    topic_words = f"{topic} {rng.choice(('policy', 'funding', 'safety', 'history', 'prices', 'jobs'))}"
    for entity_id, written in names.items():
        entity = builder.truth[entity_id]
        for name in written:
            action = rng.choice(ACTIONS).format(topic=topic_words)
            entity_rows.append((doc, name, entity.type, f"{name} is {entity.description}; {action}."))
    order = [e for e in names if e not in visitors]
    rng.shuffle(order)
    pairs: list[tuple[str, str]] = []
    for i in range(1, len(order)):  # a spanning tree of the document's own entities
        pairs.append((order[rng.randrange(i)], order[i]))
    for visitor in visitors:
        pairs.append((visitor, rng.choice(order)))
    for _ in range(len(order) // 2):
        a, b = rng.sample(order, 2)
        if (a, b) not in pairs and (b, a) not in pairs:
            pairs.append((a, b))
    for a, b in pairs:
        type_a, type_b = builder.truth[a].type, builder.truth[b].type
        if TYPES.index(type_a) > TYPES.index(type_b):
            a, b, type_a, type_b = b, a, type_b, type_a
        source, target = rng.choice(names[a]), rng.choice(names[b])
        verb = rng.choice(RELATIONS[(type_a, type_b)])
        relationship_rows.append((doc, source, target, f"{source} {verb} {target}", float(rng.randint(1, 10))))
