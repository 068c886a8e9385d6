"""Look-ups over a built index, shared by the HTTP API, the graph explorer and the MCP server: entities by
name, an entity's detail, a community's detail and an entity's neighbourhood, as JSON-ready dicts (plain
str, int, float, bool, None, list and dict: no numpy values, no NaN).

What a repeated look-up needs (positions by id and title, the relationships of each entity, each entity's
communities) is computed once per `IndexTables` and kept while it lives (`lookups_of`), so a look-up on an
index of 10,000 entities takes milliseconds.
"""

from __future__ import annotations

import heapq
import unicodedata
import weakref
from collections import defaultdict
from collections.abc import Sequence
from functools import cached_property
from typing import Any
from urllib.parse import quote

import pandas as pd

from graphrag_lite.errors import MissingIndex
from graphrag_lite.query.index import IndexTables
from graphrag_lite.tables import plain_json

SNIPPET_CHARS = 300  # a description in a list of matches: enough to tell two entities apart
MAX_HOPS = 3  # beyond three hops a neighbourhood is most of a connected graph, not a neighbourhood
RELATIONSHIP_COLUMNS = ("id", "human_readable_id", "source", "target", "description", "weight")
CLAIM_COLUMNS = ("id", "human_readable_id", "type", "status", "description", "subject_id", "object_id",
                 "start_date", "end_date", "source_text", "text_unit_id")


class NotFound(LookupError):
    """An entity or community the index does not have. `reason` says what was looked for, `suggestions`
    names close matches, `search` how to search (the HTTP route; other front ends give their own)."""

    def __init__(self, reason: str, suggestions: Sequence[str] = (), search: str | None = None) -> None:
        self.reason = reason
        self.suggestions = list(suggestions)
        super().__init__(self.message(search))

    def message(self, search: str | None) -> str:
        """The message with `search` as the way to search (None: no search hint)."""
        text = self.reason
        if self.suggestions:
            text += "; did you mean " + ", ".join(repr(s) for s in self.suggestions) + "?"
        if search:
            text += f"{' S' if self.suggestions else '; s'}earch by name with {search}"
        return text


# ------------------------------------------------------------------ public look-ups


def find_entities(index: IndexTables, q: str, limit: int = 20) -> list[dict[str, Any]]:
    """Entities whose title matches `q`, best first: the exact title (case-insensitive), then titles that
    start with it, then titles that contain it, then titles holding every word of it, then titles sharing
    a whole word with it; ties go to the higher degree. An empty `q` gives the highest-degree entities."""
    _check_positive("limit", limit)
    return _matching(lookups_of(index), q, limit)


def _matching(lookups: Lookups, q: str, limit: int) -> list[dict[str, Any]]:
    query = _fold(q)
    if not query:
        return [lookups.summary(p) for p in lookups.by_degree[:limit]]
    words = query.split()
    long_words = {w for w in words if len(w) > 2}  # "of", "a": too common to match a title on their own
    ranked = []
    for position, title in enumerate(lookups.folded):
        if query in title:
            tier, shared = (0 if title == query else 1 if title.startswith(query) else 2), 0
        elif len(words) > 1 and all(w in title for w in words):
            tier, shared = 3, 0
        else:
            tier, shared = 4, len(long_words & lookups.title_words[position])
            if not shared:
                continue
        ranked.append((tier, -shared, -lookups.degrees[position], title, position))
    return [lookups.summary(found[-1]) for found in heapq.nsmallest(limit, ranked)]


def entity_detail(index: IndexTables, key: str) -> dict[str, Any]:
    """The entity's fields, its deepest community, and its relationships (strongest first), the claims
    about it, the communities it is in (one per level) and the text units it was extracted from."""
    lookups = lookups_of(index)
    position = _position(lookups, key)
    entity = {str(k): plain_json(v) for k, v in index.entities.iloc[position].items()}
    entity_id = lookups.ids[position]
    return {**entity, "community": lookups.deepest(entity_id),
            "relationships": _relationships_of(lookups, entity_id),
            "claims": _claims_of(lookups, lookups.titles[position]),
            "communities": _communities_of(lookups, entity_id),
            "text_units": _text_units_of(lookups, entity.get("text_unit_ids") or [])}


def community_detail(index: IndexTables, community: int) -> dict[str, Any]:
    """A community: its place in the hierarchy, its report (None when it has none) and its members,
    highest degree first."""
    lookups = lookups_of(index)
    position = lookups.community_position.get(int(community))
    if position is None:
        numbers = sorted(lookups.community_position)
        known = f"communities are numbered {numbers[0]} to {numbers[-1]}" if numbers else "the index has none"
        raise NotFound(f"no community {community}; {known}")
    row = {str(k): plain_json(v) for k, v in index.communities.iloc[position].items()}
    report = lookups.reports.get(int(community))
    members = [lookups.entity_position[e] for e in row.get("entity_ids") or [] if e in lookups.entity_position]
    members.sort(key=lambda p: (-lookups.degrees[p], lookups.titles[p]))
    return {"id": row.get("id"), "community": row["community"], "level": row.get("level"),
            "parent": row.get("parent"), "children": row.get("children") or [],
            "title": (report or {}).get("title") or row.get("title"), "size": row.get("size", len(members)),
            "period": row.get("period"), "report": report,
            "members": [{"id": lookups.ids[p], "title": lookups.titles[p], "type": lookups.types[p],
                         "degree": lookups.degrees[p]} for p in members]}


def neighbourhood(index: IndexTables, key: str, hops: int = 1, limit: int = 150) -> dict[str, Any]:
    """The entities up to `hops` (1-3) relationships away from the entity, breadth first: the `limit`
    nearest are kept (at equal distance, the highest degree), with the relationships between kept ones."""
    if not 1 <= hops <= MAX_HOPS:
        raise ValueError(f"hops must be between 1 and {MAX_HOPS}, got {hops}")
    _check_positive("limit", limit)
    lookups = lookups_of(index)
    center = lookups.ids[_position(lookups, key)]
    kept: list[tuple[str, int]] = []  # (entity id, hop), nearest first
    for hop, layer in enumerate(_layers(lookups, center, hops, limit)):
        if len(layer) > limit - len(kept):  # the last layer that fits only in part: its best connected
            layer = heapq.nsmallest(limit - len(kept), layer, key=lookups.degree_rank.__getitem__)
        kept.extend((entity_id, hop) for entity_id in layer)
    edges = _edges_between(lookups, [entity_id for entity_id, _ in kept])
    nodes = []
    for entity_id, hop in kept:
        p = lookups.entity_position[entity_id]
        nodes.append({"id": entity_id, "title": lookups.titles[p], "type": lookups.types[p],
                      "degree": lookups.degrees[p], "community": lookups.deepest(entity_id), "hop": hop})
    columns = lookups.relationship_columns
    return {"center": center, "nodes": nodes,
            "edges": [{"id": columns["id"][r], "source": columns["source_id"][r], "target": columns["target_id"][r],
                       "description": columns["description"][r], "weight": columns["weight"][r]} for r in edges]}


def warm(index: IndexTables) -> None:
    """Load the tables and build every look-up now, so a server's first request is as quick as the rest
    (MissingIndex, with the command that builds it, when a table is missing)."""
    lookups = lookups_of(index)
    for name, part in vars(Lookups).items():
        if isinstance(part, cached_property):
            getattr(lookups, name)
    index.memberships  # noqa: B018 - each entity's communities
    index.units_by_id, index.unit_documents  # noqa: B018 - an entity's text units


# ------------------------------------------------------------------ precomputed look-ups


def lookups_of(index: IndexTables) -> Lookups:
    """The look-ups of `index`, built on first use and kept as long as the index lives."""
    found = _LOOKUPS.get(index)
    if found is None:
        found = _LOOKUPS[index] = Lookups(index)
    return found


class Lookups:
    """Indexes over one `IndexTables`, each built on first use (so a look-up needs only its own tables)."""

    def __init__(self, index: IndexTables) -> None:
        # the look-ups do not keep the tables alive (a weak proxy, and a weak key in _LOOKUPS): a reloaded
        # server's old index and its DataFrames are freed as soon as the last request lets go of them
        self.index = weakref.proxy(index)

    # entities ------------------------------------------------------
    @cached_property
    def _entity_columns(self) -> dict[str, list[Any]]:
        frame = self.index.entities
        columns = {name: _column(frame, name) for name in ("id", "human_readable_id", "title", "type",
                                                            "description", "degree")}
        columns["degree"] = [int(d or 0) for d in columns["degree"]]
        columns["title"] = [str(t or "") for t in columns["title"]]
        return columns

    @property
    def ids(self) -> list[str]:
        return self._entity_columns["id"]

    @property
    def titles(self) -> list[str]:
        return self._entity_columns["title"]

    @property
    def types(self) -> list[str | None]:
        return self._entity_columns["type"]

    @property
    def degrees(self) -> list[int]:
        return self._entity_columns["degree"]

    @cached_property
    def folded(self) -> list[str]:
        return [_fold(t) for t in self.titles]

    @cached_property
    def title_words(self) -> list[frozenset[str]]:
        return [frozenset(t.split()) for t in self.folded]

    @cached_property
    def entity_position(self) -> dict[str, int]:
        return {entity_id: p for p, entity_id in enumerate(self.ids)}

    @cached_property
    def short_id_position(self) -> dict[str, int]:
        return {str(h): p for p, h in enumerate(self._entity_columns["human_readable_id"]) if h is not None}

    @cached_property
    def title_position(self) -> dict[str, int]:
        """Folded title to position; of two entities with one title (two types), the higher degree wins (it
        comes last in the reversed `by_degree`, so it is written last)."""
        return {self.folded[p]: p for p in reversed(self.by_degree)}

    @cached_property
    def by_degree(self) -> list[int]:
        return sorted(range(len(self.ids)), key=lambda p: (-self.degrees[p], self.titles[p]))

    @cached_property
    def degree_rank(self) -> dict[str, int]:
        """Entity id to its place in `by_degree`: one number to sort entities by degree, then title."""
        return {self.ids[p]: rank for rank, p in enumerate(self.by_degree)}

    def summary(self, p: int) -> dict[str, Any]:
        description = self._entity_columns["description"][p]
        if isinstance(description, str) and len(description) > SNIPPET_CHARS:
            description = description[:SNIPPET_CHARS - 1].rstrip() + "…"
        return {"id": self.ids[p], "human_readable_id": self._entity_columns["human_readable_id"][p],
                "title": self.titles[p], "type": self.types[p], "description": description,
                "degree": self.degrees[p], "community": self.deepest(self.ids[p])}

    # relationships -------------------------------------------------
    @cached_property
    def relationship_columns(self) -> dict[str, list[Any]]:
        frame = self.index.relationships
        columns = {name: _column(frame, name) for name in RELATIONSHIP_COLUMNS}
        # relationships name their ends by title; the graph explorer needs entity ids (of two entities with
        # one title, the higher degree, as for a look-up by title)
        by_title = {self.titles[p]: self.ids[p] for p in reversed(self.by_degree)}
        columns["source_id"] = [by_title.get(str(s)) for s in columns["source"]]
        columns["target_id"] = [by_title.get(str(t)) for t in columns["target"]]
        return columns

    @cached_property
    def relationship_rows(self) -> list[dict[str, Any]]:
        """Each relationship as the dict an entity's detail lists (built once: a hub has thousands)."""
        columns = self.relationship_columns
        return [dict(zip(RELATIONSHIP_COLUMNS, values, strict=True))
                for values in zip(*(columns[n] for n in RELATIONSHIP_COLUMNS), strict=True)]

    @cached_property
    def neighbours(self) -> dict[str, dict[str, list[int]]]:
        """Entity id to each entity it is related to, with the positions of the relationships between them
        (by neighbour, so the edges among a set of entities are found without walking a hub's every edge)."""
        found: defaultdict[str, defaultdict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
        for r, (source, target) in enumerate(zip(self.relationship_columns["source_id"],
                                                     self.relationship_columns["target_id"], strict=True)):
            if source is None or target is None:
                continue  # an end that is not an entity: nothing to walk to
            found[source][target].append(r)
            if target != source:  # a self-loop is listed once
                found[target][source].append(r)
        return {entity_id: dict(others) for entity_id, others in found.items()}

    # communities ---------------------------------------------------
    @cached_property
    def community_position(self) -> dict[int, int]:
        return {int(c): p for p, c in enumerate(self.index.communities["community"].tolist())}

    def deepest(self, entity_id: str) -> int | None:
        pairs = self.index.memberships.get(entity_id)
        return pairs[-1][1] if pairs else None

    @cached_property
    def reports(self) -> dict[int, dict[str, Any]]:
        """Community number -> its report's fields."""
        try:
            frame = self.index.reports
        except MissingIndex:  # reports not built yet: every community is shown without one
            return {}
        columns = [c for c in ("title", "summary", "rank", "findings", "full_content") if c in frame.columns]
        rows = frame[["community", *columns]].to_dict("records")
        return {int(row["community"]): {c: plain_json(row[c]) for c in columns} for row in rows}

    # claims and text units -----------------------------------------
    @cached_property
    def claims_by_subject(self) -> dict[str, list[dict[str, Any]]]:
        frame = self.index.covariates
        columns = [c for c in CLAIM_COLUMNS if c in frame.columns]
        found: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in frame[columns].to_dict("records"):
            claim = {c: plain_json(row[c]) for c in columns}
            if isinstance(claim.get("human_readable_id"), float):  # an empty table reads its ids as floats
                claim["human_readable_id"] = int(claim["human_readable_id"])
            found[str(claim.get("subject_id"))].append(claim)
        return found


# ------------------------------------------------------------------ helpers


_LOOKUPS: weakref.WeakKeyDictionary[IndexTables, Lookups] = weakref.WeakKeyDictionary()

def _position(lookups: Lookups, key: str) -> int:
    text = str(key).strip()
    for table in (lookups.entity_position, lookups.short_id_position):
        if text in table:
            return table[text]
    position = lookups.title_position.get(_fold(text))
    if position is not None:
        return position
    close = [found["title"] for found in _matching(lookups, text, 5)] if text else []
    raise NotFound(f"no entity {text!r} (looked up as an entity id, a human_readable_id and an exact title)",
                   close, f"GET /entities?q={quote(text)}")


def _relationships_of(lookups: Lookups, entity_id: str) -> list[dict[str, Any]]:
    rows, weights, rank = lookups.relationship_rows, lookups.relationship_columns["weight"], lookups.degree_rank
    found = [(-(weights[r] or 0.0), rank[other], r, other)
             for other, positions in lookups.neighbours.get(entity_id, {}).items() for r in positions]
    found.sort()  # strongest first; at equal weight, the better connected other end
    return [{**rows[r], "other_id": other} for *_, r, other in found]


def _claims_of(lookups: Lookups, title: str) -> list[dict[str, Any]]:
    return sorted(lookups.claims_by_subject.get(title, []), key=lambda c: c.get("human_readable_id") or 0)


def _communities_of(lookups: Lookups, entity_id: str) -> list[dict[str, Any]]:
    found = []
    for level, community in lookups.index.memberships.get(entity_id, []):
        report = lookups.reports.get(community)
        row = lookups.index.communities.iloc[lookups.community_position[community]]
        found.append({"community": community, "level": level,
                      "title": (report or {}).get("title") or plain_json(row.get("title")),
                      "has_report": report is not None})
    return found


def _text_units_of(lookups: Lookups, unit_ids: Sequence[str]) -> list[dict[str, Any]]:
    if not unit_ids:  # no table read: an index may have entities and no text units yet
        return []
    units, documents = lookups.index.units_by_id, lookups.index.unit_documents
    return [{"id": u, "human_readable_id": units[u][0], "document_title": documents[u][1],
             "text": units[u][1]} for u in unit_ids if u in units]


def _layers(lookups: Lookups, center: str, hops: int, limit: int) -> list[list[str]]:
    """The entities at each distance from `center` (itself first), up to `hops`; stops early once `limit`
    entities are found, since farther ones would not be kept."""
    seen = {center}
    layers = [[center]]
    while len(layers) <= hops and len(seen) < limit:
        layer = []
        for entity_id in layers[-1]:
            for other in lookups.neighbours.get(entity_id, {}):
                if other not in seen:
                    seen.add(other)
                    layer.append(other)
        if not layer:
            break
        layers.append(layer)
    return layers


def _edges_between(lookups: Lookups, entity_ids: list[str]) -> list[int]:
    """Positions of the relationships with both ends among `entity_ids`, in table order. Each entity's
    neighbours or the kept entities are scanned, whichever is fewer, so a hub costs no more than a leaf."""
    kept = set(entity_ids)
    found: set[int] = set()
    for entity_id in entity_ids:
        others = lookups.neighbours.get(entity_id, {})
        linked = [o for o in others if o in kept] if len(others) <= len(kept) else [o for o in kept if o in others]
        for other in linked:
            found.update(others[other])
    return sorted(found)


def _check_positive(name: str, value: int) -> None:
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")


def _fold(text: str) -> str:
    """Text compared without case, compatibility forms or runs of spaces."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _column(frame: pd.DataFrame, name: str) -> list[Any]:
    """A column as JSON-ready values (all None when the table lacks it)."""
    if name not in frame.columns:
        return [None] * len(frame)
    return [plain_json(v) for v in frame[name].tolist()]
