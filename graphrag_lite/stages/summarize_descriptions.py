"""Stage summarize_descriptions: one description per entity and per relationship (graph/summaries.py says
when the model is called and when descriptions are kept or joined with no call). A summary that fails after
retries falls back to the descriptions joined (nothing is lost), is listed in the problems, and the stage is
marked for a re-run.
"""

from __future__ import annotations

from collections import Counter

from graphrag_lite.graph.summaries import JOINED, SAID_IT_ALL, SUMMARIZED, summarize_all
from graphrag_lite.pipeline.contract import Stage, StageContext, StageResult
from graphrag_lite.prompts import section_prompt


def run(ctx: StageContext) -> StageResult:
    cfg = ctx.config.summarize_descriptions
    entities = ctx.read("merged_entities")
    relationships = ctx.read("merged_relationships")
    template = section_prompt(cfg, required=("description_list",))
    subjects = list(entities["title"]) + [f"{s}, {t}" for s, t in zip(relationships["source"],
                                                                            relationships["target"], strict=True)]
    lists = [list(d) for d in entities["descriptions"]] + [list(d) for d in relationships["descriptions"]]
    several = sum(len(d) > 1 for d in lists)
    problems: list[str] = []
    tally: Counter[str] = Counter()
    with ctx.bar(several, "summaries") as advance:
        summaries = ctx.run(summarize_all(ctx.llm if several else None, cfg, template, subjects, lists,
                                          problems, advance, tally))
    entity_table = entities.drop(columns=["descriptions"]).assign(description=summaries[: len(entities)])
    relationship_table = relationships.drop(columns=["descriptions"]).assign(description=summaries[len(entities):])
    return StageResult(
        tables={"summarized_entities": entity_table, "summarized_relationships": relationship_table},
        summary=f"{tally[SUMMARIZED]} of {len(lists)} entities and relationships had several descriptions and were "
                f"summarized; {tally[JOINED]} had few and short ones, joined with no call; {tally[SAID_IT_ALL]} had "
                "several, one of which said it all (kept, no call); the rest kept their single description",
        problems=problems,
        details={"summarized": tally[SUMMARIZED], "joined": tally[JOINED], "one_said_it_all": tally[SAID_IT_ALL],
                 "kept_verbatim": len(lists) - several},
        complete=not problems,
    )


STAGE = Stage(
    name="summarize_descriptions",
    description="one description per entity and relationship (LLM summary where there are several)",
    reads=("merged_entities", "merged_relationships"),
    writes=("summarized_entities", "summarized_relationships"),
    config_sections=("summarize_descriptions",),
    run=run,
    uses_model=True,
)
