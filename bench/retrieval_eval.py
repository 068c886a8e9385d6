"""Shared by the retrieval benchmarks: contexts built exactly as the query commands build them, and a fair
score table.

Fair by construction: every local search run is scored beside basic search packed to the same token budget
(`basic_search.k` raised until the sources fill `local_search.max_context_tokens`), so a graph method is
never compared with a baseline that was given less text. Scores per question: all-gold (every gold item is
in the context) and recall (the share of gold items in it), averaged overall and by question group (hop
count, question type).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from graphrag_lite.evaluation.evaluate import packed_basic
from graphrag_lite.query.engine import GraphRAG


def with_settings(rag: GraphRAG, **sections: dict[str, Any]) -> GraphRAG:
    """The same index under other settings (`local_search={"source_ranking": "fusion"}`)."""
    config = rag.config.model_copy(deep=True)
    for section, values in sections.items():
        for key, value in values.items():
            setattr(getattr(config, section), key, value)
    return GraphRAG(config)


def local_rows(rag: GraphRAG, question: str) -> list[dict[str, Any]]:
    context = asyncio.run(rag.alocal_context(question))
    return context.sources.rows


def whole_local_context(rag: GraphRAG, question: str) -> list[dict[str, Any]]:
    """Every row local search sends, as text rows: what the answering model reads, not only the sources."""
    context = asyncio.run(rag.alocal_context(question))
    return [{"text": " ".join(str(row.get(k, "")) for k in ("title", "entity", "description", "content", "text"))}
            for table in context.tables for row in table.rows]


def basic_rows(rag: GraphRAG, question: str) -> list[dict[str, Any]]:
    return asyncio.run(rag.abasic_context(question)).rows


Rows = Callable[[GraphRAG, str], list[dict[str, Any]]]


def compared_methods(rag: GraphRAG) -> dict[str, tuple[GraphRAG, Rows]]:
    """Local search with the walk and with fusion, and basic search packed to local search's budget and at
    its default k, each as (the searcher, how its context rows are built)."""
    budget = rag.config.local_search.max_context_tokens
    return {"local (ppr)": (rag, local_rows),
            "local (fusion)": (with_settings(rag, local_search={"source_ranking": "fusion"}), local_rows),
            f"basic packed to {budget:,} tokens": (packed_basic(rag), basic_rows),
            "basic k=10 (the default)": (rag, basic_rows)}


def score_question(scores: Scores, methods: dict[str, tuple[GraphRAG, Rows]], question: str, group: str,
                   gold: set[Any], found_in: Callable[[GraphRAG, list[dict[str, Any]]], set[Any]]) -> None:
    """Every method's context for the question, scored; local (ppr) is timed."""
    for name, (searcher, rows_of) in methods.items():
        began = time.perf_counter()
        rows = rows_of(searcher, question)
        if name == "local (ppr)":
            scores.latencies.append(time.perf_counter() - began)
        scores.add(name, group, gold, found_in(searcher, rows))


@dataclass
class Scores:
    """Per method: one (group, all-gold, recall) per question."""

    rows: dict[str, list[tuple[str, bool, float]]] = field(default_factory=lambda: defaultdict(list))
    latencies: list[float] = field(default_factory=list)

    def add(self, method: str, group: str, gold: set[Any], found: set[Any]) -> None:
        hit = len(gold & found)
        self.rows[method].append((group, hit == len(gold), hit / len(gold) if gold else 1.0))

    def print(self, title: str) -> None:
        groups = sorted({g for rows in self.rows.values() for g, _, _ in rows})
        print(title)
        header = f"  {'method':34s} {'all-gold':>8s} {'recall':>7s}" + "".join(f" {g[:14]:>14s}" for g in groups)
        print(header)
        counts = {g: sum(1 for x, _, _ in next(iter(self.rows.values())) if x == g) for g in groups}
        print(f"  {'(questions)':34s} {len(next(iter(self.rows.values()))):>8d} {'':>7s}"
              + "".join(f" {counts[g]:>14d}" for g in groups))
        for method, rows in self.rows.items():
            by_group = [_mean(ok for g, ok, _ in rows if g == group) for group in groups]
            print(f"  {method:34s} {_mean(ok for _, ok, _ in rows):8.3f} {_mean(r for _, _, r in rows):7.4f}"
                  + "".join(f" {v:14.2f}" for v in by_group))
        print("  (all-gold overall, mean recall overall, then all-gold by group)")
        if self.latencies:
            ordered = sorted(self.latencies)
            print(f"  local context build: median {statistics.median(ordered) * 1000:.0f} ms, "
                  f"p95 {ordered[int(0.95 * (len(ordered) - 1))] * 1000:.0f} ms (question embedding included, "
                  "when there is one)")


def _mean(values: Iterable[float]) -> float:
    found = list(values)
    return sum(found) / len(found) if found else 0.0
