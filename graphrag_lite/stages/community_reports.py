"""Stage community_reports: one LLM report per community.

Every report whose community's own detail fits `max_input_length` is written at once, whatever its level;
a community whose detail does not fit waits for its sub-communities' reports, which stand in for it
(graph/report_context.py), and is written as soon as they are done (not when the whole level below is).
Answers are validated JSON (retried with a correction when malformed, never cached when invalid). A report
that still fails keeps a row with `status` saying why, is listed in the run's problems, and the stage is
marked for a re-run, which regenerates only the missing reports (the others come back from the cache).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pandas as pd

from graphrag_lite.answer_parsing import json_parser
from graphrag_lite.graph.report_context import ChildReport, Context, ContextBuilder
from graphrag_lite.llm.calls import gather_all
from graphrag_lite.llm.gateway import Gateway
from graphrag_lite.llm.limits import PRIORITY
from graphrag_lite.llm.per_item import attempt
from graphrag_lite.pipeline.contract import Stage, StageContext, StageResult
from graphrag_lite.prompts import fill, section_prompt
from graphrag_lite.tables import COLUMN, REPORT_COLUMNS, CommunityRow, Report, placed_report, report_row, typed_records


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


class ReportWriter:
    """Writes the reports, a community after its sub-communities when it needs their reports, keeping a
    previous report whose community was written from the same facts."""

    def __init__(self, gateway: Gateway | None, model_id: str, template: str, builder: ContextBuilder,
                 previous: dict[str, dict[str, Any]], salt: str) -> None:
        self.gateway, self.model_id, self.template, self.builder = gateway, model_id, template, builder
        self.previous, self.salt = previous, salt  # salt: the model and prompt, part of every digest
        self.kept = self.written = 0
        self._parse = json_parser(Report)

    def generate(self, communities: pd.DataFrame, advance: Callable[[], None],
                 run: Callable[[Coroutine[Any, Any, Any]], Any] = asyncio.run
                 ) -> tuple[list[tuple[Any, ...]], dict[int, Context]]:
        """`run`: runs the writing to its end (the pipeline's event loop, in a stage)."""
        records = typed_records(communities, CommunityRow)
        waits = {int(r["community"]): not self.builder.fits(list(r["entity_ids"]), list(r["relationship_ids"]))
                 for r in records}
        contexts: dict[int, Context] = {}
        rows = run(self._write_all(records, waits, contexts, advance)) if records else []
        return rows, contexts

    async def _write_all(self, records: list[CommunityRow], waits: dict[int, bool], contexts: dict[int, Context],
                         advance: Callable[[], None]) -> list[tuple[Any, ...]]:
        loop = asyncio.get_running_loop()
        # each community's report as its parent would use it; None when it failed
        reports: dict[int, asyncio.Future[ChildReport | None]] = {int(r["community"]): loop.create_future()
                                                                   for r in records}
        priorities = chain_lengths(records, waits)
        first = sorted(records, key=lambda r: -priorities[int(r["community"])])  # ask before the slots are taken
        return await gather_all(self._one(r, waits, reports, contexts, advance, priorities) for r in first)

    async def _one(self, record: CommunityRow, waits: dict[int, bool],
                   reports: dict[int, asyncio.Future[ChildReport | None]], contexts: dict[int, Context],
                   advance: Callable[[], None], priorities: dict[int, int]) -> tuple[Any, ...]:
        number = int(record["community"])
        PRIORITY.set(priorities[number])  # in this community's task only
        entity_ids, relationship_ids = list(record["entity_ids"]), list(record["relationship_ids"])
        report: ChildReport | None = None
        try:
            children: list[ChildReport] = []
            if waits[number]:  # its own detail does not fit
                done = await asyncio.gather(*(reports[int(c)] for c in record["children"] if int(c) in reports))
                children = [child for child in done if child is not None]
            context = contexts[number] = self.builder.build(entity_ids, relationship_ids, children)
            digest = self.builder.digest(entity_ids, relationship_ids, context, children, self.salt)
            if digest in self.previous:
                self.kept += 1
                advance()
                row = kept_row(record, self.previous[digest], digest)
            else:
                self.written += 1
                row = report_row(record, *await self._write(context, advance), digest)
            if row[COLUMN["status"]] == "ok":
                report = ChildReport(number, int(record["size"]), frozenset(entity_ids),
                                     self.builder.report_row(number, row[COLUMN["title"]], row[COLUMN["full_content"]]))
            return row
        finally:  # set even when this one failed, so its parent never waits forever (unless a cancelled run
            if not reports[number].done():  # already cancelled it)
                reports[number].set_result(report)

    async def _write(self, context: Context, advance: Callable[[], None]) -> tuple[Report | None, str]:
        assert self.gateway is not None
        messages = [{"role": "user", "content": fill(self.template, input_text=context.text)}]
        done = await attempt(self.gateway.chat(self.model_id, messages, stage="community_reports", step="report",
                                               parse=self._parse, json_mode=True), advance)
        return (done.value.value, "ok") if done.value is not None else (None, str(done.error))


def chain_lengths(records: list[CommunityRow], waits: dict[int, bool]) -> dict[int, int]:
    """For each community, how many reports are written one after another from its own on: itself when it
    waited for its sub-communities' reports, and each parent above that waits in turn. The model's free
    slots go to the longest chain first; in order of asking, a parent whose sub-community was asked for
    late would add rounds of calls (on the podcast bench: 219 reports in 10-11 rounds at concurrency 25,
    not 9)."""
    parent = {int(r["community"]): int(r["parent"]) for r in records}

    def waiting_above(number: int) -> int:
        above = parent[number]
        return 1 + waiting_above(above) if waits.get(above) else 0

    return {number: waiting_above(number) + waits[number] for number in parent}


def kept_row(record: CommunityRow, kept: dict[str, Any], digest: str) -> tuple[Any, ...]:
    """A previous report as it was, in its community's place now (number, parent, children, size)."""
    return placed_report(record, [kept[c] for c in REPORT_COLUMNS[COLUMN["title"]:COLUMN["size"]]], "ok", digest)


STAGE = Stage(
    name="community_reports",
    description="one LLM report per community, sub-community reports standing in for detail that does not fit",
    reads=("communities", "entities", "relationships", "covariates"),
    writes=("community_reports",),
    config_sections=("community_reports",),
    run=run,
    uses_model=True,
)
