"""Stage join_descriptions (fast method): one description per entity and relationship with no model: the
first descriptions (the sentences that mention it), up to a length."""

from __future__ import annotations

import pandas as pd

from graphrag_lite.pipeline.contract import Stage, StageContext, StageResult

MAX_CHARACTERS = 600


def joined(descriptions: list[str]) -> str:
    text = ""
    for description in descriptions:
        if text and len(text) + len(description) > MAX_CHARACTERS:
            break
        text = f"{text} {description}".strip()
    return text


def run(ctx: StageContext) -> StageResult:
    tables = {}
    for source, target in (("merged_entities", "summarized_entities"),
                           ("merged_relationships", "summarized_relationships")):
        table: pd.DataFrame = ctx.read(source)
        tables[target] = table.drop(columns=["descriptions"]).assign(
            description=[joined(list(d)) for d in table["descriptions"]])
    return StageResult(tables=tables, summary="descriptions joined (no model)")


STAGE = Stage(
    name="join_descriptions",
    description="one description per entity and relationship by joining the first ones (no model)",
    reads=("merged_entities", "merged_relationships"),
    writes=("summarized_entities", "summarized_relationships"),
    config_sections=(),
    run=run,
)
