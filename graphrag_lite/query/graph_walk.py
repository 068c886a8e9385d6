"""Ranking text units by a walk over the graph from the question's entities (personalized PageRank).

One undirected graph holds the entities and the text units: relationships join entities, and each entity is
joined to the text units it was extracted from. The walk restarts at the seeds: the entities linked to the
question, weighted by their link score and by how specific they are (an entity found in few text units says
more about where to look, as in HippoRAG), and, with a smaller weight, the text units found for the question
directly. A text unit scores high when it is close to several seeds, so the "bridge" passage that a
multi-hop question does not name, but that shares an entity with a passage it does name, comes up.

The graph is built once per index (a few hundred milliseconds for 20,000 entities); a walk costs a few
milliseconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import igraph as ig
import pandas as pd


@dataclass
class WalkScores:
    units: dict[str, float]  # text unit id -> score, best first, only units the walk reached
    entities: dict[str, float]  # entity id -> score, best first


class EntityUnitGraph:
    def __init__(self, entities: pd.DataFrame, relationships: pd.DataFrame, text_units: pd.DataFrame) -> None:
        self.entity_ids = [str(e) for e in entities["id"]]
        self.unit_ids = [str(u) for u in text_units["id"]]
        position = {eid: i for i, eid in enumerate(self.entity_ids)}
        offset = len(self.entity_ids)
        position.update({uid: offset + j for j, uid in enumerate(self.unit_ids)})
        by_title = {title: position[str(eid)] for eid, title in zip(entities["id"], entities["title"], strict=True)}
        edges: list[tuple[int, int]] = []
        weights: list[float] = []
        for source, target, weight in zip(relationships["source"], relationships["target"], relationships["weight"],
                                          strict=True):
            if source in by_title and target in by_title and source != target:
                edges.append((by_title[source], by_title[target]))
                weights.append(max(float(weight), 1e-6))
        self.specificity: dict[str, float] = {}
        for eid, units in zip(entities["id"], entities["text_unit_ids"], strict=True):
            known = [u for u in units if u in position]
            self.specificity[str(eid)] = 1.0 / max(1, len(known))
            edges += [(position[str(eid)], position[u]) for u in known]
            weights += [1.0] * len(known)
        self.position = position
        self.graph = ig.Graph(n=offset + len(self.unit_ids), edges=edges)
        self.graph.es["weight"] = weights

    def walk(self, entity_seeds: Mapping[str, float], unit_seeds: Mapping[str, float], damping: float,
             unit_weight: float) -> WalkScores:
        """Scores of the walk restarting at the seeds. Entity seeds are weighted by specificity; each seed
        group sums to one before the unit seeds are scaled by `unit_weight`."""
        reset = [0.0] * self.graph.vcount()
        entity_mass = {e: s * self.specificity[e] for e, s in entity_seeds.items() if e in self.specificity}
        unit_mass = {u: s for u, s in unit_seeds.items() if u in self.position}
        for seeds, scale in ((entity_mass, 1.0), (unit_mass, unit_weight)):
            total = sum(seeds.values())
            for node, mass in seeds.items():
                reset[self.position[node]] += scale * mass / total if total > 0 else 0.0
        if not any(reset):
            return WalkScores({}, {})
        scores = self.graph.personalized_pagerank(directed=False, damping=damping, reset=reset, weights="weight")
        offset = len(self.entity_ids)
        return WalkScores(_ranked(self.unit_ids, scores[offset:]), _ranked(self.entity_ids, scores[:offset]))


def _ranked(ids: list[str], scores: list[float]) -> dict[str, float]:
    reached = sorted((i for i, s in enumerate(scores) if s > 0), key=lambda i: -scores[i])
    return {ids[i]: scores[i] for i in reached}
