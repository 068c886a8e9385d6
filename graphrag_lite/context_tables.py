"""Context tables, the one format of every prompt's data (report contexts, query contexts): `|`-delimited
rows under `-----Name-----` and a header row, packed to a token budget, with the short ids the answer cites;
and the parser that reads such a table back (the fake provider's)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from graphrag_lite.tokens import count_tokens


@dataclass
class ContextTable:
    name: str  # Reports, Entities, Relationships, Claims, Sources
    columns: list[str]
    rows: list[dict[str, Any]] = field(default_factory=list)
    tokens: int = 0

    def column_rows(self) -> list[dict[str, Any]]:
        """The rows as the context shows them: its columns only (a row may carry more, e.g. its text units)."""
        return [{c: row[c] for c in self.columns} for row in self.rows]

    def render(self) -> str:
        if not self.rows:
            return ""
        return header(self.name, self.columns) + "".join(row_line([row[c] for c in self.columns]) for row in self.rows)


def header(name: str, columns: Iterable[str]) -> str:
    """A table's first two lines: `-----Name-----` and the column names."""
    return f"-----{name}-----\n" + "|".join(columns) + "\n"


def row_line(values: Iterable[object]) -> str:
    return "|".join(cell(v) for v in values) + "\n"


def cell(value: object) -> str:
    """A value on one line, with no `|` to split it."""
    return " ".join(str(value).replace("|", "/").split())


def pack(name: str, columns: list[str], candidates: Iterable[dict[str, Any]], budget: int,
         after: ContextTable | None = None) -> ContextTable:
    """Rows in the given (ranked) order while they fit in `budget` tokens (the header counted once);
    `after`: a table packed before from the same ranking, whose rows come first, not counted again."""
    table = ContextTable(name, columns, list(after.rows) if after else [])
    used = after.tokens if after and after.rows else count_tokens(header(name, columns))
    if used >= budget:
        table.tokens = used if table.rows else 0
        return table
    for row in candidates:
        cost = row_tokens(columns, row)
        if used + cost > budget:
            break
        table.rows.append(row)
        used += cost
    table.tokens = used if table.rows else 0
    return table


def row_tokens(columns: list[str], row: dict[str, Any]) -> int:
    return count_tokens(row_line([row[c] for c in columns]))


def render(tables: list[ContextTable]) -> str:
    return "\n".join(t.render() for t in tables if t.rows)


def parse_rows(text: str, name: str) -> list[list[str]]:
    """The rows of the `-----Name-----` table in `text` (header row skipped), split on `|`, or on `,` for a
    table written with commas (a prompt tuned from an older GraphRAG context)."""
    block = re.search(rf"-----{name}-----\n(.*?)(?:\n-----|\Z)", text, re.DOTALL)
    if not block:
        return []
    lines = [line for line in block.group(1).strip().splitlines() if line.strip()]
    splitter = "|" if lines and "|" in lines[0] else ","
    return [[c.strip() for c in line.split(splitter)] for line in lines[1:]]
