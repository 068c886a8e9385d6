"""The entity-resolution benchmark's corpus (bench/resolution_corpus.py) and today's resolution on it
(bench/entity_resolution.py): the generator is deterministic and writes every alias pattern and hard negative
of issue 13; resolution never merges a hard negative and does not lose ground on persons."""

from __future__ import annotations

import importlib
import random
import sys
from collections import Counter
from pathlib import Path

import igraph as ig
import pytest

from graphrag_lite.graph.merge import merge_graph
from graphrag_lite.names import normalize_name

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
corpus_module = importlib.import_module("resolution_corpus")
bench = importlib.import_module("entity_resolution")

# exact-one rate of persons with the rules of today (measured: seed 1 0.89, seed 2 0.87), less a margin
PERSON_EXACT_ONE_FLOOR = {1: 0.86, 2: 0.84}
PATTERNS = {"full", "surname", "title+surname", "role+surname", "title+full", "shortened", "first word", "acronym",
            "without generic word", "with 'of'", "dropped middle word", "year in front"}
HARD_NEGATIVE_KINDS = {"persons sharing a surname", "organizations sharing a first word",
                       "places sharing their proper word", "events differing in a middle word",
                       "events differing in the year", "a place and a feature named after it"}


@pytest.fixture(scope="module")
def runs():
    result = {}
    for seed in PERSON_EXACT_ONE_FLOOR:
        corpus = corpus_module.generate(seed)
        result[seed] = (corpus, merge_graph(corpus.entities, corpus.relationships, resolve=True))
    return result


def test_generator_is_deterministic_for_a_seed(runs):
    again = corpus_module.generate(1)
    first = runs[1][0]
    assert again.entities.equals(first.entities) and again.relationships.equals(first.relationships)
    assert again.name_to_entity == first.name_to_entity and again.hard_negatives == first.hard_negatives
    assert not runs[2][0].entities.equals(first.entities)


def test_corpus_shape_truth_and_patterns(runs):
    for corpus, _ in runs.values():
        assert list(corpus.entities.columns) == ["text_unit_id", "name", "type", "description"]
        assert list(corpus.relationships.columns) == ["text_unit_id", "source", "target", "description", "strength"]
        assert len(corpus.truth) == 400 and corpus.entities["text_unit_id"].nunique() == 150
        assert Counter(e.type for e in corpus.truth.values()) == {"PERSON": 150, "ORGANIZATION": 100, "GEO": 75,
                                                                   "EVENT": 75}
        assert len(set(corpus.groups)) == 25
        # every name in the tables is known, with its entity's type, and 1-3 names per entity
        assert set(corpus.entities["name"]) == set(corpus.name_to_entity)
        for name, kind in zip(corpus.entities["name"], corpus.entities["type"], strict=True):
            assert corpus.truth[corpus.name_to_entity[name]].type == kind
        assert all(1 <= len(e.names) <= 3 for e in corpus.truth.values())
        assert Counter(len(e.names) for e in corpus.truth.values()).keys() == {1, 2, 3}
        # a normalized name belongs to one entity, so the truth is not a guess
        owners: dict[str, set[str]] = {}
        for name, entity_id in corpus.name_to_entity.items():
            owners.setdefault(normalize_name(name), set()).add(entity_id)
        assert all(len(ids) == 1 for ids in owners.values())
        # relationships link names found in the same text unit
        found = set(zip(corpus.entities["text_unit_id"], corpus.entities["name"], strict=True))
        for unit, source, target in zip(corpus.relationships["text_unit_id"], corpus.relationships["source"],
                                        corpus.relationships["target"], strict=True):
            assert (unit, source) in found and (unit, target) in found
        patterns = {p for e in corpus.truth.values() for p in e.patterns.values()}
        assert patterns == PATTERNS
        assert {kind for *_, kind in corpus.hard_negatives} <= HARD_NEGATIVE_KINDS
        assert sum(kind.startswith(("persons", "organizations")) for *_, kind in corpus.hard_negatives) >= 12


def test_alias_patterns_have_the_shapes_of_the_issue(runs):
    corpus = runs[1][0]
    for entity in corpus.truth.values():
        full = entity.names[0]
        words = normalize_name(full).split()
        for name, pattern in entity.patterns.items():
            short = normalize_name(name).split()
            if pattern == "acronym":
                assert name == "".join(w[0] for w in words if w != "FOR")
            elif pattern in ("surname", "first word", "without generic word"):
                assert len(short) == 1 and short[0] in words
            elif pattern in ("shortened", "dropped middle word"):  # a subsequence of the full name, shorter
                iterator = iter(words)
                assert len(short) < len(words) and all(w in iterator for w in short)
            elif pattern in ("title+surname", "role+surname"):
                assert len(short) <= 2 and short[-1] == words[-1]
    examples = {p: n for e in corpus.truth.values() for n, p in e.patterns.items()}
    assert examples["role+surname"].split()[0] in corpus_module.ROLE_TITLES
    # hard negatives: two different entities of one type and group that share a word of their names
    for a, b, _ in corpus.hard_negatives:
        first, second = corpus.truth[a], corpus.truth[b]
        assert a != b and first.type == second.type and first.group == second.group
        assert set(normalize_name(first.names[0]).split()) & set(normalize_name(second.names[0]).split())


def test_resolution_never_merges_a_hard_negative_and_keeps_persons(runs):
    for seed, (corpus, merged) in runs.items():
        scores = bench.score(corpus, merged)
        assert all(s.hard_negatives_merged == 0 for s in scores.values()), seed
        assert scores["all"].hard_negatives == len(corpus.hard_negatives) >= 20
        assert scores["all"].wrong_share <= 0.02, bench.wrong_merges(corpus, merged)
        assert scores["PERSON"].exact_one_rate >= PERSON_EXACT_ONE_FLOOR[seed], scores["PERSON"]
        assert scores["all"].merges == merged.counts["merged_as_aliases"]
        plain = bench.score(corpus, merge_graph(corpus.entities, corpus.relationships, resolve=False))
        assert plain["all"].merges == plain["all"].wrong_merges == 0
        assert scores["all"].nodes < plain["all"].nodes


def test_nmi_agrees_with_igraph_and_communities_follow_the_groups(runs):
    rng = random.Random(5)
    a = [rng.randrange(6) for _ in range(300)]
    b = [x if rng.random() < 0.6 else rng.randrange(9) for x in a]
    assert bench.nmi(a, b) == pytest.approx(ig.compare_communities(a, b, method="nmi"))
    assert bench.nmi(a, a) == pytest.approx(1.0) and bench.nmi([0] * 5, [0] * 5) == 1.0
    corpus, merged = runs[1]
    communities = bench.community_nmi(corpus, merged)
    assert communities["covered"] == 1.0 and communities["leaf"] > 0.6 and communities["level0"] > 0.7
