"""Stage merge_graph: one entity per real-world thing, one relationship per pair (see graph/merge.py)."""

from __future__ import annotations

from graphrag_lite.graph.merge import merge_graph
from graphrag_lite.pipeline import Stage, StageContext, StageResult


def run(ctx: StageContext) -> StageResult:
    cfg = ctx.config.entity_resolution
    result = merge_graph(ctx.read("raw_entities"), ctx.read("raw_relationships"), resolve=cfg.enabled,
                         max_edits=cfg.max_edit_distance)
    c = result.counts
    summary = (f"{c['raw_entity_records']} entity records -> {c['names_after_normalization']} names -> "
               f"{c['entities']} entities ({c['merged_as_aliases']} merged as aliases, see entity_aliases); "
               f"{c['raw_relationship_records']} relationship records -> {c['relationships']} relationships")
    if c["records_without_a_usable_name"]:
        summary += f"; {c['records_without_a_usable_name']} entity records left out: their names are only " \
                   "punctuation"
    if c["relationships_to_unknown_entities"]:
        summary += f"; {c['relationships_to_unknown_entities']} relationships to names never extracted as entities" \
                   " left out (listed in stats.json)"
    return StageResult(
        tables={"merged_entities": result.entities, "merged_relationships": result.relationships,
                "entity_aliases": result.aliases},
        summary=summary,
        details={**c, "relationships_left_out": result.problems},
    )


STAGE = Stage(
    name="merge_graph",
    description="merge entity records by normalized name and resolved aliases; merge relationships",
    reads=("raw_entities", "raw_relationships"),
    writes=("merged_entities", "merged_relationships", "entity_aliases"),
    config_sections=("entity_resolution",),
    run=run,
)
