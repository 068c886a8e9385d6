"""Stage extract_graph: entities and relationships from every text unit, by the LLM (GraphRAG's tuple format).

Each text unit is one extraction with gleaning. A unit whose calls still fail after the gateway's retries is
listed in the run's problems and stats; the stage then finishes with what it has, and is marked for a
re-run that retries only the failed units (the others come back from the cache).
"""

from __future__ import annotations

import pandas as pd

from graphrag_lite.config import ExtractGraphConfig
from graphrag_lite.estimate import CallEstimate
from graphrag_lite.extraction.estimate import extraction_estimate
from graphrag_lite.extraction.gleaning import CONTINUE_GRAPH, ExtractionRequest, UnitOutcome, extract_units
from graphrag_lite.extraction.report import extraction_report
from graphrag_lite.extraction.tuples import (
    COMPLETION_DELIMITER,
    RECORD_DELIMITER,
    TUPLE_DELIMITER,
    parse_graph_json,
    parse_graph_reply,
)
from graphrag_lite.llm.gateway import Gateway
from graphrag_lite.pipeline.contract import Stage, StageContext, StageResult
from graphrag_lite.prompts import fill, section_prompt

ENTITY_COLUMNS = ["text_unit_id", "name", "type", "description"]
RELATIONSHIP_COLUMNS = ["text_unit_id", "source", "target", "description", "strength"]


def answer_format(cfg: ExtractGraphConfig, gateway: Gateway) -> str:
    """tuples or json. `auto`: a project's single prompt (a GraphRAG project's `prompt`, no `json_prompt`)
    decides by the format it asks for; otherwise JSON when the model takes structured output (small local
    models extract far better that way; the server enforces the JSON), and GraphRAG's tuples when not."""
    if cfg.format != "auto":
        return cfg.format
    if cfg.prompt is not None and cfg.json_prompt is None:
        text = section_prompt(cfg, required=("input_text",))
        return "tuples" if "{tuple_delimiter}" in text or TUPLE_DELIMITER in text else "json"
    return "json" if gateway.supports_json(cfg.model_id) else "tuples"


def extraction_prompt(cfg: ExtractGraphConfig, answer_format: str) -> str:
    key = "json_prompt" if answer_format == "json" and (cfg.json_prompt or not cfg.prompt) else "prompt"
    template = section_prompt(cfg, key, required=("input_text",))
    return fill(template, entity_types=",".join(t.upper() for t in cfg.entity_types), tuple_delimiter=TUPLE_DELIMITER,
                record_delimiter=RECORD_DELIMITER, completion_delimiter=COMPLETION_DELIMITER)


def extraction_request(cfg: ExtractGraphConfig, gateway: Gateway) -> ExtractionRequest:
    chosen = answer_format(cfg, gateway)
    return ExtractionRequest(stage="extract_graph", model_id=cfg.model_id, template=extraction_prompt(cfg, chosen),
                             parse=parse_graph_json if chosen == "json" else parse_graph_reply,
                             continue_prompt=CONTINUE_GRAPH, max_gleanings=cfg.max_gleanings,
                             json_mode=chosen == "json", compact=cfg.gleaning == "compact",
                             separate_turns=gateway.marks_prompt_cache(cfg.model_id),
                             max_tokens=cfg.max_completion_tokens, grounded=cfg.require_grounding)


def estimate(ctx: StageContext) -> CallEstimate:
    cfg = ctx.config.extract_graph
    request = extraction_request(cfg, ctx.llm)
    return extraction_estimate(ctx.llm, request, ctx.read("base_text_units"))


def run(ctx: StageContext) -> StageResult:
    units = ctx.read("base_text_units")
    request = extraction_request(ctx.config.extract_graph, ctx.llm)
    with ctx.bar(len(units), "text units") as advance:
        outcomes = ctx.run(extract_units(ctx.llm, request, units, advance))
    result = build_result(outcomes, units)
    result.summary += f" (format: {'json' if request.json_mode else 'tuples'})"
    result.details["format"] = "json" if request.json_mode else "tuples"
    return result


def build_result(outcomes: list[UnitOutcome], units: pd.DataFrame) -> StageResult:
    """The raw_entities and raw_relationships tables (one row per record, with its text unit)."""
    entities, relationships = [], []
    for outcome in outcomes:
        if outcome.parsed is None:
            continue
        entities += [(outcome.text_unit_id, e.name, e.type, e.description) for e in outcome.parsed.entities]
        relationships += [(outcome.text_unit_id, r.source, r.target, r.description, r.strength)
                          for r in outcome.parsed.relationships]
    report = extraction_report(outcomes, units, len(entities) + len(relationships),
                               f"{len(entities)} entity and {len(relationships)} relationship records")
    tables = {"raw_entities": pd.DataFrame(entities, columns=ENTITY_COLUMNS),
              "raw_relationships": pd.DataFrame(relationships, columns=RELATIONSHIP_COLUMNS)}
    return StageResult(tables, report.summary, report.problems, report.details, report.complete)


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
