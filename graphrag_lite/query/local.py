"""Local search context: the neighbourhood of the entities a question is about.

The linked entities (vector and keyword matches fused by reciprocal rank) bring, within the token budget
split as GraphRAG splits it: the reports of their communities (community_prop), the entities with their
relationships and claims (the rest), and the source text units (text_unit_prop). Relationships among the
linked entities come first; then relationships that leave the set, ranked by how many linked entities their
far end touches, then by combined degree. Text units rank by the match order of the entity they mention,
then by how many of the selected relationships they support.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from graphrag_lite.config import LocalSearchConfig
from graphrag_lite.graph.resolution import normalize_name
from graphrag_lite.query.context import ContextTable, pack
from graphrag_lite.query.index import IndexTables
from graphrag_lite.query.retrieval import fuse
from graphrag_lite.tables import records


@dataclass
class LocalContext:
    tables: list[ContextTable]
    budgets: dict[str, int]
    entity_ids: list[str]


def name_matches(index: IndexTables, question: str) -> list[str]:
    """Entities whose whole name appears in the question, longest names first."""
    text = f" {normalize_name(question)} "
    found = [(len(name), eid) for eid, name in index.normalized_titles if f" {name} " in text]
    return [eid for _, eid in sorted(found, key=lambda x: -x[0])]


def build_local_context(index: IndexTables, cfg: LocalSearchConfig, linked: list[str], community_level: int,
                        retrieved_units: list[str] | None = None) -> LocalContext:
    """`retrieved_units`: text unit ids found for the question directly (vector and keyword search); fused
    with the units of the linked entities, so the sources are never blind to the question's own words."""
    budget = cfg.max_context_tokens
    budgets = {"reports": int(budget * cfg.community_prop), "sources": int(budget * cfg.text_unit_prop)}
    budgets["graph"] = budget - budgets["reports"] - budgets["sources"]
    entities = index.entities.set_index("id", drop=False)
    linked = [e for e in linked if e in entities.index][: cfg.top_k_entities]
    selected = entities.loc[linked]

    report_rows = _report_rows(index, linked, community_level)
    reports = pack("Reports", ["id", "title", "content"], report_rows, budgets["reports"])
    if report_rows and not reports.rows:  # full reports are too long for this share: their summaries may fit
        summaries = [{**row, "content": row["summary"]} for row in report_rows]
        reports = pack("Reports", ["id", "title", "content"], summaries, budgets["reports"])
    entity_table = pack("Entities", ["id", "entity", "description", "number of relationships"],
                        [{"id": r["human_readable_id"], "entity": r["title"], "description": r["description"],
                          "number of relationships": r["degree"]} for r in records(selected)], budgets["graph"])
    relationship_rows, relationship_units = _relationship_rows(index, linked, cfg.top_k_relationships)
    relationships = pack("Relationships", ["id", "source", "target", "description", "weight", "links"],
                         relationship_rows, budgets["graph"] - entity_table.tokens)
    claims = pack("Claims", ["id", "entity", "type", "status", "description"],
                  _claim_rows(index, set(selected["title"])),
                  budgets["graph"] - entity_table.tokens - relationships.tokens)
    included = {row["id"] for row in relationships.rows}
    supported = {uid: tuple(r for r in ids if r in included) for uid, ids in relationship_units.items()}
    sources = pack("Sources", ["id", "text"], _source_rows(index, linked, supported, retrieved_units or []),
                   budgets["sources"])
    return LocalContext([reports, entity_table, relationships, claims, sources], budgets, linked)


def _report_rows(index: IndexTables, linked: list[str], level: int) -> list[dict[str, Any]]:
    """Reports of the communities holding the linked entities (each entity's deepest community at or above
    `level`), the communities with the most linked entities first, then by rating."""
    communities = index.communities[index.communities["level"] <= level]
    deepest: dict[str, tuple[int, int]] = {}
    for number, lvl, members in zip(communities["community"], communities["level"], communities["entity_ids"],
                                    strict=True):
        for eid in members:
            if eid not in deepest or lvl > deepest[eid][0]:
                deepest[eid] = (int(lvl), int(number))
    counts: dict[int, int] = {}
    for eid in linked:
        if eid in deepest:
            counts[deepest[eid][1]] = counts.get(deepest[eid][1], 0) + 1
    reports = index.reports[(index.reports["community"].isin(list(counts))) & (index.reports["status"] == "ok")]
    ranked = sorted(records(reports), key=lambda r: (-counts[int(r["community"])], -float(r["rank"])))
    return [{"id": int(r["community"]), "title": r["title"], "content": r["full_content"], "summary": r["summary"]}
            for r in ranked]


def _relationship_rows(index: IndexTables, linked: list[str], per_entity: int
                       ) -> tuple[list[dict[str, Any]], dict[str, tuple[int, ...]]]:
    titles = dict(zip(index.entities["id"], index.entities["title"], strict=True))
    chosen = {titles[e] for e in linked}
    rels = index.relationships
    touches = rels["source"].isin(chosen) | rels["target"].isin(chosen)
    candidates = rels[touches]
    inside = candidates[candidates["source"].isin(chosen) & candidates["target"].isin(chosen)]
    outside = candidates.drop(inside.index)
    far_end = [t if s in chosen else s for s, t in zip(outside["source"], outside["target"], strict=True)]
    links: dict[str, int] = {}
    for end in far_end:
        links[end] = links.get(end, 0) + 1
    outside = outside.assign(links=[links[e] for e in far_end])
    inside = inside.assign(links=2)
    ordered = pd.concat([inside.sort_values("combined_degree", ascending=False),
                         outside.sort_values(["links", "combined_degree"], ascending=False)])
    ordered_rows = records(ordered.head(per_entity * max(1, len(linked))))
    rows = [{"id": int(r["human_readable_id"]), "source": r["source"], "target": r["target"],
             "description": r["description"], "weight": r["weight"], "links": int(r["links"])} for r in ordered_rows]
    units: dict[str, list[int]] = {}
    for r in ordered_rows:
        for uid in r["text_unit_ids"]:
            units.setdefault(uid, []).append(int(r["human_readable_id"]))
    return rows, {uid: tuple(ids) for uid, ids in units.items()}


def _claim_rows(index: IndexTables, titles: set[str]) -> list[dict[str, Any]]:
    claims = index.covariates[index.covariates["subject_id"].isin(titles)]
    return [{"id": int(c["human_readable_id"]), "entity": c["subject_id"], "type": c["type"], "status": c["status"],
             "description": c["description"]} for c in records(claims)]


def _source_rows(index: IndexTables, linked: list[str], supported: dict[str, tuple[int, ...]],
                 retrieved: list[str]) -> list[dict[str, Any]]:
    units_of = dict(zip(index.entities["id"], index.entities["text_unit_ids"], strict=True))
    order: dict[str, int] = {}
    for position, eid in enumerate(linked):
        for uid in units_of[eid]:
            order.setdefault(uid, position)
    by_entities = sorted(order, key=lambda u: (order[u], -len(supported.get(u, ()))))
    ranked = fuse([by_entities, retrieved], len(order) + len(retrieved)) if retrieved else by_entities
    units = index.text_units.set_index("id", drop=False).loc[ranked]
    return [{"id": int(h), "text": t} for h, t in zip(units["human_readable_id"], units["text"], strict=True)]
