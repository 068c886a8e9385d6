"""merge_graph keeps of each entity's and relationship's descriptions only what the next stage reads (issue 38:
at 100,000 documents the fast method's merged tables carried 4.0 million sentences, of which join_descriptions
reads the first 600 characters' worth): the fast method's final tables are those it gives with every
description kept, and how many were left out is in stats.json."""

from __future__ import annotations

import json
import random

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from graphrag_lite.cli import app
from graphrag_lite.graph import joining
from graphrag_lite.graph.coded import coded_text
from graphrag_lite.graph.merge import merge_graph
from graphrag_lite.stages import merge_graph as merge_stage
from tests.conftest import sample_project
from tests.test_merge_records import assert_same_merge, random_records
from tests.test_resolution import entities, relationships

FINAL_TABLES = ("entities", "relationships", "communities", "community_reports", "text_units", "documents")
WORDS = ["a", "ship", "sailed", "to", "Deptford", "with", "Sir W. Pen", "and", "the", "Duke"]


def read_by_the_loop(descriptions: list[str], max_characters: int) -> int:
    """How many descriptions joining.joined's loop reads before it stops (its own steps, counted)."""
    text, count = "", 0
    for description in descriptions:
        if text and len(text) + len(description) > max_characters:
            break
        text, count = f"{text} {description}".strip(), count + 1
    return count


def random_descriptions(rng: random.Random, padded: bool) -> list[str]:
    texts = [" ".join(rng.choices(WORDS, k=rng.randint(1, 40))) for _ in range(rng.randint(1, 12))]
    if padded:  # blank ones, and whitespace around others (Unicode's too)
        texts = [rng.choice(["", " ", "\n", "\u2003", "\x1c"]) + t + rng.choice(["", " \t", "\u3000"]) for t in texts]
        texts += rng.choice([[], [" "], ["\u00a0\u00a0"]])
    return list(dict.fromkeys(t for t in texts if t))  # distinct and given, as merge_graph has them


def kept_by_merge(lists: list[list[str]], max_characters: int) -> list[list[str]]:
    """What read_by_joining keeps of each list, the lists coded as merge_graph codes descriptions."""
    flat = [t for texts in lists for t in texts]
    column = coded_text(pd.Series(flat, dtype="str"))
    groups = np.repeat(np.arange(len(lists)), [len(t) for t in lists])
    kept = joining.read_by_joining(column.lengths[column.codes], column.stripped_lengths(column.codes), groups,
                                   max_characters)
    return [[t for t, k, g in zip(flat, kept, groups, strict=True) if k and g == i] for i in range(len(lists))]


@pytest.mark.parametrize("padded", [False, True])
def test_merge_keeps_what_joining_reads_of_each_list(padded):
    rng = random.Random(38)
    lists = [random_descriptions(rng, padded) for _ in range(400)]
    for max_characters in (0, 1, 50, 600):
        for texts, kept in zip(lists, kept_by_merge(lists, max_characters), strict=True):
            assert kept == texts[:len(kept)]  # the first ones
            assert joining.joined(kept, max_characters) == joining.joined(texts, max_characters)
            if not padded:  # exactly those the loop reads
                assert len(kept) == read_by_the_loop(texts, max_characters)


def test_merge_graph_counts_the_descriptions_it_leaves_out():
    long = "x" * 400
    raw = entities(("u0", "Pen", "PERSON", long), ("u1", "Pen", "PERSON", "y" * 300), ("u2", "Pen", "PERSON", "z"),
                   ("u1", "Batten", "PERSON", long), ("u2", "Batten", "PERSON", long))
    rels = relationships(("u1", "Pen", "Batten", long, 1.0), ("u2", "Pen", "Batten", "w" * 250, 1.0))
    merged = merge_graph(raw, rels, description_characters=600)
    # PEN: 400 + 300 is past 600, so its second and third are left out; BATTEN's one description is kept once
    assert merged.entities["descriptions"].tolist() == [[long], [long]]
    assert merged.relationships["descriptions"].tolist() == [[long]]
    assert merged.descriptions_left_out == {"entities": 2, "relationships": 1}
    everything = merge_graph(raw, rels)
    assert everything.descriptions_left_out == {"entities": 0, "relationships": 0}
    assert everything.entities["descriptions"].map(len).tolist() == [1, 3]


def indexed(root, monkeypatch, keep_all: bool) -> dict:
    if keep_all:
        monkeypatch.setattr(merge_stage, "description_characters", lambda config: None)
    result = CliRunner().invoke(app, ["index", "--root", str(root), "--method", "fast"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    monkeypatch.undo()
    return json.loads((root / "output" / "stats.json").read_text())["stages"]["merge_graph"]["details"]


def test_the_fast_method_gives_the_same_tables_with_only_the_descriptions_joining_reads(tmp_path, monkeypatch):
    capped, everything = sample_project(tmp_path / "capped"), sample_project(tmp_path / "all")
    details = indexed(capped, monkeypatch, keep_all=False)
    indexed(everything, monkeypatch, keep_all=True)
    for table in (*FINAL_TABLES, "summarized_entities", "summarized_relationships"):
        pd.testing.assert_frame_equal(pd.read_parquet(capped / "output" / f"{table}.parquet"),
                                      pd.read_parquet(everything / "output" / f"{table}.parquet"), obj=table)
    # what merge_graph kept: what joining reads, and the rest counted in stats.json
    for table, key in (("merged_entities", "entity_descriptions_left_out"),
                       ("merged_relationships", "relationship_descriptions_left_out")):
        kept, all_of_them = (pd.read_parquet(root / "output" / f"{table}.parquet")["descriptions"].map(list)
                             for root in (capped, everything))
        assert [a[:len(k)] for k, a in zip(kept, all_of_them, strict=True)] == kept.tolist()
        assert all(len(" ".join(k[:-1])) <= joining.MAX_CHARACTERS for k in kept)
        assert details[key] == sum(all_of_them.map(len)) - sum(kept.map(len)) > 0
    assert details["descriptions_kept_up_to_characters"] == joining.MAX_CHARACTERS


@pytest.mark.parametrize("seed", range(10))
def test_records_read_with_categories_merge_as_records_read_as_text(seed):
    # the stage holds the columns of repeated values as categories (merge_stage.read_records)
    raw, rels = random_records(seed)
    raw, rels = raw.astype({"text_unit_id": "str", "name": "str", "type": "str", "description": "str"}), \
        rels.astype({"text_unit_id": "str", "source": "str", "target": "str", "description": "str"})
    as_categories = [frame.astype({c: "category" for c in merge_stage.RECORD_COLUMNS[table][0]})
                     for frame, table in ((raw, "raw_entities"), (rels, "raw_relationships"))]
    for characters in (None, 600):
        assert_same_merge(merge_graph(*as_categories, resolve=seed % 2 == 0, description_characters=characters),
                          merge_graph(raw, rels, resolve=seed % 2 == 0, description_characters=characters))
