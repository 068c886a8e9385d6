"""Stage extract_graph: entities and relationships from every text unit, by the LLM (GraphRAG's tuple format).

Each text unit is one extraction with gleaning. A unit whose calls still fail after the gateway's retries is
listed in the run's problems and stats; the stage then finishes with what it has, and is marked for a
re-run that retries only the failed units (the others come back from the cache).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pandas as pd

from graphrag_lite.config import ExtractGraphConfig
from graphrag_lite.estimate import CallEstimate, gleaning_estimate
from graphrag_lite.extraction.gleaning import CONTINUE_GRAPH, extract_with_gleaning
from graphrag_lite.extraction.tuples import (
    COMPLETION_DELIMITER,
    RECORD_DELIMITER,
    TUPLE_DELIMITER,
    ParsedReply,
    parse_graph_json,
    parse_graph_reply,
)
from graphrag_lite.llm.gateway import Gateway, LLMCallError
from graphrag_lite.pipeline import Stage, StageContext, StageResult
from graphrag_lite.prompts import fill, load_prompt
from graphrag_lite.tokens import count_tokens

ESTIMATE_ENCODING = "o200k_base"
ENTITY_COLUMNS = ["text_unit_id", "name", "type", "description"]
RELATIONSHIP_COLUMNS = ["text_unit_id", "source", "target", "description", "strength"]


@dataclass
class UnitOutcome:
    text_unit_id: str
    parsed: ParsedReply | None
    calls: int
    error: str | None = None


def extraction_prompt(cfg: ExtractGraphConfig) -> str:
    default = "extract_graph_json.txt" if cfg.format == "json" else "extract_graph.txt"
    template = load_prompt(cfg.prompt, default, required=("input_text",))
    return fill(template, entity_types=",".join(t.upper() for t in cfg.entity_types), tuple_delimiter=TUPLE_DELIMITER,
                record_delimiter=RECORD_DELIMITER, completion_delimiter=COMPLETION_DELIMITER)


def estimate(ctx: StageContext) -> CallEstimate:
    cfg = ctx.config.extract_graph
    units = ctx.read("base_text_units")
    template = extraction_prompt(cfg)
    base = count_tokens(fill(template, input_text=""), ESTIMATE_ENCODING)
    texts = [int(n) for n in units["n_tokens"]]
    return gleaning_estimate("extract_graph", cfg.model_id, [base + n for n in texts], texts, cfg.max_gleanings,
                             count_tokens(CONTINUE_GRAPH, ESTIMATE_ENCODING))


def run(ctx: StageContext) -> StageResult:
    units = ctx.read("base_text_units")
    cfg = ctx.config.extract_graph
    template = extraction_prompt(cfg)
    with ctx.bar(len(units), "text units") as advance:
        outcomes = asyncio.run(extract_units(ctx.llm, cfg, template, units, advance))
    return build_result(outcomes, units)


async def extract_units(gateway: Gateway, cfg: ExtractGraphConfig, template: str, units: pd.DataFrame,
                        advance: object = None) -> list[UnitOutcome]:
    async def one(unit_id: str, text: str) -> UnitOutcome:
        try:
            parsed, calls = await extract_with_gleaning(
                gateway, cfg.model_id, "extract_graph", fill(template, input_text=text), cfg.max_gleanings,
                parse_graph_json if cfg.format == "json" else parse_graph_reply, CONTINUE_GRAPH,
                json_mode=cfg.format == "json")
            return UnitOutcome(unit_id, parsed, calls)
        except LLMCallError as err:
            return UnitOutcome(unit_id, None, 0, str(err))
        finally:
            if callable(advance):
                advance()

    return list(await asyncio.gather(*(one(u, t) for u, t in zip(units["id"], units["text"], strict=True))))


def build_result(outcomes: list[UnitOutcome], units: pd.DataFrame) -> StageResult:
    """The raw_entities and raw_relationships tables (one row per record, with its text unit)."""
    entities, relationships, problems, dropped = [], [], [], []
    readable = dict(zip(units["id"], units["human_readable_id"], strict=True))
    for outcome in outcomes:
        if outcome.parsed is None:
            problems.append(f"text unit {readable[outcome.text_unit_id]}: extraction failed: {outcome.error}")
            continue
        entities += [(outcome.text_unit_id, e.name, e.type, e.description) for e in outcome.parsed.entities]
        relationships += [(outcome.text_unit_id, r.source, r.target, r.description, r.strength)
                          for r in outcome.parsed.relationships]
        dropped += [f"text unit {readable[outcome.text_unit_id]}: {d}" for d in outcome.parsed.dropped]
    failed = sum(o.parsed is None for o in outcomes)
    summary = (f"{len(outcomes) - failed} of {len(outcomes)} text units -> {len(entities)} entity and "
               f"{len(relationships)} relationship records")
    if dropped:
        summary += f", {len(dropped)} unusable records dropped (listed in stats.json)"
    return StageResult(
        tables={"raw_entities": pd.DataFrame(entities, columns=ENTITY_COLUMNS),
                "raw_relationships": pd.DataFrame(relationships, columns=RELATIONSHIP_COLUMNS)},
        summary=summary,
        problems=problems,
        details={"text_units": len(outcomes), "failed_text_units": failed, "dropped_records": dropped,
                 "calls_per_unit": sum(o.calls for o in outcomes) / max(1, len(outcomes))},
        complete=failed == 0,
    )


STAGE = Stage(
    name="extract_graph",
    description="entities and relationships of every text unit, by the LLM, with gleaning",
    reads=("base_text_units",),
    writes=("raw_entities", "raw_relationships"),
    config_sections=("extract_graph",),
    run=run,
    uses_model=True,
    estimate=estimate,
)
