"""How a run sees the index and makes its work current. A run reads and writes table versions through a
working store (the committed tables, then those the run state names); when its last stage is done, one
commit (commits.py) makes them current, the tables GraphRAG's readers know are linked to them, and versions
no kept commit needs are deleted. What is damaged in the run's own records is said and rebuilt, not fatal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from graphrag_lite.commits import (
    Commit,
    clean_versions,
    next_commit,
    read_commit,
    show_to_other_readers,
    shown_to_other_readers,
    write_commit,
)
from graphrag_lite.config import GraphRagConfig
from graphrag_lite.errors import IndexDamaged
from graphrag_lite.pipeline.definition import Pipeline
from graphrag_lite.pipeline.display import LOG
from graphrag_lite.pipeline.mirroring import LocalRun
from graphrag_lite.pipeline.records import STATE_FILE, last_run, read_state, same_run, unfinished
from graphrag_lite.storage import OutputStore
from graphrag_lite.vector_store import pin_tables, read_manifest


def readable_state(output_dir: Path, console: Console | None) -> dict[str, Any]:
    """pipeline_state.json; a damaged one is said and taken as empty: every stage runs again, its model calls
    answered by the answer cache, and the state is written anew."""
    try:
        state = read_state(output_dir)
    except IndexDamaged as err:
        _say(console, f"{err}; every stage runs again (the answer cache answers the model calls it holds) and the "
                      "file is written anew")
        return {}
    if not isinstance(state, dict) or not all(isinstance(entry, dict) for entry in state.values()):
        _say(console, f"{output_dir / STATE_FILE}: not a run state; every stage runs again")
        return {}
    return state


def readable_last_run(output_dir: Path, console: Console | None) -> dict[str, Any]:
    """stats.json; a damaged one is said and taken as empty (it only describes the last run)."""
    try:
        stats = last_run(output_dir)
    except IndexDamaged as err:
        _say(console, f"{err}; it is written anew by this run")
        return {}
    commit = readable_commit(output_dir, None)
    if unfinished(stats) and commit is not None and same_run(commit.run, stats):
        # stopped after its commit, before its last record: the run is complete, nothing is left to resume
        return {**stats, "status": "completed (stopped after its commit)", "built_with": {
            key: commit.run.get(key) for key in ("pipeline", "pipeline_file")}}
    return stats


def readable_commit(output_dir: Path, console: Console | None) -> Commit | None:
    """The current commit; a damaged one is said and taken as absent (this run commits anew)."""
    try:
        return read_commit(output_dir)
    except IndexDamaged as err:
        _say(console, f"{err}; this run writes it anew")
        return None


def working_store(output_dir: Path, state: dict[str, Any], console: Console | None) -> OutputStore:
    """The tables a run starts from: the committed versions, then those of the stages the run state names
    (an interrupted run's finished stages)."""
    commit = readable_commit(output_dir, console)
    versions = dict(commit.tables) if commit is not None else {}
    for entry in state.values():
        versions.update(entry.get("outputs", {}))
    return OutputStore(output_dir, versions)


def is_committed(pipeline: Pipeline, store: OutputStore) -> bool:
    """Whether the current commit holds exactly the tables of the pipeline the store sees."""
    try:
        commit = read_commit(store.base_dir)
    except IndexDamaged:
        return False
    return commit is not None and commit.tables == pipeline_tables(pipeline, store) and \
        shown_to_other_readers(store.base_dir, commit)


def pipeline_tables(pipeline: Pipeline, store: OutputStore) -> dict[str, str]:
    written = {table for stage in pipeline.stages for table in stage.writes}
    return {name: digest for name, digest in (store.versions or {}).items() if name in written}


def commit_run(config: GraphRagConfig, pipeline: Pipeline, where: tuple[OutputStore, LocalRun],
               stats: dict[str, Any], state: dict[str, Any]) -> int:
    """Make the run's tables current (one atomic write), show them to GraphRAG's readers, delete what no kept
    commit needs; returns the commit's number. An index on object storage gets its tables and LanceDB files
    before index.json, and loses what was deleted after it."""
    store, mirror = where
    output = config.output.base_dir
    tables = OutputStore(output, pipeline_tables(pipeline, store))
    embedded = any(stage.name == "embed_text" for stage in pipeline.stages)
    vectors = (read_manifest(output), pin_tables(config.lancedb_uri)) if embedded else (None, None)
    run = {key: stats.get(key) for key in ("pipeline", "pipeline_file", "started", "run_id")}
    commit = next_commit(readable_commit(output, None), tables, {**run, "status": "completed"},
                         config.output.keep_versions, vectors)
    mirror.before_commit()
    write_commit(output, commit)
    show_to_other_readers(output, commit)
    working = {name: digest for entry in state.values() for name, digest in entry.get("outputs", {}).items()}
    removed = clean_versions(output, commit, working)
    mirror.committed()
    LOG.info("commit %d: %d tables; %d table versions no kept commit needs deleted", commit.number,
             len(commit.tables), len(removed))
    return commit.number


def _say(console: Console | None, message: str) -> None:
    LOG.warning(message)
    if console is not None:
        console.print(f"[yellow]![/yellow] {escape(message)}", highlight=False)
