"""Records as integer codes: a column's distinct values held once as Python objects and each row as a code into
them, and what a merge asks of groups of rows (the distinct values of each group in order of first appearance, a
flat list cut into one list per group) done in numpy. A million records then cost integer arrays and their
distinct texts, not a Python object per record and field. A column of long texts (descriptions: millions of
sentences) keeps its values in the Arrow buffers it was read into (`CodedText`), and only the values asked for
become Python strings."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from functools import cache

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc


@dataclass(frozen=True)
class Coded:
    codes: np.ndarray  # each row's code (int64): its value is values[code]
    values: np.ndarray  # the distinct values (dtype object), a null last with its own code

    def reordered(self, order: np.ndarray) -> Coded:
        """The same column with its rows in `order`."""
        return Coded(self.codes[order], self.values)

    def at(self, codes: np.ndarray) -> list:
        """The values of these codes, as Python objects (one per distinct value, shared by the rows)."""
        return self.values[codes].tolist()


def coded(column: pd.Series, sort: bool = False) -> Coded:
    """A column as codes; `sort`: codes in the order of the values (nulls last, as `sort_values` puts them). A null
    keeps the value pandas gives it (NaN in a text column, None in a column of objects), as `tolist()` would."""
    codes, uniques = pd.factorize(column, sort=sort)
    values = np.asarray(uniques, dtype=object)
    nulls = codes < 0
    if nulls.any():
        codes[nulls] = len(values)
        values = np.append(values, np.empty(1, dtype=object))
        values[-1] = column.iloc[int(np.argmax(nulls))]
    return Coded(codes.astype(np.int64, copy=False), values)


@cache
def _surrounded() -> str:
    """A pattern of a text that starts or ends with what str.strip() strips (it may be shorter stripped)."""
    whitespace = "".join(f"\\x{{{ord(c):x}}}" for c in map(chr, range(sys.maxunicode + 1)) if c.isspace())
    return f"^[{whitespace}]|[{whitespace}]$"


@dataclass(frozen=True)
class CodedText:
    """A text column as codes whose values stay in Arrow: code c's value is the column's row `first_rows[c]`;
    a null has the last code (its value `null`: NaN in a text column, None in a column of objects, as `Coded`
    gives them)."""

    codes: np.ndarray
    column: pa.ChunkedArray  # as read (large_string)
    first_rows: np.ndarray  # per code, its first row
    lengths: np.ndarray  # per code, its value's length in characters (a null's: 0)
    has_null: bool
    null: object = None

    def reordered(self, order: np.ndarray) -> CodedText:
        """The same column with its rows in `order`."""
        return replace(self, codes=self.codes[order])

    def at(self, codes: np.ndarray) -> list:
        """The values of these codes, as Python objects (made now, one per code asked for), taken a chunk of the
        column at a time: a take over the whole column would hold the values once more in Arrow."""
        rows = self.first_rows[codes]
        values: list = [None] * len(rows)
        starts = np.cumsum([0, *(len(chunk) for chunk in self.column.chunks)])
        chunk_of = np.searchsorted(starts, rows, side="right") - 1
        by_chunk = np.argsort(chunk_of, kind="stable")
        bounds = np.searchsorted(chunk_of[by_chunk], np.arange(len(starts))).tolist()
        for i, chunk in enumerate(self.column.chunks):
            picked = by_chunk[bounds[i]:bounds[i + 1]]
            for position, value in zip(picked.tolist(), chunk.take(pa.array(rows[picked] - starts[i])).to_pylist(),
                                       strict=True):
                values[position] = value
        return values if self.null is None else [self.null if v is None else v for v in values]

    def is_text(self) -> np.ndarray:
        """Per code: is its value a text (not the null)?"""
        texts = np.ones(len(self.lengths), dtype=bool)
        texts[-1:] &= not self.has_null
        return texts

    def given(self) -> np.ndarray:
        """Per code: is its value given (true: not empty; a null is when it is NaN, as `bool` has it)?"""
        return (self.lengths > 0) | (~self.is_text() & bool(self.null))

    def stripped_lengths(self, codes: np.ndarray) -> np.ndarray:
        """The lengths of these codes' values without surrounding whitespace, as str.strip() leaves them (a
        null's: 0)."""
        lengths = self.lengths[codes]
        surrounded = pc.fill_null(pc.match_substring_regex(self.column, _surrounded()), False).to_numpy()
        few = np.flatnonzero(surrounded[self.first_rows[codes]])  # seldom any: the rest need no Python string
        lengths[few] = [len(v.strip()) for v in self.at(codes[few])]
        return lengths


def coded_text(column: pd.Series) -> CodedText:
    """A text column (strings and nulls) as `CodedText`; read from Parquet, its Arrow buffers are shared, not
    copied."""
    arrow = pa.array(column.array) if isinstance(column.dtype, pd.StringDtype) and column.dtype.storage == "pyarrow" \
        else pa.array(column.to_numpy(dtype=object), type=pa.large_string(), from_pandas=True)
    arrow = (arrow if isinstance(arrow, pa.ChunkedArray) else pa.chunked_array([arrow])).cast(pa.large_string())
    codes, _ = pd.factorize(column)
    codes = codes.astype(np.int64, copy=False)
    nulls = codes < 0
    first_rows = np.unique(codes, return_index=True)[1][int(nulls.any()):]  # np.unique puts the nulls' -1 first
    if nulls.any():
        codes[nulls] = len(first_rows)
        first_rows = np.append(first_rows, np.argmax(nulls))
    lengths = pc.fill_null(pc.utf8_length(arrow), 0).to_numpy()[first_rows].astype(np.int64)
    return CodedText(codes, arrow, first_rows.astype(np.int64), lengths, bool(nulls.any()),
                     column.iloc[int(np.argmax(nulls))] if nulls.any() else None)


def first_in_group(groups: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """A mask of the rows that hold the first appearance of their code in their group (rows in any order: the first
    is the earliest row)."""
    if not len(codes):
        return np.zeros(0, dtype=bool)
    combined = groups.astype(np.int64) * (int(codes.max()) + 1) + codes
    return ~pd.Series(combined).duplicated().to_numpy()


def cut(flat: list, groups: np.ndarray, count: int) -> list[list]:
    """`flat` (rows sorted by their group in `groups`) as one list per group 0 .. count - 1."""
    ends = np.cumsum(np.bincount(groups, minlength=count)).tolist()
    return [flat[start:end] for start, end in zip([0, *ends][:count], ends, strict=True)]


def first_appearance_ranks(codes: np.ndarray, count: int) -> np.ndarray:
    """The rank of each of `count` codes by its first row in `codes` (-1: a row without one); codes never seen
    rank last."""
    seen = codes >= 0
    first = np.full(count, len(codes), dtype=np.int64)
    np.minimum.at(first, codes[seen], np.flatnonzero(seen))
    ranks = np.empty(count, dtype=np.int64)
    ranks[np.argsort(first, kind="stable")] = np.arange(count)
    return ranks


@dataclass(frozen=True)
class Grouped:
    """Rows (indices into coded columns) sorted by their group, 0 .. count - 1."""

    rows: np.ndarray
    groups: np.ndarray  # the group of each row
    count: int

    def distinct_codes(self, column: Coded | CodedText) -> tuple[np.ndarray, np.ndarray]:
        """The codes of `column` in each group, each once, in order of first appearance, and their groups."""
        codes = column.codes[self.rows]
        first = first_in_group(self.groups, codes)
        return codes[first], self.groups[first]

    def distinct(self, column: Coded | CodedText) -> list[list]:
        """The distinct values of `column` in each group, in order of first appearance."""
        codes, groups = self.distinct_codes(column)
        return cut(column.at(codes), groups, self.count)
