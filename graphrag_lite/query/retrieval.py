"""Finding rows for a question in LanceDB: by vector, by keywords, and both fused by reciprocal rank."""

from __future__ import annotations

import re
from typing import Any, TypeVar

from graphrag_lite.errors import IndexDamaged, MissingIndex

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


def take_turns(queues: list[list[T]]) -> list[T]:
    """The first item of each queue, then the second of each, and so on."""
    return [queue[turn] for turn in range(max(map(len, queues), default=0)) for queue in queues if turn < len(queue)]


def by_keywords(db: Any, table: str, question: str, limit: int) -> list[str]:
    words = " ".join(re.findall(r"\w+", question))  # plain search words: no query syntax
    return _found_ids(db, table, words, limit if words else 0, query_type="fts")


def by_vector(db: Any, table: str, vector: list[float], limit: int) -> list[str]:
    return _found_ids(db, table, vector, limit)


def _found_ids(db: Any, table: str, query: str | list[float], limit: int, **options: Any) -> list[str]:
    """The ids of the rows the search finds, or a message naming a missing table and the command that
    rebuilds it (said also when there is nothing to search for)."""
    try:
        lance = db.open_table(table)
    except (ValueError, FileNotFoundError, OSError) as err:
        raise MissingIndex(f"the LanceDB table '{table}' is missing or unreadable in {db.uri} ({err}); "
                           "rebuild it with `graphrag-lite index --root ROOT` (the embed_text stage notices and "
                           "runs again)") from None
    try:
        if limit <= 0 or lance.count_rows() == 0:  # nothing to find (and no full-text index to search)
            return []
        return [str(row["id"]) for row in lance.search(query, **options).limit(limit).select(["id"]).to_list()]
    except (OSError, RuntimeError) as err:  # lance's I/O and format errors: a file of the table gone or damaged
        raise IndexDamaged(f"the LanceDB table '{table}' in {db.uri} cannot be searched ({str(err)[:200]}); "
                           "repair it with `graphrag-lite index --root ROOT` (the embed_text stage rebuilds it)"
                           ) from None
