"""Stage extract_graph_nlp (fast method): entities and relationships with no model (see nlp/)."""

from __future__ import annotations

from graphrag_lite.nlp.cooccurrence import graph_of, read_texts
from graphrag_lite.pipeline.contract import Stage, StageContext, StageResult


def run(ctx: StageContext) -> StageResult:
    cfg = ctx.config.extract_graph_nlp
    texts = ctx.read("base_text_units", ["text"])["text"]
    with ctx.bar(len(texts), "text units") as advance:
        found = read_texts(texts, cfg, advance)
    del texts  # let go before the tables are built: 0.6 GB of text at 100,000 documents
    graph = graph_of(found, ctx.read("base_text_units", ["id"])["id"], cfg)
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
