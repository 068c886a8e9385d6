"""merge_graph on integer codes gives the tables the per-record merge gave (tests/reference_merge.py): on a
hand-built case whose every value is written out, and on seeded random record sets full of ties, duplicates,
reversed and self-looping edges, unknown ends, empty and missing descriptions, and aliases."""

from __future__ import annotations

import random

import pandas as pd
import pytest

from graphrag_lite.alias_overrides import AliasOverrides
from graphrag_lite.graph.merge import MergeResult, merge_graph
from tests import reference_merge
from tests.test_resolution import entities, relationships


def test_records_merge_by_name_in_text_unit_order_with_ties_and_duplicates():
    raw = entities(("u2", "PEN", "CONCEPT", "d2"), ("u2", "Batten", "PERSON", ""), ("u2", "Batten", "PERSON", "d3"),
                   ("u1", "Pen", "PERSON", "d1"), ("u1", "Mr. Pen", "CONCEPT", "d1"),
                   ("u0", "Mr. Pen", "PERSON", "d0"), ("u0", "!!!", "CONCEPT", "x"))
    rels = relationships(("u2", "Batten", "Mr. Pen", "r2", 0.1), ("u1", "Pen", "Batten", "r1", 0.2),
                         ("u1", "Pen", "Mr. Pen", "self", 1.0), ("u1", "Pen", "Nobody", "unknown", 1.0),
                         ("u2", "Batten", "Pen", "r1", 0.7), ("u0", "!!!", "Pen", "", 0.3))
    merged = merge_graph(raw, rels)
    # PEN's records in text-unit order (u0, u1, u2): PERSON and CONCEPT twice each, the first seen wins; "MR. PEN"
    # and "PEN" twice each, the shorter titles it; an empty description is left out, a repeated one kept once
    assert merged.entities.to_dict("records") == [
        {"title": "BATTEN", "type": "PERSON", "other_types": [], "descriptions": ["d3"], "text_unit_ids": ["u2"],
         "frequency": 1},
        {"title": "PEN", "type": "PERSON", "other_types": ["CONCEPT"], "descriptions": ["d0", "d1", "d2"],
         "text_unit_ids": ["u0", "u1", "u2"], "frequency": 3}]
    # the pair takes the direction of its first record in text-unit order (u1's), and sums its strengths in it
    assert merged.relationships.to_dict("records") == [
        {"source": "PEN", "target": "BATTEN", "descriptions": ["r1", "r2"], "weight": 0.2 + 0.1 + 0.7,
         "text_unit_ids": ["u1", "u2"]}]
    assert merged.aliases.to_dict("records") == [
        {"alias": "MR. PEN", "title": "PEN", "reason": "same name after normalization", "score": 1.0}]
    assert merged.problems == ["relationship !!! -> Pen: '!!!' is not an extracted entity",
                               "relationship Pen -> Nobody: 'Nobody' is not an extracted entity"]
    assert merged.counts == {
        "raw_relationship_records": 6, "relationships": 1, "relationships_to_unknown_entities": 2,
        "self_loops_after_merging": 1, "raw_entity_records": 7, "names_after_normalization": 2,
        "records_without_a_usable_name": 1, "entities": 2, "merged_as_aliases": 0, "ambiguous_names_left_apart": 0,
        "overrides_not_applied": 0}


NAMES = ["Sherlock Holmes", "Holmes", "Mr. Holmes", "HOLMES", "Holmes's", "Mycroft Holmes", "John Watson", "Watson",
         "Dr. Watson", "Dr.  Watson", "Mrs. Hudson", "Mr. Hudson", "Hudson", "Lake Ostra", "Ostra", "the Navy Office",
         "Navy Office", "Acme Corp", "Acme Corporation", "ACME CORP", "London", "Londn", "!!!", "Irene Adler", "Adler"]
TYPES = ["PERSON", "PERSON", "GEO", "ORGANIZATION", "CONCEPT", "EVENT", ""]
DESCRIPTIONS = ["", "", None, "a detective", "a doctor", "a lake", "the lake Ostra", "a bank of England", "x" * 2500,
                "y" * 1700, "a landlady", "a singer"]
STRENGTHS = [0.1, 0.2, 0.3, 0.7, 1.0, 0.123456789, 1e-9, 3.0]


def random_records(seed: int, n: int = 300) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = random.Random(seed)
    units = [f"{rng.getrandbits(64):016x}" for _ in range(rng.randint(1, 30))]
    raw = entities(*[(rng.choice(units), rng.choice(NAMES), rng.choice(TYPES), rng.choice(DESCRIPTIONS))
                     for _ in range(n)])
    ends = [*NAMES, "Moriarty", "Nobody"]
    rels = relationships(*[(rng.choice(units), rng.choice(ends), rng.choice(ends), rng.choice(DESCRIPTIONS),
                            rng.choice(STRENGTHS)) for _ in range(n)])
    return raw, rels


def assert_same_merge(got: MergeResult, want: reference_merge.MergeResult) -> None:
    for table in ("entities", "relationships", "aliases", "ambiguous_aliases"):
        pd.testing.assert_frame_equal(getattr(got, table), getattr(want, table), check_exact=True, obj=table)
        for column in getattr(want, table).columns:  # list cells compared as lists, NaN and None told apart
            assert list(map(repr, getattr(got, table)[column])) == list(map(repr, getattr(want, table)[column]))
    assert (got.problems, got.counts, got.overrides_not_applied) == \
           (want.problems, want.counts, want.overrides_not_applied)


@pytest.mark.parametrize("seed", range(30))
def test_the_coded_merge_gives_the_per_record_merges_tables(seed):
    raw, rels = random_records(seed)
    overrides = AliasOverrides().with_merges({"Adler": "Irene Adler", "Londn": "London"}, "chosen") \
        if seed % 3 == 0 else None
    options = {"resolve": seed % 2 == 0, "overrides": overrides}
    assert_same_merge(merge_graph(raw, rels, **options), reference_merge.merge_graph(raw, rels, **options))
    # columns of Python objects (a table built by hand, not read from Parquet): None, not NaN, where missing
    raw, rels = raw.astype(object), rels.astype({"description": object, "source": object})
    assert_same_merge(merge_graph(raw, rels, **options), reference_merge.merge_graph(raw, rels, **options))


def test_the_coded_merge_of_nothing():
    raw, rels = random_records(0)
    unusable = raw.assign(name="!!!")  # every record's name is only punctuation
    for entity_records, relationship_records in ((raw.iloc[:0], rels.iloc[:0]), (raw, rels.iloc[:0]), (unusable, rels)):
        assert_same_merge(merge_graph(entity_records, relationship_records),
                          reference_merge.merge_graph(entity_records, relationship_records))
