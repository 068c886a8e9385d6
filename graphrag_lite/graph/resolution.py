"""Which entity names denote the same thing: the policy of merging, apart from its mechanism (merge.py).

Two steps. Names that normalize alike (case, spacing, punctuation, possessives, leading articles and
honorifics: "Mr. Holmes", "HOLMES", "Holmes's") are one entity. Then likely aliases merge when every guard
holds: the same type, no ambiguity (the short name fits exactly one longer name), and evidence in the graph
(a shared neighbour or a shared text unit):
- a person's name whose words are all in a longer person's name ("Holmes" -> "Sherlock Holmes");
- an organization's, place's or event's name whose words are all in the longest of a chain of names of that
  type ("Northwind" -> "Northwind Logistics" -> "Northwind Logistics Group", "Aldermere" -> "Port Aldermere",
  "Halvard Summit" -> "Halvard Climate Summit"), when that chain is the only one ("Northwind" beside
  "Northwind Bank" is ambiguous and stays);
- an acronym of exactly one longer name of the same type ("CFA" -> "Coastal Fisheries Authority", "USA" ->
  "United States of America": the initials of its words, small words aside);
- organization names equal but for a company suffix ("Acme Corp" -> "Acme Corporation" -> "Acme");
- names equal but for one word spelled slightly differently (Muhammed / Mohammed, Bennet / Bennett, bomb /
  bombs; not numbers, dates, regnal numbers or opposites), for any type.
Every decision comes back with its reason, for the `entity_aliases` table.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass

ARTICLES = frozenset({"THE", "A", "AN"})
# role titles a person is called by ("Senator Velling"); kept in names, set aside when matching persons
ROLES = frozenset({"SENATOR", "MAYOR", "JUDGE", "JUSTICE", "MINISTER", "INSPECTOR", "COMMISSIONER", "PRESIDENT",
                   "GOVERNOR", "CHANCELLOR", "DETECTIVE", "OFFICER", "SECRETARY", "CHAIRMAN", "CHAIRWOMAN",
                   "DIRECTOR", "AMBASSADOR", "BISHOP", "CONGRESSMAN", "CONGRESSWOMAN", "COUNCILLOR", "SHERIFF",
                   "CHIEF", "CONSTABLE", "MAJOR", "ADMIRAL", "REPRESENTATIVE", "DEPUTY", "MINISTRESS"})
TITLES = frozenset({"KING", "QUEEN", "PRINCE", "PRINCESS", "DUKE", "DUCHESS", "EARL", "COUNT", "COUNTESS",
                    "EMPEROR", "EMPRESS", "POPE", "BISHOP", "PRESIDENT", "GOVERNOR", "MAYOR"})
HONORIFICS = frozenset({"MR", "MRS", "MS", "MISS", "DR", "SIR", "DAME", "LADY", "LORD", "PROF", "PROFESSOR",
                        "CAPT", "CAPTAIN", "COL", "COLONEL", "GEN", "GENERAL", "REV", "REVEREND", "MADAM",
                        "MADAME", "MONSIEUR", "HERR", "FRAU", "AGENT", "SERGEANT", "SGT", "LIEUTENANT", "LT"})
COMPANY_SUFFIXES = frozenset({"CORP", "CORPORATION", "INC", "INCORPORATED", "CO", "COMPANY", "LTD", "LIMITED",
                              "LLC", "PLC", "GMBH", "AG", "SA", "LLP"})
ROMAN = re.compile(r"[IVXLCDM]+")
OPPOSITES = frozenset(frozenset(pair) for pair in (
    ("EAST", "WEST"), ("EASTERN", "WESTERN"), ("NORTH", "SOUTH"), ("NORTHERN", "SOUTHERN"), ("UPPER", "LOWER"),
    ("INNER", "OUTER"), ("MEN", "WOMEN"), ("MALE", "FEMALE"), ("BEFORE", "AFTER"), ("MINOR", "MAJOR"),
    ("NATIONAL", "INTERNATIONAL"), ("SENIOR", "JUNIOR"), ("FIRST", "FINAL"), ("SOUTHEAST", "SOUTHWEST"),
    ("NORTHEAST", "NORTHWEST"), ("NORTHEAST", "SOUTHEAST"), ("NORTHWEST", "SOUTHWEST")))
MAX_POSTING = 50  # a word shared by more names than this (JOHN, LONDON) proposes no candidates
Evidence = Callable[[str, str], bool]


def normalize_name(name: str) -> str:
    """The grouping key of a name: upper case, punctuation as spaces, no possessive, no leading article or
    honorific (unless that is the whole name)."""
    text = unicodedata.normalize("NFKC", name).upper().replace("\u2019", "'")
    text = re.sub(r"'S\b", "", text)
    text = re.sub(r"[^\w\s&-]", " ", text)
    words = text.split()
    while len(words) > 1 and (words[0] in ARTICLES or words[0] in HONORIFICS):
        words = words[1:]
    return " ".join(words)


@dataclass(frozen=True)
class Candidate:
    key: str  # normalized name
    type: str
    frequency: int


@dataclass(frozen=True)
class AliasDecision:
    alias: str  # key merged away
    canonical: str  # key it merges into
    reason: str
    score: float


def find_aliases(candidates: list[Candidate], neighbours: dict[str, set[str]], text_units: dict[str, set[str]],
                 max_edits: int, require_evidence: bool = True) -> list[AliasDecision]:
    """Alias decisions between normalized entities; each alias points at a final canonical key."""
    by_key = {c.key: c for c in candidates}
    postings: dict[str, list[str]] = defaultdict(list)
    for c in candidates:
        for word in set(c.key.split()):
            postings[word].append(c.key)

    def evidence(a: str, b: str) -> bool:
        if not require_evidence:
            return True
        return bool(neighbours.get(a, set()) & (neighbours.get(b, set()) | {b})) or \
            bool(text_units.get(a, set()) & text_units.get(b, set()))

    initials: dict[str, list[str]] = defaultdict(list)
    for c in candidates:
        if c.type in SHORTENED_TYPES and len(c.key.split()) >= 2:
            initials[_initials(c.key)].append(c.key)
    decisions: dict[str, AliasDecision] = {}
    for c in sorted(candidates, key=lambda c: (len(c.key), c.key)):
        if c.key in decisions:
            continue
        decision = (_person_subset(c, by_key, postings, evidence) or _company_suffix(c, by_key, postings)
                    or _shorter_name(c, by_key, postings, evidence) or _acronym(c, by_key, initials, evidence)
                    or _similar_spelling(c, by_key, postings, evidence, max_edits))
        target = decisions.get(decision.canonical) if decision else None
        if decision and not (target and target.canonical == c.key):  # two rules may disagree on direction
            decisions[c.key] = decision
    return _resolve_chains(decisions)


def _words_candidates(key: str, postings: dict[str, list[str]]) -> set[str]:
    """Names sharing every word of `key` (through words that are not too common)."""
    lists = [postings[w] for w in set(key.split()) if len(postings[w]) <= MAX_POSTING]
    if not lists:
        return set()
    result = set(lists[0])
    for other in lists[1:]:
        result &= set(other)
    result.discard(key)
    return result


def _person_subset(c: Candidate, by_key: dict[str, Candidate], postings: dict[str, list[str]],
                   evidence: Evidence) -> AliasDecision | None:
    """Role titles aside ("Senator Velling" is Velling), the name's words are in exactly one longer name."""
    if c.type != "PERSON":
        return None
    key = _without_role(c.key)
    words = set(key.split())
    longer = [k for k in _words_candidates(key, postings)
              if k != c.key and by_key[k].type == "PERSON" and words < set(_without_role(k).split())]
    if len(longer) != 1 or not evidence(c.key, longer[0]):
        return None  # none, or ambiguous ("Holmes": Sherlock or Mycroft?), or no evidence
    return AliasDecision(c.key, longer[0], "name words contained in a longer person's name", 1.0)


SHORTENED_TYPES = frozenset({"ORGANIZATION", "GEO", "EVENT"})
SMALL_WORDS = frozenset({"OF", "AND", "THE", "FOR", "&", "DE", "LA", "DER", "VON", "VAN"})
JOINING_WORDS = frozenset({"AND", "&", "OR", "I", "WITH"})  # "WHITE HALL AND WESTMINSTER HALL" names two things
PLACE_HEADS = frozenset({"REPUBLIC", "KINGDOM", "PORT", "CITY", "TOWN", "COUNTY", "ISLE", "ISLAND", "LAKE",
                         "STATE", "PROVINCE", "DISTRICT", "BAY", "GULF", "MOUNT", "RIVER", "VALLEY"})


def _shorter_name(c: Candidate, by_key: dict[str, Candidate], postings: dict[str, list[str]],
                  evidence: Evidence) -> AliasDecision | None:
    """A shortened name of exactly one longest name of the same type, with evidence in the graph."""
    if c.type not in SHORTENED_TYPES or (len(c.key.split()) == 1 and c.key in HONORIFICS | TITLES):
        return None
    words = set(c.key.split())
    longer = {k for k in _words_candidates(c.key, postings) if by_key[k].type == c.type and words < set(k.split())}
    # the longest names: those no other candidate contains ("NORTHWIND LOGISTICS GROUP", not its shorter forms)
    longest = [k for k in longer if not any(set(k.split()) < set(o.split()) for o in longer)]
    if len(longest) != 1 or any(not set(k.split()) <= set(longest[0].split()) for k in longer):
        return None  # none, or two different longer names could be meant: ambiguous
    if c.type == "ORGANIZATION" and _company_core(longest[0]) == _company_core(c.key):
        return None  # only a company suffix apart: the suffix rule picks the most mentioned spelling
    if not evidence(c.key, longest[0]) or JOINING_WORDS & set(longest[0].split()) or \
            _part_of(c.key, longest[0]):
        return None
    return AliasDecision(c.key, longest[0], f"shortened {c.type.lower()} name", 1.0)


def _initials(key: str) -> str:
    return "".join(w[0] for w in key.split() if w not in SMALL_WORDS)


def _acronym(c: Candidate, by_key: dict[str, Candidate], initials: dict[str, list[str]],
             evidence: Evidence) -> AliasDecision | None:
    """A one-word name of 2-6 letters that is the initials of exactly one longer name of its type."""
    if c.type not in SHORTENED_TYPES or " " in c.key or not 2 <= len(c.key) <= 6 or not c.key.isalpha():
        return None
    expanded = [k for k in initials.get(c.key, []) if by_key[k].type == c.type]
    if len(expanded) != 1 or not evidence(c.key, expanded[0]):
        return None
    return AliasDecision(c.key, expanded[0], "acronym of a longer name", 1.0)


def _part_of(short: str, long: str) -> bool:
    """"KENT" in "EARLDOM OF KENT", "BOHEMIA" in "QUEEN OF BOHEMIA": the longer name is of the shorter one's
    thing, a different entity, unless its head is a generic place word ("REPUBLIC OF VESKARIA")."""
    head, of, tail = long.partition(" OF ")
    return bool(of) and short.split()[-1] in tail.split() and head.split()[-1] not in PLACE_HEADS


def _without_role(key: str) -> str:
    words = key.split()
    while len(words) > 1 and words[0] in ROLES:
        words = words[1:]
    return " ".join(words)


def _company_suffix(c: Candidate, by_key: dict[str, Candidate], postings: dict[str, list[str]]) -> AliasDecision | None:
    if c.type != "ORGANIZATION":
        return None
    core = _company_core(c.key)
    if not core:
        return None
    same = [k for k in postings.get(core.split()[0], []) if k != c.key and by_key[k].type == "ORGANIZATION"
            and _company_core(k) == core]
    if not same:
        return None
    # everything with the same core merges into its most mentioned spelling
    best = max([c.key, *same], key=lambda k: (by_key[k].frequency, len(k), k))
    if best == c.key:
        return None
    return AliasDecision(c.key, best, "same organization name but for a company suffix", 1.0)


def _company_core(key: str) -> str:
    words = key.split()
    while len(words) > 1 and words[-1] in COMPANY_SUFFIXES:
        words = words[:-1]
    return " ".join(words)


def _similar_spelling(c: Candidate, by_key: dict[str, Candidate], postings: dict[str, list[str]], evidence: Evidence,
                      max_edits: int) -> AliasDecision | None:
    best: tuple[float, str] | None = None
    for word in set(c.key.split()):
        if len(postings[word]) > MAX_POSTING:
            continue
        for other in postings[word]:
            if other == c.key or by_key[other].type != c.type:
                continue
            score = one_word_variant(c.key, other, max_edits)
            if score is not None and (best is None or score > best[0]):
                best = (score, other)
    if best is None or not evidence(c.key, best[1]):
        return None
    other = best[1]
    if (by_key[other].frequency, other) < (c.frequency, c.key):
        return None  # the more mentioned spelling survives; that pair is decided from the other side
    return AliasDecision(c.key, other, "spelling variant of one word", round(best[0], 3))


def one_word_variant(a: str, b: str, max_edits: int) -> float | None:
    """1 / (1 + edits) for the one word (hyphens split words) in which two names differ, when that is a
    spelling variant (MUHAMMED / MOHAMMED, DEURSEN / DEUSEN, BOMB / BOMBS) and not a different thing:
    numbers, dates and regnal numbers (HENRY III / HENRY VIII), opposites (EASTERN / WESTERN), other names
    (JONG-NAM / JONG-UN) or other words (MINISTER / MINISTRY). None otherwise."""
    words_a, words_b = a.replace("-", " ").split(), b.replace("-", " ").split()
    if len(words_a) != len(words_b):
        return None
    differing = [(x, y) for x, y in zip(words_a, words_b, strict=True) if x != y]
    if len(differing) != 1:
        return None
    x, y = differing[0]
    if _numeric(x) or _numeric(y) or frozenset((x, y)) in OPPOSITES or x[0] != y[0] or min(len(x), len(y)) < 4:
        return None
    edits = 1 if _plural_pair(x, y) else edit_distance(x, y, max_edits)
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
    values = [v for v in values if v] or values[:1]
    counts = Counter(values)
    order = list(dict.fromkeys(values))
    winner = max(order, key=lambda v: (counts[v], -order.index(v)))
    return winner, [v for v in order if v != winner]
