"""Merge extracted records into one entity per real-world thing and one relationship per pair.

The mechanism: group records by normalized name, apply the alias decisions of resolution.py, re-point
relationships to the surviving entities, and merge duplicate and reversed edges (weights summed). Nothing
is dropped without a count: an entity seen with two types keeps every description and text unit (the
majority type wins, the others are listed), and a relationship whose end is not an extracted entity, or
that becomes a self-loop by merging, is counted and reported.

Records are read as integer codes (coded.py): each distinct name, type and text unit is one Python object, and a
record a row of codes, so a million records cost arrays and their distinct texts; names are normalized once each,
not once a record. Descriptions stay in the Arrow buffers they were read into: only those the merged tables keep
become Python strings. With `description_characters` (the fast method, whose descriptions are the sentences that
mention a name) an entity or relationship keeps only the first descriptions its joining reads (joining.py); how
many were left out is counted.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from graphrag_lite.alias_overrides import NORMALIZED, AliasOverrides
from graphrag_lite.graph.coded import Coded, CodedText, Grouped, coded, coded_text, cut, first_appearance_ranks
from graphrag_lite.graph.joining import read_by_joining
from graphrag_lite.graph.resolution import Candidate, Resolution, find_aliases, majority
from graphrag_lite.names import honorific_gender, normalize_name

ENTITY_COLUMNS = ["title", "type", "other_types", "descriptions", "text_unit_ids", "frequency"]
RELATIONSHIP_COLUMNS = ["source", "target", "descriptions", "weight", "text_unit_ids"]
ALIAS_COLUMNS = ["alias", "title", "reason", "score"]
AMBIGUOUS_COLUMNS = ["title", "could_be", "why"]
DESCRIBED_CHARACTERS = 4000  # of a name's descriptions, what resolution reads ("a lake" lets "Ostra" be "Lake Ostra")


@dataclass
class MergeResult:
    entities: pd.DataFrame
    relationships: pd.DataFrame
    aliases: pd.DataFrame
    ambiguous_aliases: pd.DataFrame  # names left apart for a reader or the model: the names they could be, why
    problems: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    overrides_not_applied: list[str] = field(default_factory=list)
    # distinct descriptions not kept (beyond `description_characters`), of entities and of relationships
    descriptions_left_out: dict[str, int] = field(default_factory=lambda: {"entities": 0, "relationships": 0})


def merge_graph(raw_entities: pd.DataFrame, raw_relationships: pd.DataFrame, resolve: bool = True,
                max_edits: int = 1, generic_words: dict[str, frozenset[str]] | None = None,
                overrides: AliasOverrides | None = None, description_characters: int | None = None) -> MergeResult:
    """The merged graph; `description_characters`: keep of each entity's and relationship's descriptions only
    those joining.joined reads with that budget (None: all)."""
    key_of = overrides.key if overrides else normalize_name
    records = _EntityRecords(raw_entities, key_of)
    ends = _RelationshipEnds(raw_relationships, key_of, records.index)
    keys = records.keys
    canonical = {k: k for k in keys}
    resolution = Resolution([], {})
    if resolve:
        resolution = find_aliases(records.candidates(), ends.neighbours(keys), records.units_by_key(), max_edits,
                                  generic_words=generic_words, overrides=overrides)
        canonical.update({d.alias: d.canonical for d in resolution.decisions})

    spellings = records.spellings()
    # a group is titled by its canonical name's own spelling ("TAYLOR CRUZ", not its more frequent alias "TAYLOR")
    titles = {k: _title(spellings[i]) for i, k in enumerate(keys)}
    canonical_of = [records.index[canonical[k]] for k in keys]  # the number of each key's canonical key
    entities, entity_texts_left_out = _entity_rows(records, canonical_of, [titles[k] for k in keys],
                                                   description_characters)
    aliases = _alias_rows(keys, spellings, canonical, titles, resolution.decisions)
    relationships, problems, counts, relationship_texts_left_out = ends.merged(
        [titles[keys[c]] for c in canonical_of], description_characters)
    counts.update({"raw_entity_records": len(raw_entities), "names_after_normalization": len(keys),
                   "records_without_a_usable_name": records.without_key,
                   "entities": len(entities), "merged_as_aliases": len(resolution.decisions),
                   "ambiguous_names_left_apart": len(resolution.ambiguous),
                   "overrides_not_applied": len(resolution.overrides_not_applied)})
    ambiguous = _ambiguous_rows(resolution.ambiguous, titles, canonical)
    return MergeResult(entities, relationships, aliases, ambiguous, problems, counts,
                       resolution.overrides_not_applied,
                       {"entities": entity_texts_left_out, "relationships": relationship_texts_left_out})


def _in_unit_order(raw: pd.DataFrame) -> tuple[np.ndarray, Coded]:
    """The rows by text unit id (a hash of the text), in their order within a unit, and the coded unit ids: the
    merged graph (a pair's direction, the order of descriptions) then does not depend on the order of the input
    files, so an update gives what a rebuild of the same documents gives."""
    units = coded(raw["text_unit_id"], sort=True)
    order = np.argsort(units.codes, kind="stable")
    return order, units.reordered(order)


class _EntityRecords:
    """The entity records in text-unit order, coded, and grouped by their usable key (normalized name): `keys` in
    order of first appearance, `rows` the records sorted by key (then text-unit order), `key` each one's key."""

    def __init__(self, raw: pd.DataFrame, key_of: Callable[[str], str]) -> None:
        order, self.unit = _in_unit_order(raw)
        self.name, self.type = (coded(raw[column]).reordered(order) for column in ("name", "type"))
        self.description = coded_text(raw["description"]).reordered(order)
        name_keys = [key_of(n) for n in self.name.values]
        distinct = list(dict.fromkeys(k for k in name_keys if k))
        number = {k: i for i, k in enumerate(distinct)}
        row_keys = np.array([number.get(k, -1) for k in name_keys], dtype=np.int64)[self.name.codes]
        ranks = first_appearance_ranks(row_keys, len(distinct))
        self.keys = [""] * len(distinct)
        for k, rank in zip(distinct, ranks.tolist(), strict=True):
            self.keys[rank] = k
        self.index = {k: i for i, k in enumerate(self.keys)}
        ranked = np.append(ranks, -1)[row_keys]  # a record without a key keeps -1
        self.without_key = int((ranked < 0).sum())
        self.rows = np.argsort(ranked, kind="stable")[self.without_key:]
        self.key = ranked[self.rows]
        self.by_key = Grouped(self.rows, self.key, len(self.keys))

    def per_key(self, column: Coded) -> list[list]:
        """The distinct values of `column` each key has, in order of first appearance."""
        return self.by_key.distinct(column)

    def units_by_key(self) -> dict[str, set[str]]:
        return {k: set(units) for k, units in zip(self.keys, self.per_key(self.unit), strict=True)}

    def candidates(self) -> list[Candidate]:
        kinds = self.kinds
        units = self.per_key(self.unit)
        genders = [_gender(names) for names in self.per_key(self.name)]
        described = self.described()
        return [Candidate(k, kinds[i], len(units[i]), genders[i], described[i]) for i, k in enumerate(self.keys)]

    @cached_property
    def kinds(self) -> list[str]:
        """Each key's majority type, over its records."""
        return [majority(types)[0] for types in cut(self.type.at(self.type.codes[self.rows]), self.key,
                                                     len(self.keys))]

    def described(self) -> list[str]:
        """What the text says about each key: its distinct descriptions joined, the first DESCRIBED_CHARACTERS in
        lower case (only as many are read as make them up)."""
        codes, groups = self.by_key.distinct_codes(self.description)
        is_text = self.description.is_text()
        codes, groups = codes[is_text[codes]], groups[is_text[codes]]
        lengths = self.description.lengths[codes] + 1  # and the space that joins them
        # a description is read while the ones before it in its group, joined, are shorter than DESCRIBED_CHARACTERS
        before = np.cumsum(lengths) - lengths
        needed = before - before[np.searchsorted(groups, groups)] <= DESCRIBED_CHARACTERS
        per_key = cut(self.description.at(codes[needed]), groups[needed], len(self.keys))
        return [" ".join(texts)[:DESCRIBED_CHARACTERS].lower() for texts in per_key]

    def spellings(self) -> list[Counter[str]]:
        """How often each key is written each way (upper case, spaces collapsed)."""
        pairs, counts = np.unique(np.stack([self.key, self.name.codes[self.rows]]), axis=1, return_counts=True)
        spelled = [" ".join(n.split()).upper() for n in self.name.values]
        found: list[Counter[str]] = [Counter() for _ in self.keys]
        for key, name, count in zip(*pairs.tolist(), counts.tolist(), strict=True):
            found[key][spelled[name]] += count
        return found


def _gender(raw_names: list[str]) -> str:
    said = {honorific_gender(n) for n in raw_names} - {""}
    return said.pop() if len(said) == 1 else ""


def _title(spellings: Counter[str]) -> str:
    """The most common spelling, upper-cased (GraphRAG's titles are upper case)."""
    return max(spellings, key=lambda s: (spellings[s], -len(s), s))


def _descriptions(grouped: Grouped, column: CodedText, max_characters: int | None) -> tuple[list[list], int]:
    """Each group's distinct given descriptions in order of first appearance; with `max_characters` only those
    joining.joined reads, and how many were left out."""
    codes, groups = grouped.distinct_codes(column)
    given = column.given()[codes]
    codes, groups = codes[given], groups[given]
    if max_characters is None:
        return cut(column.at(codes), groups, grouped.count), 0
    read = read_by_joining(column.lengths[codes], column.stripped_lengths(codes), groups, max_characters)
    return cut(column.at(codes[read]), groups[read], grouped.count), int(len(read) - read.sum())


def _entity_rows(records: _EntityRecords, canonical_of: list[int], titles: list[str],
                 description_characters: int | None) -> tuple[pd.DataFrame, int]:
    """One row per node, from the records of its keys (keys in order of first appearance, each key's records in
    text-unit order), and how many descriptions were left out. Its type is its canonical name's own (rules merge
    only names of one type; a user's or the model's merge across types keeps the type of the name merged into);
    the other types are listed."""
    node_of: dict[int, int] = {}  # canonical key -> its node, in order of the node's first key
    for canonical in canonical_of:
        node_of.setdefault(canonical, len(node_of))
    node = np.array([node_of[c] for c in canonical_of], dtype=np.int64)[records.key]
    by_node = np.argsort(node, kind="stable")
    grouped = Grouped(records.rows[by_node], node[by_node], len(node_of))
    types, units = grouped.distinct(records.type), grouped.distinct(records.unit)
    texts, left_out = _descriptions(grouped, records.description, description_characters)
    kinds = records.kinds
    rows = [(titles[c], kinds[c], [t for t in types[i] if t and t != kinds[c]], texts[i], units[i], len(units[i]))
            for i, c in enumerate(node_of)]
    table = pd.DataFrame(rows, columns=ENTITY_COLUMNS)
    return table.sort_values("title", kind="stable").reset_index(drop=True), left_out


def _alias_rows(keys: list[str], spellings: list[Counter[str]], canonical: dict[str, str], titles: dict[str, str],
                decisions: list) -> pd.DataFrame:
    reasons = {d.alias: (d.reason, d.score) for d in decisions}
    rows = []
    for key, spelled in zip(keys, spellings, strict=True):
        target = canonical[key]
        for spelling in sorted(spelled):
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


class _RelationshipEnds:
    """The relationship records in text-unit order, coded, with the key of each end (-1: not an extracted name)."""

    def __init__(self, raw: pd.DataFrame, key_of: Callable[[str], str], index: dict[str, int]) -> None:
        order, self.unit = _in_unit_order(raw)
        self.records = len(raw)
        self.source, self.target = (coded(raw[column]).reordered(order) for column in ("source", "target"))
        self.description = coded_text(raw["description"]).reordered(order)
        self.strength = raw["strength"].to_numpy()[order]
        self.ends = [np.array([index.get(key_of(n), -1) for n in end.values], dtype=np.int64)[end.codes]
                     for end in (self.source, self.target)]

    def neighbours(self, keys: list[str]) -> dict[str, set[str]]:
        """The names each name is related to (through records between two extracted names)."""
        source, target = self.ends
        both = (source >= 0) & (target >= 0) & (source != target)
        found: dict[str, set[str]] = defaultdict(set)
        for s, t in zip(*np.unique(np.stack([source[both], target[both]]), axis=1).tolist(), strict=True):
            found[keys[s]].add(keys[t])
            found[keys[t]].add(keys[s])
        return found

    def merged(self, titles: list[str], description_characters: int | None
               ) -> tuple[pd.DataFrame, list[str], dict[str, int], int]:
        """One row per pair of titles (each key's node's title in `titles`): reversed edges are the same edge, in
        the direction of its first record; its weight the sum of its records' strengths. Also the relationships
        to unknown names, the counts, and how many descriptions were left out."""
        source, target = self.ends
        known = (source >= 0) & (target >= 0)
        unknown = [self._unknown(i, source[i] < 0) for i in np.flatnonzero(~known).tolist()]
        names = list(dict.fromkeys(titles))
        number = {title: i for i, title in enumerate(names)}
        title_of = np.array([number[t] for t in titles], dtype=np.int64)
        rows = np.flatnonzero(known)
        a, b = title_of[source[rows]], title_of[target[rows]]
        loops = a == b
        rows, a, b = rows[~loops], a[~loops], b[~loops]
        pair = pd.factorize(np.minimum(a, b) * len(names) + np.maximum(a, b))[0]  # by first appearance
        first = np.unique(pair, return_index=True)[1]
        by_pair = np.argsort(pair, kind="stable")
        grouped = Grouped(rows[by_pair], pair[by_pair], len(first))
        descriptions, left_out = _descriptions(grouped, self.description, description_characters)
        units = grouped.distinct(self.unit)
        strengths = cut([float(s) for s in self.strength[grouped.rows].tolist()], grouped.groups, grouped.count)
        table = pd.DataFrame([(names[a[f]], names[b[f]], descriptions[p], sum(strengths[p]), units[p])
                              for p, f in enumerate(first.tolist())], columns=RELATIONSHIP_COLUMNS)
        table = table.sort_values(["source", "target"], kind="stable")
        counts = {"raw_relationship_records": self.records, "relationships": len(table),
                  "relationships_to_unknown_entities": len(unknown), "self_loops_after_merging": int(loops.sum())}
        return table.reset_index(drop=True), unknown, counts, left_out

    def _unknown(self, row: int, source_unknown: bool) -> str:
        source, target = self.source.values[self.source.codes[row]], self.target.values[self.target.codes[row]]
        return f"relationship {source} -> {target}: '{source if source_unknown else target}' is not an extracted entity"
