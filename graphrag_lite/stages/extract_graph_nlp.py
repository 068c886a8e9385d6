"""Stage extract_graph_nlp (fast method): entities and relationships with no model (see nlp/)."""

from __future__ import annotations

from graphrag_lite.nlp.cooccurrence import extract_nlp_graph
from graphrag_lite.pipeline.contract import Stage, StageContext, StageResult


def run(ctx: StageContext) -> StageResult:
    units = ctx.read("base_text_units")
    with ctx.bar(len(units), "text units") as advance:
        graph = extract_nlp_graph(units, ctx.config.extract_graph_nlp, advance)
    c = graph.counts
    return StageResult(
        tables={"raw_entities": graph.entities, "raw_relationships": graph.relationships},
        summary=f"{c['names_found']} names found, {c['entities_kept']} kept ({c['rare_entities_pruned']} too rare, "
                f"{c['hubs_removed']} hubs removed); {c['edges_kept']} co-occurrence edges of "
                f"{c['co_occurring_pairs']} pairs over {c['windows']} windows",
        details=c,
    )


STAGE = Stage(
    name="extract_graph_nlp",
    description="entities by rules and relationships by co-occurrence (NPMI), no model",
    reads=("base_text_units",),
    writes=("raw_entities", "raw_relationships"),
    config_sections=("extract_graph_nlp",),
    run=run,
)
