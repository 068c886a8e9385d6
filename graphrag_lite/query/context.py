"""Context tables for answer prompts: `|`-delimited rows under `-----Name-----`, packed to a token budget,
with the short ids the answer cites."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from graphrag_lite.tokens import count_tokens

ENCODING = "o200k_base"


@dataclass
class ContextTable:
    name: str  # Reports, Entities, Relationships, Claims, Sources
    columns: list[str]
    rows: list[dict[str, Any]] = field(default_factory=list)
    tokens: int = 0

    def render(self) -> str:
        if not self.rows:
            return ""
        lines = [f"-----{self.name}-----", "|".join(self.columns)]
        lines += ["|".join(_cell(row[c]) for c in self.columns) for row in self.rows]
        return "\n".join(lines) + "\n"


def _cell(value: object) -> str:
    return " ".join(str(value).replace("|", "/").split())


def pack(name: str, columns: list[str], candidates: Iterable[dict[str, Any]], budget: int) -> ContextTable:
    """Rows in the given (ranked) order while they fit in `budget` tokens (the header counted once)."""
    table = ContextTable(name, columns)
    used = count_tokens(f"-----{name}-----\n" + "|".join(columns) + "\n", ENCODING)
    if used >= budget:
        return table
    for row in candidates:
        cost = count_tokens("|".join(_cell(row[c]) for c in columns) + "\n", ENCODING)
        if used + cost > budget:
            break
        table.rows.append(row)
        used += cost
    table.tokens = used if table.rows else 0
    return table


def render(tables: list[ContextTable]) -> str:
    return "\n".join(t.render() for t in tables if t.rows)
