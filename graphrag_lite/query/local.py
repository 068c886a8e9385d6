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
from collections import Counter
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from graphrag_lite.config import LocalSearchConfig
from graphrag_lite.context_tables import ContextTable, pack, row_tokens
from graphrag_lite.names import normalize_name
from graphrag_lite.query.index import IndexTables
from graphrag_lite.query.retrieval import RRF_K, fuse_scores, take_turns
from graphrag_lite.tables import CommunityReportRow, CovariateRow, EntityRow, records, typed_records


@dataclass
class SectionUse:
    """How many tokens a context section could take, took, and why."""

    name: str
    cap: int
    used: int
    rows: int
    candidates: int
    why: str
    left_out: int = 0  # rows whose description was left out because their passages are all among the sources


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
    included = {row["id"] for row in graph.tables[1].rows}
    supported = {uid: tuple(r for r in rel_ids if r in included) for uid, rel_ids in graph.relationship_units.items()}
    order = _source_order(index, walk.units if walk else None, ids, supported, list(unit_scores))
    if earlier_order:
        order = with_lead(earlier_order, order)
    sources = pack_sources(index, order, budget - reports.tokens - graph.tokens)
    if cfg.skip_repeated_descriptions:  # a description copied from passages the sources hold adds nothing: its
        graph = graph.without_repeats(set(order[:len(sources.rows)]))  # tokens go to more sources
        if any(graph.left_out):
            sources = pack_sources(index, order, budget - reports.tokens - graph.tokens, after=sources)
    tables = [reports, *graph.tables, sources]
    sections = _section_uses(cfg, tables, [len(report_rows), *graph.candidates, len(order)], graph.caps,
                             [0, *graph.left_out, 0])
    return LocalContext(tables, sections, ids, order)


def with_lead(earlier_order: Sequence[str], order: list[str]) -> list[str]:
    """A later round's sources: a lead may be wrong, so the head of what earlier rounds sent stays, and the
    lead's new passages take turns with their last LEAD_SHARE (a turn spent on a passage already sent would
    leave the lead none)."""
    kept, found = int(len(earlier_order) * (1 - LEAD_SHARE)), set(earlier_order)
    fresh = [unit for unit in order if unit not in found]
    return list(dict.fromkeys([*earlier_order[:kept], *take_turns([list(earlier_order[kept:]), fresh])]))


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


LEFT_OUT = "description_left_out"  # a graph row's description, left out of the context as repeated


def _all_among(unit_ids: Sequence[str] | None, in_sources: set[str]) -> bool:
    """Whether a row's text units are all among the sources (a row with none is not: nothing repeats it)."""
    return unit_ids is not None and len(unit_ids) > 0 and all(u in in_sources for u in unit_ids)


@dataclass
class GraphTables:
    tables: list[ContextTable]  # entities, relationships, claims
    caps: list[int]  # the tokens each table was offered
    relationship_units: dict[str, tuple[int, ...]]  # text unit id -> the candidate relationships it supports
    candidates: list[int]  # candidate rows of each table
    left_out: list[int] = field(default_factory=lambda: [0, 0, 0])  # descriptions left out (without_repeats)

    @property
    def tokens(self) -> int:
        return sum(t.tokens for t in self.tables)

    def without_repeats(self, in_sources: set[str]) -> GraphTables:
        """The tables with no description in the rows whose every text unit is among the sources (the row
        stays: its names and figures still say what the question is about)."""
        tables, left_out = [], []
        for table in self.tables:
            rows, saved, blanked = [], 0, 0
            for row in table.rows:
                if _all_among(row["text_unit_ids"], in_sources):  # kept aside: a hop's shorter context needs it
                    blank = {**row, "description": "", LEFT_OUT: row["description"]}
                    saved += row_tokens(table.columns, row) - row_tokens(table.columns, blank)
                    row, blanked = blank, blanked + 1
                rows.append(row)
            tables.append(ContextTable(table.name, table.columns, rows, table.tokens - saved))
            left_out.append(blanked)
        return GraphTables(tables, self.caps, self.relationship_units, self.candidates, left_out)


GRAPH_COLUMNS = (["id", "entity", "description", "number of relationships"],
                 ["id", "source", "target", "description", "weight", "links"],
                 ["id", "entity", "type", "status", "description"])


def _graph_tables(index: IndexTables, linked: list[str], per_entity: int, cap: int) -> GraphTables:
    """Entities, relationships and claims of the linked entities, in that order within `cap` tokens."""
    selected = index.entities_by_id.loc[linked]
    relationship_rows, relationship_units = _relationship_rows(index, linked, per_entity)
    candidates = [[{"id": r["human_readable_id"], "entity": r["title"], "description": r["description"],
                    "number of relationships": r["degree"], "text_unit_ids": r["text_unit_ids"]}
                   for r in typed_records(selected, EntityRow)],
                  relationship_rows, _claim_rows(index, set(selected["title"]))]
    tables: list[ContextTable] = []
    caps: list[int] = []
    for name, columns, rows in zip(("Entities", "Relationships", "Claims"), GRAPH_COLUMNS, candidates, strict=True):
        caps.append(cap - sum(t.tokens for t in tables))
        tables.append(pack(name, columns, rows, caps[-1]))
    return GraphTables(tables, caps, relationship_units, [len(c) for c in candidates])


def _section_uses(cfg: LocalSearchConfig, tables: list[ContextTable], candidates: list[int],
                  graph_caps: list[int], left_out: list[int]) -> list[SectionUse]:
    """`graph_caps`: the tokens the entities, relationships and claims were offered when they were packed."""
    reports, entities, relationships, claims, sources = tables
    budget = cfg.max_context_tokens
    left = budget - sources.tokens - reports.tokens - entities.tokens - relationships.tokens - claims.tokens
    graph_used = entities.tokens + relationships.tokens + claims.tokens
    ranking = "a graph walk from the linked entities (ppr)" if cfg.source_ranking == "ppr" else \
        "the linked entities' order fused with direct retrieval (fusion)"
    whys = [f"at most community_prop {cfg.community_prop:g} of {budget:,}",
            f"entities, relationships and claims share at most {graph_caps[0]:,} (1 - community_prop - "
            "text_unit_prop)",
            "what the entities left of the graph share", "what the entities and relationships left of the graph share",
            f"the {budget - reports.tokens - graph_used:,} tokens the other sections left "
            f"(text_unit_prop {cfg.text_unit_prop:g} is its minimum), ranked by {ranking}; {left:,} unused"]
    whys = [why + (f"; {n} {'description' if n == 1 else 'descriptions'} left out: their passages are all among "
                   "the sources (skip_repeated_descriptions)" if n else "")
            for why, n in zip(whys, left_out, strict=True)]
    caps = [int(budget * cfg.community_prop), *graph_caps, budget - reports.tokens - graph_used]
    return [SectionUse(t.name, cap, t.tokens, len(t.rows), n, why, out)
            for t, cap, n, why, out in zip(tables, caps, candidates, whys, left_out, strict=True)]


def _report_rows(index: IndexTables, linked: list[str], level: int) -> list[dict[str, Any]]:
    """Reports of the communities holding the linked entities (each entity's deepest community at or above
    `level`), the communities with the most linked entities first, then by rating."""
    deepest = index.deepest_communities(level)
    counts = Counter(deepest[eid][1] for eid in linked if eid in deepest)
    reports = index.reports[(index.reports["community"].isin(list(counts))) & (index.reports["status"] == "ok")]
    ranked = sorted(typed_records(reports, CommunityReportRow),
                    key=lambda r: (-counts[int(r["community"])], -float(r["rank"])))
    return [{"id": int(r["community"]), "title": r["title"], "content": r["full_content"], "summary": r["summary"]}
            for r in ranked]


def _relationship_rows(index: IndexTables, linked: list[str], per_entity: int
                       ) -> tuple[list[dict[str, Any]], dict[str, tuple[int, ...]]]:
    chosen = {index.title_of[e] for e in linked}
    rels = index.relationships
    candidates = rels[rels["source"].isin(chosen) | rels["target"].isin(chosen)]
    inside = candidates[candidates["source"].isin(chosen) & candidates["target"].isin(chosen)]
    outside = candidates.drop(inside.index)
    far_end = [t if s in chosen else s for s, t in zip(outside["source"], outside["target"], strict=True)]
    links = Counter(far_end)
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
             "description": c["description"], "text_unit_ids": [c["text_unit_id"]]}
            for c in typed_records(claims, CovariateRow)]


def _source_order(index: IndexTables, walked: dict[str, float] | None, linked: list[str],
                  supported: dict[str, tuple[int, ...]], retrieved: list[str]) -> list[str]:
    """Text units in the walk's order, or (fusion) by the match order of the entity they mention, then by
    the selected relationships they support, fused with the directly retrieved units."""
    if walked is not None:
        return list(walked) + [u for u in retrieved if u not in walked]
    units_of = dict(zip(index.entities["id"], index.entities["text_unit_ids"], strict=True))
    order: dict[str, int] = {}
    for position, eid in enumerate(linked):
        for uid in units_of[eid]:
            order.setdefault(uid, position)
    by_entities = sorted(order, key=lambda u: (order[u], -len(supported.get(u, ()))))
    return list(fuse_scores([by_entities, retrieved], len(order) + len(retrieved))) if retrieved else by_entities


def pack_sources(index: IndexTables, ranked: list[str], cap: int, after: ContextTable | None = None) -> ContextTable:
    """The ranked text units while they fit (`after`: the head already packed); rows are made as `pack` takes
    them (it stops at the first that does not fit, so the rest are never made)."""
    units = index.units_by_id
    rest = ranked[len(after.rows):] if after else ranked
    return pack("Sources", ["id", "text"], ({"id": units[uid][0], "text": units[uid][1]} for uid in rest), cap, after)
