"""What every model call cost: one record a call, totals per stage, and the budget that stops a run."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphrag_lite.errors import GraphragLiteError


class BudgetExceeded(GraphragLiteError):
    """The run reached budget.max_cost_usd or budget.max_tokens; finished calls are cached."""

    exit_code = 3


@dataclass(frozen=True)
class CallRecord:
    stage: str
    model_id: str
    kind: str  # chat | embedding | failed_attempt (an attempt the provider read but did not answer usefully)
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None  # None: the model is not in LiteLLM's price map
    latency_s: float
    cache_hit: bool
    retries: int  # transport retries (429, 5xx, timeouts)
    parse_retries: int  # corrective follow-ups after an unparseable answer
    ok: bool
    provider_cached_tokens: int = 0  # prompt tokens the provider served from its prompt cache (cheaper)
    early: bool = False  # made by its stage's early work (pipeline.contract.Stage.early), which may run before its turn


# the calls of one request to a long-lived process (graphrag-lite serve), whose gateway serves many at once
_REQUEST_CALLS: ContextVar[list[CallRecord] | None] = ContextVar("request_calls", default=None)
# set in the context of a stage's early work: its calls are recorded as early
EARLY_WORK: ContextVar[bool] = ContextVar("early_work", default=False)


@contextlib.contextmanager
def request_scope() -> Iterator[None]:
    """Within it (and the tasks it starts), a ledger's totals count only the calls made within it: a
    request's usage, not that of every request the process has served."""
    token = _REQUEST_CALLS.set([])
    try:
        yield
    finally:
        _REQUEST_CALLS.reset(token)


class Ledger:
    def __init__(self, max_cost_usd: float | None = None, max_tokens: int | None = None,
                 prior_spend: tuple[float, int] = (0.0, 0)) -> None:
        self.records: list[CallRecord] = []
        self.keep_records = True  # False in a long-lived server: records go to the request's scope only
        self.max_cost_usd = max_cost_usd
        self.max_tokens = max_tokens
        self.prior_cost, self.prior_tokens = prior_spend  # earlier runs of the same index (budget.scope: index)
        self._cost = 0.0  # running totals: the budget is checked before every call
        self._tokens = 0
        self._reserved_cost = 0.0  # calls sent and not yet answered
        self._reserved_tokens = 0
        self._in_flight = 0  # calls holding a reservation
        self._by_stage: dict[str, dict[str, Any]] = {}  # running spend per stage, for progress bars
        self._early_cost: dict[str, float] = {}  # of that, what each stage's early work spent

    def add(self, record: CallRecord) -> None:
        if self.keep_records:
            self.records.append(record)
        if (scope := _REQUEST_CALLS.get()) is not None:
            scope.append(record)
        if not record.cache_hit:
            self._cost += record.cost_usd or 0.0
            self._tokens += record.prompt_tokens + record.completion_tokens
        self._count(record)

    def _count(self, record: CallRecord) -> None:
        spend = self._by_stage.setdefault(record.stage, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                                         "cost_usd": 0.0})
        spend["calls"] += record.kind != "failed_attempt"
        if not record.cache_hit:  # counted as `summarize` counts them
            spend["prompt_tokens"] += record.prompt_tokens
            spend["completion_tokens"] += record.completion_tokens
            spend["cost_usd"] += record.cost_usd or 0.0
            if record.early:
                self._early_cost[record.stage] = self._early_cost.get(record.stage, 0.0) + (record.cost_usd or 0.0)

    def running(self, stage: str) -> dict[str, Any] | None:
        """A stage's calls, tokens and cost so far, kept as calls are recorded: a progress bar shows them
        twice a second, and summing every record each time made a stage of 100,000 calls quadratic."""
        spend = self._by_stage.get(stage)
        return dict(spend) if spend else None

    def spent(self) -> tuple[float, int]:
        return self._cost, self._tokens

    def reserve(self, cost: float, tokens: int, what: str = "the next call") -> tuple[float, int] | None:
        """Count a call (`what`: or a batch of calls) about to be sent at its estimated cost. None when the
        spending so far, the calls in flight and this one would pass the budget: wait for the calls in flight
        (their real cost may leave room) and try again. BudgetExceeded when nothing is in flight and this call
        would pass it."""
        over_cost = self.max_cost_usd is not None and \
            self.prior_cost + self._cost + self._reserved_cost + cost > self.max_cost_usd
        over_tokens = self.max_tokens is not None and \
            self.prior_tokens + self._tokens + self._reserved_tokens + tokens > self.max_tokens
        if (over_cost or over_tokens) and self._in_flight:
            return None
        if over_cost:
            raise BudgetExceeded(f"budget reached: ${self.prior_cost + self._cost:.4f} spent ({self._spent_by_stage()})"
                                 f"{self._earlier()}, and {what} would pass budget.max_cost_usd=${self.max_cost_usd}")
        if over_tokens:
            raise BudgetExceeded(f"budget reached: {self.prior_tokens + self._tokens:,} tokens used{self._earlier()}, "
                                 f"and {what} would pass budget.max_tokens={self.max_tokens:,}")
        self._reserved_cost += cost
        self._reserved_tokens += tokens
        self._in_flight += 1
        return cost, tokens

    def release(self, reservation: tuple[float, int]) -> None:
        self._in_flight -= 1
        self._reserved_cost = max(0.0, self._reserved_cost - reservation[0]) if self._in_flight else 0.0
        self._reserved_tokens -= reservation[1]

    def _spent_by_stage(self) -> str:
        """What each stage of this run spent, its early work apart: "extract_graph $0.0226, embed_text's early
        work $0.0037" (the stage lines show a stage's calls; early work runs beside another stage)."""
        parts = []
        for stage, spend in self._by_stage.items():
            early = self._early_cost.get(stage, 0.0)
            if spend["cost_usd"] - early >= 0.00005:
                parts.append(f"{stage} ${spend['cost_usd'] - early:.4f}")
            if early >= 0.00005:
                parts.append(f"{stage}'s early work ${early:.4f}")
        return ", ".join(parts) or "no priced call"

    def _earlier(self) -> str:
        return f" (${self.prior_cost:.4f} in earlier runs of this index)" if self.prior_cost or self.prior_tokens \
            else ""

    def visible(self) -> list[CallRecord]:
        """Every call, or within a request_scope the calls of that request."""
        scope = _REQUEST_CALLS.get()
        return self.records if scope is None else scope

    def totals(self, stage: str | None = None, early_only: bool = False) -> dict[str, Any]:
        """The calls of `stage` (of all stages: None); with `early_only`, those its early work made."""
        return summarize([r for r in self.visible()
                          if (stage is None or r.stage == stage) and (r.early or not early_only)])

    def by_stage(self) -> dict[str, dict[str, Any]]:
        """Each stage's totals, in the order stages first called (the records grouped in one pass)."""
        groups: dict[str, list[CallRecord]] = {}
        for record in self.visible():
            groups.setdefault(record.stage, []).append(record)
        return {stage: summarize(records) for stage, records in groups.items()}


def summarize(records: list[CallRecord]) -> dict[str, Any]:
    calls = [r for r in records if r.kind != "failed_attempt"]
    sent = [r for r in records if not r.cache_hit]
    latencies = sorted(r.latency_s for r in sent if r.kind != "failed_attempt")
    return {
        "calls": len(calls),
        "cache_hits": sum(r.cache_hit for r in calls),
        "failures": sum(not r.ok for r in calls),
        # every attempt the provider read counts, answered or not (a 500, a time-out, a rejected answer)
        "prompt_tokens": sum(r.prompt_tokens for r in sent),
        # of those, served from the provider's prompt cache at its discount (a static prompt prefix repeated)
        "provider_cached_prompt_tokens": sum(r.provider_cached_tokens for r in sent),
        "completion_tokens": sum(r.completion_tokens for r in sent),
        "cost_usd": round(sum(r.cost_usd or 0.0 for r in sent), 6),
        "unpriced_calls": sum(r.cost_usd is None and r.prompt_tokens > 0 for r in sent if r.kind != "failed_attempt"),
        "retries": sum(r.retries for r in calls),
        "failed_attempts": len(records) - len(calls),
        "parse_retries": sum(r.parse_retries for r in calls),
        "median_latency_s": round(latencies[len(latencies) // 2], 3) if latencies else 0.0,
        # what the same calls cost with an empty cache: a cache hit counts at the price it was first paid;
        # None when a call's price is unknown (a model missing from LiteLLM's price map, an old cache entry)
        "tokens_without_cache": sum(r.prompt_tokens + r.completion_tokens for r in records),
        "cost_usd_without_cache": round(sum(r.cost_usd or 0.0 for r in records), 6)
        if all(r.cost_usd is not None for r in calls if r.ok) else None,
    }


SPEND_FILE = "llm_spend.json"


def read_spend(output_dir: Path) -> tuple[float, int]:
    """Cost and tokens of every earlier run of the index in `output_dir` (for budget.scope: index)."""
    path = output_dir / SPEND_FILE
    if not path.is_file():
        return 0.0, 0
    data = json.loads(path.read_text(encoding="utf-8"))
    return float(data.get("cost_usd", 0.0)), int(data.get("tokens", 0))


def write_spend(output_dir: Path, ledger: Ledger) -> None:
    """Add this run's spending to the index's running total."""
    cost, tokens = ledger.spent()
    if not cost and not tokens:
        return
    from graphrag_lite.storage import write_json  # imported here: storage brings pandas and pyarrow with it

    earlier_cost, earlier_tokens = read_spend(output_dir)
    write_json(output_dir / SPEND_FILE, {"cost_usd": round(earlier_cost + cost, 6), "tokens": earlier_tokens + tokens})
