"""LanceDB tables of the index: vectors and a full-text index per table, keyed by the Parquet row ids.

Tables (GraphRAG's names): entity_description ("title:description"), text_unit_text, community_full_content.
A manifest in the output folder records the embedding model and dimension, so a query embedded with another
model is refused with the command that re-embeds, instead of returning nonsense.

A re-run updates the tables in place (`plan_update`, then `apply_update`): rows whose id is gone or whose text
changed are deleted, new and changed rows are added, unchanged rows (and their vectors) stay. A table that is
missing or whose schema does not fit (vectors or not, another dimension) is recreated instead.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from graphrag_lite.config import GraphRagConfig
from graphrag_lite.errors import GraphragLiteError, IndexDamaged
from graphrag_lite.large_imports import import_large
from graphrag_lite.storage import file_digest, read_record
from graphrag_lite.tables import VECTOR_TABLES

MANIFEST = "embeddings_manifest.json"
TABLES = VECTOR_TABLES
REEMBED = "graphrag-lite index --from embed_text"
DELETE_CHUNK = 500  # ids per delete predicate
BATCH_ROWS = 8192  # rows turned into Python strings at a time, to compare texts by digest


class IndexMismatchError(GraphragLiteError):
    exit_code = 2


# Files of a LanceDB table that change in place (lance rewrites its hint of the latest version): not digested.
MUTABLE_FILES = ("latest_version_hint.json", "_latest.manifest")


def connect(uri: str) -> Any:
    return import_large("lancedb").connect(uri)


ROWS = pa.schema([("id", pa.string()), ("text", pa.string())])


def write_table(db: Any, name: str, rows: pa.Table, vectors: list[list[float]] | None) -> None:
    """(Re)create the table with exactly these rows (mode="overwrite"), and its full-text index. An empty
    table has no vector column (lance refuses vectors of dimension 0)."""
    if vectors:
        rows = rows.append_column("vector", pa.array(vectors, pa.list_(pa.float32(), len(vectors[0]))))
    table = db.create_table(name, data=rows, mode="overwrite")
    if rows.num_rows:
        index_text(table)


def index_text(table: Any) -> None:
    """The table's full-text index on `text` (LanceDB's own, with its default tokenizer: lower case, English
    stemming and stop words), through the current API (create_fts_index is deprecated)."""
    table.create_index("text", config=import_large("lancedb.index").FTS(), replace=True)


@dataclass
class TableUpdate:
    """What brings a table to the wanted rows. `add`: positions in the wanted rows of new or changed rows, the
    only ones that need vectors; `remove`: stored ids that are gone or whose text changed; `kept`: rows left as
    they are. `rebuilt`: the table is missing or its schema does not fit, so every wanted row is added to a
    recreated table."""

    add: list[int]
    remove: list[str]
    kept: int
    rebuilt: bool

    def added(self, rows: pa.Table) -> pa.Table:
        """The rows `add` names, out of the wanted `rows`."""
        return rows.take(pa.array(self.add, pa.int64()))  # typed: an empty list would be Arrow's null type

    def counts(self) -> dict[str, Any]:
        return {"added": len(self.add), "removed": len(self.remove), "kept": self.kept, "rebuilt": self.rebuilt}


def _stored_digests(db: Any, name: str, dimension: int | None) -> dict[str, bytes] | None:
    """id -> digest of the text of the stored table, or None when it must be recreated: missing, no FTS-ready
    id/text columns, a vector column when none is wanted (dimension None) or none / another size when one is,
    duplicated ids."""
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
    stored, rows = {}, 0
    for i, digest in _digested(table.search().select(["id", "text"]).limit(None).to_batches(BATCH_ROWS)):
        stored[i], rows = digest, rows + 1
    return stored if len(stored) == rows else None  # duplicated ids: not ours, recreate


def _digested(batches: Iterable[pa.RecordBatch]) -> Iterator[tuple[str, bytes]]:
    """(id, digest of its text) per row, a batch of Python strings at a time: rows are compared by digest, so a
    table of a 200 MB input (240 MB of text) is never held as Python strings."""
    for batch in batches:
        for i, text in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True):
            yield i, hashlib.blake2b((text or "").encode(), digest_size=16).digest()


def plan_update(db: Any, name: str, rows: pa.Table, dimension: int | None, rebuild: bool = False) -> TableUpdate:
    """The change from the stored table to `rows` (id, text); `dimension`: the vectors' size (None: no
    vectors). `rebuild`: recreate it whatever it holds (the vectors were made by another model). A table
    without vectors that would add more rows than it keeps is recreated too: cheaper than deleting, adding and
    compacting, and it needs no model call."""
    stored = None if rebuild else _stored_digests(db, name, dimension)
    if stored is None:
        return TableUpdate(add=list(range(rows.num_rows)), remove=[], kept=0, rebuilt=True)
    wanted = list(_digested(rows.to_batches(BATCH_ROWS)))
    add = [k for k, (i, digest) in enumerate(wanted) if stored.get(i) != digest]
    if dimension is None and len(add) > len(wanted) - len(add):
        return TableUpdate(add=list(range(rows.num_rows)), remove=[], kept=0, rebuilt=True)
    by_id = dict(wanted)
    remove = [i for i, digest in stored.items() if by_id.get(i) != digest]
    return TableUpdate(add=add, remove=remove, kept=len(wanted) - len(add), rebuilt=False)


def apply_update(db: Any, name: str, rows: pa.Table, update: TableUpdate,
                 vectors: list[list[float]] | None) -> None:
    """Make the change `update` planned; `vectors`: those of the added rows, in `update.add`'s order (None for
    a table without vectors)."""
    if update.rebuilt:
        write_table(db, name, rows, vectors)
        return
    table = db.open_table(name)
    keep_since = table.list_versions()[-1]["timestamp"] if update.add or update.remove else None
    for start in range(0, len(update.remove), DELETE_CHUNK):
        quoted = ", ".join("'" + i.replace("'", "''") + "'" for i in update.remove[start:start + DELETE_CHUNK])
        table.delete(f"id IN ({quoted})")
    if update.add:
        added = update.added(rows)
        if vectors is not None:
            added = added.append_column("vector", pa.array(vectors, table.schema.field("vector").type))
        table.add(added.cast(table.schema))
    if not any(index.index_type == "FTS" for index in table.list_indices()):
        if table.count_rows():  # a run was killed between creating the table and indexing it
            index_text(table)
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
    """The embeddings manifest a run left (None before a first embed_text); IndexDamaged when unreadable."""
    path = output_dir / MANIFEST
    return read_record(path) if path.is_file() else None


def check_embedding_model(config: GraphRagConfig, model_id: str, manifest: dict[str, Any] | None,
                          dimension: int | None = None) -> dict[str, Any]:
    """The manifest, after checking the index was embedded with this model (and dimension)."""
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


def texts_for(entities: pa.Table, text_units: pa.Table, reports: pa.Table) -> dict[str, pa.Table]:
    """The wanted rows (id, text) per LanceDB table, built in Arrow; missing reports (failed) are left out."""
    described = pc.binary_join_element_wise(_text(entities["title"]), pc.fill_null(_text(entities["description"]), ""),
                                            ":")
    content = pc.fill_null(_text(reports["full_content"]), "")
    present = pc.greater(pc.utf8_length(content), 0)
    return {
        "entity_description": _rows(entities["id"], described),
        "text_unit_text": _rows(text_units["id"], text_units["text"]),
        "community_full_content": _rows(reports["id"].filter(present), content.filter(present)),
    }


def _text(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A text column as Arrow's string type (Parquet written by pandas gives large_string; an empty table, null)."""
    return pc.cast(column, pa.string())


def _rows(ids: pa.ChunkedArray, texts: pa.ChunkedArray) -> pa.Table:
    return pa.table([_text(ids), _text(texts)], schema=ROWS)


# ------------------------------------------------------------ versions pinned by a commit


def pin_tables(uri: str) -> dict[str, Any]:
    """The index's LanceDB tables as they are now, for a commit: per table its version and, for a local
    database, the digest of every file of the table (lance never rewrites a file but its hint of the latest
    version) and the files this version cannot be read without (its manifest and its indexes' files)."""
    db = connect(uri)
    tables: dict[str, Any] = {}
    for name in (n for n in TABLES if n in db.list_tables().tables):
        table = db.open_table(name)
        tables[name] = {"version": table.version, "rows": table.count_rows()}
        folder = _table_folder(uri, name)
        if folder is not None:
            tables[name]["files"] = {_relative(path, folder): file_digest(path) for path in _table_files(folder)}
            tables[name]["required"] = _required_files(folder, table)
    return {"uri": uri, "tables": tables}


def damage(uri: str, pinned: dict[str, Any], probe: bool = False) -> dict[str, str]:
    """What is damaged in the LanceDB tables a commit pinned, by table: a file whose digest changed, a file
    the pinned version requires that is gone, and (`probe`) a table that cannot be opened at its version
    and read whole (a data file gone), or has lost its full-text index. {} when all is intact."""
    found: dict[str, str] = {}
    for name, entry in pinned.get("tables", {}).items():
        folder = _table_folder(uri, name)
        for relative, digest in entry.get("files", {}).items() if folder is not None else ():
            path = folder / relative
            if path.is_file() and file_digest(path) != digest:
                found[name] = f"{path}: changed or damaged on disk (its digest differs from the commit's)"
                break
            if not path.is_file() and relative in entry.get("required", ()):
                found[name] = f"{path}: missing (the table's version {entry['version']} needs it)"
                break
        if name not in found and probe and (problem := _unreadable(uri, name, entry)) is not None:
            found[name] = problem
    return found


def _unreadable(uri: str, name: str, entry: dict[str, Any]) -> str | None:
    """Why the table cannot be read whole at its pinned version (None when it can)."""
    try:
        table = connect(uri).open_table(name)
        table.checkout(entry["version"])
        rows = table.search().select(["id"]).limit(None).to_arrow().num_rows
        indexed = any(index.index_type == "FTS" for index in table.list_indices())
    except Exception as err:  # lance's errors have no common class: any failure to read is damage here
        return f"LanceDB table {name} (version {entry['version']}) cannot be read: {type(err).__name__}: " \
               f"{str(err)[:200]}"
    if rows != entry.get("rows", rows):
        return f"LanceDB table {name} (version {entry['version']}) has {rows} rows, its commit recorded {entry['rows']}"
    if rows and not indexed:
        return f"LanceDB table {name} (version {entry['version']}) has lost its full-text index"
    return None


def checked_damage(uri: str, pinned: dict[str, Any]) -> None:
    """IndexDamaged, naming the file and the repair, when a pinned table's files are damaged."""
    if found := damage(uri, pinned):
        name, problem = next(iter(found.items()))
        raise IndexDamaged(f"{problem}; LanceDB table {name} is damaged")


def _table_folder(uri: str, name: str) -> Path | None:
    return None if "://" in uri else Path(uri) / f"{name}.lance"


def _table_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name not in MUTABLE_FILES
                  and not p.name.startswith("."))


def _relative(path: Path, folder: Path) -> str:
    return path.relative_to(folder).as_posix()


def _required_files(folder: Path, table: Any) -> list[str]:
    """The manifest of the table's current version (lance names it by version, in one of two schemes) and
    the files of its indexes."""
    version = table.version
    manifests = [f"_versions/{version}.manifest", f"_versions/{2 ** 64 - 1 - version:020d}.manifest"]
    required = [m for m in manifests if (folder / m).is_file()]
    for index in table.list_indices():
        index_folder = folder / "_indices" / str(index.index_uuid)
        required += [_relative(path, folder) for path in _table_files(index_folder)] if index_folder.is_dir() else []
    return required


class PinnedDatabase:
    """A LanceDB connection whose tables are opened once, at the versions a commit pinned (at their latest
    versions when it pinned none): an index run writing new versions meanwhile is not seen."""

    def __init__(self, uri: str, versions: dict[str, int] | None) -> None:
        self.uri = uri
        db = connect(uri)
        self._tables: dict[str, Any] = {}
        for name in db.list_tables().tables:
            if versions is not None and name not in versions:
                continue
            table = db.open_table(name)
            table.checkout(versions[name] if versions is not None else table.version)
            self._tables[name] = table

    def open_table(self, name: str) -> Any:
        if name not in self._tables:
            raise ValueError(f"table {name} not found")
        return self._tables[name]
