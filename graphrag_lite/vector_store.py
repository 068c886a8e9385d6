"""LanceDB tables of the index: vectors and a full-text index per table, keyed by the Parquet row ids.

Tables (GraphRAG's names): entity_description ("title:description"), text_unit_text, community_full_content.
A manifest in the output folder records the embedding model and dimension, so a query embedded with another
model is refused with the command that re-embeds, instead of returning nonsense.

A re-run updates the tables in place (`plan_update`, then `apply_update`): rows whose id is gone or whose text
changed are deleted, new and changed rows are added, unchanged rows (and their vectors) stay. A table that is
missing or whose schema does not fit (vectors or not, another dimension) is recreated instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from graphrag_lite.config import GraphRagConfig
from graphrag_lite.errors import GraphragLiteError
from graphrag_lite.large_imports import import_large
from graphrag_lite.storage import read_json
from graphrag_lite.tables import VECTOR_TABLES

MANIFEST = "embeddings_manifest.json"
TABLES = VECTOR_TABLES
REEMBED = "graphrag-lite index --from embed_text"
DELETE_CHUNK = 500  # ids per delete predicate


class IndexMismatchError(GraphragLiteError):
    exit_code = 2


def connect(uri: str) -> Any:
    return import_large("lancedb").connect(uri)


def write_table(db: Any, name: str, ids: list[str], texts: list[str], vectors: list[list[float]] | None) -> None:
    """(Re)create the table with exactly these rows (mode="overwrite"), and its full-text index. An empty
    table has no vector column (lance refuses vectors of dimension 0)."""
    columns: dict[str, Any] = {"id": pa.array(ids, pa.string()), "text": pa.array(texts, pa.string())}
    if vectors:
        columns["vector"] = pa.array(vectors, pa.list_(pa.float32(), len(vectors[0])))
    table = db.create_table(name, data=pa.table(columns), mode="overwrite")
    if ids:
        table.create_fts_index("text", replace=True)


@dataclass
class TableUpdate:
    """What brings a table to the wanted rows. `add`: positions in the wanted (ids, texts) of new or changed
    rows, the only ones that need vectors; `remove`: stored ids that are gone or whose text changed; `kept`:
    rows left as they are. `rebuilt`: the table is missing or its schema does not fit, so every wanted row is
    added to a recreated table."""

    add: list[int]
    remove: list[str]
    kept: int
    rebuilt: bool

    def counts(self) -> dict[str, Any]:
        return {"added": len(self.add), "removed": len(self.remove), "kept": self.kept, "rebuilt": self.rebuilt}


def _stored_texts(db: Any, name: str, dimension: int | None) -> dict[str, str] | None:
    """id -> text of the stored table, or None when it must be recreated: missing, no FTS-ready id/text
    columns, a vector column when none is wanted (dimension None) or none / another size when one is."""
    try:
        table = db.open_table(name)
    except ValueError as err:  # missing: created; anything else (permissions, storage) is not hidden by a rebuild
        if "not found" in str(err).lower():
            return None
        raise
    schema = table.schema
    if schema.names != ["id", "text", *(["vector"] if dimension is not None else [])]:
        return None
    if dimension is not None:
        kind = schema.field("vector").type
        if not (pa.types.is_fixed_size_list(kind) and kind.list_size == dimension
                and pa.types.is_float32(kind.value_type)):
            return None
    rows = table.search().select(["id", "text"]).limit(None).to_arrow()
    stored = dict(zip(rows["id"].to_pylist(), rows["text"].to_pylist(), strict=True))
    return stored if len(stored) == rows.num_rows else None  # duplicated ids: not ours, recreate


def plan_update(db: Any, name: str, ids: list[str], texts: list[str], dimension: int | None,
                rebuild: bool = False) -> TableUpdate:
    """The change from the stored table to (ids, texts); `dimension`: the vectors' size (None: no vectors).
    `rebuild`: recreate it whatever it holds (the vectors were made by another model)."""
    stored = None if rebuild else _stored_texts(db, name, dimension)
    if stored is None:
        return TableUpdate(add=list(range(len(ids))), remove=[], kept=0, rebuilt=True)
    wanted = dict(zip(ids, texts, strict=True))
    remove = [i for i, text in stored.items() if wanted.get(i) != text]
    add = [k for k, (i, text) in enumerate(zip(ids, texts, strict=True)) if stored.get(i) != text]
    return TableUpdate(add=add, remove=remove, kept=len(ids) - len(add), rebuilt=False)


def apply_update(db: Any, name: str, ids: list[str], texts: list[str], update: TableUpdate,
                 vectors: list[list[float]] | None) -> None:
    """Make the change `update` planned; `vectors`: those of the added rows, in `update.add`'s order (None for
    a table without vectors)."""
    added_ids, added_texts = [ids[k] for k in update.add], [texts[k] for k in update.add]
    if update.rebuilt:
        write_table(db, name, added_ids, added_texts, vectors)
        return
    table = db.open_table(name)
    keep_since = table.list_versions()[-1]["timestamp"] if update.add or update.remove else None
    for start in range(0, len(update.remove), DELETE_CHUNK):
        quoted = ", ".join("'" + i.replace("'", "''") + "'" for i in update.remove[start:start + DELETE_CHUNK])
        table.delete(f"id IN ({quoted})")
    if update.add:
        columns = [pa.array(added_ids, pa.string()), pa.array(added_texts, pa.string())]
        if vectors is not None:
            columns.append(pa.array(vectors, table.schema.field("vector").type))
        table.add(pa.Table.from_arrays(columns, schema=table.schema))
    if not any(index.index_type == "FTS" for index in table.list_indices()):
        if table.count_rows():  # created empty, so without a full-text index
            table.create_fts_index("text", replace=True)
    elif update.add or update.remove:
        # lancedb 0.40, checked (tests/test_vector_store_update.py): deleted rows are masked at once by lance's
        # deletion files and rows not yet indexed are found by a flat scan, so searches are right even before
        # this; optimize() compacts and then adds the new rows to the existing FTS index (and drops deleted
        # ones): afterwards num_unindexed_rows is 0 and a search of the index alone (fast_search) finds the
        # added text and not the deleted. Same tokenizer settings, no second index; on 300,000 rows it took
        # 0.9-2.2 s where re-creating the index took 3.0-3.9 s.
        assert keep_since is not None  # the version a running server may still be reading
        table.optimize(cleanup_older_than=_cleanup_age(keep_since))


def _cleanup_age(keep_since: datetime) -> timedelta:
    """optimize() deletes the files of versions older than this (lance's default: 7 days). The version this
    update started from stays: `graphrag-lite serve` searches it until it swaps in the updated index, however
    old it is."""
    now = datetime.now(keep_since.tzinfo)
    return max(timedelta(days=7), now - keep_since + timedelta(hours=1))


def read_manifest(output_dir: Path) -> dict[str, Any] | None:
    path = output_dir / MANIFEST
    return read_json(path) if path.is_file() else None


def check_embedding_model(config: GraphRagConfig, model_id: str, dimension: int | None = None) -> dict[str, Any]:
    """The manifest, after checking the index was embedded with this model (and dimension)."""
    manifest = read_manifest(config.output.base_dir)
    if manifest is None:
        raise IndexMismatchError(f"no embeddings in {config.output.base_dir}; build them with `{REEMBED}`")
    model = config.models[model_id].model
    if manifest.get("model") is None:
        raise IndexMismatchError(f"the index has no vectors (built without an embedding model); configure "
                                 f"embed_text.model_id and run `{REEMBED}`, or search by keywords only")
    if manifest["model"] != model or (dimension is not None and manifest["dimension"] != dimension):
        raise IndexMismatchError(
            f"the index was embedded with {manifest['model']} ({manifest['dimension']} dimensions) but queries use "
            f"{model}{f' ({dimension} dimensions)' if dimension is not None else ''}; vectors of different models "
            f"cannot be compared. Re-embed with `{REEMBED}`, or set models.{model_id}.model back to "
            f"{manifest['model']}")
    return manifest


def texts_for(entities: pd.DataFrame, text_units: pd.DataFrame, reports: pd.DataFrame) -> dict[str, tuple[list, list]]:
    """(ids, texts) per LanceDB table; missing reports (failed) are left out."""
    present = reports[reports["full_content"].fillna("").str.len() > 0]
    return {
        "entity_description": (entities["id"].tolist(),
                               [f"{t}:{d}" for t, d in zip(entities["title"], entities["description"], strict=True)]),
        "text_unit_text": (text_units["id"].tolist(), text_units["text"].tolist()),
        "community_full_content": (present["id"].tolist(), present["full_content"].tolist()),
    }
