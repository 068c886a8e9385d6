"""Multi-hop local search: the model reads what was found and names what is still missing.

A question like "Who founded the company that bought the Orrin Press?" names the first hop only; the passage
about the founder shares nothing with the question's words. After each retrieval round the model reads the
context and either says it is enough or gives one short search query for the missing link (the bridge
entity), in the spirit of IRCoT and Microsoft GraphRAG's DRIFT search. The next round links that query to
entities and text units and walks the graph from the old and the new seeds together.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from graphrag_lite.answer_parsing import ParseError, strip_reasoning
from graphrag_lite.context_tables import ContextTable, pack
from graphrag_lite.query.local import LEFT_OUT

ENOUGH = "ENOUGH"
MAX_QUERY_WORDS = 30
_LABEL = re.compile(r"^\W*(?:next\s+|follow[- ]up\s+)?(?:search\s+)?query\s*[:\-]\s*(.+)$", re.IGNORECASE)
_ENOUGH = re.compile(r"^\W*enough\b", re.IGNORECASE)
_NOT_A_QUERY = re.compile(r"^\W*(?:i\b|i'm\b|sorry\b|as an ai\b|unfortunately\b|the (?:information|context)\b)",
                         re.IGNORECASE)  # a sentence about the task (a refusal, an explanation), not a search


@dataclass
class HopRound:
    """One retrieval round, as `--json` shows it."""

    query: str  # the question (round 1), the model's query, or "" when the model found the context enough
    linked_entities: list[str]
    new_sources: list[int]  # source ids this round brought into the context
    calls: int = 0  # model calls that produced this round's query (0 for the question itself)
    tokens: int = 0  # their prompt and completion tokens (0 when the reply came from the cache)
    cached: bool = False
    problems: list[str] = field(default_factory=list)
    kept_sources: list[int] = field(default_factory=list)  # of new_sources, those in the final context


def describe_round(number: int, hop: dict[str, Any]) -> str:
    """One line of `--explain` for a round (as `SearchResult.rounds` holds it)."""
    if not hop["query"]:
        found = "the model found the context enough" if not hop["problems"] else "no new query"
    else:
        found = (f"linked {', '.join(hop['linked_entities'][:5]) or 'nothing'}"
                 f"{' …' if len(hop['linked_entities']) > 5 else ''}; {len(hop['new_sources'])} new sources, "
                 f"{len(hop['kept_sources'])} in the final context")
    cost = "" if number == 1 else (f"; {hop['calls']} call{'s' if hop['calls'] != 1 else ''}, " + (
        "from the cache" if hop["cached"] else f"{hop['tokens']:,} tokens"))
    return f"round {number}: {hop['query'] or '-'} ({found}{cost})"


def follow_up_query(text: str) -> str | None:
    """The search query a hop reply names, or None when the model says the context is enough. Accepts a
    bare query, a labelled one ("Search query: ...") inside prose, quotes and fences; anything else (empty,
    a long explanation with no query in it) is a ParseError, so the model is asked again."""
    reply = strip_reasoning(text).strip().strip("`").strip()
    lines = [line.strip() for line in reply.splitlines() if line.strip() and not line.strip().startswith("```")]
    if not lines:
        raise ParseError("the reply is empty; expected ENOUGH or one short search query")
    if _ENOUGH.match(lines[0]) or (len(lines) == 1 and lines[0].strip(" .!\"'*").upper() == ENOUGH):
        return None
    labelled = [m.group(1) for m in map(_LABEL.match, lines) if m]
    query = (labelled[-1] if labelled else lines[0] if len(lines) == 1 else "").strip(" \"'*`")
    if not query or len(query.split()) > MAX_QUERY_WORDS or _NOT_A_QUERY.match(query):
        raise ParseError(f"expected ENOUGH or one search query of at most {MAX_QUERY_WORDS} words on a line of "
                         "its own (or after 'Search query:')")
    return query


def merged_seeds(rounds: list[dict[str, float]]) -> dict[str, float]:
    """Seeds of every round so far: each id at its best score in any round, best first. A later round's
    seeds weigh as much as the question's, so the walk explores the new lead without losing the first."""
    best: dict[str, float] = {}
    for scores in rounds:
        top = max(scores.values(), default=0.0)
        for row_id, score in scores.items():  # scaled per round: fused scores of a short query run lower
            best[row_id] = max(best.get(row_id, 0.0), score / top if top > 0 else 0.0)
    return dict(sorted(best.items(), key=lambda item: -item[1]))


def hop_context(tables: list[ContextTable], budget: int) -> list[ContextTable]:
    """What the model reads to name the missing link: the entities, relationships and then as much source
    text as fits in `budget` tokens (reports and claims matter less for finding the next hop)."""
    chosen = [t for t in tables if t.name in ("Entities", "Relationships", "Sources")]
    packed: list[ContextTable] = []
    for table in chosen:  # with their descriptions: this shorter context holds fewer of the passages
        rows = [{**row, "description": row[LEFT_OUT]} if LEFT_OUT in row else row for row in table.rows]
        part = pack(table.name, table.columns, rows, budget - sum(t.tokens for t in packed))
        if part.rows:
            packed.append(part)
    return packed
