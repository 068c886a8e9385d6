"""Benchmark (issue 38): the largest entity graph the cluster_graph stage's hierarchical Leiden handles here.

    .venv/bin/python bench/leiden_limit.py [--sizes 150000:1260000,1000000:10000000,2000000:40000000]
                                           [--max-cluster-size 10] [--seed 1]

Each size is NODES:EDGES. A graph with planted communities (30 to 300 nodes each; 70% of a node's edges
inside its community, the rest anywhere, node activity Zipf-like, as the entity graphs of bench/scale.py's
corpora) is built with numpy, then clustered by `graph.cluster.hierarchical_leiden` (the stage's core: the
igraph graph built from Python lists of edges and weights, as the stage builds it) in a subprocess of its
own. Printed per size: edges after merging duplicates, the seconds to build the graph and to cluster it, the
communities and levels, and the subprocess's peak RSS. The 100,000-document fast index of bench/scale.py has
145,265 entities and 1,259,703 relationships (the first size); a million documents would have about
0.8M and 10M if names grow as they did to 100,000.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np


def planted_edges(nodes: int, edges: int, seed: int) -> tuple[list[tuple[int, int]], int]:
    """Edges of a graph with planted communities, duplicates and loops removed; and the communities."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(30, 301, size=nodes // 30 + 1)
    starts = np.concatenate(([0], np.cumsum(sizes)))
    communities = int(np.searchsorted(starts, nodes, side="right"))
    community_of = np.repeat(np.arange(len(sizes)), sizes)[:nodes]
    activity = 1.0 / np.arange(1, nodes + 1) ** 0.6  # a few very frequent names, many rare ones
    sources = rng.choice(nodes, size=edges, p=activity / activity.sum())
    inside = rng.random(edges) < 0.7
    start = starts[community_of[sources]]
    size = np.minimum(starts[community_of[sources] + 1], nodes) - start
    targets = np.where(inside, start + (rng.random(edges) * size).astype(np.int64), rng.integers(0, nodes, edges))
    pairs = np.unique(np.sort(np.stack([sources, targets], axis=1), axis=1), axis=0)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    return [(int(a), int(b)) for a, b in pairs], communities


def one(nodes: int, edges: int, max_cluster_size: int, seed: int) -> dict:
    from graphrag_lite.graph.cluster import build_graph, hierarchical_leiden

    pairs, planted = planted_edges(nodes, edges, seed)
    started = time.perf_counter()
    graph = build_graph(nodes, pairs, [1.0] * len(pairs))
    built = time.perf_counter() - started
    del pairs
    started = time.perf_counter()
    communities = hierarchical_leiden(graph, max_cluster_size, seed)
    return {"nodes": nodes, "edges": graph.ecount(), "planted": planted, "build_s": round(built, 1),
            "cluster_s": round(time.perf_counter() - started, 1), "communities": len(communities),
            "levels": 1 + max((c.level for c in communities), default=-1),
            "peak_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 / 1024, 2)}  # KB


def measured(nodes: int, edges: int, max_cluster_size: int, seed: int) -> dict:
    """`one` in a subprocess of its own, with its peak RSS (or how it ended when it did not finish)."""
    done = subprocess.run([sys.executable, __file__, "--one", f"{nodes}:{edges}", "--max-cluster-size",
                           str(max_cluster_size), "--seed", str(seed)], capture_output=True, text=True)
    if done.returncode != 0:
        return {"nodes": nodes, "edges": edges, "failed": f"exit {done.returncode}: {done.stderr.strip()[-300:]}"}
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="150000:1260000,1000000:10000000,2000000:40000000")
    parser.add_argument("--max-cluster-size", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        nodes, edges = (int(part) for part in args.one.split(":"))
        print(json.dumps(one(nodes, edges, args.max_cluster_size, args.seed)))
        return
    print("| nodes | edges | build | cluster | communities | levels | peak RSS |")
    print("|---|---|---|---|---|---|---|")
    sizes = sorted((int(a), int(b)) for a, b in (size.split(":") for size in args.sizes.split(",")))
    for nodes, edges in sizes:
        r = measured(nodes, edges, args.max_cluster_size, args.seed)
        if "failed" in r:
            print(f"| {nodes:,} | {edges:,} | {r['failed']} |", flush=True)
            continue
        print(f"| {r['nodes']:,} | {r['edges']:,} | {r['build_s']} s | {r['cluster_s']} s | {r['communities']:,} | "
              f"{r['levels']} | {r['peak_gb']} GB |", flush=True)


if __name__ == "__main__":
    main()
