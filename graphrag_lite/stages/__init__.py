"""Every indexing stage, in the order a pipeline runs them. Open this file to see the whole index build.

Each stage module has a small I/O wrapper (`run`, reading and returning tables) around a pure core
function over tables, and declares what it reads, writes and which config sections it depends on.

standard pipeline (pipelines/standard.yaml):
1. load_documents         input folder                       -> input_documents
2. chunk_text             input_documents                    -> base_text_units, documents
3. extract_graph          base_text_units  (LLM)             -> raw_entities, raw_relationships
4. extract_claims         base_text_units  (LLM, optional)   -> raw_claims
5. merge_graph            raw_entities, raw_relationships    -> merged_entities, merged_relationships,
                                                                entity_aliases, ambiguous_aliases
6. summarize_descriptions merged_*         (LLM)             -> summarized_entities, summarized_relationships
7. cluster_graph          summarized_*                       -> entities, relationships, communities
8. finalize_text_units    base_text_units, entities, relationships, raw_claims, entity_aliases
                                                             -> text_units, covariates
9. community_reports      communities, entities, relationships, covariates (LLM)
                                                             -> community_reports
10. embed_text            entities, text_units, community_reports (embedding model)
                                                             -> embeddings (+ LanceDB tables)
    (on a first build it asks for the text units' vectors right after chunk_text, while the graph is
    extracted: Stage.early)

fast pipeline (pipelines/fast.yaml), no model: the same stages, except
3. extract_graph_nlp      base_text_units  (rules, NPMI)     -> raw_entities, raw_relationships
6. join_descriptions      merged_*                           -> summarized_entities, summarized_relationships
9. community_reports_extractive  communities, entities, relationships, text_units -> community_reports
"""

from graphrag_lite.pipeline.contract import Stage
from graphrag_lite.stages import (
    chunk_text,
    cluster_graph,
    community_reports,
    community_reports_extractive,
    embed_text,
    extract_claims,
    extract_graph,
    extract_graph_nlp,
    finalize_text_units,
    join_descriptions,
    load_documents,
    merge_graph,
    summarize_descriptions,
)

STAGES: dict[str, Stage] = {stage.name: stage for stage in (
    load_documents.STAGE,
    chunk_text.STAGE,
    extract_graph.STAGE,
    extract_graph_nlp.STAGE,
    extract_claims.STAGE,
    merge_graph.STAGE,
    summarize_descriptions.STAGE,
    join_descriptions.STAGE,
    cluster_graph.STAGE,
    finalize_text_units.STAGE,
    community_reports.STAGE,
    community_reports_extractive.STAGE,
    embed_text.STAGE,
)}


def written_by(table: str) -> str:
    """The stage that writes an index table (the standard pipeline's, where two pipelines differ)."""
    return next(stage.name for stage in STAGES.values() if table in stage.writes)
