"""Keep only what the text says: a name the model returns must occur in the text unit it read.

Models copy the prompt's worked example into their answer (ADA MENSAH, HARBOR DYNAMICS), echo names from
other documents, or invent them; Microsoft GraphRAG keeps all of it. Here an entity whose name (or every
word of it, in any order and case, plural or possessive) does not occur in its text unit is dropped and
counted, and a relationship or claim about it goes with it. A relationship whose ends occur in the text but
were never emitted as entity records (common with small models) keeps them: each end becomes an entity of
unknown type described by the relationship, and is counted.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field, replace

from graphrag_lite.extraction.tuples import EntityRecord, ParsedReply

# words a name may carry that its mention in the text often lacks
_OPTIONAL_WORDS = frozenset({"the", "a", "an", "of", "and", "mr", "mrs", "ms", "dr", "st", "jr", "sr"})


def normalize(text: str) -> str:
    """Lower case, accents removed, every run of non-word characters one space, padded with spaces."""
    folded = unicodedata.normalize("NFKD", text.casefold())
    # the accents found among the text's distinct characters, then removed in one pass (not a test per character)
    accents = [c for c in set(folded) if unicodedata.combining(c)]
    if accents:
        folded = folded.translate(dict.fromkeys(map(ord, accents)))
    return " " + " ".join(re.findall(r"\w+", folded)) + " "


def _variants(word: str) -> set[str]:
    found = {word}
    if len(word) > 3 and word.endswith("s"):
        found.add(word[:-1])
    if len(word) > 4 and word.endswith("es"):
        found.add(word[:-2])
    return found


class UnitText:
    """One text unit, prepared for many name look-ups."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.normalized = normalize(text)
        self.words = {v for word in self.normalized.split() for v in _variants(word)}

    def sentence_with(self, *names: str) -> str:
        """The first sentence that mentions every name (the text's start when none does), for a record the
        model gave no description: the text's own words, not invented ones."""
        sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", self.text) if s.strip()]
        for sentence in sentences:
            if all(UnitText(sentence).mentions(name) for name in names):
                return " ".join(sentence.split())[:500]
        return " ".join(self.text.split())[:200]

    def mentions(self, name: str) -> bool:
        wanted = normalize(name)
        if wanted.strip() and wanted in self.normalized:
            return True
        words = [w for w in wanted.split() if w not in _OPTIONAL_WORDS]
        return bool(words) and all(_variants(w) & self.words for w in words)


@dataclass
class Grounding:
    ungrounded: list[str] = field(default_factory=list)  # one line per record dropped, with the reason
    created: list[str] = field(default_factory=list)  # entities created from relationship ends


def ground(parsed: ParsedReply, text: str) -> Grounding:
    """Drop, in place, the records of `parsed` that `text` does not support; returns what was done."""
    unit = UnitText(text)
    result = Grounding()
    kept: dict[str, EntityRecord] = {}
    entities = []
    for entity in parsed.entities:
        if not unit.mentions(entity.name):
            result.ungrounded.append(f"entity not in its text unit (from the prompt's example or invented): "
                                     f"{entity.name}")
            continue
        if not entity.description:
            entity = replace(entity, description=unit.sentence_with(entity.name))
        entities.append(entity)
        kept.setdefault(entity.name, entity)
    parsed.entities = entities
    relationships = []
    for relationship in parsed.relationships:
        missing = [end for end in (relationship.source, relationship.target)
                   if end not in kept and not unit.mentions(end)]
        if missing:
            result.ungrounded.append(f"relationship {relationship.source} -> {relationship.target}: "
                                     f"{', '.join(missing)} not in its text unit")
            continue
        if not relationship.description:
            relationship = replace(relationship, description=unit.sentence_with(relationship.source,
                                                                                relationship.target))
        relationships.append(relationship)
        for end in (relationship.source, relationship.target):
            if end not in kept:
                kept[end] = EntityRecord(name=end, type="", description=relationship.description)
                parsed.entities.append(kept[end])
                result.created.append(end)
    parsed.relationships = relationships
    claims = [c for c in parsed.claims if unit.mentions(c.subject)]
    result.ungrounded += [f"claim about {c.subject}, which is not in its text unit" for c in parsed.claims
                          if c not in claims]
    parsed.claims = claims
    return result
