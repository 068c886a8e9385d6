"""Parse GraphRAG's tuple format, correctly where GraphRAG's own parser is not.

    ("entity"<|>NAME<|>TYPE<|>DESCRIPTION)##("relationship"<|>SOURCE<|>TARGET<|>DESCRIPTION<|>STRENGTH)<|COMPLETE|>

Records are found by where they start, not only by the `##` separator, so a missing separator, a record per
line, markdown fences, lowercase tags or stray quotes lose nothing; the closing `)` and `<|COMPLETE|>` are
removed before fields are read, so the last record keeps its strength and a clean description. Every record
that cannot be used is kept in `dropped` with the reason, so it is counted, never silently lost.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from pydantic import BaseModel

from graphrag_lite.llm.structured import json_parser

TUPLE_DELIMITER = "<|>"
RECORD_DELIMITER = "##"
COMPLETION_DELIMITER = "<|COMPLETE|>"
CLAIM_STATUSES = ("TRUE", "FALSE", "SUSPECTED")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_FENCE = re.compile(r"^\s*```[\w-]*\s*$", re.MULTILINE)


@dataclass(frozen=True)
class EntityRecord:
    name: str
    type: str
    description: str


@dataclass(frozen=True)
class RelationshipRecord:
    source: str
    target: str
    description: str
    strength: float


@dataclass(frozen=True)
class ClaimRecord:
    subject: str
    object: str
    type: str
    status: str
    start_date: str
    end_date: str
    description: str
    source_text: str


@dataclass
class ParsedReply:
    entities: list[EntityRecord] = field(default_factory=list)
    relationships: list[RelationshipRecord] = field(default_factory=list)
    claims: list[ClaimRecord] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # "reason: record text"
    complete: bool = False  # the reply ended with the completion delimiter
    truncated: bool = False  # no completion delimiter and the last record unusable: the reply was cut off

    def extend(self, other: ParsedReply) -> None:
        self.entities += other.entities
        self.relationships += other.relationships
        self.claims += other.claims
        self.dropped += other.dropped
        self.complete = self.complete or other.complete


def clean_value(value: str) -> str:
    """Trim whitespace, surrounding quotes and stray markup from one field."""
    value = value.strip().strip('"').strip("'").strip()
    value = value.replace(COMPLETION_DELIMITER, "").replace(RECORD_DELIMITER, " ")
    return " ".join(value.split())


def clean_name(value: str) -> str:
    return clean_value(value).upper()


def _prepare(text: str, tuple_delimiter: str, record_delimiter: str, completion: str) -> tuple[str, bool]:
    """Remove fences and the completion marker (which also separates records)."""
    text = _FENCE.sub("\n", text)
    marker = re.compile(re.escape(completion), re.IGNORECASE)
    complete = bool(marker.search(text))
    text = marker.sub(record_delimiter, text)
    return text, complete


def _strip_record(record: str) -> str:
    """Drop the separators and the single pair of parentheses around a record."""
    record = record.strip().strip(",").strip()
    while record.endswith(RECORD_DELIMITER):
        record = record[: -len(RECORD_DELIMITER)].rstrip()
    if record.startswith("("):
        record = record[1:]
    if record.endswith(")") and record.count(")") > record.count("("):
        record = record[:-1]
    return record.strip()


def parse_graph_reply(text: str, tuple_delimiter: str = TUPLE_DELIMITER, record_delimiter: str = RECORD_DELIMITER,
                      completion: str = COMPLETION_DELIMITER) -> ParsedReply:
    text, complete = _prepare(text, tuple_delimiter, record_delimiter, completion)
    starts = re.compile(r"\(?\s*[\"']?(entity|relationship)[\"']?\s*" + re.escape(tuple_delimiter), re.IGNORECASE)
    matches = list(starts.finditer(text))
    parsed = ParsedReply(complete=complete)
    leading = _strip_record(text[: matches[0].start()] if matches else text)
    if tuple_delimiter in leading:  # looks like a record whose tag was lost; prose before records is fine
        parsed.dropped.append(f"record without an entity/relationship tag: {leading[:200]}")
    for match, following in zip(matches, [*matches[1:], None], strict=True):
        end = following.start() if following else len(text)
        record = _strip_record(text[match.start():end])
        fields = [f for f in record.split(tuple_delimiter)]
        kind = match.group(1).lower()
        dropped_before = len(parsed.dropped)
        if kind == "entity":
            _add_entity(parsed, fields, record)
        else:
            _add_relationship(parsed, fields, record)
        parsed.truncated = not complete and len(parsed.dropped) > dropped_before
    return parsed


def _add_entity(parsed: ParsedReply, fields: list[str], record: str) -> None:
    if len(fields) < 4:
        parsed.dropped.append(f"entity with {len(fields) - 1} of 3 fields: {record[:200]}")
        return
    name, kind = clean_name(fields[1]), clean_name(fields[2])
    description = clean_value(" ".join(fields[3:]))
    if not name:
        parsed.dropped.append(f"entity without a name: {record[:200]}")
        return
    parsed.entities.append(EntityRecord(name=name, type=kind, description=description))


def _add_relationship(parsed: ParsedReply, fields: list[str], record: str) -> None:
    if len(fields) < 4:
        parsed.dropped.append(f"relationship with {len(fields) - 1} of 4 fields: {record[:200]}")
        return
    source, target = clean_name(fields[1]), clean_name(fields[2])
    strength = 1.0  # GraphRAG's default when a model leaves the strength out
    description_fields = fields[3:]
    if len(fields) >= 5:
        number = _NUMBER.fullmatch(clean_value(fields[-1]))
        if number:
            strength = float(number.group(0))
            description_fields = fields[3:-1]
    description = clean_value(" ".join(description_fields))
    if not source or not target:
        parsed.dropped.append(f"relationship without both ends: {record[:200]}")
    elif source == target:
        parsed.dropped.append(f"relationship of an entity with itself: {record[:200]}")
    else:
        parsed.relationships.append(RelationshipRecord(source=source, target=target, description=description,
                                                       strength=strength))


class _JsonEntity(BaseModel):
    name: str
    type: str = ""
    description: str = ""


class _JsonRelationship(BaseModel):
    source: str
    target: str
    description: str = ""
    strength: float = 1.0


class _JsonGraph(BaseModel):
    entities: list[_JsonEntity] = []
    relationships: list[_JsonRelationship] = []


def parse_graph_json(text: str) -> ParsedReply:
    """The JSON extraction format, validated, as the same records (and the same counted drops)."""
    graph = json_parser(_JsonGraph)(text)
    parsed = ParsedReply(complete=True)
    for e in graph.entities:
        fields = ["entity", e.name, e.type, e.description]
        _add_entity(parsed, fields, json.dumps(e.model_dump()))
    for r in graph.relationships:
        fields = ["relationship", r.source, r.target, r.description, str(r.strength)]
        _add_relationship(parsed, fields, json.dumps(r.model_dump()))
    return parsed


def parse_claims_reply(text: str, tuple_delimiter: str = TUPLE_DELIMITER, record_delimiter: str = RECORD_DELIMITER,
                       completion: str = COMPLETION_DELIMITER) -> ParsedReply:
    text, complete = _prepare(text, tuple_delimiter, record_delimiter, completion)
    parsed = ParsedReply(complete=complete)
    pieces = re.split(re.escape(record_delimiter) + r"|\)\s*\n\s*\(", text)
    for piece in pieces:
        record = _strip_record(piece)
        if not record:
            continue
        fields = record.split(tuple_delimiter)
        if len(fields) < 7:
            parsed.dropped.append(f"claim with {len(fields)} of 8 fields: {record[:200]}")
            continue
        subject = clean_name(fields[0])
        description = clean_value(fields[6])
        if subject in ("", "NONE") or not description:
            parsed.dropped.append(f"claim without a subject or description: {record[:200]}")
            continue
        status = clean_name(fields[3])
        parsed.claims.append(ClaimRecord(
            subject=subject,
            object=clean_name(fields[1]) or "NONE",
            type=clean_name(fields[2]) or "NONE",
            status=status if status in CLAIM_STATUSES else "SUSPECTED",
            start_date=clean_value(fields[4]) or "NONE",
            end_date=clean_value(fields[5]) or "NONE",
            description=description,
            source_text=clean_value(" ".join(fields[7:])),
        ))
    return parsed
