"""The index's tables (one schema: names, columns and the kind of each column) and small helpers over pandas
tables."""

from __future__ import annotations

import math
from datetime import date, datetime
from typing import Any

import numpy as np
import pandas as pd

# The tables an index is read from, with Microsoft GraphRAG's names and columns (the last two of
# community_reports are ours: whether the report was written, and what it was written from). Kinds: str, int,
# float, list (a list or array per row), any. Which stage writes each: the stage registry (`written_by`).
INDEX_TABLES: dict[str, dict[str, str]] = {
    "documents": {"id": "str", "human_readable_id": "int", "title": "str", "text": "str", "text_unit_ids": "list",
                  "creation_date": "str", "raw_data": "any", "metadata": "any"},
    "text_units": {"id": "str", "human_readable_id": "int", "text": "str", "n_tokens": "int", "document_id": "str",
                   "entity_ids": "list", "relationship_ids": "list", "covariate_ids": "list"},
    "entities": {"id": "str", "human_readable_id": "int", "title": "str", "type": "str", "description": "str",
                 "text_unit_ids": "list", "frequency": "int", "degree": "int", "other_types": "list"},
    "relationships": {"id": "str", "human_readable_id": "int", "source": "str", "target": "str",
                      "description": "str", "weight": "float", "combined_degree": "int", "text_unit_ids": "list"},
    "communities": {"id": "str", "human_readable_id": "int", "community": "int", "level": "int", "parent": "int",
                    "children": "list", "title": "str", "entity_ids": "list", "relationship_ids": "list",
                    "text_unit_ids": "list", "period": "str", "size": "int"},
    "community_reports": {"id": "str", "human_readable_id": "int", "community": "int", "level": "int",
                          "parent": "int", "children": "list", "title": "str", "summary": "str",
                          "full_content": "str", "rank": "float", "rating_explanation": "str", "findings": "list",
                          "full_content_json": "str", "period": "str", "size": "int", "status": "str",
                          "inputs_digest": "str"},
    "covariates": {"id": "str", "human_readable_id": "int", "covariate_type": "str", "type": "str",
                   "description": "str", "subject_id": "str", "object_id": "str", "status": "str",
                   "start_date": "str", "end_date": "str", "source_text": "str", "text_unit_id": "str"},
}
_DTYPES = {"str": "str", "int": "int64", "float": "float64", "list": "object", "any": "object"}


def written_by(table: str) -> str:
    """The stage that writes an index table (the standard pipeline's, where two pipelines differ)."""
    from graphrag_lite.stages import STAGES

    return next(stage.name for stage in STAGES.values() if table in stage.writes)


def schema_problems(name: str, frame: pd.DataFrame) -> list[str]:
    """How an index table departs from INDEX_TABLES: missing columns, columns of another kind."""
    problems = []
    for column, kind in INDEX_TABLES[name].items():
        if column not in frame.columns:
            problems.append(f"{name}.{column} is missing")
        elif not _is_kind(frame[column], kind):
            problems.append(f"{name}.{column} is {frame[column].dtype}, not {kind}")
    return problems


def _is_kind(column: pd.Series, kind: str) -> bool:
    if kind == "int":
        return pd.api.types.is_integer_dtype(column)
    if kind == "float":
        return pd.api.types.is_float_dtype(column)
    if kind == "str":  # a text column may hold None where a value is absent (a claim's dates)
        return pd.api.types.is_string_dtype(column) or all(isinstance(v, str) for v in column.dropna())
    if kind == "list":
        return all(isinstance(v, list | tuple | np.ndarray) for v in column)
    return True


def conform(name: str, frame: pd.DataFrame) -> pd.DataFrame:
    """An empty index table with its schema's dtypes (an empty column's dtype is pandas' guess, e.g. float64
    for ids: a reader would see numbers where GraphRAG's tables have integers)."""
    if len(frame) or name not in INDEX_TABLES:
        return frame
    return frame.astype({c: _DTYPES[k] for c, k in INDEX_TABLES[name].items() if c in frame.columns})


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
