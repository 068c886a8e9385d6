"""Stage community_reports_extractive (fast method): community reports with no model.

The title names the community's most central entities (by degree inside the community); the summary and
findings are the sentences of its text units that mention the most of its entities, each finding citing
the entities it mentions; the rating grows with the community's size and internal connections. Same
columns and markdown rendering as the LLM reports, so global search reads either.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Callable
from itertools import pairwise
from typing import Any

import numpy as np
import pandas as pd

from graphrag_lite.names import normalize_name
from graphrag_lite.nlp.extractor import sentences
from graphrag_lite.pipeline.contract import Stage, StageContext, StageResult
from graphrag_lite.tables import REPORT_COLUMNS, CommunityRow, Finding, Report, report_row, typed_records

MAX_FINDINGS = 5


def run(ctx: StageContext) -> StageResult:
    # only the columns read here are kept (a table's lists of ids are most of its memory), the largest table first
    text_units = ctx.read("text_units")[["id", "text"]]
    entities = ctx.read("entities")[["id", "title", "human_readable_id", "text_unit_ids"]]
    relationships = ctx.read("relationships")[["id", "source", "target"]]
    communities = ctx.read("communities")
    with ctx.bar(len(text_units) + len(communities), "text units read, then reports") as advance:
        reports = extractive_reports(communities, entities, relationships, text_units, advance)
    return StageResult(tables={"community_reports": reports},
                       summary=f"{len(reports)} extractive reports (no model)")


def extractive_reports(communities: pd.DataFrame, entities: pd.DataFrame, relationships: pd.DataFrame,
                       text_units: pd.DataFrame, advance: Callable[[], None] = lambda: None) -> pd.DataFrame:
    """`advance` is called once per text unit read and once per report (a progress bar)."""
    mentions = SentenceMentions(entities, text_units, advance)
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
        best = mentions.best(members, MAX_FINDINGS + 1)
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


class SentenceMentions:
    """Every sentence of every text unit that names an entity (only entities listed for that unit are checked, so
    this stays linear in the corpus), held as integers: each one's text unit and place in it, and the entities it
    names. A community's best sentences are then found from its entities' sentences, not by reading every
    sentence for every community; only those chosen become text again."""

    def __init__(self, entities: pd.DataFrame, text_units: pd.DataFrame,
                 advance: Callable[[], None] = lambda: None) -> None:
        self.ids = entities["id"].tolist()
        self.number = {eid: i for i, eid in enumerate(self.ids)}
        self.texts = text_units["text"]
        names = [f" {normalize_name(title)} " for title in entities["title"]]
        listed, bounds = _listed(entities["text_unit_ids"], text_units["id"])
        places, named, counts = array("q"), array("q"), array("q")  # (unit, sentence) and entities of each
        for (row, text), (start, end) in zip(enumerate(self.texts), pairwise(bounds), strict=True):
            candidates = listed[start:end].tolist()
            for index, sentence in enumerate(sentences(text) if candidates else ()):
                key = f" {normalize_name(sentence)} "
                found = {entity for entity in candidates if names[entity] in key}
                if found:
                    places.extend((row, index))
                    named.extend(sorted(found))
                    counts.append(len(found))
            advance()
        self.places = np.frombuffer(places, dtype=np.int64).reshape(-1, 2)
        named_by = np.repeat(np.arange(len(counts)), np.frombuffer(counts, dtype=np.int64))  # each pair's sentence
        self.entities_of = np.frombuffer(named, dtype=np.int64)  # each pair's entity, pairs by sentence
        order = np.argsort(self.entities_of, kind="stable")  # each entity's sentences, in the order they are read
        self.sentences_of = named_by[order]
        self.entity_start = np.searchsorted(self.entities_of[order], np.arange(len(self.ids) + 1))
        self.mention_start = np.concatenate(([0], np.cumsum(np.frombuffer(counts, dtype=np.int64))))

    def best(self, members: set[str], count: int) -> list[tuple[str, set[str]]]:
        """The `count` sentences naming the most of `members` (the first read on ties), each with the members
        it names."""
        codes = [self.number[e] for e in members if e in self.number]
        if not codes:
            return []
        found = np.concatenate([self.sentences_of[self.entity_start[c]:self.entity_start[c + 1]] for c in codes])
        mentions, overlaps = np.unique(found, return_counts=True)
        chosen = mentions[np.lexsort((mentions, -overlaps))[:count]].tolist()
        return [(self._text(m), {self.ids[e] for e in self._named(m)} & members) for m in chosen]

    def _named(self, mention: int) -> list[int]:
        return self.entities_of[self.mention_start[mention]:self.mention_start[mention + 1]].tolist()

    def _text(self, mention: int) -> str:
        row, index = self.places[mention].tolist()
        return " ".join(sentences(self.texts.iloc[row])[index].split())[:500]


def _listed(entity_units: pd.Series, unit_ids: pd.Series) -> tuple[np.ndarray, list[int]]:
    """The entities (their rows) that list each text unit, by unit: those of unit row r are between the r-th and
    the next bound."""
    row_of_unit = {uid: row for row, uid in enumerate(unit_ids)}
    units, entities = array("q"), array("q")
    for entity, listed in enumerate(entity_units):
        for uid in listed:
            if (row := row_of_unit.get(uid)) is not None:
                units.append(row)
                entities.append(entity)
    unit = np.frombuffer(units, dtype=np.int64)
    order = np.argsort(unit, kind="stable")
    bounds = np.searchsorted(unit[order], np.arange(len(unit_ids) + 1)).tolist()
    return np.frombuffer(entities, dtype=np.int64)[order], bounds


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
