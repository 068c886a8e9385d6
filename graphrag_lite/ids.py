"""Stable ids: a hash of what a row is, so a rebuild from the same inputs gives the same ids (GraphRAG's
are random uuids, so its rebuilds cannot be diffed and vector ids churn)."""

import hashlib
import json
from collections.abc import Iterable, Mapping


def stable_id(kind: str, *parts: object) -> str:
    text = "\x1f".join([kind, *(str(p) for p in parts)])
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def json_digest(payload: object, size: int) -> str:
    """blake2b of the data's JSON, keys sorted, a Path or date as its text: stage fingerprints, an experiment's
    index and evaluation keys, a question set's digest, all kept on disk (changing the encoding would invalidate
    them). The answer cache's keys are made apart (llm/cache.py) and must stay so."""
    return hashlib.blake2b(json.dumps(payload, sort_keys=True, default=str).encode(), digest_size=size).hexdigest()


def kept_numbers(ids: Iterable[str], previous: Mapping[str, int] | None) -> list[int]:
    """human_readable_ids that survive re-runs: a row the last run numbered keeps its number, so the
    citations in kept community reports ("Entities (5)") still point at the same rows; new rows are numbered
    after the largest number in use, in order. A first run numbers 0, 1, 2, ..."""
    previous = previous or {}
    numbers: list[int] = []
    following = max(previous.values(), default=-1) + 1
    for row_id in ids:
        if row_id in previous:
            numbers.append(int(previous[row_id]))
        else:
            numbers.append(following)
            following += 1
    return numbers
