"""What every model call cost: one record a call, totals per stage, and the budget that stops a run."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from graphrag_lite.errors import GraphragLiteError


class BudgetExceeded(GraphragLiteError):
    """The run reached budget.max_cost_usd or budget.max_tokens; finished calls are cached."""

    exit_code = 3


@dataclass(frozen=True)
class CallRecord:
    stage: str
    model_id: str
    kind: str  # chat | embedding
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None  # None: the model is not in LiteLLM's price map
    latency_s: float
    cache_hit: bool
    retries: int  # transport retries (429, 5xx, timeouts)
    parse_retries: int  # corrective follow-ups after an unparseable answer
    ok: bool


class Ledger:
    def __init__(self, max_cost_usd: float | None = None, max_tokens: int | None = None) -> None:
        self.records: list[CallRecord] = []
        self.max_cost_usd = max_cost_usd
        self.max_tokens = max_tokens
        self._cost = 0.0  # running totals: the budget is checked before every call
        self._tokens = 0

    def add(self, record: CallRecord) -> None:
        self.records.append(record)
        if not record.cache_hit:
            self._cost += record.cost_usd or 0.0
            self._tokens += record.prompt_tokens + record.completion_tokens

    def spent(self) -> tuple[float, int]:
        return self._cost, self._tokens

    def check_budget(self) -> None:
        """Raise before a call is sent once the budget is used up (cached answers stay free)."""
        cost, tokens = self.spent()
        if self.max_cost_usd is not None and cost >= self.max_cost_usd:
            raise BudgetExceeded(f"budget reached: ${cost:.4f} spent of budget.max_cost_usd=${self.max_cost_usd}")
        if self.max_tokens is not None and tokens >= self.max_tokens:
            raise BudgetExceeded(f"budget reached: {tokens:,} tokens used of budget.max_tokens={self.max_tokens:,}")

    def totals(self, stage: str | None = None) -> dict[str, Any]:
        records = [r for r in self.records if stage is None or r.stage == stage]
        return summarize(records)

    def by_stage(self) -> dict[str, dict[str, Any]]:
        groups: dict[str, list[CallRecord]] = defaultdict(list)
        for record in self.records:
            groups[record.stage].append(record)
        return {stage: summarize(records) for stage, records in groups.items()}


def summarize(records: list[CallRecord]) -> dict[str, Any]:
    sent = [r for r in records if not r.cache_hit]
    latencies = sorted(r.latency_s for r in sent)
    return {
        "calls": len(records),
        "cache_hits": len(records) - len(sent),
        "failures": sum(not r.ok for r in records),
        "prompt_tokens": sum(r.prompt_tokens for r in sent),
        "completion_tokens": sum(r.completion_tokens for r in sent),
        "cost_usd": round(sum(r.cost_usd or 0.0 for r in sent), 6),
        "unpriced_calls": sum(r.cost_usd is None for r in sent),
        "retries": sum(r.retries for r in records),
        "parse_retries": sum(r.parse_retries for r in records),
        "median_latency_s": round(latencies[len(latencies) // 2], 3) if latencies else 0.0,
    }
