"""Local search context: the neighbourhood of the entities a question is about.

The linked entities (vector and keyword matches fused by reciprocal rank) bring, within the token budget
split as GraphRAG splits it: the reports of their communities (community_prop), the entities with their
relationships and claims (the rest), and the source text units (text_unit_prop). Relationships among the
linked entities come first; then relationships that leave the set, ranked by how many linked entities their
far end touches, then by combined degree. Text units rank by the match order of the entity they mention,
then by how many of the selected relationships they support.
"""

from __future__ import annotations

import re
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from graphrag_lite.config import LocalSearchConfig
from graphrag_lite.context_tables import ContextTable, pack
from graphrag_lite.graph.resolution import normalize_name
from graphrag_lite.query.index import IndexTables
from graphrag_lite.query.retrieval import RRF_K, fuse, take_turns
from graphrag_lite.tables import records


@dataclass
class SectionUse:
    """How many tokens a context section could take, took, and why."""

    name: str
    cap: int
    used: int
    rows: int
    candidates: int
    why: str


@dataclass
class LocalContext:
    tables: list[ContextTable]
    sections: list[SectionUse]
    entity_ids: list[str]
    source_order: list[str]  # every candidate text unit id, best first (the sources are its packed head)

    @property
    def sources(self) -> ContextTable:
        return self.tables[-1]

    @property
    def budgets(self) -> dict[str, int]:
        return {s.name: s.cap for s in self.sections}


Ranked = Sequence[str] | Mapping[str, float]
# Share of an earlier round's sources a multi-hop lead may take turns with. With Qwen2.5-Coder-1.5B naming
# the leads on MuSiQue (bench/musique_hops.py, 10 questions), all-gold went 0.80 -> 0.40 when a lead's walk
# replaced the ranking, 0.60 when it took turns with all of it, 0.70 with the last quarter.
LEAD_SHARE = 0.25


def name_matches(index: IndexTables, question: str) -> list[str]:
    """Entities whose whole name appears in the question, longest names first. When the question writes
    names with capitals, a match must hold a capitalized word: "during" in a question is not the entity
    DURING (a sentence-initial word taken for a name); a question typed all in lower case matches any."""
    text = f" {normalize_name(question)} "
    found = [(len(name), eid, name) for eid, name in index.normalized_titles if f" {name} " in text]
    capitalized = {normalize_name(w) for w in _CAPITALIZED.findall(question[1:])}
    if capitalized:
        found = [f for f in found if capitalized & set(f[2].split())]
    return [eid for _, eid, _ in sorted(found, key=lambda x: -x[0])]


_CAPITALIZED = re.compile("(?<![\\w'\u2019])[A-Z0-9][\\w'\u2019-]*")


def build_local_context(index: IndexTables, cfg: LocalSearchConfig, linked: Ranked, community_level: int,
                        retrieved_units: Ranked = (), entity_limit: int | None = None,
                        earlier_order: Sequence[str] = ()) -> LocalContext:
    """`linked`: the entities the question is about, best first (with their link scores, when known);
    `retrieved_units`: text unit ids found for the question directly (vector and keyword search), so the
    sources are never blind to the question's own words. Reports and the graph tables take at most their
    shares of the budget; the sources get the rest. `entity_limit`: linked entities kept (default
    `top_k_entities`; more after several retrieval rounds). `earlier_order`: the sources an earlier round
    sent; their head stays, and this round's ranking takes turns with their last LEAD_SHARE, so a new lead
    adds passages without pushing out the best ones already found."""
    budget = cfg.max_context_tokens
    entity_scores = _top(_scored(linked), index.title_of, entity_limit or cfg.top_k_entities)
    unit_scores = _scored(retrieved_units)
    walk = index.entity_unit_graph.walk(entity_scores, unit_scores, cfg.ppr_damping, cfg.ppr_unit_weight) \
        if cfg.source_ranking == "ppr" else None
    ids = list(entity_scores)
    report_rows = _report_rows(index, ids, community_level)
    reports = _pack_reports(report_rows, int(budget * cfg.community_prop))
    graph_cap = max(0, budget - int(budget * cfg.community_prop) - int(budget * cfg.text_unit_prop))
    graph = _graph_tables(index, ids, cfg.top_k_relationships, graph_cap)
    included = {row["id"] for row in graph[1].rows}
    supported = {uid: tuple(r for r in rel_ids if r in included) for uid, rel_ids in graph[3].items()}
    order = _source_order(index, walk.units if walk else None, ids, supported, list(unit_scores))
    if earlier_order:  # a lead may be wrong: it takes turns with the last quarter of the sources found so far
        kept = int(len(earlier_order) * (1 - LEAD_SHARE))
        order = list(dict.fromkeys([*earlier_order[:kept], *take_turns([list(earlier_order[kept:]), order])]))
    room, graph_tables = budget - reports.tokens, list(graph[:3])  # room: for the graph tables and the sources
    sources = _pack_sources(index, order, room - sum(t.tokens for t in graph_tables))
    skipped = 0
    if cfg.skip_rows_in_sources:  # a row copied from a passage the sources hold gives its tokens to passages
        graph_tables = _without_rows_in(graph_tables, set(order[:len(sources.rows)]))
        skipped = sum(len(t.rows) for t in graph[:3]) - sum(len(t.rows) for t in graph_tables)
        sources = _pack_sources(index, order, room - sum(t.tokens for t in graph_tables))
    tables = [reports, *graph_tables, sources]
    sections = _section_uses(cfg, tables, [len(report_rows), len(ids), *graph[4], len(order)], graph_cap, skipped)
    return LocalContext(tables, sections, ids, order)


def _scored(ranked: Ranked) -> dict[str, float]:
    """Scores as given, or reciprocal-rank scores for a plain ranking."""
    if isinstance(ranked, Mapping):
        return dict(ranked)
    return {row_id: 1.0 / (RRF_K + position + 1) for position, row_id in enumerate(ranked)}


def _top(scores: dict[str, float], known: Container[str], limit: int) -> dict[str, float]:
    return dict(list((k, v) for k, v in scores.items() if k in known)[:limit])


def _pack_reports(report_rows: list[dict[str, Any]], cap: int) -> ContextTable:
    reports = pack("Reports", ["id", "title", "content"], report_rows, cap)
    if report_rows and not reports.rows:  # full reports are too long for this share: their summaries may fit
        summaries = [{**row, "content": row["summary"]} for row in report_rows]
        reports = pack("Reports", ["id", "title", "content"], summaries, cap)
    return reports


def _graph_tables(index: IndexTables, linked: list[str], per_entity: int, cap: int
                  ) -> tuple[ContextTable, ContextTable, ContextTable, dict[str, tuple[int, ...]], list[int]]:
    """Entities, relationships and claims of the linked entities within `cap` tokens, the relationships
    each text unit supports, and the number of candidate rows of each table."""
    selected = index.entities_by_id.loc[linked]
    entities = pack("Entities", ["id", "entity", "description", "number of relationships"],
                    [{"id": r["human_readable_id"], "entity": r["title"], "description": r["description"],
                      "number of relationships": r["degree"], "text_unit_ids": r["text_unit_ids"]}
                     for r in records(selected)], cap)
    relationship_rows, relationship_units = _relationship_rows(index, linked, per_entity)
    relationships = pack("Relationships", ["id", "source", "target", "description", "weight", "links"],
                         relationship_rows, cap - entities.tokens)
    claim_rows = _claim_rows(index, set(selected["title"]))
    claims = pack("Claims", ["id", "entity", "type", "status", "description"], claim_rows,
                  cap - entities.tokens - relationships.tokens)
    return entities, relationships, claims, relationship_units, [len(relationship_rows), len(claim_rows)]


def _without_rows_in(tables: list[ContextTable], in_sources: set[str]) -> list[ContextTable]:
    """The tables without the rows whose every text unit is among the sources."""
    kept = [[row for row in t.rows if not set(row["text_unit_ids"]) <= in_sources] for t in tables]
    return [pack(t.name, t.columns, rows, t.tokens) if len(rows) < len(t.rows) else t
            for t, rows in zip(tables, kept, strict=True)]


def _section_uses(cfg: LocalSearchConfig, tables: list[ContextTable], candidates: list[int],
                  graph_cap: int, skipped: int) -> list[SectionUse]:
    reports, entities, relationships, claims, sources = tables
    budget = cfg.max_context_tokens
    left = budget - sources.tokens - reports.tokens - entities.tokens - relationships.tokens - claims.tokens
    graph_used = entities.tokens + relationships.tokens + claims.tokens
    ranking = "a graph walk from the linked entities (ppr)" if cfg.source_ranking == "ppr" else \
        "the linked entities' order fused with direct retrieval (fusion)"
    whys = [f"at most community_prop {cfg.community_prop:g} of {budget:,}",
            f"entities, relationships and claims share at most {graph_cap:,} (1 - community_prop - text_unit_prop)",
            "what the entities left of the graph share", "what the entities and relationships left of the graph share",
            f"the {budget - reports.tokens - graph_used:,} tokens the other sections left "
            f"(text_unit_prop {cfg.text_unit_prop:g} is its minimum), ranked by {ranking}; {left:,} unused"
            + (f"; {skipped} graph rows whose passages are all here left out (skip_rows_in_sources)"
               if skipped else "")]
    caps = [int(budget * cfg.community_prop), graph_cap, graph_cap - entities.tokens,
            graph_cap - entities.tokens - relationships.tokens, budget - reports.tokens - graph_used]
    return [SectionUse(t.name, cap, t.tokens, len(t.rows), n, why)
            for t, cap, n, why in zip(tables, caps, candidates, whys, strict=True)]


def _report_rows(index: IndexTables, linked: list[str], level: int) -> list[dict[str, Any]]:
    """Reports of the communities holding the linked entities (each entity's deepest community at or above
    `level`), the communities with the most linked entities first, then by rating."""
    deepest = index.deepest_communities(level)
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
    chosen = {index.title_of[e] for e in linked}
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
             "description": r["description"], "weight": r["weight"], "links": int(r["links"]),
             "text_unit_ids": r["text_unit_ids"]} for r in ordered_rows]
    units: dict[str, list[int]] = {}
    for r in ordered_rows:
        for uid in r["text_unit_ids"]:
            units.setdefault(uid, []).append(int(r["human_readable_id"]))
    return rows, {uid: tuple(ids) for uid, ids in units.items()}


def _claim_rows(index: IndexTables, titles: set[str]) -> list[dict[str, Any]]:
    claims = index.covariates[index.covariates["subject_id"].isin(titles)]
    return [{"id": int(c["human_readable_id"]), "entity": c["subject_id"], "type": c["type"], "status": c["status"],
             "description": c["description"], "text_unit_ids": [c["text_unit_id"]]} for c in records(claims)]


def _source_order(index: IndexTables, walked: dict[str, float] | None, linked: list[str],
                  supported: dict[str, tuple[int, ...]], retrieved: list[str]) -> list[str]:
    """Text units in the walk's order, or (fusion) by the match order of the entity they mention, then by
    the selected relationships they support, fused with the directly retrieved units."""
    if walked is not None:
        ranked = list(walked) + [u for u in retrieved if u not in walked]
    else:
        units_of = dict(zip(index.entities["id"], index.entities["text_unit_ids"], strict=True))
        order: dict[str, int] = {}
        for position, eid in enumerate(linked):
            for uid in units_of[eid]:
                order.setdefault(uid, position)
        by_entities = sorted(order, key=lambda u: (order[u], -len(supported.get(u, ()))))
        ranked = fuse([by_entities, retrieved], len(order) + len(retrieved)) if retrieved else by_entities
    return ranked


def _pack_sources(index: IndexTables, ranked: list[str], cap: int) -> ContextTable:
    """The ranked text units while they fit; rows are made as `pack` takes them (it stops at the first that
    does not fit, so the rest are never made)."""
    units = index.units_by_id
    return pack("Sources", ["id", "text"], ({"id": units[uid][0], "text": units[uid][1]} for uid in ranked), cap)
