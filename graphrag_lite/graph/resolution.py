"""Which entity names denote the same thing: the policy of merging, apart from its mechanism (merge.py).

Two steps. Names that normalize alike (case, spacing, punctuation, possessives, leading articles and
honorifics: "Mr. Holmes", "HOLMES", "Holmes's"; a woman's honorific stays, "Mrs. Bennet" is not "Mr.
Bennet") are one entity. Then likely aliases merge when every guard holds: the same type, no ambiguity (the
short name fits exactly one longer name; otherwise it stays apart and is recorded, with why, for a reader or
the model to decide), and evidence in the graph (a shared neighbour or a shared text unit):
- a person's name whose words, role titles and a woman's honorific aside, are those of exactly one fuller
  person's name ("Holmes" -> "Sherlock Holmes", "Senator Velling" -> "Mara Velling", "Mrs. Fenna Sormann" ->
  "Fenna Sormann"), never across genders an honorific states ("Lady Batten" / "Sir W. Batten");
- an organization's, place's or event's name whose words are all in the longest of a chain of names of that
  type ("Northwind" -> "Northwind Logistics" -> "Northwind Logistics Group", "Halvard Summit" -> "Halvard
  Climate Summit"), when that chain is the only one ("Northwind" beside "Northwind Bank" is ambiguous), into
  the fullest name of the chain the graph ties it to; a place only when the longer name adds generic place
  words ("Aldermere" -> "Port Aldermere", not "Westminster" -> "Westminster Hall"), a feature only when the
  text calls the place one ("Ostra, a lake" -> "Lake Ostra", but "Michigan, a state" is not "Lake Michigan"),
  likewise an institution named after an organization ("Harvard" is not "Harvard Medical School"),
  and a number only when the text gives it ("World Cup" is not the "2018 World Cup");
- an acronym of exactly one longer name of the same type ("CFA" -> "Coastal Fisheries Authority", "USA" ->
  "United States of America": the initials of its words, small words aside);
- organization names equal but for a company suffix ("Acme Corp" -> "Acme Corporation" -> "Acme");
- names equal but for one word spelled slightly differently (Muhammed / Mohammed, Bennet / Bennett, bomb /
  bombs; not numbers, dates, regnal numbers, opposites or short words: Gomma / Gumma), for any type.
Generic words per type (GENERIC_WORDS, extended by settings) name what kind of thing a name is: a name made
only of them merges into nothing. A user's overrides (alias_overrides.py) come before every rule. Every decision
comes back with its reason, for the `entity_aliases` table.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from graphrag_lite.names import FEMALE_HONORIFICS, HONORIFICS

if TYPE_CHECKING:  # a type only: resolution itself needs no pandas, which the overrides file's module loads
    from graphrag_lite.alias_overrides import AliasOverrides

# role titles a person is called by ("Senator Velling"); kept in names, set aside when matching persons
ROLES = frozenset({"SENATOR", "MAYOR", "JUDGE", "JUSTICE", "MINISTER", "INSPECTOR", "COMMISSIONER", "PRESIDENT",
                   "GOVERNOR", "CHANCELLOR", "DETECTIVE", "OFFICER", "SECRETARY", "CHAIRMAN", "CHAIRWOMAN",
                   "DIRECTOR", "AMBASSADOR", "BISHOP", "CONGRESSMAN", "CONGRESSWOMAN", "COUNCILLOR", "SHERIFF",
                   "CHIEF", "CONSTABLE", "MAJOR", "ADMIRAL", "REPRESENTATIVE", "DEPUTY", "MINISTRESS", "GENERAL",
                   "GEN"})  # a rank that also begins names of other things: General Motors, General Assembly
TITLES = frozenset({"KING", "QUEEN", "PRINCE", "PRINCESS", "DUKE", "DUCHESS", "EARL", "COUNT", "COUNTESS",
                    "EMPEROR", "EMPRESS", "POPE", "BISHOP", "PRESIDENT", "GOVERNOR", "MAYOR"})
COMPANY_SUFFIXES = frozenset({"CORP", "CORPORATION", "INC", "INCORPORATED", "CO", "COMPANY", "LTD", "LIMITED",
                              "LLC", "PLC", "GMBH", "AG", "SA", "LLP"})
ROMAN = re.compile(r"[IVXLCDM]+")
OPPOSITES = frozenset(frozenset(pair) for pair in (
    ("EAST", "WEST"), ("EASTERN", "WESTERN"), ("NORTH", "SOUTH"), ("NORTHERN", "SOUTHERN"), ("UPPER", "LOWER"),
    ("INNER", "OUTER"), ("MEN", "WOMEN"), ("MALE", "FEMALE"), ("BEFORE", "AFTER"), ("MINOR", "MAJOR"),
    ("NATIONAL", "INTERNATIONAL"), ("SENIOR", "JUNIOR"), ("FIRST", "FINAL"), ("SOUTHEAST", "SOUTHWEST"),
    ("NORTHEAST", "NORTHWEST"), ("NORTHEAST", "SOUTHEAST"), ("NORTHWEST", "SOUTHWEST")))
MIN_VARIANT_LENGTH = 6  # shorter words differ by a letter only as a plural ending
MAX_POSTING = 50  # a word shared by more names than this (JOHN, LONDON) proposes no candidates
SHORTENED_TYPES = frozenset({"ORGANIZATION", "GEO", "EVENT"})
SMALL_WORDS = frozenset({"OF", "AND", "THE", "FOR", "&", "DE", "LA", "DER", "VON", "VAN"})
JOINING_WORDS = frozenset({"AND", "&", "OR", "I", "WITH"})  # "WHITE HALL AND WESTMINSTER HALL" names two things
PERSONS_JOINED = JOINING_WORDS - {"I"}  # in a person's name, "I" is a numeral ("HENRY I")
# a natural or built feature often named after another place: "Lake Michigan", "Gulf of Mexico", "Quebec City"
# and "Colorado Springs" are not Michigan, Mexico, Quebec or Colorado, so a bare name merges into such a name
# only when a reader (overrides) or the model (confirm_with_model) says so
PLACE_FEATURE_WORDS = frozenset({
    "LAKE", "RIVER", "BAY", "GULF", "SEA", "MOUNT", "MOUNTAIN", "MOUNTAINS", "VALLEY", "CAPE", "CITY", "ISLAND",
    "ISLE", "FOREST", "WOODS", "HILLS", "HEIGHTS", "SPRINGS", "COAST", "PENINSULA", "STRAIT", "HARBOUR", "HARBOR",
    "FORT", "FALLS", "MOOR", "MARSH", "PLAINS", "PLATEAU", "FJORD", "ATOLL", "OASIS"})
# an institution often named after its parent or place: "Harvard Medical School" is not all of Harvard
ORGANIZATION_PART_WORDS = frozenset({
    "SCHOOL", "FOUNDATION", "HOSPITAL", "MUSEUM", "PRESS", "LIBRARY", "COLLEGE", "UNIVERSITY", "INSTITUTE",
    "CENTER", "CENTRE", "STADIUM", "LABORATORY", "LABORATORIES", "ORCHESTRA", "THEATRE", "THEATER", "CLINIC",
    "ACADEMY", "SEMINARY", "OBSERVATORY", "ZOO"})
# which added words may make a longer name another entity, per type, unless the text says so of this name
NAMED_AFTER = {"GEO": (PLACE_FEATURE_WORDS, "a place may be named after it (Lake Michigan is not Michigan)"),
               "ORGANIZATION": (ORGANIZATION_PART_WORDS, "a part may be named after it (Harvard Medical School is "
                                                          "not all of Harvard)")}
# how a description says a place is such a feature ("a headland" for CAPE); otherwise the word itself
FEATURE_KINDS = {"MOUNT": ("mount", "peak"), "MOUNTAIN": ("mountain", "peak"), "MOUNTAINS": ("mountain", "range"),
                 "CAPE": ("cape", "headland", "promontory"), "ISLE": ("isle", "island"), "HEIGHTS": ("heights", "hill"),
                 "SPRINGS": ("springs", "spa"), "WOODS": ("wood", "forest"), "HARBOUR": ("harbo",),
                 "HARBOR": ("harbo",), "FALLS": ("falls", "waterfall"), "PLAINS": ("plain",), "HILLS": ("hill",),
                 "FORT": ("fort",), "CENTER": ("cent",), "CENTRE": ("cent",), "THEATRE": ("theat",),
                 "THEATER": ("theat",), "LABORATORY": ("lab",), "LABORATORIES": ("lab",)}
# words that say what kind of thing a name is, not which one: a name made only of them merges into nothing, and
# "<generic place word> of X" is the place X; settings add to these (entity_resolution.generic_words). Place
# words name the kind of area or natural feature ("Lake Ostra" is Ostra), never a building or facility in it
# ("Westminster Hall" is not Westminster), so HALL, STREET, BRIDGE, ABBEY, STATION are not among them.
GENERIC_WORDS: dict[str, frozenset[str]] = {
    "PERSON": HONORIFICS | TITLES | ROLES,
    "ORGANIZATION": COMPANY_SUFFIXES | frozenset({
        "GROUP", "HOLDINGS", "INSTITUTE", "ASSOCIATION", "SOCIETY", "FOUNDATION", "UNION", "COUNCIL", "BANK",
        "UNIVERSITY", "COLLEGE", "AGENCY", "AUTHORITY", "MINISTRY", "DEPARTMENT", "COMMITTEE", "PARTY", "CLUB",
        "TRUST", "PARTNERS", "BOARD", "OFFICE", "COMMISSION", "ARMY", "NAVY", "COURT", "CHURCH", "SCHOOL"}),
    "GEO": frozenset({
        "REPUBLIC", "KINGDOM", "EMPIRE", "DUCHY", "PRINCIPALITY", "EMIRATE", "SULTANATE", "COMMONWEALTH",
        "FEDERATION", "STATE", "PROVINCE", "COUNTY", "SHIRE", "REGION", "DISTRICT", "PORT", "TOWN", "VILLAGE",
        "ISLANDS", "ISLES", "ARCHIPELAGO", "DESERT"}) | PLACE_FEATURE_WORDS,
    "EVENT": frozenset({
        "SUMMIT", "CONFERENCE", "FORUM", "GAMES", "CONVENTION", "SYMPOSIUM", "ASSEMBLY", "EXHIBITION", "FESTIVAL",
        "CONGRESS", "WAR", "BATTLE", "TREATY", "CRISIS", "SIEGE", "REVOLUTION", "ELECTION", "FAIR", "EXPO",
        "CHAMPIONSHIP", "CHAMPIONSHIPS", "CUP", "MEETING", "TALKS", "TRIAL", "FIRE", "PLAGUE"}),
}


@dataclass(frozen=True)
class Candidate:
    key: str  # normalized name
    type: str
    frequency: int
    gender: str = ""  # what an honorific says ("F", "M"), for persons: Lady Batten is not Sir W. Batten
    described: str = ""  # what the text says about it, lower case: "a lake" lets "Ostra" be "Lake Ostra"


@dataclass(frozen=True)
class AliasDecision:
    alias: str  # key merged away
    canonical: str  # key it merges into
    reason: str
    score: float


@dataclass
class Resolution:
    decisions: list[AliasDecision]
    # names left apart that a reader (or the model, with confirm_with_model) should decide: name -> (the
    # longer names it could be, why the rules did not merge it)
    ambiguous: dict[str, tuple[list[str], str]]
    overrides_not_applied: list[str] = field(default_factory=list)  # why, one line per override row


OVERRIDDEN = "merged by the overrides file"
SEVERAL = "fits several longer names"


def find_aliases(candidates: list[Candidate], neighbours: dict[str, set[str]], text_units: dict[str, set[str]],
                 max_edits: int, require_evidence: bool = True, generic_words: dict[str, frozenset[str]] | None = None,
                 overrides: AliasOverrides | None = None) -> Resolution:
    """Alias decisions between normalized entities; each alias points at a final canonical key. A user's
    overrides come first: their merges are made, and their pairs kept apart whatever the rules say."""
    names = _NameIndex(candidates, neighbours, text_units, require_evidence, generic_words or GENERIC_WORDS)
    never = overrides.never if overrides else frozenset()
    decisions, not_applied = _forced_merges(overrides, names.by_key)
    forced = set(decisions)
    for c in sorted(candidates, key=lambda c: (len(c.key), c.key)):
        if c.key in decisions:
            continue
        decision = (names.person_subset(c) or names.company_suffix(c) or names.shorter_name(c)
                    or names.acronym(c) or names.similar_spelling(c, max_edits))
        # rules may disagree on direction, or a user's merge point the other way: never close a loop
        if decision and not _leads_to(decisions, decision.canonical, c.key) and \
                frozenset((c.key, decision.canonical)) not in never:
            decisions[c.key] = decision
    resolved = _resolve_chains(decisions)
    if never:
        resolved, unkept = _kept_apart(resolved, never, forced)
        not_applied += unkept
    ambiguous = {k: v for k, v in names.ambiguous.items() if k not in decisions}
    return Resolution(resolved, ambiguous, not_applied)


def _leads_to(decisions: dict[str, AliasDecision], start: str, goal: str) -> bool:
    """Whether following the decisions from `start` reaches `goal` (so goal -> start would close a loop)."""
    seen = set()
    while start not in seen:
        if start == goal:
            return True
        seen.add(start)
        if start not in decisions:
            return False
        start = decisions[start].canonical
    return False


def _forced_merges(overrides: AliasOverrides | None, by_key: dict[str, Candidate]
                   ) -> tuple[dict[str, AliasDecision], list[str]]:
    if overrides is None:
        return {}, []
    decisions: dict[str, AliasDecision] = {}
    not_applied: list[str] = []
    for alias, title in overrides.merge.items():
        absent = [overrides.spelled[k] for k in (alias, title) if k not in by_key]
        if absent:
            not_applied.append(f"merge {overrides.spelled[alias]} -> {overrides.spelled[title]}: "
                               f"{' and '.join(absent)} not in the graph")
        elif _leads_to(decisions, title, alias):
            not_applied.append(f"merge {overrides.spelled[alias]} -> {overrides.spelled[title]}: would close a loop "
                               "of merges")
        else:
            decisions[alias] = AliasDecision(alias, title, overrides.reasons.get(alias, OVERRIDDEN), 1.0)
    for pair in overrides.never:
        absent = [overrides.spelled[k] for k in sorted(pair) if k not in by_key]
        if absent:
            a, b = (overrides.spelled[k] for k in sorted(pair))
            not_applied.append(f"never {a} / {b}: {' and '.join(absent)} not in the graph")
    return decisions, not_applied


def _kept_apart(decisions: list[AliasDecision], never: frozenset[frozenset[str]], forced: set[str]
                ) -> tuple[list[AliasDecision], list[str]]:
    """Undo the merges that would put a pair the user keeps apart in one node: a rule's merge of one of the
    two rather than the user's own, which is undone (and said) only when the user's lines contradict
    each other through a chain."""
    node = {d.alias: d.canonical for d in decisions}
    undone: set[str] = set()
    unkept: list[str] = []
    for pair in sorted(never, key=sorted):
        a, b = sorted(pair)
        if node.get(a, a) != node.get(b, b):
            continue
        aliases = [k for k in (a, b) if k in node]
        by_rule = [k for k in aliases if k not in forced]
        undone.add((by_rule or aliases)[0])
        if not by_rule:
            unkept.append(f"merge {aliases[0]} -> {node[aliases[0]]}: undone, it would join {a} and {b}, which "
                          "another line keeps apart")
    return [d for d in decisions if d.alias not in undone], unkept


class _NameIndex:
    """The names of one graph, indexed by word and by initials, with the evidence between them."""

    def __init__(self, candidates: list[Candidate], neighbours: dict[str, set[str]],
                 text_units: dict[str, set[str]], require_evidence: bool,
                 generic_words: dict[str, frozenset[str]]) -> None:
        self.by_key = {c.key: c for c in candidates}
        self.postings: dict[str, list[str]] = defaultdict(list)
        self.initials: dict[str, list[str]] = defaultdict(list)
        for c in candidates:
            for word in set(c.key.split()):
                self.postings[word].append(c.key)
            if c.type in SHORTENED_TYPES and len(c.key.split()) >= 2:
                self.initials[_initials(c.key)].append(c.key)
        self.neighbours, self.text_units, self.require_evidence = neighbours, text_units, require_evidence
        self.generic_words = generic_words
        self.ambiguous: dict[str, tuple[list[str], str]] = {}

    def evidence(self, a: str, b: str) -> bool:
        if not self.require_evidence:
            return True
        return bool(self.neighbours.get(a, set()) & (self.neighbours.get(b, set()) | {b})) or \
            bool(self.text_units.get(a, set()) & self.text_units.get(b, set()))

    def containing(self, key: str) -> set[str]:
        """Names sharing every word of `key` (through words that are not too common)."""
        lists = [set(self.postings[w]) for w in set(key.split()) if len(self.postings[w]) <= MAX_POSTING]
        return set.intersection(*lists) - {key} if lists else set()

    def nearest_evidenced(self, key: str, targets: list[str]) -> str | None:
        """The fullest of `targets` (most words, then most mentioned) that the graph ties to `key`."""
        ranked = sorted(targets, key=lambda k: (-len(set(k.split())), -self.by_key[k].frequency, k))
        return next((k for k in ranked if self.evidence(key, k)), None)

    def generic_only(self, c: Candidate) -> bool:
        """A name made only of its type's generic words ("LAKE", "THE SUMMIT", "GROUP"), or a bare title of
        any type ("QUEEN"), names no one thing."""
        generic = self.generic_words.get(c.type, frozenset()) | SMALL_WORDS
        return set(c.key.split()) <= generic or c.key in HONORIFICS | TITLES

    def person_subset(self, c: Candidate) -> AliasDecision | None:
        """Role titles aside ("Senator Velling" is Velling), the name's words are those of exactly one person
        named in full: the same words with a role title, or more words ("Kennedy" -> "John F. Kennedy", and
        "John Kennedy" with it)."""
        if c.type != "PERSON" or self.generic_only(c):
            return None
        key = _without_role(c.key)
        words = frozenset(key.split())
        fuller = [k for k in self.containing(key) if self.by_key[k].type == "PERSON" and k not in (key, c.key)
                  and words <= frozenset(_without_role(k).split()) and _same_gender(c, self.by_key[k])
                  and not PERSONS_JOINED & set(k.split())]  # "Erik and I" is two people, neither of them Erik
        # "Mrs. Fenna Sormann" is Fenna Sormann, but "Mrs. Bennet" need not be the Bennet named alone
        surname_only = c.key.split()[0] in FEMALE_HONORIFICS and len(words) == 1
        if key != c.key and key in self.by_key and not surname_only and _same_gender(c, self.by_key[key]) and \
                self.evidence(c.key, key):
            return AliasDecision(c.key, key, "the same person's name with a title", 1.0)
        identity = {k: frozenset(_without_role(k).split()) for k in fuller}
        targets = sorted(k for k in fuller if identity[k] != words)
        fullest = {i for i in identity.values() if i != words and not any(i < o for o in identity.values())}
        if len(fullest) > 1:  # "Holmes": Sherlock or Mycroft?
            self.ambiguous[c.key] = (sorted(k for k in targets if identity[k] in fullest), SEVERAL)
        if len(fullest) != 1:
            return None
        target = self.nearest_evidenced(c.key, [k for k in targets if _without_role(k) == k]) or \
            self.nearest_evidenced(c.key, targets)  # "Katya Masvenley" rather than "Commissioner Katya ..."
        if target is None:
            return None
        return AliasDecision(c.key, target, "name words contained in a longer person's name", 1.0)

    def shorter_name(self, c: Candidate) -> AliasDecision | None:
        """A shortened name of exactly one longest name of the same type, merged into the fullest name of that
        chain the graph ties it to ("Aldermere" -> "Port of Aldermere", or "Port Aldermere" if only that one
        shares a text unit or neighbour with it). A longer name that adds a number (an edition: "2018 World
        Cup") or a place feature (a lake named after a state: "Lake Michigan") may be another entity: the
        name is left for a reader or the model to decide."""
        if c.type not in SHORTENED_TYPES or self.generic_only(c):
            return None
        words = set(c.key.split())
        longer = [k for k in self.containing(c.key) if self.by_key[k].type == c.type and words < set(k.split())
                  and self.same_kind_added(c, k)]
        plain = [k for k in longer if not self.maybe_another(c, k)]
        fullest = [k for k in plain if not any(set(k.split()) < set(o.split()) for o in plain)]
        if len(fullest) > 1:
            self.ambiguous[c.key] = (sorted(fullest), SEVERAL)  # "Northwind": Northwind Logistics or Bank?
            return None
        if not fullest:
            risky = [k for k in longer if not any(set(k.split()) < set(o.split()) for o in longer)]
            if risky:
                self.ambiguous[c.key] = (sorted(risky), self.maybe_another(c, risky[0]))
            return None
        if JOINING_WORDS & set(fullest[0].split()) or self.part_of(c.key, fullest[0]) or \
                (c.type == "ORGANIZATION" and _company_core(fullest[0]) == _company_core(c.key)):
            return None  # two things joined, the thing a longer name is of, or a suffix (the suffix rule's)
        target = self.nearest_evidenced(c.key, sorted(plain))
        if target is None:
            return None
        return AliasDecision(c.key, target, f"shortened {c.type.lower()} name", 1.0)

    def same_kind_added(self, c: Candidate, longer: str) -> bool:
        """"Port Aldermere" may be Aldermere, but "Westminster Hall" is a building in Westminster and "New
        York" is not York: a place's longer name can be the same place only when it adds generic place words."""
        added = set(longer.split()) - set(c.key.split()) - SMALL_WORDS
        return c.type != "GEO" or added <= self.generic_words.get("GEO", frozenset())

    def maybe_another(self, c: Candidate, longer: str) -> str:
        """Why a longer name that contains this one may still be another entity, or "" when it may not: the
        added number or place feature is one the text says of this name too ("Ostra ... a lake")."""
        added = set(longer.split()) - set(c.key.split())
        words = longer.split()
        numbers = [word for at, word in enumerate(words) if word in added and _numeral_at(words, at)]
        if numbers and not all(re.search(rf"\b{n.lower()}\b", c.described) for n in numbers):
            return "the longer name adds a number: an edition or a part (2018 World Cup, World War II)"
        kinds, named_after = NAMED_AFTER.get(c.type, (frozenset(), "a longer name may be another entity"))
        # a project's own generic words (entity_resolution.generic_words) count as features: "Carrow Tor" is
        # Carrow only when the text calls Carrow a tor
        features = added & (kinds | (self.generic_words.get(c.type, frozenset()) - GENERIC_WORDS.get(c.type,
                                                                                                    frozenset())))
        if not all(re.search(rf"\b({'|'.join(FEATURE_KINDS.get(f, (f.lower(),)))})", c.described)
                   for f in features):
            return f"{named_after}, and the text does not call it a {' or '.join(sorted(f.lower() for f in features))}"
        return ""

    def part_of(self, short: str, long: str) -> bool:
        """"KENT" in "EARLDOM OF KENT", "BOHEMIA" in "QUEEN OF BOHEMIA": the longer name is of the shorter one's
        thing, a different entity, unless its head is a generic place word ("REPUBLIC OF VESKARIA")."""
        head, of, tail = long.partition(" OF ")
        return bool(of) and short.split()[-1] in tail.split() and \
            head.split()[-1] not in self.generic_words.get("GEO", frozenset())

    def acronym(self, c: Candidate) -> AliasDecision | None:
        """A one-word name of 2-6 letters that is the initials of exactly one longer name of its type."""
        if c.type not in SHORTENED_TYPES or " " in c.key or not 2 <= len(c.key) <= 6 or not c.key.isalpha():
            return None
        expanded = [k for k in self.initials.get(c.key, []) if self.by_key[k].type == c.type]
        if len(expanded) > 1:
            self.ambiguous[c.key] = (sorted(expanded), SEVERAL)
        if len(expanded) != 1 or not self.evidence(c.key, expanded[0]):
            return None
        return AliasDecision(c.key, expanded[0], "acronym of a longer name", 1.0)

    def company_suffix(self, c: Candidate) -> AliasDecision | None:
        if c.type != "ORGANIZATION":
            return None
        core = _company_core(c.key)
        if not core:
            return None
        same = [k for k in self.postings.get(core.split()[0], []) if k != c.key
                and self.by_key[k].type == "ORGANIZATION" and _company_core(k) == core]
        if not same:
            return None
        # everything with the same core merges into its most mentioned spelling
        best = max([c.key, *same], key=lambda k: (self.by_key[k].frequency, len(k), k))
        if best == c.key:
            return None
        return AliasDecision(c.key, best, "same organization name but for a company suffix", 1.0)

    def similar_spelling(self, c: Candidate, max_edits: int) -> AliasDecision | None:
        found: list[tuple[float, str]] = []
        for word in set(c.key.split()):
            if len(self.postings[word]) > MAX_POSTING:
                continue
            for other in self.postings[word]:
                if other == c.key or self.by_key[other].type != c.type:
                    continue
                if (score := one_word_variant(c.key, other, max_edits)) is not None:
                    found.append((score, other))
        if not found:
            return None
        # a tie goes to the more mentioned name, then the first by name: not to the word the set gave first
        # (its order changes from one process to the next)
        score, other = min(found, key=lambda f: (-f[0], -self.by_key[f[1]].frequency, f[1]))
        if not self.evidence(c.key, other):
            return None
        if (self.by_key[other].frequency, other) < (c.frequency, c.key):
            return None  # the more mentioned spelling survives; that pair is decided from the other side
        return AliasDecision(c.key, other, "spelling variant of one word", round(score, 3))


def _initials(key: str) -> str:
    return "".join(w[0] for w in key.split() if w not in SMALL_WORDS)


def _same_gender(a: Candidate, b: Candidate) -> bool:
    return not (a.gender and b.gender and a.gender != b.gender)


def _without_role(key: str) -> str:
    """A person's name without its role titles ("SENATOR VELLING") or a woman's honorific ("MRS BENNET")."""
    words = key.split()
    while len(words) > 1 and (words[0] in ROLES or words[0] in FEMALE_HONORIFICS):
        words = words[1:]
    return " ".join(words)


def _company_core(key: str) -> str:
    words = key.split()
    while len(words) > 1 and words[-1] in COMPANY_SUFFIXES:
        words = words[:-1]
    return " ".join(words)


def one_word_variant(a: str, b: str, max_edits: int) -> float | None:
    """1 / (1 + edits) for the one word (hyphens split words) in which two names differ, when that is a
    spelling variant (MUHAMMED / MOHAMMED, DEURSEN / DEUSEN, BOMB / BOMBS) and not a different thing:
    numbers, dates and regnal numbers (HENRY III / HENRY VIII), opposites (EASTERN / WESTERN), other names
    (JONG-NAM / JONG-UN), other words (MINISTER / MINISTRY) or, in words under six letters, anything but a
    plural (KINGDOM OF GOMMA / KINGDOM OF GUMMA are two kingdoms). None otherwise."""
    words_a, words_b = a.replace("-", " ").split(), b.replace("-", " ").split()
    if len(words_a) != len(words_b):
        return None
    differing = [(x, y) for x, y in zip(words_a, words_b, strict=True) if x != y]
    if len(differing) != 1:
        return None
    x, y = differing[0]
    if _numeric(x) or _numeric(y) or frozenset((x, y)) in OPPOSITES or x[0] != y[0] or min(len(x), len(y)) < 4:
        return None
    if max_edits < 1:
        return None
    if _plural_pair(x, y):
        return 0.5
    if min(len(x), len(y)) < MIN_VARIANT_LENGTH:
        return None  # in a short word one letter makes another name: GOMMA / GUMMA, IRAN / IRAQ
    edits = edit_distance(x, y, max_edits)
    return 1.0 / (1 + edits) if edits <= max_edits else None


def _plural_pair(x: str, y: str) -> bool:
    short, long = sorted((x, y), key=len)
    return long in (short + "S", short + "ES")


def edit_distance(a: str, b: str, limit: int) -> int:
    """Levenshtein distance, or limit + 1 as soon as it must exceed `limit`."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        current = [i]
        for j, char_b in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b)))
        if min(current) > limit:
            return limit + 1
        previous = current
    return previous[-1]


def _numeric(word: str) -> bool:
    return any(ch.isdigit() for ch in word) or ROMAN.fullmatch(word) is not None


PRONOUN_BEFORE = frozenset({"AND", "OR", "NOR", "BUT", "WITH", "&"})


def _numeral_at(words: list[str], at: int) -> bool:
    """Whether the word at `at` is a number: "I" is the pronoun, not a numeral, first or after a conjunction
    ("ERIK AND I"), and a numeral after a name ("WORLD WAR I", "HENRY I")."""
    if words[at] == "I" and (at == 0 or words[at - 1] in PRONOUN_BEFORE):
        return False
    return _numeric(words[at])


def _resolve_chains(decisions: dict[str, AliasDecision]) -> list[AliasDecision]:
    """A -> B -> C becomes A -> C and B -> C; a cycle keeps its first member."""
    resolved = []
    for decision in decisions.values():
        target, hops = decision.canonical, 0
        while target in decisions and hops < len(decisions):
            target, hops = decisions[target].canonical, hops + 1
        if target != decision.alias:
            resolved.append(AliasDecision(decision.alias, target, decision.reason, decision.score))
    return resolved


def majority(values: list[str]) -> tuple[str, list[str]]:
    """The most common value (the first seen on ties) and the others, in order of first appearance. An
    empty value (a type not known: an entity created from a relationship's end) loses to any other."""
    counts = Counter([v for v in values if v] or values[:1])  # in order of first appearance
    winner = max(counts, key=counts.__getitem__)  # the first of the most common
    return winner, [v for v in counts if v != winner]
