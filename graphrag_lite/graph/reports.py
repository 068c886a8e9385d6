"""Community reports written by the model: every report whose community's own detail fits
`max_input_length` at once, whatever its level; a community whose detail does not fit waits for its
sub-communities' reports, which stand in for it (report_context.py), and is written as soon as they are done.
A previous report written from the same facts (members, relationships, claims, model and prompt) is kept."""

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
from graphrag_lite.prompts import fill
from graphrag_lite.tables import COLUMN, REPORT_COLUMNS, CommunityRow, Report, placed_report, report_row, typed_records


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
