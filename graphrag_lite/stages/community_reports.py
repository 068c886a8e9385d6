"""Stage community_reports: one LLM report per community (graph/reports.py says in which order, and which
previous reports are kept). Answers are validated JSON (retried with a correction when malformed, never cached
when invalid). A report that still fails keeps a row with `status` saying why, is listed in the run's
problems, and the stage is marked for a re-run, which regenerates only the missing reports (the others come
back from the cache).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from graphrag_lite.graph.report_context import ContextBuilder
from graphrag_lite.graph.reports import ReportWriter
from graphrag_lite.pipeline.contract import Stage, StageContext, StageResult
from graphrag_lite.prompts import fill, section_prompt
from graphrag_lite.tables import REPORT_COLUMNS


def run(ctx: StageContext) -> StageResult:
    cfg = ctx.config.community_reports
    communities = ctx.read("communities")
    builder = ContextBuilder(ctx.read("entities"), ctx.read("relationships"), ctx.read("covariates"),
                             cfg.max_input_length)
    template = section_prompt(cfg, required=("input_text",))
    template = fill(template, max_report_length=cfg.max_length)
    model = ctx.config.models[cfg.model_id]
    previous, legacy = previous_reports(ctx)
    writer = ReportWriter(ctx.llm if len(communities) else None, cfg.model_id, template, builder, previous,
                          salt=f"{model.model}|{model.api_base or ''}|{model.call_args}|{template}")
    with ctx.bar(len(communities), "reports") as advance:
        rows, contexts = writer.generate(communities, advance, ctx.run)
    table = pd.DataFrame(rows, columns=REPORT_COLUMNS).sort_values("community").reset_index(drop=True)
    failed = table[table["status"] != "ok"]
    substituted = sum(bool(c.substituted) for c in contexts.values())
    kept = f"{writer.kept} kept from the last run (same members, relationships and claims), " if writer.kept else ""
    if legacy:
        kept = "none kept: the last run's reports do not say what they were written from (written before reports " \
               "were kept), "
    return StageResult(
        tables={"community_reports": table},
        summary=f"{len(table) - len(failed)} of {len(table)} communities reported ({kept}{writer.written} "
                f"written); {substituted} contexts used sub-community reports, "
                f"{sum(c.truncated for c in contexts.values())} cut to fit",
        problems=[f"community {c}: report failed: {s}" for c, s in zip(failed["community"], failed["status"],
                                                                       strict=True)],
        details={"substituted_contexts": substituted, "failed_reports": len(failed), "reports_kept": writer.kept,
                 "reports_written": writer.written,
                 "context_tokens_max": max((c.tokens for c in contexts.values()), default=0)},
        complete=failed.empty,
    )


def previous_reports(ctx: StageContext) -> tuple[dict[str, dict[str, Any]], bool]:
    """The last run's good reports by what they were written from (facts, model and prompt), none with
    --no-cache, which asks for everything again; and whether they come from an index written before
    reports said what they were written from (none can be kept)."""
    previous = ctx.previous("community_reports")
    legacy = previous is not None and "inputs_digest" not in previous
    if previous is None or legacy or not ctx.models.use_cache:
        return {}, legacy
    good = previous[previous["status"] == "ok"]
    return {digest: {str(k): v for k, v in row.items()}
            for digest, row in zip(good["inputs_digest"], good.to_dict("records"), strict=True)}, False


STAGE = Stage(
    name="community_reports",
    description="one LLM report per community, sub-community reports standing in for detail that does not fit",
    reads=("communities", "entities", "relationships", "covariates"),
    writes=("community_reports",),
    config_sections=("community_reports",),
    run=run,
    uses_model=True,
)
