"""The per-record merge as it was before merge_graph worked on integer codes (2026-11-29): a Python list entry per
record and a dict of lists per pair. Kept as the specification the coded merge must match table for table
(tests/test_merge_records.py); not used by the package."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

import pandas as pd

from graphrag_lite.alias_overrides import NORMALIZED, AliasOverrides
from graphrag_lite.graph.resolution import Candidate, Resolution, find_aliases, majority
from graphrag_lite.names import honorific_gender, normalize_name

ENTITY_COLUMNS = ["title", "type", "other_types", "descriptions", "text_unit_ids", "frequency"]
RELATIONSHIP_COLUMNS = ["source", "target", "descriptions", "weight", "text_unit_ids"]
ALIAS_COLUMNS = ["alias", "title", "reason", "score"]
AMBIGUOUS_COLUMNS = ["title", "could_be", "why"]


@dataclass
class MergeResult:
    entities: pd.DataFrame
    relationships: pd.DataFrame
    aliases: pd.DataFrame
    ambiguous_aliases: pd.DataFrame  # names left apart for a reader or the model: the names they could be, why
    problems: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    overrides_not_applied: list[str] = field(default_factory=list)


def merge_graph(raw_entities: pd.DataFrame, raw_relationships: pd.DataFrame, resolve: bool = True,
                max_edits: int = 1, generic_words: dict[str, frozenset[str]] | None = None,
                overrides: AliasOverrides | None = None) -> MergeResult:
    # records by text unit id (a hash of the text), in their order within a unit: the merged graph (a pair's
    # direction, the order of descriptions) then does not depend on the order of the input files, so an
    # update gives what a rebuild of the same documents gives
    raw_entities, raw_relationships = (raw.sort_values("text_unit_id", kind="stable").reset_index(drop=True)
                                       for raw in (raw_entities, raw_relationships))
    key_of = overrides.key if overrides else normalize_name
    keys = [key_of(n) for n in raw_entities["name"]]
    groups: dict[str, list[int]] = defaultdict(list)
    for row, key in enumerate(keys):
        if key:
            groups[key].append(row)
    names = raw_entities["name"].tolist()
    types = raw_entities["type"].tolist()
    units = raw_entities["text_unit_id"].tolist()

    rel_keys = [(key_of(s), key_of(t)) for s, t in zip(raw_relationships["source"],
                                                                      raw_relationships["target"], strict=True)]
    neighbours: dict[str, set[str]] = defaultdict(set)
    for s, t in rel_keys:
        if s in groups and t in groups and s != t:
            neighbours[s].add(t)
            neighbours[t].add(s)
    key_units = {k: {units[r] for r in rows} for k, rows in groups.items()}

    canonical = {k: k for k in groups}
    resolution = Resolution([], {})
    if resolve:
        descriptions = raw_entities["description"].tolist()
        candidates = [Candidate(k, majority([types[r] for r in rows])[0], len(key_units[k]),
                                _gender([names[r] for r in rows]), _described([descriptions[r] for r in rows]))
                      for k, rows in groups.items()]
        resolution = find_aliases(candidates, neighbours, key_units, max_edits, generic_words=generic_words,
                                  overrides=overrides)
        canonical.update({d.alias: d.canonical for d in resolution.decisions})

    members: dict[str, list[int]] = defaultdict(list)
    for key, rows in groups.items():
        members[canonical[key]].extend(rows)
    # a group is titled by its canonical name's own spelling ("TAYLOR CRUZ", not its more frequent alias "TAYLOR")
    titles = {c: _title([names[r] for r in groups[c]]) for c in members}
    entities = _entity_rows(members, groups, titles, raw_entities)
    aliases = _alias_rows(groups, canonical, titles, names, resolution.decisions)
    relationships, problems, counts = _relationship_rows(raw_relationships, rel_keys, canonical, titles)
    counts.update({"raw_entity_records": len(raw_entities), "names_after_normalization": len(groups),
                   "records_without_a_usable_name": sum(1 for key in keys if not key),
                   "entities": len(entities), "merged_as_aliases": len(resolution.decisions),
                   "ambiguous_names_left_apart": len(resolution.ambiguous),
                   "overrides_not_applied": len(resolution.overrides_not_applied)})
    ambiguous = _ambiguous_rows(resolution.ambiguous, titles, canonical)
    return MergeResult(entities, relationships, aliases, ambiguous, problems, counts,
                       resolution.overrides_not_applied)


def _described(descriptions: list[object]) -> str:
    return " ".join(str(d) for d in dict.fromkeys(descriptions) if isinstance(d, str))[:4000].lower()


def _gender(raw_names: list[str]) -> str:
    said = {honorific_gender(n) for n in raw_names} - {""}
    return said.pop() if len(said) == 1 else ""


def _title(raw_names: list[str]) -> str:
    """The most common spelling, upper-cased (GraphRAG's titles are upper case)."""
    spellings = Counter(" ".join(n.split()).upper() for n in raw_names)
    return max(spellings, key=lambda s: (spellings[s], -len(s), s))


def _entity_rows(members: dict[str, list[int]], own: dict[str, list[int]], titles: dict[str, str],
                 raw: pd.DataFrame) -> pd.DataFrame:
    """One row per node. Its type is its canonical name's own (rules merge only names of one type; a user's or
    the model's merge across types keeps the type of the name merged into); the other types are listed."""
    types, descriptions, units = raw["type"].tolist(), raw["description"].tolist(), raw["text_unit_id"].tolist()
    rows = []
    for key, indices in members.items():
        kind = majority([types[i] for i in own[key]])[0]
        others = [t for t in dict.fromkeys(types[i] for i in indices) if t and t != kind]
        texts = list(dict.fromkeys(d for d in (descriptions[i] for i in indices) if d))
        unit_ids = list(dict.fromkeys(units[i] for i in indices))
        rows.append((titles[key], kind, others, texts, unit_ids, len(unit_ids)))
    table = pd.DataFrame(rows, columns=ENTITY_COLUMNS)
    return table.sort_values("title", kind="stable").reset_index(drop=True)


def _alias_rows(groups: dict[str, list[int]], canonical: dict[str, str], titles: dict[str, str], names: list[str],
                decisions: list) -> pd.DataFrame:
    reasons = {d.alias: (d.reason, d.score) for d in decisions}
    rows = []
    for key, indices in groups.items():
        target = canonical[key]
        for spelling in sorted({" ".join(names[i].split()).upper() for i in indices}):
            if spelling == titles[target]:
                continue
            reason, score = reasons.get(key, (NORMALIZED, 1.0))
            rows.append((spelling, titles[target], reason, score))
    return pd.DataFrame(sorted(rows), columns=ALIAS_COLUMNS)


def _ambiguous_rows(ambiguous: dict[str, tuple[list[str], str]], titles: dict[str, str],
                    canonical: dict[str, str]) -> pd.DataFrame:
    rows = [(titles[canonical[key]], sorted({titles[canonical[k]] for k in could_be}), why)
            for key, (could_be, why) in ambiguous.items()]
    return pd.DataFrame(sorted(rows), columns=AMBIGUOUS_COLUMNS)


def _relationship_rows(raw: pd.DataFrame, keys: list[tuple[str, str]], canonical: dict[str, str],
                       titles: dict[str, str]) -> tuple[pd.DataFrame, list[str], dict[str, int]]:
    merged: dict[tuple[str, str], dict[str, list]] = {}
    unknown, self_loops = [], 0
    descriptions, strengths = raw["description"].tolist(), raw["strength"].tolist()
    units = raw["text_unit_id"].tolist()
    for i, (s, t) in enumerate(keys):
        if s not in canonical or t not in canonical:
            missing = raw["source"].iloc[i] if s not in canonical else raw["target"].iloc[i]
            unknown.append(f"relationship {raw['source'].iloc[i]} -> {raw['target'].iloc[i]}: "
                           f"'{missing}' is not an extracted entity")
            continue
        a, b = titles[canonical[s]], titles[canonical[t]]
        if a == b:
            self_loops += 1
            continue
        pair = (a, b) if (b, a) not in merged else (b, a)  # undirected: reversed edges are the same edge
        entry = merged.setdefault(pair, {"descriptions": [], "weights": [], "units": []})
        entry["descriptions"].append(descriptions[i])
        entry["weights"].append(float(strengths[i]))
        entry["units"].append(units[i])
    rows = [(a, b, list(dict.fromkeys(d for d in e["descriptions"] if d)), sum(e["weights"]),
             list(dict.fromkeys(e["units"]))) for (a, b), e in merged.items()]
    table = pd.DataFrame(rows, columns=RELATIONSHIP_COLUMNS).sort_values(["source", "target"], kind="stable")
    counts = {"raw_relationship_records": len(raw), "relationships": len(table),
              "relationships_to_unknown_entities": len(unknown), "self_loops_after_merging": self_loops}
    return table.reset_index(drop=True), unknown, counts
