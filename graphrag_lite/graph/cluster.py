"""Hierarchical Leiden communities (leidenalg on igraph), reproducible, and stable when the graph changes.

Level 0 partitions every entity that has a relationship (Leiden keeps connected components apart, so a
second, unrelated book gets communities of its own), or, with `use_lcc` as in GraphRAG, only the largest
connected component. Entities with no relationship come as `loose` groups chosen by the caller; they are
level-0 communities that are never split. Every community larger than `max_cluster_size` is partitioned
again on its induced subgraph at the next level, until communities are small enough or cannot be split.

Updates: with the `previous` partition, Leiden starts from it (its initial membership: each vertex in its
last community at that level, new vertices alone) instead of from scratch, and the vertices whose
relationships did not change (`settled`) keep their communities (Leiden's fixed membership): only what an
update touched moves, and new vertices join the communities around them (bench/incremental_update.py counts
the communities kept, and compares the modularity with a fresh clustering's). With a
`memo` (the answer cache), a graph clustered before gets the very communities it had then, so a document
added and removed again leaves the communities as they were.

Communities are numbered level by level (children after their parents); `number_groups` keeps the number of
a community that matches a previous one of its level (same members, else the largest member overlap, at
least half of the two together), so an unchanged community keeps its number, and a changed one its place.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import igraph as ig
import leidenalg

from graphrag_lite.llm.cache import cache_key

ALGORITHM = "leiden-modularity-2"  # part of the memo key: change it when the clustering changes
MIN_OVERLAP = 0.5  # Jaccard share of members for a changed community to keep a previous number


@dataclass
class Community:
    community: int
    level: int
    parent: int  # -1 at level 0
    members: list[int]  # vertex indices
    children: list[int] = field(default_factory=list)


@dataclass
class Group:
    """A community before it is numbered: its members (sorted vertex indices) and its sub-communities."""
    members: list[int]
    children: list[Group] = field(default_factory=list)
    number: int | None = None  # the number it had when this very graph was clustered before (memo)


class Memo(Protocol):
    def get(self, key: str) -> Any | None: ...

    def put(self, key: str, kind: str, value: Any) -> None: ...


@dataclass
class Previous:
    """The last run's communities, by vertex name: level -> {name: community number}, and level ->
    {members: number}."""
    membership: list[dict[str, int]]
    numbers: list[dict[frozenset[str], int]]
    settled: frozenset[str] = frozenset()  # vertices whose relationships did not change: they stay put

    @classmethod
    def from_rows(cls, rows: Sequence[tuple[int, int, Sequence[str]]]) -> Previous:
        """From (level, community number, member names) rows."""
        depth = max((level for level, _, _ in rows), default=-1) + 1
        previous = cls([{} for _ in range(depth)], [{} for _ in range(depth)])
        for level, number, names in rows:
            previous.numbers[level][frozenset(names)] = number
            previous.membership[level].update((name, number) for name in names)
        return previous


def build_graph(n_vertices: int, edges: list[tuple[int, int]], weights: list[float]) -> ig.Graph:
    graph = ig.Graph(n=n_vertices, edges=edges, directed=False)
    graph.es["weight"] = weights
    return graph


def partition(graph: ig.Graph, members: list[int], seed: int, initial: list[int] | None = None,
              fixed: list[bool] | None = None) -> list[list[int]]:
    """Leiden modularity communities of the subgraph induced by `members` (sorted), as lists of original
    indices, largest first (ties by smallest member), so the order is deterministic. `initial`: the starting
    membership; `fixed`: vertices that keep theirs."""
    sub = graph.induced_subgraph(members)
    found = leidenalg.ModularityVertexPartition(sub, initial_membership=initial, weights="weight")
    optimiser = leidenalg.Optimiser()  # what leidenalg.find_partition does, with fixed vertices
    optimiser.set_rng_seed(seed)
    optimiser.optimise_partition(found, n_iterations=2, is_membership_fixed=fixed)
    groups = [sorted(members[v] for v in group) for group in found if group]
    return sorted(groups, key=lambda g: (-len(g), g[0]))


def hierarchical_leiden(graph: ig.Graph, max_cluster_size: int, seed: int, use_lcc: bool = False,
                        loose: list[list[int]] | None = None, names: Sequence[str] | None = None,
                        previous: Previous | None = None, memo: Memo | None = None) -> list[Community]:
    """`loose`: groups of vertices with no edge (ignored with `use_lcc`), each a level-0 community. `names`:
    a stable name per vertex (entity ids), needed for `previous` and `memo`."""
    names = list(names) if names is not None else [str(v) for v in range(graph.vcount())]
    connected = [v for v, d in enumerate(graph.degree()) if d > 0]
    roots = largest_component(graph) if use_lcc else connected
    key = _memo_key(graph, roots, max_cluster_size, seed, names) if memo is not None and roots else ""
    # a first run clusters afresh (an index is a function of its graph); an update takes a graph it saw before
    stored = memo.get(key) if memo is not None and key and previous is not None else None
    index = {names[v]: v for v in roots}
    clustered = ([_group_from_names(item, index) for item in stored] if stored is not None else
                 _split(graph, roots, 0, max_cluster_size, seed, names, previous) if roots else [])
    groups = clustered + [Group(sorted(group)) for group in ([] if use_lcc else loose or []) if group]
    communities = number_tree(groups, names, previous)
    if memo is not None and key and stored is None:
        memo.put(key, "communities", [_group_to_names(g, names) for g in clustered])
    return communities


def largest_component(graph: ig.Graph) -> list[int]:
    return sorted(max(graph.connected_components(), key=lambda c: (len(c), -min(c)), default=[]))


def _split(graph: ig.Graph, members: list[int], level: int, max_size: int, seed: int, names: list[str],
           previous: Previous | None) -> list[Group]:
    groups = partition(graph, members, seed, *_start(members, level, names, previous))
    if level > 0 and len(groups) < 2:  # cannot be split: it stays a leaf
        return []
    return [Group(g, _split(graph, g, level + 1, max_size, seed, names, previous) if len(g) > max_size else [])
            for g in groups]


def _start(members: list[int], level: int, names: list[str], previous: Previous | None
           ) -> tuple[list[int] | None, list[bool] | None]:
    """Leiden's starting partition: each vertex in its previous community at this level, a new one alone;
    None (every vertex alone) when no vertex has one, so a new component is clustered as in a first run.
    And the vertices that keep theirs: the settled ones that had one, so a part of the graph an update did
    not touch keeps its communities."""
    if previous is None or level >= len(previous.membership):
        return None, None
    last = previous.membership[level]
    labels: list[tuple[str, object]] = [("old", last[names[v]]) if names[v] in last else ("new", v) for v in members]
    fresh = all(kind == "new" for kind, _ in labels)
    dense: dict[tuple[str, object], int] = {}
    initial = None if fresh else [dense.setdefault(label, len(dense)) for label in labels]
    fixed = [names[v] in previous.settled and names[v] in last for v in members]
    return initial, (fixed if any(fixed) else None)


def _memo_key(graph: ig.Graph, members: list[int], max_size: int, seed: int, names: list[str]) -> str:
    """What determines the communities: the vertices, edges and weights (by name), and the settings."""
    sub = graph.induced_subgraph(members)
    edges = sorted((*sorted((names[members[a]], names[members[b]])), float(w))
                   for (a, b), w in zip(sub.get_edgelist(), sub.es["weight"], strict=True))
    payload = {"vertices": sorted(names[v] for v in members), "edges": edges, "max_cluster_size": max_size}
    return cache_key("communities", ALGORITHM, payload, {"seed": seed})


def _group_to_names(group: Group, names: list[str]) -> list[Any]:
    return [[names[v] for v in group.members], group.number, [_group_to_names(c, names) for c in group.children]]


def _group_from_names(item: list[Any], index: dict[str, int]) -> Group:
    members, number, children = item
    return Group(sorted(index[name] for name in members), [_group_from_names(c, index) for c in children], number)


def number_tree(roots: list[Group], names: list[str], previous: Previous | None) -> list[Community]:
    """Communities numbered level by level, in order; remembered numbers, then `previous` ones, kept. Each
    group gets its number (so the memo stores it)."""
    levels: list[list[tuple[Group, Group | None]]] = []  # per level: (group, its parent)
    frontier: list[tuple[Group, Group | None]] = [(g, None) for g in roots]
    while frontier:
        levels.append(frontier)
        frontier = [(child, group) for group, _ in frontier for child in group.children]
    number_groups(levels, names, previous)

    def number(group: Group) -> int:
        assert group.number is not None
        return group.number

    return [Community(number(group), level, -1 if parent is None else number(parent), group.members,
                      [number(child) for child in group.children])
            for level, nodes in enumerate(levels) for group, parent in nodes]


def number_groups(levels: list[list[tuple[Group, Group | None]]], names: list[str], previous: Previous | None) -> None:
    """A number for every group without one: the number of the previous community of its level with the same
    members, else with the largest overlap (Jaccard >= MIN_OVERLAP, each number used once); the others are
    numbered after every number in use, in order."""
    old_levels = previous.numbers if previous is not None else []
    taken = {g.number for nodes in levels for g, _ in nodes if g.number is not None}
    following = max([*(n for level in old_levels for n in level.values()), *taken], default=-1) + 1
    for level, nodes in enumerate(levels):
        open_groups = [g for g, _ in nodes if g.number is None]
        sets = [frozenset(names[v] for v in g.members) for g in open_groups]
        old = old_levels[level] if level < len(old_levels) else {}
        membership = previous.membership[level] if previous is not None and level < len(old_levels) else {}
        matched = _match(sets, {m: n for m, n in old.items() if n not in taken},
                         {name: n for name, n in membership.items() if n not in taken})
        for i, group in enumerate(open_groups):
            if i in matched:
                group.number = matched[i]
            else:
                group.number, following = following, following + 1


def _match(sets: list[frozenset[str]], old: dict[frozenset[str], int], membership: dict[str, int]) -> dict[int, int]:
    """Group index -> previous number: exact matches first, then pairs by decreasing overlap."""
    sizes = Counter(membership.values())
    pairs = []
    for i, members in enumerate(sets):
        if members in old:
            pairs.append((2.0, old[members], i))
            continue
        for number, shared in Counter(membership[n] for n in members if n in membership).items():
            jaccard = shared / (len(members) + sizes[number] - shared)
            if jaccard >= MIN_OVERLAP:
                pairs.append((jaccard, number, i))
    matched: dict[int, int] = {}
    used: set[int] = set()
    for _, number, i in sorted(pairs, key=lambda p: (-p[0], p[1], p[2])):
        if i not in matched and number not in used:
            matched[i] = number
            used.add(number)
    return matched
