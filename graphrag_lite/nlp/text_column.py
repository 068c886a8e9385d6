"""A text column built a value at a time and turned into Arrow memory BATCH values at a time, so that a million
descriptions never wait as Python strings (about 50 bytes more each, and scattered) for their table."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd
import pyarrow as pa

BATCH = 65536


class TextColumn:
    def __init__(self) -> None:
        self.batches: list[pa.Array] = []
        self.pending: list[str] = []

    def append(self, value: str) -> None:
        self.pending.append(value)
        if len(self.pending) >= BATCH:
            self._flush()

    def values(self) -> Iterator[str]:
        """The values in order, as Python strings a batch at a time."""
        self._flush()
        for batch in self.batches:
            yield from batch.to_pylist()

    def series(self, keep: np.ndarray | None = None) -> pd.Series:
        """The column (with the dtype pandas gives text), or its values where `keep` is true; the batches are let go
        one by one as they are read."""
        self._flush()
        kept, start = [], 0
        while self.batches:
            batch = self.batches.pop(0)
            kept.append(batch if keep is None else batch.filter(pa.array(keep[start:start + len(batch)])))
            start += len(batch)
        return pd.Series(pa.chunked_array(kept, type=pa.large_string()), dtype=pd.Series([""]).dtype)

    def _flush(self) -> None:
        if self.pending:
            self.batches.append(pa.array(self.pending, type=pa.large_string()))
            self.pending = []
