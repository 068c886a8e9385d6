"""Stage join_descriptions (fast method): one description per entity and relationship with no model: the
first descriptions (the sentences that mention it), up to a length (graph/joining.py)."""

from __future__ import annotations

import pandas as pd

from graphrag_lite.graph.joining import joined
from graphrag_lite.pipeline.contract import Stage, StageContext, StageResult


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
