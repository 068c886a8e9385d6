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
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphrag_lite.config import GraphRagConfig, no_model_overrides
from graphrag_lite.errors import MissingIndex
from graphrag_lite.query.engine import GraphRAG
from graphrag_lite.serve import browse

LOG = logging.getLogger("graphrag_lite.serve")
METHODS = ("local", "global", "basic")
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
    stamp: tuple[int, int]  # stats.json's mtime and size when loaded
    loaded_at: float = field(default_factory=time.time)

    @property
    def engine(self) -> GraphRAG:
        return self.engines[("local", False)]


def stats_stamp(output_dir: Path) -> tuple[int, int]:
    path = output_dir / "stats.json"
    if not path.is_file():
        return (0, 0)
    found = path.stat()
    return (found.st_mtime_ns, found.st_size)


def load_index(root: Path, config: Path | None, overrides: list[str]) -> LoadedIndex:
    """Every table read, LanceDB pinned, engines made: the slow part happens here, not in a request."""
    base = GraphRAG.from_config(root, config, overrides)
    stamp = stats_stamp(base.config.output.base_dir)
    for name in TABLES:
        getattr(base.index, name)
    base.index.normalized_titles  # noqa: B018 - built once here rather than in the first question
    base.index.entity_unit_graph  # noqa: B018
    browse.warm(base.index)
    database = PinnedDatabase(base._database)
    engines = {}
    for method in METHODS:
        for no_model in (False, True):
            nulls = no_model_overrides(method) if no_model else []
            engine = base.with_config(GraphRAG.from_config(root, config, [*overrides, *nulls]).config)
            engine._database = database  # the pinned tables, shared (a cached_property, set here)
            engines[(method, no_model)] = engine
    searches = (base.config.local_search, base.config.global_search, base.config.basic_search)
    if any(search.chat_model_id for search in searches):
        base.gateway  # noqa: B018 - LiteLLM imported and models checked now, not in the first question
    return LoadedIndex(base.config, engines, stamp)


class IndexHolder:
    """The current LoadedIndex, and the watch that replaces it when an index run completes."""

    def __init__(self, root: Path, config: Path | None, overrides: list[str]) -> None:
        self.args = (root, config, overrides)
        self.current = load_index(root, config, overrides)
        self.reloads = 0
        self.reload_problem: str | None = None

    async def watch(self) -> None:
        while True:
            await asyncio.sleep(CHECK_EVERY_S)
            await self.reload_if_changed()

    async def reload_if_changed(self) -> bool:
        """Load and swap in the index when stats.json says a run completed since the last load."""
        output = self.current.config.output.base_dir
        stamp = stats_stamp(output)
        if stamp == self.current.stamp or not _completed(output):
            return False
        try:
            fresh = await asyncio.to_thread(load_index, *self.args)
        except (MissingIndex, OSError, ValueError) as err:  # a run that left no usable index: keep the old one
            self.reload_problem = f"the index changed but could not be loaded, still answering from the old: {err}"
            LOG.warning(self.reload_problem)
            self.current.stamp = stamp
            return False
        self.current, self.reload_problem = fresh, None
        self.reloads += 1
        LOG.info("index reloaded from %s", output)
        return True


def _completed(output: Path) -> bool:
    from graphrag_lite.pipeline import last_run

    return str(last_run(output).get("status", "")).startswith("completed")
