"""The context a community report is written from, packed to a token budget.

A community's own detail is its entities (by degree), all relationships with both ends inside it (by
combined degree; never edges to other communities) and its claims, as `|`-delimited tables. Every row is
rendered and its tokens counted once for the whole index (a sub-community report's only when a context needs
it), so packing any context is a sum, linear in its rows. When a community's detail does not fit, the
reports of its sub-communities (written first: such a community waits for them) replace those
sub-communities' detail, largest first, until it fits; GraphRAG means to do this but builds every context
before any report exists. What still does not fit is cut by rank.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field

import pandas as pd

from graphrag_lite.context_tables import header, row_line
from graphrag_lite.tokens import count_tokens

COLUMNS = {"Reports": ["id", "title", "content"], "Entities": ["id", "entity", "description", "degree"],
           "Relationships": ["id", "source", "target", "description", "combined_degree"],
           "Claims": ["id", "entity", "type", "status", "description"]}
HEADERS = {name: header(name, columns) for name, columns in COLUMNS.items()}


@dataclass(frozen=True)
class Row:
    text: str

    @functools.cached_property
    def tokens(self) -> int:
        """Counted once: a graph row's when the builder renders it, a sub-community report's only when its
        parent's own detail does not fit, which most never are."""
        return count_tokens(self.text)


@dataclass
class ChildReport:
    community: int
    size: int
    entity_ids: frozenset[str]
    row: Row


@dataclass
class Context:
    text: str
    tokens: int
    substituted: list[int] = field(default_factory=list)  # sub-communities whose report replaced their detail
    truncated: bool = False  # rows were cut to fit


class ContextBuilder:
    def __init__(self, entities: pd.DataFrame, relationships: pd.DataFrame, claims: pd.DataFrame,
                 max_tokens: int) -> None:
        self.max_tokens = max_tokens
        # a section costs its header and the blank line after it
        self.header_tokens = {name: count_tokens(text + "\n") for name, text in HEADERS.items()}
        self.entities = {eid: self._row(row_line([hid, title, desc, deg]))
                         for eid, hid, title, desc, deg in zip(entities["id"], entities["human_readable_id"],
                                                               entities["title"], entities["description"],
                                                               entities["degree"], strict=True)}
        self.entity_degree = dict(zip(entities["id"], entities["degree"], strict=True))
        title_to_id = dict(zip(entities["title"], entities["id"], strict=True))
        self.relationships = {rid: self._row(row_line([hid, s, t, desc, cd]))
                              for rid, hid, s, t, desc, cd in zip(
                                  relationships["id"], relationships["human_readable_id"], relationships["source"],
                                  relationships["target"], relationships["description"],
                                  relationships["combined_degree"], strict=True)}
        self.relationship_rank = dict(zip(relationships["id"], relationships["combined_degree"], strict=True))
        self.relationship_ends = {rid: (title_to_id[s], title_to_id[t]) for rid, s, t in zip(
            relationships["id"], relationships["source"], relationships["target"], strict=True)}
        # what a report is written from: rows with the numbers it cites (kept across updates), without the
        # degrees, which change when other parts of the graph do
        self.facts = {eid: f"{hid}|{title}|{desc}" for eid, hid, title, desc in zip(
            entities["id"], entities["human_readable_id"], entities["title"], entities["description"], strict=True)}
        self.facts.update((rid, f"{hid}|{s}|{t}|{desc}") for rid, hid, s, t, desc in zip(
            relationships["id"], relationships["human_readable_id"], relationships["source"], relationships["target"],
            relationships["description"], strict=True))
        self.claims: dict[str, list[Row]] = {}
        for hid, subject, kind, status, desc in zip(claims["human_readable_id"], claims["subject_id"], claims["type"],
                                                    claims["status"], claims["description"], strict=True):
            if subject in title_to_id:
                self.claims.setdefault(title_to_id[subject], []).append(
                    self._row(row_line([hid, subject, kind, status, desc])))

    @staticmethod
    def _row(line: str) -> Row:
        row = Row(line)
        _ = row.tokens  # counted now, so that packing a context only sums
        return row

    def report_row(self, community: int, title: str, content: str) -> Row:
        """A sub-community report as a row, its tokens counted when a context first needs them."""
        return Row(row_line([community, title, content]))

    def digest(self, entity_ids: list[str], relationship_ids: list[str], context: Context,
               children: list[ChildReport], salt: str = "") -> str:
        """What a report is written from: its community's entities, relationships and claims with the numbers
        its citations use, and the sub-community reports its context used. Degrees are left out: a community
        whose neighbours changed is still described by its report."""
        used = {c.community: c.row.text for c in children}
        facts = sorted(self.facts[e] for e in entity_ids) + sorted(self.facts[r] for r in relationship_ids)
        claims = sorted(row.text for e in entity_ids for row in self.claims.get(e, []))
        payload = "\x1e".join([*facts, "", *claims, "", *(used[c] for c in context.substituted),
                               str(self.max_tokens), salt])
        return hashlib.blake2b(payload.encode("utf-8"), digest_size=16).hexdigest()

    # ---------------------------------------------------------------- packing

    def fits(self, entity_ids: list[str], relationship_ids: list[str]) -> bool:
        """Whether a community's own detail fits, so that no sub-community report has to stand in for it."""
        return self._size(self._sections([], entity_ids, relationship_ids)) <= self.max_tokens

    def build(self, entity_ids: list[str], relationship_ids: list[str],
              children: list[ChildReport] | None = None) -> Context:
        """The context of a community: its own detail if it fits; otherwise child reports replace the
        detail of the largest children, one more at a time, until it fits; otherwise cut by rank."""
        own = self._sections([], entity_ids, relationship_ids)
        if self._size(own) <= self.max_tokens or not children:
            return self._render(own, [], cut=self._size(own) > self.max_tokens)
        ranked = sorted(children, key=lambda c: (-c.size, c.community))
        for count in range(1, len(ranked) + 1):
            replaced = ranked[:count]
            covered = frozenset().union(*(c.entity_ids for c in replaced))
            rest_entities = [e for e in entity_ids if e not in covered]
            rest_relationships = [r for r in relationship_ids
                                  if not any(set(self.relationship_ends[r]) <= c.entity_ids for c in replaced)]
            sections = self._sections(replaced, rest_entities, rest_relationships, covered)
            if self._size(sections) <= self.max_tokens or count == len(ranked):
                return self._render(sections, [c.community for c in replaced],
                                    cut=self._size(sections) > self.max_tokens)
        raise AssertionError("unreachable")

    def _sections(self, reports: list[ChildReport], entity_ids: list[str], relationship_ids: list[str],
                  covered: frozenset[str] = frozenset()) -> list[tuple[str, Row]]:
        """(section, row) in priority order: child reports by size; then for each relationship by rank its
        ends and itself (so a cut keeps connected detail); then the other entities by degree; then claims.
        Entities `covered` by a child report are not repeated, even as ends of edges that leave the child."""
        rows: list[tuple[str, Row]] = [("Reports", c.row) for c in reports]
        added: set[str] = set(covered)
        for rid in sorted(relationship_ids, key=lambda r: -self.relationship_rank[r]):
            for end in self.relationship_ends[rid]:
                if end not in added and end in self.entities:
                    added.add(end)
                    rows.append(("Entities", self.entities[end]))
            rows.append(("Relationships", self.relationships[rid]))
        for eid in sorted(entity_ids, key=lambda e: -self.entity_degree[e]):
            if eid not in added:
                added.add(eid)
                rows.append(("Entities", self.entities[eid]))
        rows += [("Claims", row) for eid in entity_ids for row in self.claims.get(eid, [])]
        return rows

    def _size(self, rows: list[tuple[str, Row]]) -> int:
        return sum(self.header_tokens[name] for name in {name for name, _ in rows}) + sum(r.tokens for _, r in rows)

    def _render(self, rows: list[tuple[str, Row]], substituted: list[int], cut: bool) -> Context:
        if cut:
            rows = self._cut(rows)
        text = "".join(HEADERS[name] + "".join(r.text for section, r in rows if section == name) + "\n"
                       for name in HEADERS if any(section == name for section, _ in rows))
        return Context(text=text, tokens=self._size(rows), substituted=substituted, truncated=cut)

    def _cut(self, rows: list[tuple[str, Row]]) -> list[tuple[str, Row]]:
        """The longest prefix of the priority order that fits (a section's header counts once)."""
        kept: list[tuple[str, Row]] = []
        used, opened = 0, set()
        for name, row in rows:
            cost = row.tokens + (0 if name in opened else self.header_tokens[name])
            if used + cost > self.max_tokens:
                break
            kept.append((name, row))
            opened.add(name)
            used += cost
        return kept
