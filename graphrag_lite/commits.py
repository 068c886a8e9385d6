"""The index's commits. `index.json` in the output folder names what the index is: for every table, the
version that is current (storage.OutputStore keeps versions as `tables/<name>.<digest>.parquet`), the LanceDB
table versions with the digests of their files, the embeddings manifest and the run that made it. A run writes
new table versions beside the committed ones and makes them current with one atomic write of this small file,
so a reader sees the index as one run finished it, never a mix: an interrupted run leaves the previous commit
current. The file carries a digest of its own content, so a damaged one is detected, never half-read.

The same write serves object storage, which has no rename but writes an object whole."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from graphrag_lite.errors import IndexDamaged
from graphrag_lite.ids import json_digest
from graphrag_lite.storage import TABLES_DIR, OutputStore, file_digest, read_record, write_json

COMMIT_FILE = "index.json"
FORMAT = 1


@dataclass
class Commit:
    number: int
    tables: dict[str, str]  # table name -> digest of its current version
    rows: dict[str, int]
    run: dict[str, Any]  # the run that made it: pipeline, pipeline_file, started, status
    embeddings: dict[str, Any] | None = None  # the embeddings manifest as the run left it
    lancedb: dict[str, Any] | None = None  # {"uri", "tables": {name: {"version", "files": {path: digest}, "required"}}}
    kept: list[dict[str, Any]] = field(default_factory=list)  # older commits whose files are kept: number, tables
    committed: str = ""

    def store(self, output_dir: Path) -> OutputStore:
        return OutputStore(output_dir, dict(self.tables))


def read_commit(output_dir: Path) -> Commit | None:
    """The current commit; None when the folder has none (no run finished since versioned commits, or an index
    built by an earlier version or by Microsoft GraphRAG). IndexDamaged when index.json is damaged."""
    path = output_dir / COMMIT_FILE
    if not path.is_file():
        shown = output_dir / "entities.parquet"  # a copy of a committed version: only a commit makes one
        if shown.is_file() and (output_dir / TABLES_DIR / f"entities.{file_digest(shown)}.parquet").is_file():
            raise IndexDamaged(f"{path}: the index's commit record is missing, though {output_dir / TABLES_DIR} holds "
                               "table versions", path)
        return None
    return commit_from_record(read_record(path), path)


def commit_from_record(data: Any, path: Path) -> Commit:
    """A commit from the content of an index.json (`path`: where it was read, for the message);
    IndexDamaged when it is damaged."""
    if not isinstance(data, dict) or data.pop("digest", None) != json_digest(data, 16) or data.pop("format") != FORMAT:
        raise IndexDamaged(f"{path}: the index's commit record is damaged (its digest does not match its content)",
                           path)
    try:
        return Commit(**data)
    except TypeError as err:
        raise IndexDamaged(f"{path}: not a commit record of this version ({err})", path) from None


def write_commit(output_dir: Path, commit: Commit) -> None:
    """Make `commit` current: one atomic write."""
    commit.committed = datetime.now(UTC).isoformat(timespec="seconds")
    data = {"format": FORMAT, **asdict(commit)}
    write_json(output_dir / COMMIT_FILE, {**data, "digest": json_digest(data, 16)})


def next_commit(previous: Commit | None, store: OutputStore, run: dict[str, Any], keep: int,
                vectors: tuple[dict[str, Any] | None, dict[str, Any] | None]) -> Commit:
    """The commit of the tables `store` sees now, after `previous` (of which the last `keep - 1` commits
    are kept, with their files). `vectors`: the embeddings manifest and the pinned LanceDB tables."""
    kept = [] if previous is None else [{"number": previous.number, "tables": previous.tables}, *previous.kept]
    return Commit(number=(previous.number + 1) if previous else 1, tables=dict(store.versions or {}),
                  rows={name: store.rows(name) for name in sorted(store.versions or {})}, run=run,
                  embeddings=vectors[0], lancedb=vectors[1], kept=kept[:max(keep - 1, 0)])


def show_to_other_readers(output_dir: Path, commit: Commit) -> None:
    """`<name>.parquet` beside `tables/`, each a link to its committed version, for readers that know only
    GraphRAG's layout (Microsoft GraphRAG's own query engine, pandas): each replaced in one rename, so such a
    reader sees whole tables, though not always of one commit while a commit is being made."""
    for name, digest in commit.tables.items():
        source, target = output_dir / TABLES_DIR / f"{name}.{digest}.parquet", output_dir / f"{name}.parquet"
        if not source.is_file():  # a table an earlier version wrote beside tables/ (the store read it there)
            if not (target.is_file() and file_digest(target) == digest):
                raise IndexDamaged(f"{source}: the version of table '{name}' to commit is missing", source)
            _link(target, source)
        if not (target.is_file() and os.path.samefile(source, target)):
            _link(source, target)


def shown_to_other_readers(output_dir: Path, commit: Commit) -> bool:
    """Whether every `<name>.parquet` beside `tables/` is the committed version (a run stopped while it
    replaced them leaves some stale, which the next run replaces)."""
    for name, digest in commit.tables.items():
        source, target = output_dir / TABLES_DIR / f"{name}.{digest}.parquet", output_dir / f"{name}.parquet"
        if not (source.is_file() and target.is_file() and os.path.samefile(source, target)):
            return False
    return True


def _link(source: Path, target: Path) -> None:
    """`target` made a link to `source` (a copy on another file system) in one rename."""
    temporary = target.parent / f".{target.name}.link"
    temporary.unlink(missing_ok=True)
    try:
        os.link(source, temporary)
    except OSError:
        temporary.write_bytes(source.read_bytes())
    os.replace(temporary, target)


def clean_versions(output_dir: Path, commit: Commit, working: dict[str, str]) -> list[Path]:
    """Delete the table versions no kept commit and no stage of the run state (`working`: table -> digest)
    names; returns them."""
    wanted = {f"{name}.{digest}.parquet" for tables in (commit.tables, working, *(k["tables"] for k in commit.kept))
              for name, digest in tables.items()}
    folder = output_dir / TABLES_DIR
    removed = [path for path in folder.glob("*.parquet") if path.name not in wanted] if folder.is_dir() else []
    for path in removed:
        path.unlink(missing_ok=True)
    for leftover in folder.glob(".*.tmp") if folder.is_dir() else []:  # a write that a killed run left
        leftover.unlink(missing_ok=True)
    return removed
