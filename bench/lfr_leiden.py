"""Benchmark: hierarchical Leiden on a 1M-edge LFR graph with planted communities, next to flat Leiden.

    .venv/bin/pip install networkit   # the LFR generator; not a dependency of graphrag-lite
    .venv/bin/python bench/lfr_leiden.py [--nodes 100000] [--avg-degree 20] [--mu 0.3]

Prints the graph's size, then for our hierarchical Leiden (the cluster_graph stage's core, max cluster size
10 as in GraphRAG, and a larger one) and for one flat leidenalg run: the time, the communities, and the NMI
of the finest level (every node's deepest community) against the planted partition.
"""

from __future__ import annotations

import argparse
import time

import igraph as ig
import leidenalg

from graphrag_lite.graph.cluster import build_graph, hierarchical_leiden


def lfr(nodes: int, avg_degree: int, mu: float, seed: int) -> tuple[ig.Graph, list[int]]:
    import networkit as nk

    nk.setSeed(seed, False)
    generator = nk.generators.LFRGenerator(nodes)
    generator.generatePowerlawDegreeSequence(avg_degree, avg_degree * 5, -2)
    generator.generatePowerlawCommunitySizeSequence(20, 200, -1)
    generator.setMu(mu)
    generator.run()
    graph = generator.getGraph()
    planted = generator.getPartition()
    edges = [(u, v) for u, v in graph.iterEdges()]
    return build_graph(nodes, edges, [1.0] * len(edges)), [planted.subsetOf(v) for v in range(nodes)]


def finest_membership(tree: list, nodes: int) -> list[int]:
    membership = [-1] * nodes
    for community in sorted(tree, key=lambda c: c.level):  # deeper levels overwrite their parents
        for v in community.members:
            membership[v] = community.community
    return membership


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--avg-degree", type=int, default=20)
    parser.add_argument("--mu", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    started = time.perf_counter()
    graph, planted = lfr(args.nodes, args.avg_degree, args.mu, args.seed)
    print(f"LFR graph: {graph.vcount():,} nodes, {graph.ecount():,} edges, {len(set(planted)):,} planted "
          f"communities, mu {args.mu} (generated in {time.perf_counter() - started:.1f} s)")

    started = time.perf_counter()
    flat = leidenalg.find_partition(graph, leidenalg.ModularityVertexPartition, weights="weight", seed=args.seed)
    elapsed = time.perf_counter() - started
    nmi = ig.compare_communities(planted, flat.membership, method="nmi")
    print(f"flat leidenalg:                  {elapsed:6.1f} s, {len(flat):,} communities, NMI {nmi:.3f}")

    for max_size in (10, 200):
        started = time.perf_counter()
        tree = hierarchical_leiden(graph, max_cluster_size=max_size, seed=args.seed, use_lcc=False)
        elapsed = time.perf_counter() - started
        membership = finest_membership(tree, graph.vcount())
        nmi = ig.compare_communities(planted, membership, method="nmi")
        levels = {}
        for c in tree:
            levels[c.level] = levels.get(c.level, 0) + 1
        print(f"hierarchical, max size {max_size:>4}:    {elapsed:6.1f} s, {len(tree):,} communities "
              f"({', '.join(f'L{k}: {v:,}' for k, v in sorted(levels.items()))}), finest-level NMI {nmi:.3f}")


if __name__ == "__main__":
    main()
