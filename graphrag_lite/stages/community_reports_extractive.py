"""Stage community_reports_extractive (fast method): community reports with no model.

The title names the community's most central entities (by degree inside the community); the summary and
findings are the sentences of its text units that mention the most of its entities, each finding citing
the entities it mentions; the rating grows with the community's size and internal connections. Same
columns and markdown rendering as the LLM reports, so global search reads either.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from typing import Any

import pandas as pd

from graphrag_lite.names import normalize_name
from graphrag_lite.nlp.extractor import sentences
from graphrag_lite.pipeline.contract import Stage, StageContext, StageResult
from graphrag_lite.tables import REPORT_COLUMNS, CommunityRow, Finding, Report, report_row, typed_records

MAX_FINDINGS = 5


def run(ctx: StageContext) -> StageResult:
    communities, text_units = ctx.read("communities"), ctx.read("text_units")
    with ctx.bar(len(text_units) + len(communities), "text units read, then reports") as advance:
        reports = extractive_reports(communities, ctx.read("entities"), ctx.read("relationships"), text_units,
                                     advance)
    return StageResult(tables={"community_reports": reports},
                       summary=f"{len(reports)} extractive reports (no model)")


def extractive_reports(communities: pd.DataFrame, entities: pd.DataFrame, relationships: pd.DataFrame,
                       text_units: pd.DataFrame, advance: Callable[[], None] = lambda: None) -> pd.DataFrame:
    """`advance` is called once per text unit read and once per report (a progress bar)."""
    mentions = sentence_mentions(entities, text_units, advance)
    titles = dict(zip(entities["id"], entities["title"], strict=True))
    readable = dict(zip(entities["id"], entities["human_readable_id"], strict=True))
    ends = {rid: (s, t) for rid, s, t in zip(relationships["id"], relationships["source"], relationships["target"],
                                              strict=True)}
    title_to_id = {t: e for e, t in titles.items()}
    rows = []
    for record in typed_records(communities, CommunityRow):
        members = set(record["entity_ids"])
        inside = Counter(title_to_id[end] for rid in record["relationship_ids"] for end in ends[rid])
        central = sorted(members, key=lambda e: (-inside[e], titles[e]))
        ranked = sorted(((len(found & members), -i, text, found) for i, (text, found) in enumerate(mentions)
                         if found & members), key=lambda x: (-x[0], -x[1]))
        best = [(text, found & members) for _, _, text, found in ranked[: MAX_FINDINGS + 1]]
        names = [titles[e].title() for e in central[:3]]
        summary = best[0][0] if best else f"A community of {len(members)} entities: {', '.join(names)}."
        findings = [Finding(summary=", ".join(titles[e].title() for e in sorted(found, key=lambda e: titles[e])),
                            explanation=f"{text} [Data: Entities ({_ids(found, readable)})]")
                    for text, found in best[1:]] or [Finding(summary=names[0], explanation=summary)]
        size, edges = len(members), len(record["relationship_ids"])
        rating = min(10.0, round(1 + 1.5 * math.log2(1 + size) + math.log2(1 + edges) / 2, 1))
        report = Report(title=" and ".join(names[:2]) + (" community" if len(names) > 2 else ""),
                        summary=summary, rating=rating,
                        rating_explanation=f"{size} entities with {edges} relationships among them",
                        findings=findings)
        rows.append(report_row(record, report, "ok", digest=""))
        advance()
    return pd.DataFrame(rows, columns=REPORT_COLUMNS).sort_values("community").reset_index(drop=True)


def sentence_mentions(entities: pd.DataFrame, text_units: pd.DataFrame,
                      advance: Callable[[], None] = lambda: None) -> list[tuple[str, set[str]]]:
    """Every sentence of every text unit with the entities it names (only entities listed for that unit
    are checked, so this stays linear in the corpus)."""
    by_unit: dict[str, list[tuple[str, str]]] = {}
    for eid, title, units in zip(entities["id"], entities["title"], entities["text_unit_ids"], strict=True):
        for uid in units:
            by_unit.setdefault(uid, []).append((eid, f" {normalize_name(title)} "))
    found: list[tuple[str, set[str]]] = []
    for uid, text in zip(text_units["id"], text_units["text"], strict=True):
        candidates = by_unit.get(uid, [])
        for sentence in sentences(text):
            key = f" {normalize_name(sentence)} "
            named = {eid for eid, name in candidates if name in key}
            if named:
                found.append((" ".join(sentence.split())[:500], named))
        advance()
    return found


def _ids(found: set[str], readable: dict[str, Any]) -> str:
    ids = sorted(int(readable[e]) for e in found)
    return ", ".join(map(str, ids[:5])) + (", +more" if len(ids) > 5 else "")


STAGE = Stage(
    name="community_reports_extractive",
    description="community reports from the sentences that mention the community's entities (no model)",
    reads=("communities", "entities", "relationships", "text_units"),
    writes=("community_reports",),
    config_sections=(),
    run=run,
)
