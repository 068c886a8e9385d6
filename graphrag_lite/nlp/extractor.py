"""A deterministic English entity extractor that needs no model and no download.

Proper-noun phrases are runs of capitalised words (with "of", "de", "van", ... inside), with honorifics
("Mr.", "Sir W.") kept in the name, possessives removed, and dates (months, weekdays) left out. A word that
is capitalised only because it starts a sentence is not a name unless the corpus capitalises it in the
middle of sentences at least as often as it writes it in lower case ("Hence", "During" are not names;
"Wardrobe" in Pepys is), and a one-word name must pass the same test wherever it stands. An honorific alone
("Lady", "King") is not a name: only what follows it makes one. Types where rules allow: PERSON by
honorific or a common given name, ORGANIZATION by a suffix (Inc, Corp, Ltd, University, Company, ...), GEO
after "in/at/to/from/near"; the rest CONCEPT.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

HONORIFICS = ("Mr", "Mrs", "Ms", "Miss", "Dr", "Sir", "Dame", "Lady", "Lord", "Captain", "Capt", "Colonel", "Col",
              "General", "Admiral", "Professor", "Prof", "Rev", "Reverend", "Madam", "Madame", "Mistress", "Master",
              "Judge", "Duke", "Duchess", "Earl", "Count", "Countess", "Prince", "Princess", "King", "Queen")
ORG_SUFFIXES = ("Inc", "Corp", "Corporation", "Ltd", "Limited", "LLC", "PLC", "Company", "Co", "University",
                "College", "Institute", "Agency", "Society", "Bank", "Association", "Council", "Committee",
                "Foundation", "Group", "Department", "Ministry", "Office", "Navy", "Army", "Church", "School",
                "Parliament", "Court", "Board", "Exchange")
GIVEN_NAMES = frozenset("""John William James Thomas Richard Robert Henry Charles George Edward Samuel Joseph
Peter Paul Mark David Michael Daniel Matthew Andrew Francis Anthony Arthur Walter Ralph Hugh Nicholas Roger Philip
Will Tom Jack Harry Ned Elizabeth Mary Anne Anna Jane Margaret Catherine Sarah Susan Alice Ellen
Emma Frances Martha Dorothy Joan Judith Barbara Grace Betty Bess Kate Nell Alex Sam Taylor Jordan
Maria Laura Julia Sophia Olivia""".split())  # noqa: SIM905
DATE_WORDS = frozenset("""January February March April May June July August September October November
December Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec Monday Tuesday Wednesday Thursday Friday
Saturday Sunday Lord's
Day Michaelmas Whitsuntide Christmas Easter Lent""".split())  # noqa: SIM905
STARTERS = frozenset("""A An And As At But By For From He Her His How I If In It Its My No Not Now Of On Or Our
She So That The Their Then There These They This Those Thus To Up We What When Where Which While Who Why With
Yet You Your After Before Here Having Being Being Yes Upon Only Also All Some One Two Three Many
Most Much Such""".split())  # noqa: SIM905
CONNECTORS = frozenset({"of", "de", "van", "von", "der", "la", "le", "du", "the"})
GEO_CUES = frozenset({"in", "at", "to", "from", "near", "into", "towards", "toward", "through"})
_ABBREVIATION_CHARS = max(map(len, HONORIFICS)) + 1  # the longest abbreviation, with its full stop
_ABBREVIATION_END = re.compile(r"(?:\b(?:" + "|".join(HONORIFICS) + r")|\b[A-Z])\.$")
_POSSESSIVE = re.compile(r"['\u2019][sS]$")
_ROMAN = re.compile(r"[IVXLC]+")
_HONORIFIC_WORDS = frozenset(HONORIFICS)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'\u201c\u2018(]?[A-Z0-9])")


@dataclass(frozen=True)
class Mention:
    name: str  # upper case, as GraphRAG titles are
    type: str
    sentence: int  # index of the sentence in the text


def sentences(text: str) -> list[str]:
    """Sentences, not split after honorifics or single-letter initials ("Sir W. Pen", "Mr. Gauden")."""
    pieces = _SENTENCE_END.split(text)
    merged: list[str] = []
    for piece in pieces:
        # only a sentence's last few characters can be an abbreviation: the search starts there
        if merged and _ABBREVIATION_END.search(merged[-1], max(0, len(merged[-1]) - _ABBREVIATION_CHARS)):
            merged[-1] += " " + piece
        else:
            merged.append(piece)
    return [s.strip() for s in merged if s.strip()]


def capitalised_mid_sentence(texts: Iterable[str]) -> set[str]:
    """Words the corpus capitalises in the middle of sentences at least as often as it writes them in lower
    case: words used as names, not ordinary words that headings, titles or a sentence start capitalise.
    Lower-cased."""
    written: Counter[str] = Counter()  # each word as written, but a sentence's first; each spelling judged once
    for text in texts:
        written.update(text.split())  # a text's words are its sentences' words (they split at spaces)
        written.subtract(sentence.split(None, 1)[0] for sentence in sentences(text))
    capitalised: Counter[str] = Counter()
    lower: Counter[str] = Counter()
    for word, count in written.items():
        if count > 0 and (clean := _clean_word(word)):
            (capitalised if word[:1].isupper() else lower)[clean.lower()] += count
    return {word for word, count in capitalised.items() if count >= lower[word]}


@lru_cache(maxsize=2**16)  # a corpus repeats its words: each is cleaned once (4 times faster on a large input)
def _clean_word(word: str) -> str:
    return _POSSESSIVE.sub("", word.strip(".,;:!?\"'\u201c\u201d\u2018\u2019()[]"))


@lru_cache(maxsize=2**16)
def _capitalised(word: str) -> bool:
    return _clean_word(word)[:1].isupper()


@lru_cache(maxsize=2**16)
def _name_word(word: str) -> bool:
    """A capitalised word that can be part of a name: not a date, a number, a roman numeral, an all-caps
    heading word or a dotted abbreviation (initials such as "W." are fine)."""
    core = word.rstrip(".")
    shouting = core.isupper() and len(core) > 1 and (len(core) > 5 or core.title() in STARTERS
                                                     or core.lower() in CONNECTORS or core in ("AND", "OR"))
    return (core[:1].isupper() and core.title() not in DATE_WORDS and not any(ch.isdigit() for ch in core)
            and not _ROMAN.fullmatch(core) and not shouting and "." not in core)


def extract_mentions(text: str, known_names: set[str], split: list[str] | None = None) -> list[Mention]:
    """The names in a text; `split`: its sentences, when the caller has them already."""
    mentions: list[Mention] = []
    for index, sentence in enumerate(sentences(text) if split is None else split):
        words = sentence.split()
        after = 0  # where the next name may start: after the last one
        # no name starts with a lower-case word: most words are passed over here, in one sweep
        for i in [i for i, word in enumerate(words) if not word[0].islower() and _capitalised(word)]:
            if i < after:
                continue
            phrase, end, kind = _phrase_at(words, i)
            if i == 0 and phrase and not kind and phrase[0].lower() not in known_names:
                phrase = phrase[1:]  # capitalised only because it starts the sentence ("Yesterday John Smith")
                while phrase and phrase[0] in CONNECTORS:
                    phrase = phrase[1:]
            single = len(phrase) == 1 and (phrase[0] in HONORIFICS or phrase[0].lower() not in known_names)
            if phrase and phrase[0] not in STARTERS and not single:
                name = " ".join(phrase)
                previous = _clean_word(words[i - 1]).lower() if i > 0 else ""
                mentions.append(Mention(name.upper(), kind or _type_of(phrase, previous), index))
            after = max(end, i + 1)
    return mentions


def _phrase_at(words: list[str], start: int) -> tuple[list[str], int, str | None]:
    """The proper-noun phrase starting at words[start] (honorific included), where it ends, and a type
    when the honorific decides it."""
    kind = None
    phrase: list[str] = []
    i = start
    first = _clean_word(words[i])
    if first.rstrip(".") in _HONORIFIC_WORDS and i + 1 < len(words) and words[i + 1][:1].isupper():
        phrase.append(first.rstrip("."))
        kind = "PERSON"
        i += 1
    while i < len(words):
        word = _clean_word(words[i])
        if _name_word(word):
            phrase.append(word.rstrip("."))
            i += 1
            if words[i - 1][-1:] in ",;:!?\"”)" or (words[i - 1].endswith(".") and len(word) > 2):
                break  # punctuation ends a name (but "W." inside "Sir W. Pen" does not)
        elif phrase and word.lower() in CONNECTORS and i + 1 < len(words) and words[i + 1][:1].isupper() \
                and not kind and not GIVEN_NAMES & set(phrase):  # "Bank of England", not "John Smith of Acme"
            phrase.append(word.lower())
            i += 1
        else:
            break
    while phrase and phrase[-1] in CONNECTORS:
        phrase.pop()
    if kind and len(phrase) < 2:
        return [], start + 1, None
    return phrase, i, kind


def _type_of(phrase: list[str], previous: str) -> str:
    if phrase[-1] in ORG_SUFFIXES or (phrase[0] in ORG_SUFFIXES and "of" in phrase):
        return "ORGANIZATION"
    if phrase[0] in GIVEN_NAMES and len(phrase) >= 2:
        return "PERSON"
    if previous in GEO_CUES:
        return "GEO"
    return "CONCEPT"


def majority_type(kinds: Iterable[str] | Counter[str]) -> str:
    """The most frequent type other than CONCEPT (CONCEPT when there is none); `kinds` may be counted already."""
    counts = Counter(kinds)
    specific = [(n, k) for k, n in counts.items() if k != "CONCEPT"]
    return max(specific)[1] if specific else "CONCEPT"
