"""An index on object storage, kept through its local working copy (object_storage/): what a run pulls
before it starts and pushes as it goes, and what a reader pulls before it opens the committed index.

A run pulls the whole remote index (only what differs), holds the lease while it writes, and pushes in the
order that keeps the remote whole at every moment: a stage's new table versions (content-addressed, never
overwritten) and LanceDB files before the run state that names them; at the end the tables and LanceDB
files, then `index.json` last, in one whole-object write, so a reader sees the old commit or the new one.
A run killed mid-stage leaves the remote as its last pushed run state says, and the next run, here or on
another machine, resumes from it. Versions no kept commit needs are deleted remotely once the commit is
pushed. A local index gets `LocalRun`, which does nothing."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from graphrag_lite.commits import (
    COMMIT_FILE,
    clean_versions,
    commit_from_record,
    read_commit,
    show_to_other_readers,
)
from graphrag_lite.config import GraphRagConfig, Located
from graphrag_lite.errors import IndexDamaged
from graphrag_lite.object_storage.lease import LEASE_OBJECT, Lease, lease_is_live
from graphrag_lite.object_storage.mirror import Mirror
from graphrag_lite.object_storage.s3 import ObjectStore, md5_of
from graphrag_lite.object_storage.uris import remote_of
from graphrag_lite.pipeline.records import STATE_FILE, STATS_FILE, read_state
from graphrag_lite.storage import TABLES_DIR, OutputLock, atomic_path, command_name

CACHE_FILE = "llm_cache.sqlite"  # llm/cache.py's file
LANCEDB = "lancedb"  # the default LanceDB folder inside the output folder (config.lancedb_uri)
IN_ORDER = (COMMIT_FILE, STATS_FILE, STATE_FILE)  # pushed by name, each when its moment comes


class LocalRun:
    """A run whose output folder is local: nothing to pull, push or lease."""

    def pull(self) -> None: ...

    def acquire(self) -> None: ...

    def release(self) -> None: ...

    def state_written(self) -> None: ...

    def stage_recorded(self) -> None: ...

    def stats_written(self) -> None: ...

    def before_commit(self) -> None: ...

    def committed(self) -> None: ...

    def figures(self) -> dict[str, Any] | None:
        return None


class RemoteRun(LocalRun):
    """A run whose output folder is the working copy of `output.remote` (and whose cache may be remote)."""

    def __init__(self, config: GraphRagConfig) -> None:
        output = ObjectStore(str(config.output.remote))
        self.output = Mirror(output, config.output.base_dir)
        self.lease = Lease(output, config.object_storage.lease_seconds, command_name())
        cache = mirrored(config.cache) if config.cache.enabled else None
        self.cache = Mirror(ObjectStore(cache), config.cache.base_dir) if cache else None

    def pull(self) -> None:
        """Make the working copy equal to the remote (only what differs), unless a run on this machine is
        writing it now (it is then newer than the remote: that run pushes it)."""
        if not OutputLock(self.output.local).held_by_another():
            self._pull_now()

    def _pull_now(self) -> None:
        self.output.pull_everything(skip=[LEASE_OBJECT])
        try:
            commit = read_commit(self.output.local)
        except IndexDamaged:
            commit = None  # the runner says so and commits anew
        if commit is not None:
            show_to_other_readers(self.output.local, commit)
        if self.cache is not None:
            self._pull_cache(self.cache)

    def acquire(self) -> None:
        """Take the lease, then pull again: a run that finished meanwhile pushed what this one goes on from."""
        self.lease.acquire()
        self._pull_now()

    def release(self) -> None:
        self.lease.release()

    def state_written(self) -> None:
        self.lease.check()
        self.output.push([STATE_FILE])

    def stage_recorded(self) -> None:
        """After a stage: its table versions, LanceDB files and records, then the run state that names them."""
        self.lease.check()
        self.output.push_folder(leave=self._in_order())
        self.output.push([STATE_FILE])
        if self.cache is not None:
            _push_cache(self.cache)

    def stats_written(self) -> None:
        if self.lease.lost is None:  # a run that lost its lease sends nothing more: the index is another run's
            self.output.push([STATS_FILE])

    def before_commit(self) -> None:
        self.stage_recorded()

    def committed(self) -> None:
        """index.json, last; then what the commit let go of (clean_versions, LanceDB's cleanup)."""
        self.lease.check()
        self.output.push([COMMIT_FILE])
        self.output.prune(TABLES_DIR)
        for folder in {p.parts[0] for p in _relative_folders(self.output.local)} - {TABLES_DIR}:
            self.output.prune(folder)

    def figures(self) -> dict[str, Any] | None:
        figures = {"output": self.output.figures()}
        return figures | ({"cache": self.cache.figures()} if self.cache is not None else {})

    def _in_order(self) -> list[str]:
        """What stage_recorded leaves: the records pushed at their moment, and the tables shown to GraphRAG's
        readers (links to committed versions, made again wherever the index is pulled)."""
        shown = [p.name for p in self.output.local.glob("*.parquet")]
        return [*IN_ORDER, *shown]

    @staticmethod
    def _pull_cache(cache: Mirror) -> None:
        cache.refresh()
        if cache.pull([CACHE_FILE]):  # a journal left beside an older copy would not belong to the new one
            for journal in ("-wal", "-shm"):
                (cache.local / f"{CACHE_FILE}{journal}").unlink(missing_ok=True)


_remote_runs: dict[tuple[Path, str], RemoteRun] = {}


def run_mirror(config: GraphRagConfig) -> LocalRun:
    """The mirror of the run's output folder: one per working copy and process, so what a command pulled while
    it planned the run is known to the run, and counted in its figures."""
    if mirrored(config.output) is None:
        return LocalRun()
    key = (config.output.base_dir, str(config.cache.remote if config.cache.enabled else None))
    if key not in _remote_runs:
        _remote_runs[key] = RemoteRun(config)
    return _remote_runs[key]


def mirrored(section: Located) -> str | None:
    """The URI a section's folder mirrors; None for a local folder, and for a folder set in code to another
    place than the working copy (an experiment's variant index, a dry run's scratch copy): what is written there
    must not reach the remote."""
    remote = section.remote
    return remote if remote is not None and remote_of(section.base_dir) == remote else None


def _relative_folders(local: Path) -> list[Path]:
    return [p.relative_to(local) for p in local.iterdir() if p.is_dir() and not p.name.startswith(".")]


def _push_cache(cache: Mirror) -> None:
    """The answer cache as one consistent copy (SQLite's backup, while the run's connection may write)."""
    source = cache.local / CACHE_FILE
    if not source.is_file():
        return
    with atomic_path(cache.local / f".{CACHE_FILE}.snapshot") as snapshot:
        live, copy = sqlite3.connect(source), sqlite3.connect(snapshot)
        try:
            live.backup(copy)
        finally:
            copy.close()
            live.close()
        digest = md5_of(snapshot)
        if cache.known.get(CACHE_FILE) != digest:
            cache.known[CACHE_FILE] = cache.store.upload(snapshot, CACHE_FILE)
            cache.sent += 1
            cache.bytes_sent += snapshot.stat().st_size


def remote_run_live(output_dir: Path) -> bool:
    """Whether a run on another machine writes the index whose working copy is `output_dir` (its lease is
    live); False for a local folder."""
    uri = remote_of(output_dir)
    return uri is not None and lease_is_live(ObjectStore(uri))


def pull_input(config: GraphRagConfig) -> None:
    """Input on object storage: its local mirror made equal to it (only what changed is fetched, a document
    deleted there is deleted here), so the documents are read as from a local folder, named by their path
    under the prefix."""
    if (remote := mirrored(config.input)) is not None:
        Mirror(ObjectStore(remote), config.input.base_dir).pull_everything()


def pull_committed(output_dir: Path) -> bool:
    """Before a reader opens the index in the working copy `output_dir`: fetch the remote's commit, the table
    versions and LanceDB files it needs, then its index.json (last, so the working copy is never ahead of what
    it holds). Nothing for a local folder, or while a run on this machine writes the working copy. Returns
    whether a new commit was pulled."""
    uri = remote_of(output_dir)
    if uri is None or OutputLock(output_dir).held_by_another():
        return False
    store = ObjectStore(uri)
    fetched = store.fetch(COMMIT_FILE)
    mirror = Mirror(store, output_dir)
    if fetched is None:  # no commit yet: what the last run did, for the reader's message
        mirror.refresh(STATS_FILE)
        mirror.pull([STATS_FILE])
        return False
    local = output_dir / COMMIT_FILE
    if local.is_file() and local.read_bytes() == fetched.data:
        return False
    remote = commit_from_record(json.loads(fetched.data), Path(f"{uri}/{COMMIT_FILE}"))
    try:
        here = read_commit(output_dir)
    except IndexDamaged:
        here = None
    if here is not None and here.number > remote.number:  # committed here, not pushed yet
        return False
    listing = mirror.refresh()
    wanted = [f"{TABLES_DIR}/{name}.{digest}.parquet" for name, digest in remote.tables.items()]
    lancedb = [r for r in listing if r.startswith(f"{LANCEDB}/")] if remote.lancedb else []
    mirror.pull([*wanted, *lancedb, STATS_FILE])
    with atomic_path(local) as temporary:
        temporary.write_bytes(fetched.data)
    show_to_other_readers(output_dir, remote)
    working = {name: digest for entry in readable_state(output_dir).values() if isinstance(entry, dict)
               for name, digest in entry.get("outputs", {}).items()}
    clean_versions(output_dir, remote, working)  # a reader's working copy keeps what a writer's would
    return True


def readable_state(output_dir: Path) -> dict[str, Any]:
    """The working copy's run state ({} when there is none, or it cannot be read)."""
    try:
        state = read_state(output_dir)
    except IndexDamaged:
        return {}
    return state if isinstance(state, dict) else {}
