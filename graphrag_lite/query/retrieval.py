"""Finding rows for a question in LanceDB: by vector, by keywords, and both fused by reciprocal rank."""

from __future__ import annotations

import re
from typing import Any, TypeVar

T = TypeVar("T")
RRF_K = 60  # the usual constant of reciprocal rank fusion


def fuse_scores(rankings: list[list[str]], limit: int) -> dict[str, float]:
    """Reciprocal rank fusion: an id ranked high by any list, or fairly high by several, comes first. Returns
    the `limit` best ids with their fused scores, best first."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for position, row_id in enumerate(ranking):
            scores[row_id] = scores.get(row_id, 0.0) + 1.0 / (RRF_K + position + 1)
    return {row_id: scores[row_id] for row_id in sorted(scores, key=lambda row_id: -scores[row_id])[:limit]}


def fuse(rankings: list[list[str]], limit: int) -> list[str]:
    return list(fuse_scores(rankings, limit))


def take_turns(queues: list[list[T]]) -> list[T]:
    """The first item of each queue, then the second of each, and so on."""
    return [queue[turn] for turn in range(max(map(len, queues), default=0)) for queue in queues if turn < len(queue)]


def keyword_query(question: str) -> str:
    """The question as plain search words (no query syntax)."""
    return " ".join(re.findall(r"\w+", question))


def open_table(db: Any, table: str) -> Any:
    """A LanceDB table of the index, or a message naming it and the command that rebuilds it."""
    from graphrag_lite.errors import MissingIndex

    try:
        return db.open_table(table)
    except (ValueError, FileNotFoundError, OSError) as err:
        raise MissingIndex(f"the LanceDB table '{table}' is missing or unreadable in {db.uri} ({err}); "
                                   "rebuild it with `graphrag-lite index --root ROOT` (the embed_text stage notices "
                                   "and runs again)") from None


def by_keywords(db: Any, table: str, question: str, limit: int) -> list[str]:
    words = keyword_query(question)
    lance = open_table(db, table)
    if not words or limit <= 0 or lance.count_rows() == 0:  # an empty table has no full-text index to search
        return []
    found = lance.search(words, query_type="fts").limit(limit).select(["id"]).to_list()
    return [str(row["id"]) for row in found]


def by_vector(db: Any, table: str, vector: list[float], limit: int) -> list[str]:
    lance = open_table(db, table)
    if limit <= 0 or lance.count_rows() == 0:
        return []
    found = lance.search(vector).limit(limit).select(["id"]).to_list()
    return [str(row["id"]) for row in found]
