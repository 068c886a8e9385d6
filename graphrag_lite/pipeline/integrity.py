"""`graphrag-lite check`: every file of an index verified without changing one. The committed tables against
their digests and as Parquet, the LanceDB tables against the digests of their pinned versions and read whole,
the run's own records as JSON, and the table versions an unfinished run left for its resumption."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphrag_lite.commits import COMMIT_FILE, Commit, read_commit
from graphrag_lite.config import GraphRagConfig
from graphrag_lite.errors import IndexDamaged, MissingIndex, index_command
from graphrag_lite.pipeline.committed import pending_run
from graphrag_lite.pipeline.mirroring import run_mirror
from graphrag_lite.pipeline.records import STATE_FILE, STATS_FILE
from graphrag_lite.storage import OutputStore, read_record
from graphrag_lite.tables import INDEX_TABLES
from graphrag_lite.vector_store import MANIFEST, damage


@dataclass
class Finding:
    path: str
    problem: str
    serious: bool = True  # False: said, but the index is served as it is (a record of runs, a resumable run)


@dataclass
class CheckReport:
    output_dir: Path
    commit: int | None
    tables_checked: int
    lancedb_checked: int
    findings: list[Finding]
    pending_run: str | None
    repair: str

    @property
    def damaged(self) -> bool:
        return any(finding.serious for finding in self.findings)

    def as_dict(self) -> dict[str, Any]:
        return {"output": str(self.output_dir), "commit": self.commit, "tables_checked": self.tables_checked,
                "lancedb_tables_checked": self.lancedb_checked, "damaged": self.damaged,
                "findings": [vars(f) for f in self.findings], "pending_run": self.pending_run,
                "repair": self.repair if self.findings else None}


def check_index(config: GraphRagConfig) -> CheckReport:
    """Verify the index of `config` (nothing is written). MissingIndex when there is none. An index on object
    storage is fetched first (only what differs from the working copy), so what is checked is the remote's."""
    output = config.output.base_dir
    run_mirror(config).pull()
    findings: list[Finding] = []
    try:
        commit = read_commit(output)
    except IndexDamaged as err:
        commit = None
        findings.append(Finding(str(output / COMMIT_FILE), str(err)))
    if commit is None and not findings and not (output / "entities.parquet").is_file():
        raise MissingIndex(f"no index in {output} to check; build it with `{index_command(config.root_dir)}`")
    findings += _records(output)
    tables = commit.tables if commit is not None else {}
    findings += _tables(commit.store(output) if commit else OutputStore(output), list(tables) or _legacy(output))
    lancedb = (commit.lancedb or {}) if commit is not None else {}
    findings += [Finding(name, problem) for name, problem in damage(config.lancedb_uri, lancedb,
                                                                     probe=True).items()]
    findings += _resumable(output, commit)
    return CheckReport(output, commit.number if commit else None, len(tables) or len(_legacy(output)),
                       len(lancedb.get("tables", {})), findings, pending_run(output, commit, config.root_dir),
                       f"`{index_command(config.root_dir)}` rebuilds what is damaged from what is intact and from "
                       "the answer cache")


def _legacy(output: Path) -> list[str]:
    """The tables of an index from before versioned commits (checked as Parquet only: no digest to compare)."""
    return [name for name in INDEX_TABLES if (output / f"{name}.parquet").is_file()]


def _records(output: Path) -> list[Finding]:
    found = []
    for name in (STATS_FILE, STATE_FILE, MANIFEST):
        path = output / name
        try:
            if path.is_file():
                read_record(path)
        except IndexDamaged as err:
            found.append(Finding(str(path), f"{err}: the next index run writes it anew",
                                 serious=name == MANIFEST))
    return found


def _tables(store: OutputStore, names: list[str]) -> list[Finding]:
    found = []
    for name in names:
        try:
            table = store.read(name)
        except IndexDamaged as err:
            found.append(Finding(str(err.path or store.path(name)), str(err)))
            continue
        if missing := [column for column in INDEX_TABLES.get(name, {}) if column not in table.columns]:
            found.append(Finding(str(store.path(name)), f"table '{name}' lacks the columns {missing} of its schema"))
    return found


def _resumable(output: Path, commit: Commit | None) -> list[Finding]:
    """The table versions the run state names beyond the commit (what an unfinished run finished): missing or
    damaged ones are run again by the next index run (not served, so not serious)."""
    try:
        state = read_record(output / STATE_FILE) if (output / STATE_FILE).is_file() else {}
    except IndexDamaged:
        return []
    committed = commit.tables if commit is not None else {}
    found = []
    for entry in state.values() if isinstance(state, dict) else ():
        for name, digest in (entry.get("outputs") or {}).items() if isinstance(entry, dict) else ():
            if committed.get(name) == digest or commit is None:
                continue
            store = OutputStore(output, {name: digest})
            if store.digest(name) != digest:
                found.append(Finding(str(store.path(name)), f"table '{name}' of the unfinished run is missing or "
                                     "damaged: the next index run makes it again", serious=False))
    return found
