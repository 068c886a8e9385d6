"""Figures and integrity problems of a built index, for comparing variants: table sizes, communities per
level, the modularity of each level's partition, and references that point nowhere (a relationship to a
missing entity, a text unit of a missing document), in the spirit of the shared check_index tool."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import igraph as ig
import numpy as np
import pandas as pd

from graphrag_lite.pipeline.committed import open_committed

# (table, column holding ids or lists of ids, table they must exist in, column of that table)
REFERENCES = (("relationships", "source", "entities", "title"), ("relationships", "target", "entities", "title"),
              ("entities", "text_unit_ids", "text_units", "id"), ("text_units", "document_id", "documents", "id"),
              ("communities", "entity_ids", "entities", "id"),
              ("community_reports", "community", "communities", "community"))


def index_figures(output_dir: Path) -> dict[str, Any]:
    store = open_committed(output_dir, output_dir.parent).store
    tables = {name: store.read(name) for name in ("documents", "text_units", "entities", "relationships",
                                                  "communities", "community_reports") if store.has(name)}
    figures: dict[str, Any] = {name: len(table) for name, table in tables.items()}
    if "communities" in tables and "entities" in tables and "relationships" in tables:
        communities = tables["communities"]
        for level, size in communities.groupby("level").size().items():
            figures[f"communities_level_{level}"] = int(size)
        figures["modularity"] = modularity(tables["entities"], tables["relationships"], communities, level=0)
    problems = integrity_problems(tables)
    return {**figures, "integrity_problems": len(problems), "integrity_examples": problems[:5]}


def modularity(entities: pd.DataFrame, relationships: pd.DataFrame, communities: pd.DataFrame, level: int) -> float:
    """Weighted modularity of one level's partition of the entity graph (an unclustered entity is a
    community of its own)."""
    position = {title: i for i, title in enumerate(entities["title"])}
    ids = {e: position[t] for e, t in zip(entities["id"], entities["title"], strict=True)}
    membership = list(range(len(entities)))
    for number, members in enumerate(communities.loc[communities["level"] == level, "entity_ids"]):
        for entity in members:
            if entity in ids:
                membership[ids[entity]] = len(entities) + number
    known = [(position[s], position[t], float(w)) for s, t, w in zip(relationships["source"],
             relationships["target"], relationships["weight"], strict=True) if s in position and t in position]
    if not known:
        return float("nan")
    graph = ig.Graph(n=len(entities), edges=[(s, t) for s, t, _ in known])
    return round(float(graph.modularity(membership, weights=[w for _, _, w in known])), 4)


def integrity_problems(tables: dict[str, pd.DataFrame]) -> list[str]:
    problems = [f"{name}: {count} duplicate ids" for name, table in tables.items()
                if "id" in table and (count := int(table["id"].duplicated().sum()))]
    for table, column, target, key in REFERENCES:
        if table not in tables or target not in tables or column not in tables[table]:
            continue
        known = set(tables[target][key])
        values = [v for cell in tables[table][column]
                  for v in (cell if isinstance(cell, list | np.ndarray) else [cell])]
        missing = [v for v in values if v not in known]
        if missing:
            problems.append(f"{table}.{column}: {len(missing)} references to a missing {target} row "
                            f"(e.g. {missing[0]!r})")
    return problems
