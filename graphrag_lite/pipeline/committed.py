"""What a reader opens (query, serve, mcp, export, show, check, experiments): the committed index, and what
it should be told about a run that has not finished. Readers never see a run's uncommitted tables."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphrag_lite.commits import Commit, read_commit
from graphrag_lite.errors import IndexDamaged, MissingIndex, index_command
from graphrag_lite.object_storage.uris import remote_of
from graphrag_lite.pipeline.mirroring import pull_committed, remote_run_live
from graphrag_lite.pipeline.records import STATS_FILE, last_run, same_run, unfinished
from graphrag_lite.storage import OutputLock, OutputStore, read_record
from graphrag_lite.vector_store import MANIFEST


@dataclass
class CommittedIndex:
    output_dir: Path
    store: OutputStore
    commit: Commit | None  # None: an index from before versioned commits (or by Microsoft GraphRAG): unchecked
    pending: str | None  # a run that has not finished, said on every command: its tables are not served

    @property
    def embeddings(self) -> dict[str, Any] | None:
        """The embeddings manifest of the committed index."""
        if self.commit is not None:
            return self.commit.embeddings
        path = self.output_dir / MANIFEST
        return read_record(path) if path.is_file() else None

    @property
    def lancedb_versions(self) -> dict[str, int] | None:
        """The LanceDB table versions the commit pinned (None: the latest, for an index without commits)."""
        if self.commit is None or self.commit.lancedb is None:
            return None
        return {name: entry["version"] for name, entry in self.commit.lancedb.get("tables", {}).items()}

    def describe(self) -> dict[str, Any]:
        """For --json and /health: which commit answers, and the run that has not finished."""
        commit = self.commit
        return {"commit": commit.number if commit else None, "committed": commit.committed if commit else None,
                "tables": dict(commit.tables) if commit else None, "pending_run": self.pending}


def open_committed(output_dir: Path, root: Path) -> CommittedIndex:
    """The committed index in `output_dir`. MissingIndex when there is none (with what to run), IndexDamaged
    when its commit record is damaged. An index on object storage is pulled into its working copy first."""
    pull_committed(output_dir)
    commit = read_commit(output_dir)
    if commit is None and not (output_dir / "entities.parquet").is_file() and not (output_dir / "text_units.parquet"
                                                                                    ).is_file():
        run = _last_run(output_dir)
        if run.get("started"):
            raise MissingIndex(f"no finished index in {where(output_dir)} yet: its first run (started "
                               f"{run['started']}) {_how_it_ended(run, output_dir)}; run `{index_command(root)}` "
                               "to finish it")
        raise MissingIndex(f"no index in {where(output_dir)}; build it with `{index_command(root)}`")
    store = commit.store(output_dir) if commit is not None else OutputStore(output_dir)
    return CommittedIndex(output_dir, store, commit, pending_run(output_dir, commit, root))


def where(output_dir: Path) -> str:
    """The index's place as the user gave it: its URI on object storage, else its folder."""
    return remote_of(output_dir) or str(output_dir)


def pending_run(output_dir: Path, commit: Commit | None, root: Path) -> str | None:
    """A sentence on the last run when its tables are not the committed ones (running, or stopped); None when
    they are."""
    run = _last_run(output_dir)
    if not run.get("started") or (commit is not None and same_run(commit.run, run)):
        return None
    if commit is None and not unfinished(run):
        return None  # an index from before versioned commits, whose last run completed
    since = f"the index committed at {commit.committed} (commit {commit.number})" if commit else "the index as it was"
    if not unfinished(run) and not OutputLock(output_dir).held_by_another():
        return None
    return (f"the last index run (started {run['started']}) {_how_it_ended(run, output_dir)}: answering from {since}; "
            + ("it is committed when that run completes" if _running(run, output_dir)
               else f"run `{index_command(root)}` (or `update`) to finish it"))


def _running(run: dict[str, Any], output_dir: Path) -> bool:
    """Whether the run stats.json says is running is (here, or on another machine: an index on object storage)."""
    return run.get("status") == "running" and (OutputLock(output_dir).held_by_another() or
                                               remote_run_live(output_dir))


def _how_it_ended(run: dict[str, Any], output_dir: Path) -> str:
    if _running(run, output_dir):
        return "is still running"
    status = run.get("status")
    return "stopped before it finished (killed, or the machine stopped)" if status == "running" else \
        f"did not finish ({status})"


def _last_run(output_dir: Path) -> dict[str, Any]:
    """stats.json; {} when it is damaged (it only describes runs: the commit is what is served)."""
    try:
        return last_run(output_dir)
    except IndexDamaged:
        return {"started": None, "damaged": str(output_dir / STATS_FILE)}
