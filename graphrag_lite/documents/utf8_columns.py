"""A table's text column read as UTF-8 bytes, and one built from them, with no Python string of each text in
between: a 200 MB document is 200 to 800 MB as a Python string (1, 2 or 4 bytes a character, by its widest
character), and its text units as much again. pandas 3 keeps text in Arrow buffers, which are read in place
here; a column of Python strings (older pandas) is encoded one value at a time."""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
import pyarrow as pa

BATCH = 4096  # values gathered as bytes before they become Arrow memory


def utf8_values(column: pd.Series) -> Iterator[memoryview]:
    """Each value's UTF-8 bytes: a view of the column's Arrow buffer when it has one (not a copy)."""
    if isinstance(column.array, pd.arrays.ArrowStringArray):
        for value in pa.array(column.array):
            yield memoryview(value.as_buffer() or b"")
    else:
        for value in column:
            yield memoryview(str(value).encode("utf-8"))


class Utf8Column:
    """A text column built from UTF-8 bytes, turned into Arrow memory BATCH values at a time."""

    def __init__(self) -> None:
        self.batches: list[pa.Array] = []
        self.pending: list[bytes] = []

    def append(self, value: bytes) -> None:
        self.pending.append(value)
        if len(self.pending) >= BATCH:
            self._flush()

    def series(self) -> pd.Series:
        """The column, with the dtype pandas gives text (Arrow-backed "str" in pandas 3, object before)."""
        self._flush()
        values = pa.chunked_array(self.batches, type=pa.large_string())
        return pd.Series(values, dtype=pd.Series([""]).dtype)

    def _flush(self) -> None:
        if self.pending:  # the cast checks the bytes are UTF-8
            self.batches.append(pa.array(self.pending, type=pa.large_binary()).cast(pa.large_string()))
            self.pending = []
