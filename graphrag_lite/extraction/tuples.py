"""Parse GraphRAG's tuple format, correctly where GraphRAG's own parser is not, and tolerantly of how real
models write it.

    ("entity"<|>NAME<|>TYPE<|>DESCRIPTION)##("relationship"<|>SOURCE<|>TARGET<|>DESCRIPTION<|>STRENGTH)<|COMPLETE|>

Records are found by where they start, not only by the `##` separator, so a missing separator, a record per
line, numbered or bulleted records, fences, bold, `<br>` markup, `<think>` blocks, lowercase tags or stray
quotes lose nothing; the closing `)` and the completion marker (also as `## COMPLETE|` or `[COMPLETE]`) are
removed before fields are read, so the last record keeps its strength and a clean description. A record
that opens with `(` and never closes, when no completion marker follows, means the reply was cut off
(`truncated`). Every record that cannot be used is kept in `dropped` with the reason, so it is counted,
never silently lost. A reply with no tuple record that holds the JSON format is read as JSON, and the other
way round: the records are what matters, not the format the model chose.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from graphrag_lite.answer_parsing import ParseError, parse_json_value, strip_reasoning

TUPLE_DELIMITER = "<|>"
RECORD_DELIMITER = "##"
COMPLETION_DELIMITER = "<|COMPLETE|>"
CLAIM_STATUSES = ("TRUE", "FALSE", "SUSPECTED")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_STRENGTH_CELL = re.compile(r"\|\s*(-?\d+(?:\.\d+)?)\s*\|?\s*$")
_FENCE = re.compile(r"^\s*```[\w-]*\s*$", re.MULTILINE)
# the completion marker as models write it: <|COMPLETE|>, ## COMPLETE|, [COMPLETE], <COMPLETE>, a lone line
_COMPLETION = re.compile(r"<\|\s*complete\s*\|?>?|#{1,3}\s*complete\s*\|?>?|\[complete\]|<complete>"
                         r"|^\s*complete\s*$", re.IGNORECASE | re.MULTILINE)
_MARKUP = re.compile(r"<br\s*/?>|</?(?:p|b|i|em|strong|span|div|code)>", re.IGNORECASE)
# the tuple delimiter written with spaces or more pipes (`< | >`, `<||>`); `<|>` itself is left as it is
_SPACED_DELIMITER = re.compile(r"<(?!\|>)\s*\|+\s*>")
_LIST_MARKER = re.compile(r"(?:^|\s)(?:\d{1,3}[.)]|[-*\u2022])\s*$")
_LEADING_MARKER = re.compile(r"^(?:\d{1,3}[.)]|[-*\u2022])\s+")
# a record starts with its tag and the delimiter: `("entity"<|>`, `entity<|>`, or `("entity"|` (a `|`
# delimiter counts only after a parenthesis or a quote, so a Markdown table's "| Entity |" is not a record)
_RECORD_START = re.compile(r"\(?\s*[\"'*]*\s*(entity|relationship)\s*[\"'*]*\s*(<\|>)"
                           r"|(?:\(\s*[\"'*]*|[\"'*]+)\s*(entity|relationship)\s*[\"'*]*\s*(\|)", re.IGNORECASE)
_TAG = re.compile(r"entity|relationship", re.IGNORECASE)
_BEFORE_TAG = "(\"'*"  # what may stand between a record's start and its tag, with whitespace


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
        """Add another reply's records (a gleaning), leaving out exact repeats of records already here."""
        self.entities += other.entities
        self.relationships += other.relationships
        self.claims += other.claims
        self.dropped += other.dropped
        self.complete = self.complete or other.complete
        self.deduplicate()

    def deduplicate(self) -> ParsedReply:
        """Each record once: a model that loops repeats the same records until it is cut off, and a repeated
        relationship must not add to its weight."""
        self.entities = list(dict.fromkeys(self.entities))
        self.relationships = list(dict.fromkeys(self.relationships))
        self.claims = list(dict.fromkeys(self.claims))
        return self

    @property
    def records(self) -> int:
        return len(self.entities) + len(self.relationships) + len(self.claims)


def clean_value(value: str) -> str:
    """Trim whitespace, surrounding quotes, emphasis, table pipes and stray markup from one field."""
    value = value.replace(COMPLETION_DELIMITER, "").replace(RECORD_DELIMITER, " ").replace("**", "")
    value = value.strip().strip("|").strip().strip('"').strip("'").strip("`").strip()
    return " ".join(value.split())


def clean_name(value: str) -> str:
    return clean_value(value).upper()


def _prepare(text: str) -> tuple[str, bool]:
    """Remove reasoning blocks, fences and markup; find and remove the completion marker (which also
    separates records)."""
    text = strip_reasoning(text)
    if "```" in text:
        text = _FENCE.sub("\n", text)
    text = _MARKUP.sub("\n", text)
    text = _SPACED_DELIMITER.sub(TUPLE_DELIMITER, text)
    text, markers = _COMPLETION.subn(RECORD_DELIMITER, text)
    return text, markers > 0


def _record_starts(text: str) -> Iterator[re.Match[str]]:
    """What `_RECORD_START.finditer(text)` finds, found faster: the pattern is tried only where a record can
    start, in the run of parentheses, quotes, stars and spaces just before an entity or relationship tag,
    instead of at every character of the reply."""
    position = 0
    while (tag := _TAG.search(text, position)) is not None:
        start = tag.start()
        while start > position and (text[start - 1] in _BEFORE_TAG or text[start - 1].isspace()):
            start -= 1
        match = next(filter(None, (_RECORD_START.match(text, p) for p in range(start, tag.start() + 1))), None)
        if match is None:
            position = tag.start() + 1
        else:
            yield match
            position = match.end()


def without_markers(text: str) -> str:
    """Free text (a summary) without a completion marker the model added out of habit."""
    return " ".join(_COMPLETION.sub(" ", text).split(" ")).strip()


def _strip_record(record: str) -> tuple[str, bool]:
    """A record without separators, list markers and its pair of parentheses; and whether it was closed."""
    record = _LEADING_MARKER.sub("", record.strip())
    while True:  # trailing separators and the next record's list marker ("2.", "-") belong to no field
        before = record
        record = record.rstrip(",;").strip().removesuffix(RECORD_DELIMITER).rstrip()
        record = _without_list_marker(record).rstrip()
        if record == before:
            break
    closed = record.endswith(")")
    if record.startswith("("):
        record = record[1:]
    if closed and record.count(")") > record.count("("):
        record = record[:-1]
    return record.strip(), closed


def _without_list_marker(record: str) -> str:
    """`_LIST_MARKER.sub("", record)`, looked for only where it can be: it ends the record (but for spaces)
    and is at most 5 characters long."""
    found = _LIST_MARKER.search(record, max(0, len(record.rstrip()) - 5))
    return record[: found.start()] + record[found.end():] if found else record


def parse_graph_reply(text: str) -> ParsedReply:
    text, complete = _prepare(text)
    matches = list(_record_starts(text))
    if not matches:  # the model chose another format: JSON, or Markdown tables
        if "{" in text:
            try:
                return parse_graph_json(text)
            except ParseError:
                pass
        return parse_markdown_tables(text, complete)
    parsed = ParsedReply(complete=complete)
    leading, _ = _strip_record(text[: matches[0].start()])
    if TUPLE_DELIMITER in leading:  # looks like a record whose tag was lost; prose before records is fine
        parsed.dropped.append(f"record without an entity/relationship tag: {leading[:200]}")
    ends = [m.start() for m in matches[1:]] + [len(text)]
    for match, end in zip(matches, ends, strict=True):
        kind, delimiter = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
        _read_record(parsed, kind.lower(), text[match.start():end], delimiter)
    return parsed.deduplicate()


def _read_record(parsed: ParsedReply, kind: str, raw: str, delimiter: str) -> None:
    """Add one record, or count it as dropped. Reading them in order, `truncated` ends up describing the
    last one: it opened with `(` and never closed, or lost fields, and no completion marker came."""
    record, closed = _strip_record(raw)
    fields = record.split(delimiter)
    records: list = parsed.entities if kind == "entity" else parsed.relationships
    dropped_before = len(parsed.dropped)
    (_add_entity if kind == "entity" else _add_relationship)(parsed, fields, record)
    added = len(parsed.dropped) == dropped_before
    parsed.truncated = not parsed.complete and ((raw.lstrip().startswith("(") and not closed) or len(fields) < 4)
    if parsed.truncated and added:  # a cut-off record may have lost words of its last field: not kept
        records.pop()
        parsed.dropped.append(f"{kind} cut off: {record[:200]}")


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


def _strength(value: str) -> float | None:
    """A strength as models write it: `8`, `8.5`, `| 9 |`, `strength: 7`, `9/10`."""
    cleaned = clean_value(value)
    if len(cleaned) > 14:
        return None
    number = _NUMBER.search(cleaned)
    return float(number.group(0)) if number else None


def _add_relationship(parsed: ParsedReply, fields: list[str], record: str) -> None:
    if len(fields) < 4:
        parsed.dropped.append(f"relationship with {len(fields) - 1} of 4 fields: {record[:200]}")
        return
    source, target = clean_name(fields[1]), clean_name(fields[2])
    found = _strength(fields[-1]) if len(fields) >= 5 or _NUMBER.fullmatch(clean_value(fields[-1])) else None
    strength = 1.0 if found is None else found  # 1: GraphRAG's default when a model leaves the strength out
    description = clean_value(" ".join(fields[3:] if found is None else fields[3:-1]))
    cell = _STRENGTH_CELL.search(description)  # "... | 9 |": the strength written as a table cell
    if found is None and cell:
        strength, description = float(cell.group(1)), clean_value(description[: cell.start()])
    if not source or not target:
        parsed.dropped.append(f"relationship without both ends: {record[:200]}")
    elif source == target:
        parsed.dropped.append(f"relationship of an entity with itself: {record[:200]}")
    else:
        parsed.relationships.append(RelationshipRecord(source=source, target=target, description=description,
                                                       strength=strength))


_ENTITY_COLUMNS = {"name": ("name", "entity", "entity_name", "title"), "type": ("type", "entity_type", "category"),
                   "description": ("description", "entity_description", "summary")}
_RELATIONSHIP_COLUMNS = {"source": ("source", "source_entity", "src_id", "from", "subject"),
                         "target": ("target", "target_entity", "tgt_id", "to", "object"),
                         "description": ("description", "relationship_description", "relationship", "relation"),
                         "strength": ("strength", "relationship_strength", "weight", "score")}


def _pick(item: dict[str, object], names: tuple[str, ...]) -> str:
    lowered = {str(k).strip().lower().replace(" ", "_"): v for k, v in item.items()}
    return next((str(lowered[n]) for n in names if lowered.get(n) not in (None, "")), "")


def _add_json_item(parsed: ParsedReply, item: object, kind: str | None) -> None:
    """One JSON object as a record, under the key names models use (name / entity_name / title, ...)."""
    if not isinstance(item, dict):
        parsed.dropped.append(f"not a JSON object: {str(item)[:200]}")
        return
    record = json.dumps(item, ensure_ascii=False)[:200]
    source, target = _pick(item, _RELATIONSHIP_COLUMNS["source"]), _pick(item, _RELATIONSHIP_COLUMNS["target"])
    if kind == "relationship" or (kind is None and source and target):
        fields = ["relationship", source, target, _pick(item, _RELATIONSHIP_COLUMNS["description"]),
                  _pick(item, _RELATIONSHIP_COLUMNS["strength"]) or "1"]
        _add_relationship(parsed, fields, record)
    else:
        fields = ["entity", *(_pick(item, _ENTITY_COLUMNS[c]) for c in ("name", "type", "description"))]
        _add_entity(parsed, fields, record)


def parse_graph_json(text: str) -> ParsedReply:
    """The JSON extraction format as the same records (and the same counted drops), under the key names
    models use. An object without `entities` or `relationships` is not an empty graph; a list of records is
    read record by record; a reply holding tuples is read as tuples; a cut-off reply keeps its complete
    objects in `partial` and is rejected, so it is asked again and never cached."""
    text = strip_reasoning(text)
    if re.search(r"[\"'(]\s*entity\s*[\"']?\s*<\|>", text, re.IGNORECASE):
        return parse_graph_reply(text)
    try:
        value: object = parse_json_value(text)
    except ParseError as err:
        if "cut off" in str(err):
            raise ParseError(str(err), partial=_complete_objects(text)) from None
        raise
    parsed = ParsedReply(complete=True)
    if isinstance(value, list):
        for item in value:
            _add_json_item(parsed, item, None)
        return parsed
    assert isinstance(value, dict)
    keys = {str(k).lower(): v for k, v in value.items()}
    if "entities" not in keys and "relationships" not in keys:
        raise ParseError('the JSON object has neither "entities" nor "relationships"')
    for kind, names in (("entity", ("entities", "nodes")), ("relationship", ("relationships", "relations", "edges"))):
        items: object = next((keys[n] for n in names if keys.get(n)), [])
        for item in items if isinstance(items, list) else [items]:
            _add_json_item(parsed, item, kind)
    if not parsed.records and parsed.dropped:  # keys we do not know: asking again is the remedy
        raise ParseError(f"none of the records could be used ({parsed.dropped[0]})")
    return parsed.deduplicate()


def _complete_objects(text: str) -> ParsedReply:
    """The records of a cut-off JSON reply that were complete before the cut."""
    parsed = ParsedReply(truncated=True)
    decoder = json.JSONDecoder()
    position = text.find("{", text.find("{") + 1)
    while position >= 0:
        try:
            item, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError:
            position = text.find("{", position + 1)
            continue
        if isinstance(item, dict) and not {"entities", "relationships"} & set(item):
            _add_json_item(parsed, item, None)
        position = text.find("{", end)
    return parsed


def parse_markdown_tables(text: str, complete: bool) -> ParsedReply:
    """Records from Markdown tables with an entity table (name, type, description) and a relationship table
    (source, target, description, strength), the way some models answer a tuple prompt."""
    parsed = ParsedReply(complete=complete)
    header: list[str] = []
    for line in text.splitlines():
        cells = [c.strip().strip("*").strip() for c in line.strip().strip("|").split("|")] if "|" in line else []
        if not cells or all(set(c) <= set("-: ") for c in cells):
            header = header if cells else []
            continue
        if not header:
            header = [c.lower().replace(" ", "_") for c in cells]
            continue
        row = dict(zip(header, cells, strict=False))
        is_relationship = bool({"source", "target", "source_entity", "target_entity", "from", "to"} & set(header))
        _add_json_item(parsed, row, "relationship" if is_relationship else "entity")
    return parsed


def parse_claims_reply(text: str) -> ParsedReply:
    text, complete = _prepare(text)
    parsed = ParsedReply(complete=complete)
    pieces = [p for p in re.split(re.escape(RECORD_DELIMITER) + r"|\)\s*\n\s*(?:\d{1,3}[.)]\s*|[-*]\s*)?\(", text)
              if p.strip()]
    for position, piece in enumerate(pieces):
        record, closed = _strip_record(piece)
        if not record or TUPLE_DELIMITER not in record:
            continue  # prose around the records
        fields = record.split(TUPLE_DELIMITER)
        if len(fields) < 7 or (position == len(pieces) - 1 and not complete and piece.lstrip().startswith("(")
                               and not closed):
            parsed.dropped.append(f"claim with {len(fields)} of 8 fields: {record[:200]}")
            parsed.truncated = not complete and position == len(pieces) - 1
            continue
        _add_claim(parsed, fields, record)
    return parsed.deduplicate()


def _add_claim(parsed: ParsedReply, fields: list[str], record: str) -> None:
    subject = clean_name(fields[0])
    description = clean_value(fields[6])
    if subject in ("", "NONE") or not description:
        parsed.dropped.append(f"claim without a subject or description: {record[:200]}")
        return
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
