"""The index's tables (one schema: names, columns and the kind of each column) and small helpers over pandas
tables."""

from __future__ import annotations

import json
import math
import types
import typing
from collections.abc import Sequence
from datetime import UTC, date, datetime
from typing import Any, Literal, TypedDict, TypeVar

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field, field_validator

from graphrag_lite.answer_parsing import number_from_text
from graphrag_lite.ids import stable_id

# The tables an index is read from, with Microsoft GraphRAG's names and columns (the last two of
# community_reports are ours: whether the report was written, and what it was written from): one typed row
# per table, which code that iterates over a table's rows reads (`typed_records`), and from which the
# schema's kinds are derived (str, int, float, list: a list or array per row, any). A row type's field order
# is its table's column order on disk, and stages that build rows as tuples follow it. Which stage writes
# each table: the stage registry (stages.written_by).


# The vector tables an index keeps in LanceDB (GraphRAG's names): the texts embed_text embeds.
VectorTable = Literal["entity_description", "text_unit_text", "community_full_content"]
VECTOR_TABLES: tuple[str, ...] = typing.get_args(VectorTable)


class DocumentRow(TypedDict):
    id: str
    human_readable_id: int
    title: str
    text: str
    text_unit_ids: Sequence[str]
    creation_date: str
    raw_data: Any
    metadata: Any


class TextUnitRow(TypedDict):
    id: str
    human_readable_id: int
    text: str
    n_tokens: int
    document_id: str
    entity_ids: Sequence[str]
    relationship_ids: Sequence[str]
    covariate_ids: Sequence[str]


class EntityRow(TypedDict):
    id: str
    human_readable_id: int
    title: str
    type: str
    description: str
    text_unit_ids: Sequence[str]
    frequency: int
    degree: int
    other_types: Sequence[str]


class RelationshipRow(TypedDict):
    id: str
    human_readable_id: int
    source: str
    target: str
    description: str
    weight: float
    combined_degree: int
    text_unit_ids: Sequence[str]


class _CommunityHead(TypedDict):
    """The first columns of a community and of its report, in GraphRAG's order."""

    id: str
    human_readable_id: int
    community: int
    level: int
    parent: int
    children: Sequence[int]
    title: str


class CommunityRow(_CommunityHead):
    entity_ids: Sequence[str]
    relationship_ids: Sequence[str]
    text_unit_ids: Sequence[str]
    period: str
    size: int


class CommunityReportRow(_CommunityHead):
    summary: str
    full_content: str
    rank: float
    rating_explanation: str
    findings: Sequence[Any]
    full_content_json: str
    period: str
    size: int
    status: str  # ok, or why the report is missing
    inputs_digest: str  # what it was written from (facts, model, prompt)


class CovariateRow(TypedDict):
    id: str
    human_readable_id: int
    covariate_type: str
    type: str
    description: str
    subject_id: str
    object_id: str
    status: str
    start_date: str | None
    end_date: str | None
    source_text: str
    text_unit_id: str


ROW_TYPES: dict[str, Any] = {"documents": DocumentRow, "text_units": TextUnitRow, "entities": EntityRow,
                             "relationships": RelationshipRow, "communities": CommunityRow,
                             "community_reports": CommunityReportRow, "covariates": CovariateRow}
Row = TypeVar("Row")


def _kind(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin in (types.UnionType, typing.Union):  # X | None (a claim's dates): the kind of X
        [kept] = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _kind(kept)
    if origin is not None:
        return "list"
    if annotation is Any:
        return "any"
    kinds = {str: "str", int: "int", float: "float"}
    if annotation not in kinds:
        raise TypeError(f"a table column typed {annotation!r}: the schema has str, int, float, lists and Any")
    return kinds[annotation]


INDEX_TABLES: dict[str, dict[str, str]] = {
    name: {column: _kind(annotation) for column, annotation in typing.get_type_hints(row).items()}
    for name, row in ROW_TYPES.items()}


def typed_records(frame: pd.DataFrame, row: type[Row]) -> list[Row]:
    """A table's rows as its typed rows (an index table read by IndexTables or a stage, so its schema holds)."""
    return typing.cast(list[Row], records(frame))


# A community report: the model an LLM's answer is validated against (the extractive reports build the same),
# and its row of the community_reports table.
REPORT_COLUMNS = list(INDEX_TABLES["community_reports"])
COLUMN = {name: i for i, name in enumerate(REPORT_COLUMNS)}  # a report row's fields by name


class Finding(BaseModel):
    summary: str = Field(min_length=1)
    explanation: str


class Report(BaseModel):
    title: str = Field(min_length=1)
    summary: str = Field(min_length=1)
    rating: float = Field(ge=0, le=10)
    rating_explanation: str = ""
    findings: list[Finding] = Field(default_factory=list)  # a report with a summary and no finding still informs

    @field_validator("title", "summary")
    @classmethod
    def stripped(cls, value: str) -> str:
        return value.strip()

    @field_validator("rating", mode="before")
    @classmethod
    def number(cls, value: object) -> object:
        return number_from_text(value, scale=10)


def full_content(report: Report) -> str:
    """GraphRAG's markdown rendering of a report."""
    parts = [f"# {report.title}", report.summary] + [f"## {f.summary}\n\n{f.explanation}" for f in report.findings]
    return "\n\n".join(parts)


def report_row(record: CommunityRow, report: Report | None, status: str, digest: str) -> tuple[Any, ...]:
    """A community's report row; with no report, a row whose `status` says why (queries skip it, a re-run
    writes it)."""
    period = datetime.now(UTC).date().isoformat()
    fields: tuple[Any, ...]
    if report is None:  # kept, so queries can tell the report is missing and a re-run knows what to redo
        fields = (f"Community {int(record['community'])} (report missing)", "", "", float("nan"), "", [], "", period)
    else:
        findings = [f.model_dump() for f in report.findings]
        fields = (report.title, report.summary, full_content(report), float(report.rating), report.rating_explanation,
                  findings, json.dumps(report.model_dump(), ensure_ascii=False), period)
    return placed_report(record, fields, status, digest)


def placed_report(record: CommunityRow, fields: Sequence[Any], status: str, digest: str) -> tuple[Any, ...]:
    """A report row in its community's place: the community's id, number, level, parent and children, then
    the report's `fields` (title to period), then the community's size, `status` and `digest`."""
    number = int(record["community"])
    return (stable_id("community_report", record["id"]), number, number, int(record["level"]), int(record["parent"]),
            [int(c) for c in record["children"]], *fields, int(record["size"]), status, digest)


_DTYPES = {"str": "str", "int": "int64", "float": "float64", "list": "object", "any": "object"}


def conform(name: str, frame: pd.DataFrame) -> pd.DataFrame:
    """An empty index table with its schema's dtypes (an empty column's dtype is pandas' guess, e.g. float64
    for ids: a reader would see numbers where GraphRAG's tables have integers)."""
    if len(frame) or name not in INDEX_TABLES:
        return frame
    return frame.astype({c: _DTYPES[k] for c, k in INDEX_TABLES[name].items() if c in frame.columns})


def community_memberships(communities: pd.DataFrame) -> dict[str, list[tuple[int, int]]]:
    """Entity id -> its (level, community) pairs, shallowest first, from the communities table (an entity is in
    one community per level). Local search, the graph explorer and the exports all read memberships here."""
    found: dict[str, list[tuple[int, int]]] = {}
    for community, level, members in zip(communities["community"].tolist(), communities["level"].tolist(),
                                         communities["entity_ids"].tolist(), strict=True):
        for entity_id in members if members is not None else ():
            found.setdefault(str(entity_id), []).append((int(level), int(community)))
    return {entity_id: sorted(pairs) for entity_id, pairs in found.items()}


def unit_documents(text_units: pd.DataFrame, documents: pd.DataFrame | None) -> dict[str, tuple[str, str | None]]:
    """Text unit id -> (its document's id, that document's title: None when `documents` lacks it). Citations,
    the graph explorer and the evaluation's gold documents all name a unit's document from here."""
    titles = {} if documents is None else {d: plain_json(t) for d, t in zip(documents["id"], documents["title"],
                                                                              strict=True)}
    return {unit: (document, titles.get(document)) for unit, document in zip(text_units["id"],
                                                                              text_units["document_id"], strict=True)}


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as plain dicts with string keys (typed, unlike itertuples)."""
    return [{str(k): v for k, v in row.items()} for row in frame.to_dict("records")]


def plain_json(value: Any) -> Any:
    """A value from a table as plain JSON: numpy scalars and arrays unwrapped, NaN and NA as None, dates
    in ISO form, anything else as its text."""
    if isinstance(value, dict):
        return {str(k): plain_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple | np.ndarray):
        return [plain_json(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str | bool | int):
        return value
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)
