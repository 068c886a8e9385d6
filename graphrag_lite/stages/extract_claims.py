"""Stage extract_claims: claims (covariates) about entities in every text unit, by the LLM. Off by default.

Same gleaning, parsing, grounding and failure handling as extract_graph (extraction/gleaning.py); unlike
GraphRAG, gleaned claims are kept and blank claims are dropped (and counted) instead of becoming empty rows.
When disabled, it writes an empty table and calls no model.
"""

from __future__ import annotations

import pandas as pd

from graphrag_lite.config import ExtractClaimsConfig, GraphRagConfig
from graphrag_lite.estimate import REPLY_TO_INPUT_RATIO, CallEstimate
from graphrag_lite.extraction.estimate import extraction_estimate
from graphrag_lite.extraction.gleaning import CONTINUE_CLAIMS, ExtractionRequest, extract_units
from graphrag_lite.extraction.report import extraction_report
from graphrag_lite.extraction.tuples import COMPLETION_DELIMITER, RECORD_DELIMITER, TUPLE_DELIMITER, parse_claims_reply
from graphrag_lite.pipeline.contract import Stage, StageContext, StageResult
from graphrag_lite.prompts import fill, section_prompt

CLAIM_COLUMNS = ["text_unit_id", "subject", "object", "type", "status", "start_date", "end_date", "description",
                 "source_text"]


def claims_prompt(cfg: ExtractClaimsConfig, entity_types: list[str]) -> str:
    template = section_prompt(cfg, required=("input_text",))
    return fill(template, entity_specs=", ".join(entity_types), claim_description=cfg.description,
                tuple_delimiter=TUPLE_DELIMITER, record_delimiter=RECORD_DELIMITER,
                completion_delimiter=COMPLETION_DELIMITER)


def claims_request(config: GraphRagConfig) -> ExtractionRequest:
    cfg = config.extract_claims
    return ExtractionRequest(stage="extract_claims", model_id=cfg.model_id,
                             template=claims_prompt(cfg, config.extract_graph.entity_types),
                             parse=parse_claims_reply, continue_prompt=CONTINUE_CLAIMS,
                             max_gleanings=cfg.max_gleanings, max_tokens=cfg.max_completion_tokens,
                             grounded=config.extract_graph.require_grounding)


def estimate(ctx: StageContext) -> CallEstimate | None:
    cfg = ctx.config.extract_claims
    if not cfg.enabled:
        return None
    # claims are far fewer than entities and relationships: so is an answer, and what a follow-up resends
    return extraction_estimate(ctx.llm, claims_request(ctx.config), ctx.read("base_text_units"),
                               reply_ratio=REPLY_TO_INPUT_RATIO / 4)


def run(ctx: StageContext) -> StageResult:
    cfg = ctx.config.extract_claims
    if not cfg.enabled:
        return StageResult(tables={"raw_claims": pd.DataFrame(columns=CLAIM_COLUMNS)},
                           summary="disabled (extract_claims.enabled: false)")
    units = ctx.read("base_text_units")
    request = claims_request(ctx.config)
    with ctx.bar(len(units), "text units") as advance:
        outcomes = ctx.run(extract_units(ctx.llm, request, units, advance))
    rows = [(o.text_unit_id, c.subject, c.object, c.type, c.status, c.start_date, c.end_date, c.description,
             c.source_text) for o in outcomes if o.parsed is not None for c in o.parsed.claims]
    report = extraction_report(outcomes, units, len(rows), f"{len(rows)} claims")
    return StageResult({"raw_claims": pd.DataFrame(rows, columns=CLAIM_COLUMNS)}, report.summary, report.problems,
                       report.details, report.complete)


STAGE = Stage(
    name="extract_claims",
    description="claims about entities in every text unit, by the LLM (when extract_claims.enabled)",
    reads=("base_text_units",),
    writes=("raw_claims",),
    config_sections=("extract_claims", "extract_graph"),
    run=run,
    uses_model=True,
    estimate=estimate,
)
