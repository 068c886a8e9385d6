"""Names as entity resolution and search compare them: the grouping key of a name (its case, spacing,
punctuation, possessive, leading article and a man's honorific aside) and what an honorific says.

Every floor needs this: the settings normalize generic words with it, entity resolution groups names by it,
alias overrides and search match names with it."""

from __future__ import annotations

import re
import unicodedata

ARTICLES = frozenset({"THE", "A", "AN"})
HONORIFICS = frozenset({"MR", "MRS", "MS", "MISS", "DR", "SIR", "DAME", "LADY", "LORD", "PROF", "PROFESSOR",
                        "CAPT", "CAPTAIN", "COL", "COLONEL", "REV", "REVEREND", "MADAM",
                        "MADAME", "MONSIEUR", "HERR", "FRAU", "AGENT", "SERGEANT", "SGT", "LIEUTENANT", "LT"})
FEMALE_HONORIFICS = frozenset({"MRS", "MS", "MISS", "LADY", "DAME", "MADAM", "MADAME", "FRAU"})
MALE_HONORIFICS = frozenset({"MR", "SIR", "LORD", "MONSIEUR", "HERR"})


def normalize_name(name: str) -> str:
    """The grouping key of a name: upper case, punctuation as spaces, no possessive, no leading article or
    honorific (unless that is the whole name). A woman's honorific stays: "Mrs. Bennet" is not "Mr. Bennet",
    nor "Lady Batten" "Sir W. Batten"."""
    words = literal_name(name).split()
    while len(words) > 1 and (words[0] in ARTICLES or words[0] in HONORIFICS) and words[0] not in FEMALE_HONORIFICS:
        words = words[1:]
    return " ".join(words)


def literal_name(name: str) -> str:
    """A name as written, but for case, spacing, punctuation and a possessive: "Mr. Kessler's" is "MR KESSLER"."""
    text = unicodedata.normalize("NFKC", name).upper().replace("\u2019", "'")
    text = re.sub(r"'S\b", "", text)
    return " ".join(re.sub(r"[^\w\s&-]", " ", text).split())


def honorific_gender(name: str) -> str:
    """"F" for "Mrs. Bennet", "M" for "Sir W. Batten", "" when the name does not say."""
    words = re.sub(r"[^\w\s]", " ", name.upper()).split()
    while words and words[0] in ARTICLES:
        words = words[1:]
    first = words[0] if len(words) > 1 else ""
    return "F" if first in FEMALE_HONORIFICS else "M" if first in MALE_HONORIFICS else ""
