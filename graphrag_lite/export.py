"""Export an index's graph for other tools (Gephi, yEd, networkx, igraph)."""

from __future__ import annotations

from pathlib import Path

from graphrag_lite.errors import MissingIndex, index_command
from graphrag_lite.storage import OutputStore


def export_graphml(store: OutputStore, target: Path, root: Path) -> tuple[int, int]:
    """Write entities as nodes and relationships as weighted edges; returns (nodes, edges). `root`: the
    project, for the message when there is no index."""
    import igraph as ig

    if not (store.has("entities") and store.has("relationships")):
        raise MissingIndex(f"no entities/relationships tables in {store.base_dir}; build the index with "
                           f"`{index_command(root)}`")
    entities, relationships = store.read("entities"), store.read("relationships")
    index = {title: i for i, title in enumerate(entities["title"])}
    graph = ig.Graph(n=len(entities), edges=[(index[s], index[t]) for s, t in
                                             zip(relationships["source"], relationships["target"], strict=True)])
    for column in ("id", "title", "type", "description", "frequency", "degree"):
        graph.vs[column] = [v.item() if hasattr(v, "item") else v for v in entities[column]]
    graph.vs["name"] = graph.vs["title"]
    for column in ("id", "description", "weight", "combined_degree"):
        graph.es[column] = [v.item() if hasattr(v, "item") else v for v in relationships[column]]
    target.parent.mkdir(parents=True, exist_ok=True)
    graph.write_graphml(str(target))
    return graph.vcount(), graph.ecount()
