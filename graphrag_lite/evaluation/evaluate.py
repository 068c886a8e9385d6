"""Evaluate one index on a question set: for each query method and question, the gold evidence its context
holds, and (when the questions have answers and the method has a chat model) the answer's scores, with
the model calls, tokens, cost and time each question took.

Fair by construction: whenever the questions have gold evidence and local search is evaluated, basic search
packed to local search's context budget (`basic_packed`) is evaluated beside it, so a graph method is never
compared with a baseline that was given less text.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from graphrag_lite.evaluation.questions import Question
from graphrag_lite.evaluation.scoring import UnitLookup, contains_answer, exact_match, score_retrieval, token_f1
from graphrag_lite.llm.errors import LLMCallError
from graphrag_lite.llm.ledger import summarize
from graphrag_lite.query.engine import GraphRAG

PACKED = "basic_packed"
PACKED_K = 1000  # candidates for basic search packed to the budget: more than a context can hold


@dataclass
class QuestionResult:
    question_id: str
    group: str
    method: str
    gold: int
    found: int
    answer: str | None = None
    exact_match: float = math.nan
    token_f1: float = math.nan
    contains: float = math.nan
    calls: int = 0
    # what the question costs with an empty cache (NaN: a model missing from LiteLLM's price map), so
    # variants compare fairly whichever ran first; paid_usd is what this run paid (cache hits are free)
    tokens: int = 0
    cost_usd: float = 0.0
    paid_usd: float = 0.0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    failed: bool = False  # the model gave no usable answer after its retries: nothing was scored


def packed_basic(rag: GraphRAG) -> GraphRAG:
    """The same index searched by basic search given local search's whole context budget."""
    config = rag.config.model_copy(deep=True)
    config.basic_search.k = PACKED_K
    config.basic_search.max_context_tokens = config.local_search.max_context_tokens
    return rag.with_config(config)


def methods_to_run(methods: Sequence[str], questions: list[Question]) -> list[str]:
    """The methods asked for, plus the packed baseline when recall is measured for local search."""
    extra = [PACKED] if "local" in methods and any(q.has_gold for q in questions) else []
    return [*methods, *[m for m in extra if m not in methods]]


async def evaluate_index(rag: GraphRAG, questions: list[Question], methods: Sequence[str], answer: bool = True,
                         response_type: str = "Single Sentence", on_done: Callable[[], None] | None = None,
                         answer_every_question: Sequence[str] = ()) -> list[QuestionResult]:
    """One QuestionResult per method and question, in order; questions run one after another so each one's
    calls and cost are its own. `answer`: answer the questions that have gold answers, and score them;
    `answer_every_question`: methods whose every question is answered (for a judge)."""
    units = UnitLookup.of(rag.index.text_units, rag.index.documents)
    results = []
    for method in methods_to_run(methods, questions):
        searcher = packed_basic(rag) if method == PACKED else rag
        for question in questions:
            wanted = (answer and bool(question.answers)) or method in answer_every_question
            results.append(await _evaluate_one(searcher, method, question, units, wanted, response_type))
            if on_done:
                on_done()
    return results


async def _evaluate_one(rag: GraphRAG, method: str, question: Question, units: UnitLookup, answer: bool,
                        response_type: str) -> QuestionResult:
    began, seen = time.perf_counter(), len(rag.gateway.ledger.records)
    result = QuestionResult(question.id, question.group, method, 0, 0)
    try:
        await _search_and_score(rag, method, question, units, answer, response_type, result)
    except LLMCallError as err:  # counted, and the evaluation goes on; its retrieval is still scored
        result.failed, result.problems = True, [*result.problems, str(err)]
        with contextlib.suppress(LLMCallError):
            await _search_and_score(rag, method, question, units, False, response_type, result)
    usage = summarize(rag.gateway.ledger.records[seen:])
    result.calls, result.tokens, result.paid_usd = usage["calls"], usage["tokens_without_cache"], usage["cost_usd"]
    known = usage["cost_usd_without_cache"]
    result.cost_usd = math.nan if known is None else known
    result.seconds = time.perf_counter() - began
    return result


async def _search_and_score(rag: GraphRAG, method: str, question: Question, units: UnitLookup, answer: bool,
                            response_type: str, result: QuestionResult) -> None:
    rows: list[dict[str, Any]] | None
    if answer and method != PACKED and getattr(rag.config, f"{method}_search").chat_model_id is not None:
        found = await rag.asearch(method, question.question, response_type=response_type)
        rows = found.context.get("Sources") if method != "global" else None
        result.answer, result.problems = found.answer, found.problems
        if question.answers:
            result.exact_match = exact_match(found.answer, question.answers)
            result.token_f1 = token_f1(found.answer, question.answers)
            result.contains = contains_answer(found.answer, question.answers)
    else:
        rows = await _context_rows(rag, method, question.question)
    if rows is not None and question.has_gold:
        retrieval = score_retrieval(question, rows, units)
        result.gold, result.found = retrieval.gold, retrieval.found


async def _context_rows(rag: GraphRAG, method: str, question: str) -> list[dict[str, Any]] | None:
    """The source rows the method's context would hold, built as the query commands build them (local
    search's later rounds ask the model when `local_search.hops` > 1); None for global search."""
    if method == "local":
        context, _ = await rag.alocal_rounds(question, 2, rag.config.local_search.hops)
        return context.sources.rows
    if method in ("basic", PACKED):
        return (await rag.abasic_context(question)).rows
    return None


def summary_table(results: list[QuestionResult], by: tuple[str, ...] = ("method",)) -> pd.DataFrame:
    """Mean scores and total usage per method (and group): NaN where nothing was measured."""
    frame = pd.DataFrame([asdict(r) for r in results])
    rows = []
    for keys, part in frame.groupby(list(by), sort=False):
        scored = part[part["gold"] > 0]
        recall = scored["found"] / scored["gold"]
        rows.append({**dict(zip(by, keys, strict=True)),  # keys: a tuple, as `by` is a list
                     "questions": len(part), "failures": int(part["failed"].sum()),
                     "all_gold": _mean((scored["found"] == scored["gold"]).astype(float)),
                     "recall": _mean(recall), "exact_match": _mean(part["exact_match"]),
                     "token_f1": _mean(part["token_f1"]), "contains": _mean(part["contains"]),
                     "calls": int(part["calls"].sum()), "tokens": int(part["tokens"].sum()),
                     "cost_usd": round(float(part["cost_usd"].sum(skipna=False)), 6),
                     "seconds": round(float(part["seconds"].sum()), 3),
                     "median_s": round(statistics.median(part["seconds"]), 3)})
    return pd.DataFrame(rows)


def _mean(values: pd.Series) -> float:
    present = values.dropna()
    return round(float(present.mean()), 3) if len(present) else math.nan
