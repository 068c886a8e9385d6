"""The fake model's extractions: entities are the capitalised phrases of the text, typed by the word before
them; relationships join names that share a sentence. The first answer leaves a third of the names for the
gleanings, which find them; the answer's format (GraphRAG's tuples or JSON) is the one the prompt asks for."""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Callable

from graphrag_lite.extraction.gleaning import FOUND_NAMES
from graphrag_lite.words import STOPWORDS

TUPLE, RECORD, COMPLETE = "<|>", "##", "<|COMPLETE|>"


# the longest extraction answer the fake writes for one text unit, in tokens: a real model's answer to a
# 1,200-token unit is one or two thousand; past this, the fake's rule-found names would make it cut off at
# extract_graph.max_completion_tokens (8000) on dense text, which no real model would do
LONGEST_ANSWER = 6000


HONORIFICS = ("Mr", "Mrs", "Ms", "Dr", "Sir", "Lady", "Lord", "Captain", "Capt", "Colonel", "Agent", "Professor")


ORG_SUFFIXES = ("Corp", "Corporation", "Inc", "Ltd", "Company", "University", "Agency", "Office", "Council",
                "Committee", "Bank", "Institute", "Navy", "Army", "Society", "Group", "Foundation")


PHRASE = re.compile(r"\b[A-Z][\w'\u2019-]*(?:\s+(?:of|the|de|van|von|and)?\s*[A-Z][\w'\u2019-]*)*")


def _is_json_graph(first: str) -> bool:
    return '"entities"' in first and '"relationships"' in first


def source_text(prompt: str) -> str:
    """The document text of an extraction prompt (after the last `Text:`, before `Output:`)."""
    start = prompt.rfind("Text:")
    text = prompt[start + 5:] if start >= 0 else prompt
    end = text.rfind("Output:")
    return (text[:end] if end >= 0 else text).strip()


def entity_types(prompt: str) -> list[str]:
    found = re.search(r"types?:\s*\[([^\]]*)\]", prompt)
    types = [t.strip().upper() for t in found.group(1).split(",")] if found else []
    return [t for t in types if t] or ["ORGANIZATION", "PERSON", "GEO", "EVENT"]


def sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


def find_entities(text: str, types: list[str]) -> dict[str, tuple[str, str]]:
    """Capitalised phrases -> (type, first sentence they appear in), in order of first appearance. A single
    word that only ever appears capitalised at the start of a sentence is not a name; a single word that is
    part of a person's name is that person's."""
    found: dict[str, tuple[str, str]] = {}
    mid_sentence = {m.group(1) for m in re.finditer(r"[a-z,;:]\s+([A-Z][\w'\u2019-]*)", text)}
    for sentence in sentences(text):
        for match in PHRASE.finditer(sentence):
            words = match.group(0).split()
            while words and words[0].lower() in STOPWORDS:
                words = words[1:]
            name = re.sub(r"['\u2019]s$", "", " ".join(words)).strip("'\u2019-")
            if len(name) < 3 or name.lower() in STOPWORDS or name.upper() in found or "'" in name:
                continue
            at_start = not sentence[: match.start()].strip(" \"'\u201c\u2018(")
            if at_start and " " not in name and name not in mid_sentence:
                continue
            before = sentence[: match.start()].rstrip(" .").split()
            found[name.upper()] = (_guess_type(name, before[-1] if before else "", types), sentence)
    people = {word for name, (kind, _) in found.items() if kind == "PERSON" and " " in name for word in name.split()}
    return {name: ("PERSON" if name in people and "PERSON" in types else kind, sentence)
            for name, (kind, sentence) in found.items()}


def _guess_type(name: str, previous: str, types: list[str]) -> str:
    def pick(kind: str) -> str:
        return kind if kind in types else types[0]

    if previous.strip(".") in HONORIFICS:
        return pick("PERSON")
    if name.split()[-1] in ORG_SUFFIXES:
        return pick("ORGANIZATION")
    if previous.lower() in ("in", "at", "to", "from", "near"):
        return pick("GEO")
    return pick("PERSON") if len(name.split()) == 2 else pick("ORGANIZATION")


def _records_for(names: list[str], found: dict[str, tuple[str, str]]) -> list[str]:
    records = [f'("entity"{TUPLE}{n}{TUPLE}{found[n][0]}{TUPLE}{n.title()} appears in the text: {clip(found[n][1])})'
               for n in names]
    chosen = set(names)
    pairs: dict[tuple[str, str], list[str]] = {}
    for sentence in sentences(" ".join(s for _, s in found.values())):
        inside = [n for n in found if n.lower() in sentence.lower()]
        for i, a in enumerate(inside):
            for b in inside[i + 1:]:
                if a in chosen or b in chosen:
                    pairs.setdefault((a, b), []).append(sentence)
    # like a model, name the strongest few relationships of each entity, not every pair in the text, and stop
    # well before an answer a model would not write for one text unit (the weakest go first)
    ranked = sorted(pairs.items(), key=lambda item: -len(item[1]))[: 3 * len(names)]
    written = {pair: f'("relationship"{TUPLE}{pair[0]}{TUPLE}{pair[1]}{TUPLE}{pair[0].title()} and '
                     f'{pair[1].title()} are mentioned together: {clip(where[0])}{TUPLE}{min(10, 2 + 2 * len(where))})'
               for pair, where in ranked}
    room = LONGEST_ANSWER * 4 - sum(len(r) for r in records)  # about 4 characters a token
    used = itertools.accumulate(len(r) for r in written.values())  # by the strongest ones up to each
    kept = {pair for pair, length in zip(written, used, strict=True) if length <= room}
    return records + [written[pair] for pair in pairs if pair in kept]


def graph_extraction(first: str, last: str, prior: list[str]) -> str:
    found = find_entities(source_text(first), entity_types(first))
    return _graph_answer(first, list(found)[: math.ceil(len(found) * 2 / 3)], found)  # leave some for gleaning


def _graph_answer(first: str, names: list[str], found: dict[str, tuple[str, str]]) -> str:
    records = _records_for(names, found)
    if not _is_json_graph(first):
        return RECORD.join(records) + COMPLETE
    entities, relationships = [], []
    for record in records:
        fields = record.strip("()").split(TUPLE)
        if fields[0] == '"entity"':
            entities.append({"name": fields[1], "type": fields[2], "description": fields[3]})
        else:
            relationships.append({"source": fields[1], "target": fields[2], "description": fields[3],
                                  "strength": float(fields[4])})
    return json.dumps({"entities": entities, "relationships": relationships})


def _emitted(last: str, prior: list[str]) -> Callable[[str], bool]:
    """Whether a name was extracted before: a compact follow-up lists the names in its last message, a
    history one shows the earlier answers."""
    before, _, after = FOUND_NAMES.partition("{names}")  # the compact follow-up's own wording, not a copy
    listed = re.search(re.escape(before) + "(.*?)" + re.escape(after), last, re.DOTALL)
    if listed:
        return set(listed.group(1).splitlines()).__contains__
    answers = " ".join(prior)
    # JSON answers are written by json.dumps, which escapes non-ASCII letters (a curly apostrophe in a name)
    return lambda name: any(form in answers for form in (f'"entity"{TUPLE}{name}{TUPLE}', f'"name": "{name}"',
                                                         f'"name": {json.dumps(name)}'))


def _missed(first: str, last: str, prior: list[str]) -> tuple[list[str], dict[str, tuple[str, str]]]:
    """The names found in the text that were not extracted before, and every name found."""
    found = find_entities(source_text(first), entity_types(first))
    emitted = _emitted(last, prior)
    return [n for n in found if not emitted(n)], found


def continue_extraction(first: str, last: str, prior: list[str]) -> str:
    """A graph gleaning: the names found in the text that no earlier answer gave."""
    return _graph_answer(first, *_missed(first, last, prior))


def loop_check(first: str, last: str, prior: list[str]) -> str:
    """Y while the text holds names no answer gave yet."""
    return "Y" if _missed(first, last, prior)[0] else "N"


def claim_extraction(first: str, last: str, prior: list[str]) -> str:
    found = find_entities(source_text(first), entity_types(first))
    claims = []
    for name, (_, sentence) in list(found.items())[:5]:
        claims.append(f"({name}{TUPLE}NONE{TUPLE}MENTION{TUPLE}TRUE{TUPLE}NONE{TUPLE}NONE{TUPLE}"
                      f"{name.title()} is reported in the text{TUPLE}{clip(sentence)})")
    return RECORD.join(claims) + COMPLETE


def clip(text: str, limit: int = 160) -> str:
    text = " ".join(text.replace(TUPLE, " ").replace(RECORD, " ").split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
