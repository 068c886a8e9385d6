"""Finding rows for a question in LanceDB: by vector, by keywords, and both fused by reciprocal rank."""

from __future__ import annotations

import re
from typing import Any

RRF_K = 60  # the usual constant of reciprocal rank fusion


def fuse(rankings: list[list[str]], limit: int) -> list[str]:
    """Reciprocal rank fusion: an id ranked high by any list, or fairly high by several, comes first."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for position, row_id in enumerate(ranking):
            scores[row_id] = scores.get(row_id, 0.0) + 1.0 / (RRF_K + position + 1)
    return sorted(scores, key=lambda row_id: -scores[row_id])[:limit]


def keyword_query(question: str) -> str:
    """The question as plain search words (no query syntax)."""
    return " ".join(re.findall(r"\w+", question))


def by_keywords(db: Any, table: str, question: str, limit: int) -> list[str]:
    words = keyword_query(question)
    lance = db.open_table(table)
    if not words or limit <= 0 or lance.count_rows() == 0:  # an empty table has no full-text index to search
        return []
    found = lance.search(words, query_type="fts").limit(limit).select(["id"]).to_list()
    return [str(row["id"]) for row in found]


def by_vector(db: Any, table: str, vector: list[float], limit: int) -> list[str]:
    lance = db.open_table(table)
    if limit <= 0 or lance.count_rows() == 0:
        return []
    found = lance.search(vector).limit(limit).select(["id"]).to_list()
    return [str(row["id"]) for row in found]
