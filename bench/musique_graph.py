"""Benchmark: graph and communities from real GPT-3.5 extractions (MuSiQue, 1,890 Wikipedia paragraphs).

    .venv/bin/python bench/musique_graph.py [--openie ../shared/corpora/musique-dev/openie_gpt-3.5-turbo-1106.json]

HippoRAG's cached OpenIE output (entities and subject-predicate-object triples per paragraph) is loaded
straight into the merge stage (one text unit per paragraph; triple ends are entities too, as in HippoRAG),
then clustered. Prints entity counts before and after resolution, relationships, communities per level,
modularity of level 0, and the time of each non-LLM stage. The extractions carry no entity types, so the
type-guarded rules (person name subsets, company suffixes) cannot fire here; normalization and
near-identical spellings do.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pandas as pd
from shared_data import SHARED

from graphrag_lite.graph.final_tables import finalize_graph
from graphrag_lite.graph.merge import merge_graph

DEFAULT = SHARED / "corpora/musique-dev/openie_gpt-3.5-turbo-1106.json"


def raw_tables(path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    docs = json.loads(path.read_text())["docs"]
    entities, relationships = [], []
    for i, doc in enumerate(docs):
        unit = f"paragraph-{i}"
        names = list(doc["extracted_entities"])
        for triple in doc["extracted_triples"]:
            if len(triple) != 3 or not all(isinstance(x, str) and x.strip() for x in triple):
                continue
            subject, predicate, obj = triple
            names += [subject, obj]
            relationships.append((unit, subject, obj, f"{subject} {predicate} {obj}", 1.0))
        for name in dict.fromkeys(n for n in names if isinstance(n, str) and n.strip()):
            entities.append((unit, name, "ENTITY", f"{name} ({doc['title']})"))
    return (pd.DataFrame(entities, columns=["text_unit_id", "name", "type", "description"]),
            pd.DataFrame(relationships, columns=["text_unit_id", "source", "target", "description", "strength"]))


def summarized(merged: pd.DataFrame, column: str = "descriptions") -> pd.DataFrame:
    """Stand-in for the LLM summary stage: the first description."""
    return merged.drop(columns=[column]).assign(description=[d[0] if len(d) else "" for d in merged[column]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--openie", type=Path, default=DEFAULT)
    parser.add_argument("--max-cluster-size", type=int, default=10)
    args = parser.parse_args()
    started = time.perf_counter()
    raw_entities, raw_relationships = raw_tables(args.openie)
    loaded = time.perf_counter()
    plain = merge_graph(raw_entities, raw_relationships, resolve=False)
    resolved_start = time.perf_counter()
    merged = merge_graph(raw_entities, raw_relationships, resolve=True)
    merged_end = time.perf_counter()
    entities, relationships, communities = finalize_graph(summarized(merged.entities),
                                                          summarized(merged.relationships), args.max_cluster_size,
                                                          0xDEADBEEF, True)
    clustered = time.perf_counter()

    import igraph as ig

    index = {t: i for i, t in enumerate(entities["title"])}
    graph = ig.Graph(n=len(entities), edges=[(index[s], index[t]) for s, t in
                                             zip(relationships["source"], relationships["target"], strict=True)])
    level0 = communities[communities["level"] == 0]
    membership = [-1] * len(entities)
    ids = {e: i for i, e in enumerate(entities["id"])}
    for number, members in zip(level0["community"], level0["entity_ids"], strict=True):
        for entity_id in members:
            membership[ids[entity_id]] = int(number)
    covered = [v for v, m in enumerate(membership) if m >= 0]
    sub = graph.induced_subgraph(covered)
    modularity = sub.modularity([membership[v] for v in covered], weights=None)
    c = merged.counts
    print(f"input: {len(raw_entities):,} entity mentions, {len(raw_relationships):,} triples "
          f"from {raw_entities['text_unit_id'].nunique():,} paragraphs (load {loaded - started:.2f} s)")
    print(f"entities: {c['names_after_normalization']:,} after name normalization "
          f"({len(plain.entities):,} with resolution off) -> {c['entities']:,} after resolution "
          f"({c['merged_as_aliases']:,} aliases merged)")
    print(f"relationships: {c['relationships']:,} (self-loops after merging: {c['self_loops_after_merging']:,})")
    levels = communities.groupby("level").size().to_dict()
    print(f"communities: {len(communities):,} ({', '.join(f'level {k}: {v:,}' for k, v in levels.items())}); "
          f"level 0 covers {len(covered):,} entities (largest connected component), modularity {modularity:.3f}")
    print(f"time: merge without resolution {resolved_start - loaded:.2f} s, merge with resolution "
          f"{merged_end - resolved_start:.2f} s, graph + hierarchical Leiden + tables {clustered - merged_end:.2f} s")


if __name__ == "__main__":
    main()
