"""Stage cluster_graph: the final `entities`, `relationships` and `communities` tables (graph/final_tables.py),
keeping on an update the numbers and communities of the last run where the graph did not change."""

from __future__ import annotations

from collections import defaultdict

from graphrag_lite.graph.cluster import Previous
from graphrag_lite.graph.final_tables import PreviousRun, finalize_graph, kept_communities
from graphrag_lite.ids import stable_id
from graphrag_lite.pipeline.contract import Stage, StageContext, StageResult


def run(ctx: StageContext) -> StageResult:
    cfg = ctx.config.cluster_graph
    previous = previous_run(ctx)
    entities, relationships, communities = finalize_graph(ctx.read("summarized_entities"),
                                                          ctx.read("summarized_relationships"),
                                                          cfg.max_cluster_size, cfg.seed, cfg.use_lcc,
                                                          previous, ctx.models.cache())
    kept = kept_communities(previous.communities, communities)
    levels = communities.groupby("level").size().to_dict() if len(communities) else {}
    clustered = len({e for members in communities.loc[communities["level"] == 0, "entity_ids"] for e in members}) \
        if len(communities) else 0
    problems = []
    if entities.empty:
        problems.append("no entities were extracted, so the graph, communities and reports are empty; check "
                        "the input, or the extraction model and prompt (stats.json lists dropped records)")
    elif communities.empty:
        problems.append("the graph has no relationships, so there are no communities and no reports")
    elif clustered < len(entities):  # cluster_graph.use_lcc: said, not hidden
        problems.append(f"{len(entities) - clustered} of {len(entities)} entities are outside the largest connected "
                        "component and in no community (cluster_graph.use_lcc: true), so global search cannot "
                        "see them; set it to false to cluster every entity")
    return StageResult(
        tables={"entities": entities, "relationships": relationships, "communities": communities},
        problems=problems,
        summary=f"{len(entities)} entities, {len(relationships)} relationships, {len(communities)} communities "
                f"({', '.join(f'level {lvl}: {n}' for lvl, n in levels.items()) or 'no edges to cluster'}); "
                f"{clustered} of {len(entities)} entities in communities"
                + (f"; {kept} communities as in the last run" if kept is not None else ""),
        details={"communities_per_level": {str(k): int(v) for k, v in levels.items()},
                 "entities_in_communities": clustered,
                 **({"communities_kept": kept} if kept is not None else {})},
        complete=not entities.empty,  # an index with no entity is not usable: the run ends with an error
    )


def previous_run(ctx: StageContext) -> PreviousRun:
    communities = ctx.previous("communities", ["level", "community", "entity_ids"])
    rows = [] if communities is None else list(zip(communities["level"], communities["community"],
                                                     communities["entity_ids"], strict=True))
    relationships = ctx.previous("relationships", ["id", "source", "target", "weight"])
    edges: dict[str, set[tuple[str, float]]] | None = None
    if relationships is not None:
        edges = defaultdict(set)
        for rid, source, target, weight in relationships.itertuples(index=False):
            for title in (source, target):
                edges[stable_id("entity", title)].add((rid, float(weight)))
    return PreviousRun(ctx.previous_numbers("entities"), ctx.previous_numbers("relationships"),
                       Previous.from_rows([(int(lvl), int(n), list(ids)) for lvl, n, ids in rows]) if rows else None,
                       edges)


STAGE = Stage(
    name="cluster_graph",
    description="graph, degrees and hierarchical Leiden communities; final entities, relationships, communities",
    reads=("summarized_entities", "summarized_relationships"),
    writes=("entities", "relationships", "communities"),
    config_sections=("cluster_graph",),
    run=run,
)
