"""The index a server answers from, loaded whole and swapped whole.

A loaded index is one commit of the index (commits.py): every table in memory, checked against the commit's
digests, its LanceDB tables opened at the versions the commit pinned, and one query engine per search method
with and without models (sharing tables, gateway and answer cache). A request takes the current `LoadedIndex`
once and uses only it; a run's uncommitted tables are never seen: the holder notices a new commit, loads it
beside the old one, and swaps the reference when it is complete.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphrag_lite.commits import COMMIT_FILE
from graphrag_lite.config import GraphRagConfig, no_model_overrides
from graphrag_lite.errors import GraphragLiteError, IndexDamaged, MissingIndex
from graphrag_lite.pipeline.committed import pending_run
from graphrag_lite.pipeline.mirroring import pull_committed
from graphrag_lite.pipeline.records import last_run
from graphrag_lite.query import SEARCH_METHODS
from graphrag_lite.query.engine import GraphRAG
from graphrag_lite.serve import browse
from graphrag_lite.storage import OutputLock

LOG = logging.getLogger("graphrag_lite.serve")
TABLES = ("documents", "text_units", "entities", "relationships", "communities", "reports", "covariates")
CHECK_EVERY_S = 1.0  # how often the holder looks for a finished index run


@dataclass
class LoadedIndex:
    config: GraphRagConfig
    engines: dict[tuple[str, bool], GraphRAG]  # (method, no_model) -> engine
    stamp: tuple[int, int]  # index_stamp when loaded
    last_run: dict[str, Any]  # the stats.json of the last run (which may not have finished)
    committed: dict[str, Any]  # the commit answering, and a run that has not finished (CommittedIndex.describe)
    loaded_at: float = field(default_factory=time.time)

    @property
    def engine(self) -> GraphRAG:
        return self.engines[("local", False)]


def index_stamp(output_dir: Path) -> tuple[int, int]:
    """What changes when an index run commits: index.json (a run's other writes are not served)."""
    path = output_dir / COMMIT_FILE
    return (path.stat().st_mtime_ns, path.stat().st_size) if path.is_file() else (0, 0)


def load_index(root: Path, config: Path | None, overrides: list[str]) -> LoadedIndex:
    """Every table of the committed index read and checked, LanceDB pinned at the commit's versions, engines
    made: the slow part happens here, not in a request. A run writing meanwhile is not seen: its tables are
    not committed. IndexChanging when there is no committed index yet and a run is building the first one."""
    base = GraphRAG.from_config(root, config, overrides)
    output = base.config.output.base_dir
    pull_committed(output)  # an index on object storage: its commit pulled before it is stamped
    stamp = index_stamp(output)
    try:
        committed = base.index.committed
    except MissingIndex:
        if OutputLock(output).held_by_another():
            raise IndexChanging(f"an index run is building the first index in {output}") from None
        raise
    for name in (*TABLES, "normalized_titles", "entity_unit_graph"):  # built once here, not in the first question
        getattr(base.index, name)
    browse.warm(base.index)
    database = base._database  # checked against the commit's digests, pinned at its versions
    engines = {}
    for method in SEARCH_METHODS:
        for no_model in (False, True):  # with a model, the base's settings; without, its model settings null
            engine = base.with_config(GraphRAG.from_config(
                root, config, [*overrides, *no_model_overrides(method)]).config) if no_model else base
            engine._database = database  # the pinned tables, shared (a cached_property, set here)
            engine._manifest = base._manifest  # read once: a later run may re-embed with another model
            engines[(method, no_model)] = engine
    base.gateway.ledger.keep_records = False  # a server's calls are counted per request, not kept forever
    base.gateway.start_litellm()  # when a model needs it: imported at the load, not in the first question
    return LoadedIndex(base.config, engines, stamp, _readable_last_run(output), committed.describe())


def _readable_last_run(output: Path) -> dict[str, Any]:
    try:
        return last_run(output)
    except IndexDamaged as err:
        return {"status": f"unknown ({err})"}


class IndexChanging(GraphragLiteError):
    """An index run is writing the output folder: load it once the run has completed."""


class IndexHolder:
    """The current LoadedIndex, and the watch that replaces it when an index run completes."""

    def __init__(self, root: Path, config: Path | None, overrides: list[str]) -> None:
        self.args = (root, config, overrides)
        self.current = self._first_load()
        self.pending: str | None = self.current.committed["pending_run"]
        self.reloads = 0
        self.reload_problem: str | None = None
        self._failed_stamp: tuple[int, int] | None = None
        self._polled = time.monotonic()  # the first load pulled the remote's commit

    def _first_load(self) -> LoadedIndex:
        """Wait for a run in progress to finish: serving half of a new index would answer wrongly."""
        said = False
        while True:
            try:
                return load_index(*self.args)
            except IndexChanging as err:
                if not said:
                    sys.stderr.write(f"{err}: waiting for the run to finish before serving\n")
                    said = True
                time.sleep(CHECK_EVERY_S)

    async def watch(self) -> None:
        while True:
            await asyncio.sleep(CHECK_EVERY_S)
            try:
                await self.reload_if_changed()
            except Exception as err:  # the watch must outlive any one failed load
                self.reload_problem = f"reloading the index failed, still answering from the old: {err}"
                LOG.exception("reloading the index failed")

    def _refresh_pending(self) -> None:
        """The run that has not finished, as of now (a run may start or stop without a new commit)."""
        engine = self.current.engine
        try:
            self.pending = pending_run(self.current.config.output.base_dir, engine.index.committed.commit,
                                       self.current.config.root_dir)
        except OSError as err:
            self.pending = f"the state of the last index run cannot be read ({err})"

    async def reload_if_changed(self) -> bool:
        """Load and swap in the index when a run has committed since the last load; a load that fails is
        tried again when the index changes again."""
        output = self.current.config.output.base_dir
        if time.monotonic() - self._polled >= self.current.config.object_storage.poll_seconds:
            self._polled = time.monotonic()  # an index on object storage: its new commit pulled, if any
            await asyncio.to_thread(pull_committed, output)
        self._refresh_pending()
        stamp = index_stamp(output)
        if stamp in (self.current.stamp, self._failed_stamp):
            return False
        try:
            fresh = await asyncio.to_thread(load_index, *self.args)
        except IndexChanging:
            return False  # still no commit: next time
        except Exception as err:  # a commit that cannot be loaded (damaged): keep answering from the old one
            self.reload_problem = f"the index changed but could not be loaded, still answering from the old: {err}"
            if isinstance(err, GraphragLiteError):
                LOG.warning(self.reload_problem)
            else:  # not an index problem: a defect, with its traceback in the log
                LOG.exception(self.reload_problem)
            self._failed_stamp = stamp
            return False
        self.current, self.reload_problem = fresh, None
        self._refresh_pending()
        self.reloads += 1
        LOG.info("index reloaded from %s", output)
        return True
