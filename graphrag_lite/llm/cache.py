"""A persistent, content-addressed cache of validated model answers (SQLite in WAL mode).

Only answers that passed the caller's parser are stored, so a malformed answer is never replayed. The key
is a hash of the model string, the endpoint (base URL and API version), the messages, the response format
and the call arguments; never the API key. WAL mode and a busy timeout make it safe for several processes
writing at once, and a crash loses at most the answer being written.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from graphrag_lite.errors import ConfigError

SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    key TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    value TEXT NOT NULL,
    created REAL NOT NULL
)
"""
INSERT = "INSERT OR REPLACE INTO answers (key, kind, value, created) VALUES (?, ?, ?, ?)"


def cache_key(kind: str, model: str, payload: Any, call_args: dict[str, Any], endpoint: str = "") -> str:
    """A hash of what determines an answer. The endpoint (base URL, API version) is part of it: two servers
    may serve different models, or vectors of different dimensions, under one name."""
    data = json.dumps({"kind": kind, "model": model, "payload": payload, "args": call_args, "endpoint": endpoint},
                      sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


class AnswerCache:
    def __init__(self, folder: Path) -> None:
        self.path = folder / "llm_cache.sqlite"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(SCHEMA)
        except (OSError, sqlite3.Error) as err:
            raise ConfigError(f"cannot open the answer cache {self.path} ({err}); make {folder} writable, set "
                              "cache.base_dir to a folder you can write, or pass --no-cache") from None

    def get(self, key: str) -> Any | None:
        row = self._db.execute("SELECT value FROM answers WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, kind: str, value: Any) -> None:
        self._db.execute(INSERT, (key, kind, json.dumps(value, ensure_ascii=False), time.time()))

    def put_many(self, kind: str, items: list[tuple[str, Any]]) -> None:
        """Several answers (key, value) in one transaction: one commit, where a commit per answer (the
        vectors of an embedding batch) costs more than writing them."""
        now = time.time()
        rows = [(key, kind, json.dumps(value, ensure_ascii=False), now) for key, value in items]
        self._db.execute("BEGIN")
        try:
            self._db.executemany(INSERT, rows)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def delete(self, key: str) -> None:
        self._db.execute("DELETE FROM answers WHERE key = ?", (key,))

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])

    def close(self) -> None:
        self._db.close()
