"""The tables of a built index, loaded on first use, with a clear message when something is missing."""

from __future__ import annotations

from functools import cached_property

import pandas as pd

from graphrag_lite.commits import read_commit
from graphrag_lite.config import GraphRagConfig
from graphrag_lite.errors import IndexDamaged, MissingIndex, index_command
from graphrag_lite.names import normalize_name
from graphrag_lite.pipeline.committed import CommittedIndex, open_committed
from graphrag_lite.query.graph_walk import EntityUnitGraph
from graphrag_lite.storage import OutputStore
from graphrag_lite.tables import INDEX_TABLES, community_memberships, conform, unit_documents


def _table(name: str) -> cached_property[pd.DataFrame]:
    """An index table as an attribute of IndexTables, read on first use and kept."""
    return cached_property(lambda index: index.table(name))


class IndexTables:
    def __init__(self, config: GraphRagConfig) -> None:
        self.config = config
        self._deepest: dict[int, dict[str, tuple[int, int]]] = {}

    @cached_property
    def committed(self) -> CommittedIndex:
        """The committed index, opened once: every table is read at the versions its commit names."""
        return open_committed(self.config.output.base_dir, self.config.root_dir)

    @property
    def store(self) -> OutputStore:
        return self.committed.store

    def table(self, name: str) -> pd.DataFrame:
        if not self.store.has(name):
            from graphrag_lite.stages import written_by  # the stage registry loads every stage: only on this error

            raise MissingIndex(
                f"the index in {self.store.base_dir} has no `{name}` table (written by the {written_by(name)} stage); "
                f"build it with `{index_command(self.config.root_dir)}` (it resumes where the index stopped)")
        try:
            return self.store.read(name)
        except IndexDamaged as err:
            if self._recommitted():
                raise MissingIndex(f"the index in {self.store.base_dir} was committed again while this command read "
                                   "it, and the version it was reading is gone: run the command again") from None
            raise IndexDamaged(f"{err}. The index is not served while it is damaged: `graphrag-lite check --root "
                               f"{self.config.root_dir}` lists what is damaged, and "
                               f"`{index_command(self.config.root_dir)}` repairs it", err.path) from None

    def _recommitted(self) -> bool:
        """Whether a newer commit replaced the one this index was opened at (whose files may then be cleaned)."""
        opened = self.committed.commit
        try:
            current = read_commit(self.store.base_dir)
        except IndexDamaged:
            return False
        return opened is not None and current is not None and current.number > opened.number

    documents = _table("documents")
    text_units = _table("text_units")
    entities = _table("entities")
    relationships = _table("relationships")
    communities = _table("communities")
    reports = _table("community_reports")

    @cached_property
    def normalized_titles(self) -> list[tuple[str, str]]:
        """(entity id, normalized title) of names longer than two characters, for matching names in questions."""
        return [(eid, normalize_name(title)) for eid, title in zip(self.entities["id"], self.entities["title"],
                                                                   strict=True) if len(title) > 2]

    @cached_property
    def entity_unit_graph(self) -> EntityUnitGraph:
        """Entities and text units as one graph, for ranking sources by a walk from the question's entities."""
        return EntityUnitGraph(self.entities, self.relationships, self.text_units)

    @cached_property
    def title_of(self) -> dict[str, str]:
        """Entity id -> title. This and the look-ups below are built once per index: a warm server answers
        many questions from one IndexTables."""
        return dict(zip(self.entities["id"], self.entities["title"], strict=True))

    @cached_property
    def entities_by_id(self) -> pd.DataFrame:
        return self.entities.set_index("id", drop=False)

    @cached_property
    def units_by_id(self) -> dict[str, tuple[int, str]]:
        """Text unit id -> (human_readable_id, text)."""
        return {uid: (int(h), text) for uid, h, text in zip(self.text_units["id"], self.text_units["human_readable_id"],
                                                            self.text_units["text"], strict=True)}

    @cached_property
    def unit_documents(self) -> dict[str, tuple[str, str | None]]:
        """Text unit id -> (document id, document title)."""
        return unit_documents(self.text_units, self.documents)

    @cached_property
    def memberships(self) -> dict[str, list[tuple[int, int]]]:
        """Entity id -> its (level, community) pairs, shallowest first."""
        return community_memberships(self.communities)

    def deepest_communities(self, level: int) -> dict[str, tuple[int, int]]:
        """Entity id -> (level, community) of its deepest community at or above `level`."""
        if level not in self._deepest:
            self._deepest[level] = {eid: within[-1] for eid, pairs in self.memberships.items()
                                    if (within := [pair for pair in pairs if pair[0] <= level])}
        return self._deepest[level]

    @cached_property
    def covariates(self) -> pd.DataFrame:
        return self.table("covariates") if self.store.has("covariates") else conform(
            "covariates", pd.DataFrame(columns=list(INDEX_TABLES["covariates"])))
