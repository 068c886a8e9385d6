"""The index a server answers from, loaded whole and swapped whole.

A loaded index holds every table in memory, its LanceDB tables opened at the versions they had when it was
loaded, and one query engine per search method with and without models (sharing tables, gateway and answer
cache). A request takes the current `LoadedIndex` once and uses only it, so an index run that finishes
while requests are answered never shows them half an index: the holder notices the run's new stats.json,
loads the new index beside the old one, and swaps the reference when it is complete.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphrag_lite.config import GraphRagConfig, no_model_overrides
from graphrag_lite.errors import GraphragLiteError
from graphrag_lite.pipeline.records import last_run
from graphrag_lite.query import SEARCH_METHODS
from graphrag_lite.query.engine import GraphRAG
from graphrag_lite.serve import browse
from graphrag_lite.storage import OutputLock

LOG = logging.getLogger("graphrag_lite.serve")
TABLES = ("documents", "text_units", "entities", "relationships", "communities", "reports", "covariates")
CHECK_EVERY_S = 1.0  # how often the holder looks for a finished index run


class PinnedDatabase:
    """A LanceDB connection whose tables stay at the versions they had when it was made, opened once: an
    index run writing new versions meanwhile is not seen until the server swaps to the new index."""

    def __init__(self, db: Any) -> None:
        self.uri = db.uri
        self._tables: dict[str, Any] = {}
        for name in db.table_names():
            table = db.open_table(name)
            table.checkout(table.version)
            self._tables[name] = table

    def open_table(self, name: str) -> Any:
        if name not in self._tables:
            raise ValueError(f"table {name} not found")
        return self._tables[name]


@dataclass
class LoadedIndex:
    config: GraphRagConfig
    engines: dict[tuple[str, bool], GraphRAG]  # (method, no_model) -> engine
    stamp: tuple[tuple[int, int], ...]  # index_stamp when loaded
    last_run: dict[str, Any]  # the stats.json of the run that built the loaded index
    loaded_at: float = field(default_factory=time.time)

    @property
    def engine(self) -> GraphRAG:
        return self.engines[("local", False)]


def index_stamp(output_dir: Path) -> tuple[tuple[int, int], ...]:
    """What changes when an index run writes: stats.json (at its end) and pipeline_state.json (per stage)."""
    paths = (output_dir / "stats.json", output_dir / "pipeline_state.json")
    return tuple((path.stat().st_mtime_ns, path.stat().st_size) if path.is_file() else (0, 0) for path in paths)


def load_index(root: Path, config: Path | None, overrides: list[str]) -> LoadedIndex:
    """Every table read, LanceDB pinned, engines made: the slow part happens here, not in a request.
    IndexChanging when an index run was writing meanwhile (the tables read may be of two runs)."""
    base = GraphRAG.from_config(root, config, overrides)
    output = base.config.output.base_dir
    stamp = index_stamp(output)
    if OutputLock(output).held_by_another():
        raise IndexChanging(f"an index run is writing to {output}")
    for name in (*TABLES, "normalized_titles", "entity_unit_graph"):  # built once here, not in the first question
        getattr(base.index, name)
    browse.warm(base.index)
    database = PinnedDatabase(base._database)
    engines = {}
    for method in SEARCH_METHODS:
        for no_model in (False, True):  # with a model, the base's settings; without, its model settings null
            engine = base.with_config(GraphRAG.from_config(
                root, config, [*overrides, *no_model_overrides(method)]).config) if no_model else base
            engine._database = database  # the pinned tables, shared (a cached_property, set here)
            engine._manifest = base._manifest  # read once: a later run may re-embed with another model
            engines[(method, no_model)] = engine
    base.gateway.ledger.keep_records = False  # a server's calls are counted per request, not kept forever
    run = last_run(output)  # read before the check below, so it belongs to the tables loaded
    if OutputLock(output).held_by_another() or index_stamp(output) != stamp:
        raise IndexChanging(f"an index run wrote to {output} while it was being loaded")
    return LoadedIndex(base.config, engines, stamp, run)


class IndexChanging(GraphragLiteError):
    """An index run is writing the output folder: load it once the run has completed."""


class IndexHolder:
    """The current LoadedIndex, and the watch that replaces it when an index run completes."""

    def __init__(self, root: Path, config: Path | None, overrides: list[str]) -> None:
        self.args = (root, config, overrides)
        self.current = self._first_load()
        self.reloads = 0
        self.reload_problem: str | None = None
        self._failed_stamp: tuple[tuple[int, int], ...] | None = None

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

    async def reload_if_changed(self) -> bool:
        """Load and swap in the index when a run has completed since the last load (stats.json says so, and
        no run is writing); a load that fails is tried again when the index changes again."""
        output = self.current.config.output.base_dir
        stamp = index_stamp(output)
        if stamp in (self.current.stamp, self._failed_stamp) or not _completed(output) or \
                OutputLock(output).held_by_another():
            return False
        try:
            fresh = await asyncio.to_thread(load_index, *self.args)
        except IndexChanging:
            return False  # a run began meanwhile: next time
        except Exception as err:  # a run that left no usable index: keep answering from the old one
            self.reload_problem = f"the index changed but could not be loaded, still answering from the old: {err}"
            if isinstance(err, GraphragLiteError):
                LOG.warning(self.reload_problem)
            else:  # not an index problem: a defect, with its traceback in the log
                LOG.exception(self.reload_problem)
            self._failed_stamp = stamp
            return False
        self.current, self.reload_problem = fresh, None
        self.reloads += 1
        LOG.info("index reloaded from %s", output)
        return True


def _completed(output: Path) -> bool:
    return str(last_run(output).get("status", "")).startswith("completed")
