"""Benchmark: does entity resolution give one node per real entity? (issue 13, part 5)

    .venv/bin/python bench/entity_resolution.py [--seed 1] [--show 10]

The corpus is bench/resolution_corpus.py's: ~400 invented entities of four types in 25 topic groups, each
written under 1-3 names, ~150 documents, and hard negatives (different entities whose names share words).
Its extraction is perfect and given, so this measures resolution alone: merge_graph(resolve=False) and
merge_graph(resolve=True) on the same raw tables. Per type and overall:
- entities: true entities; nodes: nodes of that type in the merged graph; nodes/entity;
- exact-one: the share of true entities whose names all ended in one node that holds no other entity's names;
- merges: names joined into another's node by resolution (a node holding k distinct normalized names counts
  k - 1; the generator gives every normalized name to one entity, so normalization alone merges nothing
  wrong); wrong: joins between different true entities (a node holding names of m entities counts m - 1),
  as a count and a share of the merges;
- (tied): the share of entities whose names are all tied together by evidence in the raw graph (a shared
  text unit, or a neighbour in common): the most exact-one can reach with the evidence guard kept;
- hard neg.: hard-negative pairs whose names share a node / all such pairs of that type.
Then the names left apart from their entity's full name, by alias pattern (what resolution misses), the wrong
merges, and the NMI of the communities (cluster_graph's finalize_graph, every connected component clustered,
max cluster size 10) against the generator's groups, at the finest level (each node's deepest community) and
at level 0, for the resolved graph and, for comparison, the unresolved one. A node is labelled with the group
of the entity most of its records belong to.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np
import pandas as pd
from resolution_corpus import TYPES, Corpus, generate

from graphrag_lite.graph.final_tables import finalize_graph
from graphrag_lite.graph.merge import MergeResult, merge_graph
from graphrag_lite.names import normalize_name


@dataclass
class Scores:
    entities: int = 0
    nodes: int = 0
    exact_one: int = 0
    merges: int = 0
    wrong_merges: int = 0
    hard_negatives: int = 0
    hard_negatives_merged: int = 0

    @property
    def nodes_per_entity(self) -> float:
        return self.nodes / self.entities if self.entities else 0.0

    @property
    def exact_one_rate(self) -> float:
        return self.exact_one / self.entities if self.entities else 0.0

    @property
    def wrong_share(self) -> float:
        return self.wrong_merges / self.merges if self.merges else 0.0


def node_of_names(corpus: Corpus, merged: MergeResult) -> dict[str, str]:
    """Every name of the raw tables -> the title of the node it ended in. merge_graph's aliases table lists
    each spelling (upper case, spaces collapsed) that is not its node's title; a spelling not listed is one."""
    aliases = dict(zip(merged.aliases["alias"], merged.aliases["title"], strict=True))
    titles = set(merged.entities["title"])
    nodes = {}
    for name in corpus.name_to_entity:
        spelling = " ".join(name.split()).upper()
        node = aliases.get(spelling, spelling)
        if node not in titles:
            raise ValueError(f"{name!r} maps to {node!r}, which is not a node of the merged graph")
        nodes[name] = node
    return nodes


def score(corpus: Corpus, merged: MergeResult) -> dict[str, Scores]:
    """Scores per type (TYPES) and over all ("all")."""
    node_of = node_of_names(corpus, merged)
    node_type = dict(zip(merged.entities["title"], merged.entities["type"], strict=True))
    node_entities: dict[str, set[str]] = defaultdict(set)
    node_keys: dict[str, set[str]] = defaultdict(set)
    entity_nodes: dict[str, set[str]] = defaultdict(set)
    for name, entity_id in corpus.name_to_entity.items():
        node = node_of[name]
        node_entities[node].add(entity_id)
        node_keys[node].add(normalize_name(name))
        entity_nodes[entity_id].add(node)
    scores = {kind: Scores() for kind in (*TYPES, "all")}
    for entity in corpus.truth.values():
        nodes = entity_nodes[entity.id]
        exact = len(nodes) == 1 and node_entities[next(iter(nodes))] == {entity.id}
        for kind in (entity.type, "all"):
            scores[kind].entities += 1
            scores[kind].exact_one += exact
    for node, kind in node_type.items():
        for key in (kind, "all"):
            scores[key].nodes += 1
            scores[key].merges += len(node_keys[node]) - 1
            scores[key].wrong_merges += len(node_entities[node]) - 1
    for a, b, _ in corpus.hard_negatives:
        merged_pair = bool(entity_nodes[a] & entity_nodes[b])
        for key in (corpus.truth[a].type, "all"):
            scores[key].hard_negatives += 1
            scores[key].hard_negatives_merged += merged_pair
    return scores


def evidenced(corpus: Corpus) -> dict[str, float]:
    """Per type and overall, the share of entities whose names are all tied together by evidence in the raw
    graph (two names in one text unit, or one a neighbour of the other or both of one name): the most a
    resolver that keeps the evidence guard can merge, with the names as the tables write them."""
    units: dict[str, set[str]] = defaultdict(set)
    neighbours: dict[str, set[str]] = defaultdict(set)
    for unit, name in zip(corpus.entities["text_unit_id"], corpus.entities["name"], strict=True):
        units[normalize_name(name)].add(unit)
    for source, target in zip(corpus.relationships["source"], corpus.relationships["target"], strict=True):
        a, b = normalize_name(source), normalize_name(target)
        neighbours[a].add(b)
        neighbours[b].add(a)
    tied: Counter = Counter()
    total: Counter = Counter()
    for entity in corpus.truth.values():
        keys = list(dict.fromkeys(normalize_name(n) for n in entity.names))
        reached, frontier = {keys[0]}, [keys[0]]
        while frontier:
            a = frontier.pop()
            for b in keys:
                if b not in reached and (units[a] & units[b] or neighbours[a] & (neighbours[b] | {b})):
                    reached.add(b)
                    frontier.append(b)
        for kind in (entity.type, "all"):
            total[kind] += 1
            tied[kind] += len(reached) == len(keys)
    return {kind: tied[kind] / total[kind] for kind in total}


def missed_patterns(corpus: Corpus, merged: MergeResult) -> Counter:
    """Names not in the node of their entity's full name, by type and alias pattern."""
    node_of = node_of_names(corpus, merged)
    missed: Counter = Counter()
    for entity in corpus.truth.values():
        for name in entity.names[1:]:
            if node_of[name] != node_of[entity.names[0]]:
                missed[f"{entity.type} {entity.patterns[name]}"] += 1
    return missed


def wrong_merges(corpus: Corpus, merged: MergeResult) -> list[str]:
    """Nodes holding names of more than one true entity: 'NODE: name (entity id), ...'."""
    node_of = node_of_names(corpus, merged)
    held: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for name, entity_id in corpus.name_to_entity.items():
        held[node_of[name]].append((name, entity_id))
    return [f"{node}: {', '.join(f'{n} ({e})' for n, e in sorted(pairs))}" for node, pairs in sorted(held.items())
            if len({e for _, e in pairs}) > 1]


def nmi(a: list, b: list) -> float:
    """Normalized mutual information of two labellings, 2 I(A;B) / (H(A) + H(B)) (1.0 when both are one
    block)."""
    _, x = np.unique(np.asarray(a), return_inverse=True)
    _, y = np.unique(np.asarray(b), return_inverse=True)
    joint = np.zeros((x.max() + 1, y.max() + 1))
    np.add.at(joint, (x, y), 1.0)
    joint /= len(x)
    px, py = joint.sum(axis=1), joint.sum(axis=0)
    hx, hy = -np.sum(px * np.log(px)), -np.sum(py * np.log(py))
    nz = joint > 0
    mi = float(np.sum(joint[nz] * np.log(joint[nz] / np.outer(px, py)[nz])))
    return 1.0 if hx + hy == 0 else 2 * mi / float(hx + hy)


def summarized(merged: pd.DataFrame) -> pd.DataFrame:
    """Stand-in for the LLM summary stage: the first description."""
    return merged.drop(columns=["descriptions"]).assign(description=[d[0] if len(d) else ""
                                                                     for d in merged["descriptions"]])


def community_nmi(corpus: Corpus, merged: MergeResult, max_cluster_size: int = 10,
                  seed: int = 0xDEADBEEF) -> dict[str, float]:
    """Leaf-level and level-0 NMI of the communities against the true groups, and the levels and share of
    nodes in a community."""
    node_of = node_of_names(corpus, merged)
    records: dict[str, Counter] = defaultdict(Counter)
    for name in corpus.entities["name"]:
        records[node_of[name]][corpus.name_to_entity[name]] += 1
    group_of = {node: corpus.truth[min(c, key=lambda e: (-c[e], e))].group for node, c in records.items()}
    entities, _, communities = finalize_graph(summarized(merged.entities), summarized(merged.relationships),
                                              max_cluster_size, seed, False)
    title = dict(zip(entities["id"], entities["title"], strict=True))
    leaf: dict[str, int] = {}
    level0: dict[str, int] = {}
    for level, number, members in sorted(zip(communities["level"], communities["community"],
                                             communities["entity_ids"], strict=True), key=lambda r: r[0]):
        for entity_id in members:
            leaf[title[entity_id]] = int(number)  # deeper levels overwrite their parents
            if level == 0:
                level0[title[entity_id]] = int(number)
    nodes = list(entities["title"])
    truth = [group_of[n] for n in nodes]
    # a node in no community is a community of its own
    leaf_labels = [leaf.get(n, -1 - i) for i, n in enumerate(nodes)]
    level0_labels = [level0.get(n, -1 - i) for i, n in enumerate(nodes)]
    return {"leaf": nmi(truth, leaf_labels), "level0": nmi(truth, level0_labels),
            "levels": int(communities["level"].max()) + 1 if len(communities) else 0,
            "covered": sum(n in level0 for n in nodes) / len(nodes) if nodes else 0.0}


def table(title: str, scores: dict[str, Scores], ceiling: dict[str, float]) -> str:
    lines = [f"{title:<14}{'entities':>9}{'nodes':>7}{'nodes/ent':>10}{'exact-one':>10}{'(tied)':>7}{'merges':>8}"
             f"{'wrong':>7}{'wrong %':>8}{'hard neg.':>10}"]
    for kind, s in scores.items():
        lines.append(f"{kind:<14}{s.entities:>9}{s.nodes:>7}{s.nodes_per_entity:>10.2f}{s.exact_one_rate:>10.2f}"
                     f"{ceiling[kind]:>7.2f}{s.merges:>8}{s.wrong_merges:>7}{100 * s.wrong_share:>7.1f}%"
                     f"{f'{s.hard_negatives_merged}/{s.hard_negatives}':>10}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1, help="the corpus generator's seed")
    parser.add_argument("--show", type=int, default=10, help="wrong merges to print")
    args = parser.parse_args()
    started = time.perf_counter()
    corpus = generate(args.seed)
    generated = time.perf_counter()
    plain = merge_graph(corpus.entities, corpus.relationships, resolve=False)
    resolved = merge_graph(corpus.entities, corpus.relationships, resolve=True)
    merged = time.perf_counter()
    kinds = Counter(kind for *_, kind in corpus.hard_negatives)
    print(f"corpus (seed {args.seed}): {len(corpus.truth)} entities in {len(corpus.groups)} groups, "
          f"{len(corpus.name_to_entity)} names, {corpus.entities['text_unit_id'].nunique()} documents, "
          f"{len(corpus.entities)} entity records, {len(corpus.relationships)} relationship records "
          f"(generated in {generated - started:.2f} s)")
    print(f"hard negatives: {', '.join(f'{kind} {n}' for kind, n in kinds.items())}")
    print()
    ceiling = evidenced(corpus)
    print(table("resolution off", score(corpus, plain), ceiling))
    print()
    print(table("resolution on", score(corpus, resolved), ceiling))
    print()
    missed = missed_patterns(corpus, resolved)
    print("names left apart from their entity's full name (resolution on): "
          + (", ".join(f"{kind} {n}" for kind, n in missed.most_common()) or "none"))
    wrong = wrong_merges(corpus, resolved)
    print(f"wrong merges (resolution on): {len(wrong)} nodes" + (":" if wrong else ""))
    for line in wrong[:args.show]:
        print(f"  {line}")
    clustered = time.perf_counter()
    on, off = community_nmi(corpus, resolved), community_nmi(corpus, plain)
    print(f"communities vs the {len(corpus.groups)} true groups (every component clustered, max cluster size 10): "
          f"leaf NMI {on['leaf']:.3f}, level 0 NMI {on['level0']:.3f} ({on['levels']} levels, "
          f"{on['covered']:.0%} of nodes in a community); without resolution: leaf {off['leaf']:.3f}, "
          f"level 0 {off['level0']:.3f}")
    print(f"time: merge_graph off + on {merged - generated:.2f} s, communities {time.perf_counter() - clustered:.2f} s")


if __name__ == "__main__":
    main()
