"""Stage merge_graph: one entity per real-world thing, one relationship per pair (see graph/merge.py); with
entity_resolution.confirm_with_model, the chat model decides the names the rules left apart as ambiguous
(graph/confirm.py), and the graph is merged again with its picks."""

from __future__ import annotations

import pandas as pd

from graphrag_lite.alias_overrides import AliasOverrides, read_alias_overrides
from graphrag_lite.config import EntityResolutionConfig, GraphRagConfig
from graphrag_lite.graph import confirm, joining
from graphrag_lite.graph.merge import MergeResult, merge_graph
from graphrag_lite.graph.resolution import GENERIC_WORDS
from graphrag_lite.pipeline.contract import Stage, StageContext, StageResult
from graphrag_lite.prompts import section_prompt

MODEL_CHOSE = "chosen by the model among several longer names"
# the columns merge_graph reads: those of few distinct values (held as categories), then the others
RECORD_COLUMNS = {"raw_entities": (("text_unit_id", "name", "type"), ("description",)),
                  "raw_relationships": (("text_unit_id", "source", "target"), ("description", "strength"))}


def run(ctx: StageContext) -> StageResult:
    cfg = ctx.config.entity_resolution
    overrides = read_alias_overrides(cfg.overrides) if cfg.overrides else AliasOverrides()
    raw_entities, raw_relationships = read_records(ctx, "raw_entities"), read_records(ctx, "raw_relationships")
    characters = description_characters(ctx.config)

    def merged(using: AliasOverrides) -> MergeResult:
        return merge_graph(raw_entities, raw_relationships, resolve=cfg.enabled, max_edits=cfg.max_edit_distance,
                           generic_words=generic_words(cfg), overrides=using, description_characters=characters)

    result = merged(overrides)
    asked = confirm.questions(result.ambiguous_aliases, result.entities) if cfg.enabled and cfg.confirm_with_model \
        else []
    outcome = confirm.Outcome({}, [], [])
    if asked:
        template = section_prompt(cfg, required=("name", "candidates"))
        with ctx.bar(len(asked), "ambiguous names") as advance:
            outcome = ctx.run(confirm.ask_all(ctx.llm, cfg.model_id, template, asked, cfg.max_completion_tokens,
                                                advance))
        if outcome.picks:
            result = merged(overrides.with_merges(outcome.picks, MODEL_CHOSE))
        result.counts.update({"ambiguous_names_asked": len(asked), "merged_by_the_model": len(outcome.picks),
                              "model_answers_changed_with_order": len(outcome.changed_with_order)})
    return StageResult(
        tables={"merged_entities": result.entities, "merged_relationships": result.relationships,
                "entity_aliases": result.aliases, "ambiguous_aliases": result.ambiguous_aliases},
        summary=summary(result),
        problems=outcome.problems,
        details={**result.counts, "descriptions_kept_up_to_characters": characters,
                 "entity_descriptions_left_out": result.descriptions_left_out["entities"],
                 "relationship_descriptions_left_out": result.descriptions_left_out["relationships"],
                 "relationships_left_out": result.problems,
                 "overrides_not_applied": result.overrides_not_applied,
                 "model_answer_changed_with_order_for": outcome.changed_with_order},
        complete=not outcome.problems,
    )


def read_records(ctx: StageContext, table: str) -> pd.DataFrame:
    """The columns of a table of records that merge_graph reads, those of repeated values (64-character text unit
    ids, names, types) held as categories: at 4 million records their texts took 0.6 GB beside the descriptions."""
    repeated, others = RECORD_COLUMNS[table]
    records = ctx.read(table, [*repeated, *others])
    for column in repeated:
        records[column] = records[column].astype("category")
    return records


def description_characters(config: GraphRagConfig) -> int | None:
    """How much of each entity's and relationship's descriptions the stages after this one read (None: all).
    The fast pipeline's join_descriptions reads the first ones up to joining.MAX_CHARACTERS: the rest (most of
    the sentences that mention a frequent name) are not kept. summarize_descriptions (the standard pipeline, and
    any other) folds every description into its summary, and confirm_with_model shows the model more of them
    than joining reads: all are kept."""
    resolution = config.entity_resolution
    if config.pipeline != "fast" or (resolution.enabled and resolution.confirm_with_model):
        return None
    return joining.MAX_CHARACTERS


def generic_words(cfg: EntityResolutionConfig) -> dict[str, frozenset[str]]:
    """The built-in generic words per entity type and the project's own."""
    kinds = set(GENERIC_WORDS) | set(cfg.generic_words)
    return {k: GENERIC_WORDS.get(k, frozenset()) | frozenset(cfg.generic_words.get(k, [])) for k in kinds}


def summary(result: MergeResult) -> str:
    c = result.counts
    text = (f"{c['raw_entity_records']} entity records -> {c['names_after_normalization']} names -> "
            f"{c['entities']} entities ({c['merged_as_aliases']} merged as aliases, see entity_aliases); "
            f"{c['raw_relationship_records']} relationship records -> {c['relationships']} relationships")
    if "ambiguous_names_asked" in c:
        text += f"; the model placed {c['merged_by_the_model']} of {c['ambiguous_names_asked']} ambiguous names"
        if c["model_answers_changed_with_order"]:
            text += f" ({c['model_answers_changed_with_order']} left apart: its answer changed with the candidates' " \
                    "order)"
    if c["ambiguous_names_left_apart"]:
        text += f"; names left apart for you to decide: {c['ambiguous_names_left_apart']} (ambiguous_aliases; " \
                "`graphrag-lite aliases --ambiguous`)"
    left_out = result.descriptions_left_out
    if left_out["entities"] or left_out["relationships"]:
        text += f"; descriptions beyond what join_descriptions reads left out: {left_out['entities']} of entities, " \
                f"{left_out['relationships']} of relationships"
    if c["records_without_a_usable_name"]:
        text += f"; {c['records_without_a_usable_name']} entity records left out: their names are only punctuation"
    if c["relationships_to_unknown_entities"]:
        text += f"; {c['relationships_to_unknown_entities']} relationships to names never extracted as entities" \
                " left out (listed in stats.json)"
    if c["overrides_not_applied"]:
        text += f"; lines of entity_resolution.overrides not applied: {c['overrides_not_applied']} (" + \
                "; ".join(result.overrides_not_applied[:3]) + (" ..." if c["overrides_not_applied"] > 3 else "") + ")"
    return text


STAGE = Stage(
    name="merge_graph",
    description="merge entity records by normalized name and resolved aliases; merge relationships",
    reads=("raw_entities", "raw_relationships"),
    writes=("merged_entities", "merged_relationships", "entity_aliases", "ambiguous_aliases"),
    config_sections=("entity_resolution",),
    run=run,
    uses_model=True,
)
