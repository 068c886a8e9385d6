"""Stable ids: a hash of what a row is, so a rebuild from the same inputs gives the same ids (GraphRAG's
are random uuids, so its rebuilds cannot be diffed and vector ids churn)."""

import hashlib


def stable_id(kind: str, *parts: object) -> str:
    text = "\x1f".join([kind, *(str(p) for p in parts)])
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()
