"""Hierarchical Leiden communities (leidenalg on igraph), reproducible with a fixed seed.

Level 0 partitions every entity that has a relationship (Leiden keeps connected components apart, so a
second, unrelated book gets communities of its own), or, with `use_lcc` as in GraphRAG, only the largest
connected component. Entities with no relationship come as `loose` groups chosen by the caller; they are
level-0 communities that are never split. Every community larger than `max_cluster_size` is partitioned
again on its induced subgraph at the next level, until communities are small enough or cannot be split.
Communities are numbered level by level, so the numbers are unique across levels and every child's number
is larger than its parent's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import igraph as ig
import leidenalg


@dataclass
class Community:
    community: int
    level: int
    parent: int  # -1 at level 0
    members: list[int]  # vertex indices
    children: list[int] = field(default_factory=list)


def build_graph(n_vertices: int, edges: list[tuple[int, int]], weights: list[float]) -> ig.Graph:
    graph = ig.Graph(n=n_vertices, edges=edges, directed=False)
    graph.es["weight"] = weights
    return graph


def largest_component(graph: ig.Graph) -> list[int]:
    components = graph.connected_components()
    if len(components) == 0:
        return []
    best = max(components, key=lambda c: (len(c), -min(c)))
    return sorted(best)


def partition(graph: ig.Graph, members: list[int], seed: int) -> list[list[int]]:
    """Leiden modularity communities of the subgraph induced by `members`, as lists of original indices,
    largest first (ties by smallest member), so the order is deterministic."""
    sub = graph.induced_subgraph(members)
    found = leidenalg.find_partition(sub, leidenalg.ModularityVertexPartition, weights="weight", seed=seed)
    groups = [sorted(members[v] for v in group) for group in found if group]
    return sorted(groups, key=lambda g: (-len(g), g[0]))


def hierarchical_leiden(graph: ig.Graph, max_cluster_size: int, seed: int, use_lcc: bool = False,
                        loose: list[list[int]] | None = None) -> list[Community]:
    """`loose`: groups of vertices with no edge (ignored with `use_lcc`), each a level-0 community."""
    connected = [v for v, d in enumerate(graph.degree()) if d > 0]
    roots = largest_component(graph) if use_lcc else connected
    communities: list[Community] = []
    frontier = [(-1, group) for group in partition(graph, roots, seed)] if roots else []
    unsplit = [] if use_lcc else [sorted(group) for group in loose or [] if group]
    frontier += [(-1, group) for group in unsplit]
    level = 0
    while frontier:
        next_frontier: list[tuple[int, list[int]]] = []
        for parent, members in frontier:
            node = Community(community=len(communities), level=level, parent=parent, members=members)
            communities.append(node)
            if parent >= 0:
                communities[parent].children.append(node.community)
            if len(members) > max_cluster_size and members not in unsplit:
                groups = partition(graph, members, seed)
                if len(groups) > 1:
                    next_frontier += [(node.community, group) for group in groups]
        frontier = next_frontier
        level += 1
    return communities
