"""Follow an answer's `[Data: Sources (1, 2); Entities (3, +more); ...]` references back to their rows, and
for sources to the document title and the chunk text, so a reader can check every claim."""

from __future__ import annotations

import re
from typing import Any

from graphrag_lite.query.index import IndexTables

KINDS = ("Sources", "Entities", "Relationships", "Reports", "Claims")
_REFERENCE = re.compile(r"\[Data:([^\]]*)\]", re.IGNORECASE)
_GROUP = re.compile(rf"({'|'.join(KINDS)})\s*\(([^)]*)\)", re.IGNORECASE)


def cited_ids(answer: str) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for reference in _REFERENCE.findall(answer):
        for kind, ids in _GROUP.findall(reference):
            bucket = found.setdefault(kind.capitalize(), [])
            bucket.extend(n for n in map(int, re.findall(r"\d+", ids)) if n not in bucket)
    return found


def resolve_citations(answer: str, index: IndexTables) -> dict[str, list[dict[str, Any]]]:
    """Every cited id with its row, under each of the five kinds (an empty list when the answer cites none
    of a kind); an id that is not in the index is listed with `"missing": true`."""
    resolved: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    for kind, ids in cited_ids(answer).items():
        resolved[kind] = [_lookup(kind, number, index) or {"id": number, "missing": True} for number in ids]
    return resolved


def _lookup(kind: str, number: int, index: IndexTables) -> dict[str, Any] | None:
    if kind == "Sources":
        units = index.text_units[index.text_units["human_readable_id"] == number]
        if units.empty:
            return None
        unit = units.iloc[0]
        return {"id": number, "text_unit_id": unit["id"], "document_title": index.unit_documents[unit["id"]][1],
                "text": unit["text"]}
    table, columns = {
        "Entities": (index.entities, ["id", "title", "type", "description"]),
        "Relationships": (index.relationships, ["id", "source", "target", "description", "weight"]),
        "Reports": (index.reports, ["id", "community", "level", "title", "summary", "rank"]),
        "Claims": (index.covariates, ["id", "subject_id", "type", "status", "description", "text_unit_id"]),
    }[kind]
    key = "community" if kind == "Reports" else "human_readable_id"
    rows = table[table[key] == number]
    if rows.empty:
        return None
    record = rows.iloc[0]
    return {"short_id": number, **{c: _plain(record[c]) for c in columns if c in rows.columns}}


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value
