"""Global search: map-reduce over community reports.

Reports come from the chosen level, plus the communities above it that have no children down to it (the
roll-up GraphRAG does, so every entity of the clustered graph is covered once). Reports rated below
`min_community_rank` are left out; reports that failed are named, not silently skipped. Each report belongs
to a theme, the top-level (level-0) community it descends from. Reports are packed into batches of the token
budget theme by theme, and each batch gets one map call returning scored points; the reduce call sees the
best point of every theme first, then the best of the rest, as many as fit. `Coverage` counts what each
step kept.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd
from pydantic import BaseModel, Field, field_validator

from graphrag_lite.answer_parsing import ParseError, json_parser, number_from_text, strip_reasoning
from graphrag_lite.context_tables import ContextTable, pack
from graphrag_lite.query.citations import cited_ids
from graphrag_lite.query.index import IndexTables
from graphrag_lite.query.retrieval import take_turns
from graphrag_lite.tables import CommunityReportRow, typed_records
from graphrag_lite.tokens import count_tokens


class Point(BaseModel):
    description: str
    score: float = Field(ge=0, le=100)

    @field_validator("score", mode="before")
    @classmethod
    def number(cls, value: object) -> object:
        return float(str(value).strip().rstrip("%")) if isinstance(value, str) else value


class MapAnswer(BaseModel):
    points: list[Point]


@dataclass
class ReportSelection:
    reports: pd.DataFrame
    missing: list[str]  # communities at these levels whose report failed
    below_rank: int  # usable reports left out by min_community_rank
    candidates: pd.DataFrame  # the communities the reports were chosen from, one per clustered entity
    rated_out: int = 0  # reports dynamic selection rated below global_search.dynamic_threshold


def communities_at(communities: pd.DataFrame, level: int) -> pd.DataFrame:
    """The communities of `level` and the childless ones above it: together they hold every clustered entity
    exactly once, so a theme too small to be split down to the level is still read."""
    leaves_above = (communities["level"] < level) & (communities["children"].map(len) == 0)
    chosen = communities[(communities["level"] == level) | leaves_above]
    if chosen.empty:  # the graph is shallower than the level asked for: use its deepest level
        chosen = communities[communities["level"] == communities["level"].max()]
    return chosen


def community_themes(communities: pd.DataFrame) -> dict[int, int]:
    """Each community's theme: the top-level (level-0) community it descends from."""
    themes: dict[int, int] = {}
    ordered = communities.sort_values("level")  # parents before their children
    for community, parent in zip(ordered["community"].astype(int), ordered["parent"].astype(int), strict=True):
        themes[community] = themes.get(parent, parent) if parent >= 0 else community
    return themes


def select_reports(index: IndexTables, level: int, min_rank: float) -> ReportSelection:
    chosen = communities_at(index.communities, level)
    reports = index.reports[index.reports["community"].isin(chosen["community"])]
    failed = reports[reports["status"] != "ok"]
    usable = reports[reports["status"] == "ok"]
    kept = usable[usable["rank"] >= min_rank].sort_values(["rank", "community"], ascending=[False, True])
    return ReportSelection(kept, missing_reports(failed), len(usable) - len(kept), chosen)


def missing_reports(failed: pd.DataFrame) -> list[str]:
    """One line per report that failed at indexing time, so a query says what it could not read."""
    return [f"community {int(c)} has no report ({s}); `graphrag-lite index` retries it"
            for c, s in zip(failed["community"], failed["status"], strict=True)]


class Rating(BaseModel):
    rating: int = Field(ge=0, le=5)
    reason: str = ""

    @field_validator("rating", mode="before")
    @classmethod
    def number(cls, value: object) -> object:
        found = number_from_text(value, scale=5)
        return round(found) if isinstance(found, float) else found


_PROSE_RATING = re.compile(r"\b(?:rating|relevance|score)\b\W{0,5}([0-5])(?:\.0)?\s*(?:/\s*5)?\b", re.IGNORECASE)


def parse_rating(text: str) -> Rating:
    """A 0-5 relevance rating: the JSON asked for, or a rating stated plainly in prose ("Relevance: 4/5")."""
    try:
        return json_parser(Rating)(text)
    except ParseError:
        found = _PROSE_RATING.search(strip_reasoning(text))
        if found is None:
            raise
        return Rating(rating=int(found.group(1)), reason=" ".join(text.split())[:300])


async def dynamic_selection(index: IndexTables, rate: Callable[[str], Awaitable[int | None]], threshold: int,
                            max_level: int, min_rank: float) -> tuple[ReportSelection, int]:
    """Reports chosen by relevance from the top down: a relevant report is replaced by its relevant
    children (down to `max_level`), and kept itself when none of its children is relevant. `rate` returns a
    0-5 rating, or None when rating failed (then the report is kept: unrated is not irrelevant)."""
    reports = index.reports[(index.reports["status"] == "ok") & (index.reports["rank"] >= min_rank)]
    content = dict(zip(reports["community"].astype(int), reports["full_content"], strict=True))
    children = {int(c): [int(k) for k in kids if int(k) in content]
                for c, kids in zip(index.communities["community"], index.communities["children"], strict=True)}
    rated = 0

    async def visit(community: int, level: int) -> list[int]:
        nonlocal rated
        rating = await rate(content[community])
        rated += 1
        if rating is not None and rating < threshold:
            return []
        kids = children.get(community, [])
        if not kids or level >= max_level:
            return [community]
        chosen = [c for found in await asyncio.gather(*(visit(k, level + 1) for k in kids)) for c in found]
        return chosen or [community]

    roots = index.communities[index.communities["level"] == 0]["community"].astype(int)
    selected = [c for found in await asyncio.gather(*(visit(r, 0) for r in roots if r in content)) for c in found]
    chosen = reports[reports["community"].isin(selected)].sort_values(["rank", "community"], ascending=[False, True])
    below_rank = int(((index.reports["status"] == "ok") & (index.reports["rank"] < min_rank)).sum())
    missing = missing_reports(index.reports[index.reports["status"] != "ok"])
    return ReportSelection(chosen, missing, below_rank, communities_at(index.communities, max_level),
                           rated - len(chosen)), rated


REPORT_COLUMNS = ["id", "title", "content", "rank"]


def map_batches(reports: pd.DataFrame, budget: int, themes: dict[int, int]) -> list[ContextTable]:
    """Reports in batches of `budget` tokens, packed theme by theme: a map call answers with a limited number
    of points, and the fewer themes it reads, the larger each one's share. Within a batch the themes take
    turns, so every theme's best report is near the top, where a model reads most carefully."""
    rows = [{"id": int(r["community"]), "title": r["title"], "content": r["full_content"], "rank": r["rank"]}
            for r in typed_records(by_theme(reports, themes), CommunityReportRow)]
    batches: list[ContextTable] = []
    while rows:
        batch = pack("Reports", REPORT_COLUMNS, rows, budget)
        if not batch.rows:  # one report larger than the budget goes alone, cut by the model's own limit
            batch = ContextTable("Reports", REPORT_COLUMNS, rows[:1])
        rows = rows[len(batch.rows):]
        by_theme_rows: dict[int, list[dict[str, Any]]] = {}
        for row in batch.rows:
            by_theme_rows.setdefault(themes[row["id"]], []).append(row)
        batch.rows = take_turns(list(by_theme_rows.values()))
        batches.append(batch)
    return batches


def by_theme(reports: pd.DataFrame, themes: dict[int, int]) -> pd.DataFrame:
    """Reports grouped by theme, the themes in order of their best report's rating, highest rated first
    within a theme."""
    theme = reports["community"].astype(int).map(themes)
    best = reports["rank"].groupby(theme).transform("max")
    return reports.assign(theme=theme, best=best).sort_values(
        ["best", "theme", "rank", "community"], ascending=[False, True, False, True])


def cited_themes(point: Point, report_themes: dict[int, int]) -> set[int]:
    """The themes of the reports a point cites; ids of reports the map calls did not read are ignored."""
    return {report_themes[i] for i in cited_ids(point.description).get("Reports", []) if i in report_themes}


@dataclass
class ReduceContext:
    text: str
    points: list[Point]  # the points sent, highest score first


def reduce_context(points: list[Point], budget: int, report_themes: dict[int, int]) -> ReduceContext:
    """The points scored above zero that fit in `budget`: first the best point of each theme, so a theme whose
    points all score lower than another theme's still reaches the answer, then the others by score. A point
    citing no report that was read competes on score alone. Each is labelled with its rank among all points."""
    scored = sorted((p for p in points if p.score > 0), key=lambda p: -p.score)
    blocks = [f"----Analyst {i}----\nImportance Score: {p.score:g}\n{p.description}\n\n"
              for i, p in enumerate(scored, start=1)]
    costs = [count_tokens(block) for block in blocks]
    chosen: set[int] = set()
    used = 0

    def take(i: int) -> bool:
        nonlocal used
        if i in chosen or used + costs[i] > budget:
            return False
        chosen.add(i)
        used += costs[i]
        return True

    represented: set[int] = set()
    for i, point in enumerate(scored):
        themes = cited_themes(point, report_themes)
        if themes - represented and take(i):
            represented |= themes
    for i in range(len(scored)):
        take(i)
    return ReduceContext("".join(blocks[i] for i in sorted(chosen)), [scored[i] for i in sorted(chosen)])


@dataclass
class Coverage:
    """How much of the corpus one global search read, and how much of it reached the reduce call."""

    level: int  # the level searched (with dynamic selection: the deepest it may descend to)
    communities: int  # communities at that level, with the childless ones above it
    mapped_communities: int  # communities whose report went to a map call
    entities: int  # entities in the index
    clustered_entities: int  # entities in one of those communities (cluster_graph.use_lcc leaves out the rest)
    mapped_entities: int  # entities in a community whose report went to a map call
    map_calls: int
    points: int  # map points produced
    scored_points: int  # points scored above zero
    kept_points: int  # points sent to the reduce call
    themes: int  # top-level (level-0) communities
    mapped_themes: int  # themes with a report in a map call
    scored_themes: int  # themes cited by a point scored above zero
    kept_themes: int  # themes cited by a point sent to the reduce call

    def describe(self) -> str:
        calls = f"{self.map_calls} map call" + ("s" if self.map_calls != 1 else "")
        return (f"coverage: read {self.mapped_communities} of the {self.communities} community reports at level "
                f"{self.level} (or the last level of a shallower branch) in {calls}; they cover "
                f"{self.mapped_entities} of {self.entities} entities "
                f"({self.clustered_entities} are in a community at all)\n"
                f"points: {self.points} produced, {self.scored_points} scored above 0, {self.kept_points} kept for "
                f"the reduce; top-level themes: {self.kept_themes} of {self.themes} kept ({self.mapped_themes} read, "
                f"{self.scored_themes} with a scored point)")


def measure_coverage(index: IndexTables, selection: ReportSelection, level: int, batches: list[ContextTable],
                     points: list[Point], kept: list[Point], report_themes: dict[int, int]) -> Coverage:
    """`report_themes`: the theme of every report the map calls read."""
    members = dict(zip(index.communities["community"].astype(int), index.communities["entity_ids"], strict=True))
    scored = [p for p in points if p.score > 0]

    def entities_in(communities: Iterable[int]) -> int:
        return len({entity for community in communities for entity in members[community]})

    def themes_cited(cited: list[Point]) -> int:
        return len({theme for point in cited for theme in cited_themes(point, report_themes)})

    return Coverage(
        level=level, communities=len(selection.candidates), mapped_communities=len(report_themes),
        entities=len(index.entities), clustered_entities=entities_in(selection.candidates["community"].astype(int)),
        mapped_entities=entities_in(report_themes), map_calls=len(batches), points=len(points),
        scored_points=len(scored), kept_points=len(kept), themes=int((index.communities["level"] == 0).sum()),
        mapped_themes=len(set(report_themes.values())), scored_themes=themes_cited(scored),
        kept_themes=themes_cited(kept))


def no_answer(question: str, selection: ReportSelection, level: int) -> str:
    if selection.reports.empty:
        reasons = [f"{selection.below_rank} rated below global_search.min_community_rank"] if selection.below_rank \
            else []
        reasons += [f"{len(selection.missing)} missing (failed at indexing)"] if selection.missing else []
        reasons += [f"dynamic community selection rated {selection.rated_out} reports below "
                    "global_search.dynamic_threshold"] if selection.rated_out else []
        why = "; ".join(reasons) or "the graph has no communities"
        return (f"The index has no community reports to search at level {level} ({why}), so global search has "
                "nothing to answer from. Try basic search.")
    titles = "; ".join(f"{int(r['community'])}: {r['title']}"
                       for r in typed_records(selection.reports.head(10), CommunityReportRow))
    more = f" and {len(selection.reports) - 10} more" if len(selection.reports) > 10 else ""
    return (f"No community report at level {level} held information relevant to this question, so there is no "
            f"answer to give. Considered {len(selection.reports)} reports ({titles}{more}). Try local search for "
            "questions about specific entities, or another --community-level.")
