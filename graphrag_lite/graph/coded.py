"""Records as integer codes: a column's distinct values held once as Python objects and each row as a code into
them, and what a merge asks of groups of rows (the distinct values of each group in order of first appearance, a
flat list cut into one list per group) done in numpy. A million records then cost integer arrays and their
distinct texts, not a Python object per record and field."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


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

    def distinct_codes(self, column: Coded) -> tuple[np.ndarray, np.ndarray]:
        """The codes of `column` in each group, each once, in order of first appearance, and their groups."""
        codes = column.codes[self.rows]
        first = first_in_group(self.groups, codes)
        return codes[first], self.groups[first]

    def distinct(self, column: Coded, given_only: bool = False) -> list[list]:
        """The distinct values of `column` in each group, in order of first appearance; `given_only`: only those
        that are given (true: not empty)."""
        codes, groups = self.distinct_codes(column)
        if given_only:
            given = np.fromiter((bool(v) for v in column.values), dtype=bool, count=len(column.values))[codes]
            codes, groups = codes[given], groups[given]
        return cut(column.at(codes), groups, self.count)
