"""Ranking source text by a personalized PageRank walk over entities and text units."""

from __future__ import annotations

import pandas as pd
import pytest

from graphrag_lite.config import GraphRagConfig, LocalSearchConfig
from graphrag_lite.query.graph_walk import EntityUnitGraph
from graphrag_lite.query.index import IndexTables
from graphrag_lite.query.local import build_local_context, name_matches

# u0 names the question's entity and a bridge entity; u1 (the bridge passage) shares only the bridge entity
# with u0 and holds the answer; u2 and u3 repeat the question's words but lead nowhere.
UNITS = {"u0": "Ada Vale founded the Orrin Press.", "u1": "The Orrin Press was sold to Halvard Group in 1931.",
         "u2": "Founded presses were common; many founded one.", "u3": "Who founded what press? Nobody knows.",
         "u4": "Halvard Group built ships."}
ENTITIES = {"ADA VALE": ["u0"], "ORRIN PRESS": ["u0", "u1"], "HALVARD GROUP": ["u1", "u4"], "PRESSES": ["u2"],
            "NOBODY": ["u3"]}
RELATIONSHIPS = [("ADA VALE", "ORRIN PRESS", ["u0"]), ("ORRIN PRESS", "HALVARD GROUP", ["u1"])]


def tables() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    units = pd.DataFrame({"id": list(UNITS), "human_readable_id": range(len(UNITS)), "text": list(UNITS.values())})
    entities = pd.DataFrame({"id": [f"e-{t}" for t in ENTITIES], "human_readable_id": range(len(ENTITIES)),
                             "title": list(ENTITIES), "description": [f"{t}." for t in ENTITIES],
                             "degree": [1] * len(ENTITIES), "text_unit_ids": list(ENTITIES.values())})
    n = len(RELATIONSHIPS)
    relationships = pd.DataFrame({"source": [s for s, _, _ in RELATIONSHIPS],
                                  "target": [t for _, t, _ in RELATIONSHIPS],
                                  "weight": [1.0] * n, "description": ["related"] * n, "human_readable_id": range(n),
                                  "combined_degree": [2] * n, "text_unit_ids": [u for _, _, u in RELATIONSHIPS]})
    return entities, relationships, units


def index_of(tmp_path) -> IndexTables:
    """An index held in memory: the tables are set where IndexTables caches what it reads."""
    index = IndexTables(GraphRagConfig(output={"base_dir": tmp_path}))
    entities, relationships, units = tables()
    index.__dict__.update(
        entities=entities, relationships=relationships, text_units=units,
        communities=pd.DataFrame({"community": [0], "level": [0], "entity_ids": [list(entities["id"])]}),
        reports=pd.DataFrame(columns=["community", "status", "rank", "title", "full_content", "summary"]),
        covariates=pd.DataFrame(columns=["human_readable_id", "subject_id", "type", "status", "description"]))
    return index


def test_the_walk_reaches_the_bridge_passage_through_a_shared_entity():
    graph = EntityUnitGraph(*tables())
    scores = graph.walk({"e-ADA VALE": 1.0}, {}, damping=0.5, unit_weight=0.0)
    ranked = list(scores.units)
    assert ranked[:2] == ["u0", "u1"]  # the seed's passage, then the bridge passage
    assert "u2" not in scores.units and "u3" not in scores.units  # unconnected to the seed: never reached
    assert next(iter(scores.entities)) == "e-ADA VALE"


def test_specific_entities_weigh_more_than_common_ones():
    graph = EntityUnitGraph(*tables())
    assert graph.specificity["e-ADA VALE"] == 1.0 and graph.specificity["e-ORRIN PRESS"] == 0.5
    scores = graph.walk({"e-ADA VALE": 1.0, "e-HALVARD GROUP": 1.0}, {}, damping=0.5, unit_weight=0.0)
    assert scores.units["u0"] > scores.units["u4"]


def test_no_seeds_give_no_ranking():
    scores = EntityUnitGraph(*tables()).walk({"e-UNKNOWN": 1.0}, {}, damping=0.5, unit_weight=1.0)
    assert scores.units == {} and scores.entities == {}


@pytest.mark.parametrize("ranking, bridge_found", [("ppr", True), ("fusion", False)])
def test_ppr_sources_bring_the_bridge_passage_that_fusion_misses(tmp_path, ranking, bridge_found):
    cfg = LocalSearchConfig(source_ranking=ranking, max_context_tokens=500, community_prop=0, text_unit_prop=1)
    retrieved = ["u0", "u2", "u3"]  # keyword search: the question's words
    context = build_local_context(index_of(tmp_path), cfg, ["e-ADA VALE"], 2, retrieved)
    sources = [row["id"] for row in context.sources.rows]
    assert (1 in sources) is bridge_found and sources[0] == 0  # fusion sees only the linked entity's passage
    if bridge_found:
        assert sources.index(1) < sources.index(4)  # one hop from the seeds before two


def test_names_in_a_question_link_only_where_the_question_capitalizes_them(tmp_path):
    index = index_of(tmp_path)
    index.__dict__["normalized_titles"] = [("e-ada", "ADA VALE"), ("e-during", "DURING"), ("e-press", "PRESS")]
    assert name_matches(index, "What did Ada Vale print during the war?") == ["e-ada"]
    assert name_matches(index, "During what war did the Press close?") == ["e-press"]  # sentence start: no name
    assert name_matches(index, "what did ada vale print during the war?") == ["e-ada", "e-during"]  # all lower


@pytest.mark.parametrize("damping", [0.5, 0.85, 0.99])
def test_the_walk_gives_igraphs_personalized_pagerank(damping):
    """The numpy power iteration against igraph's PRPACK solver on a random weighted graph with isolated
    nodes (their walkers restart at the seeds, as igraph does)."""
    import igraph as ig
    import numpy as np

    from graphrag_lite.query.graph_walk import _transitions

    rng = np.random.default_rng(7)
    nodes = 60
    edges = [(int(a), int(b)) for a, b in rng.integers(0, 50, size=(150, 2)) if a != b]  # 50-59 isolated
    weights = [float(w) for w in rng.uniform(0.1, 5.0, size=len(edges))]
    reset = np.zeros(nodes)
    reset[[3, 17, 55]] = [0.5, 0.3, 0.2]
    ours = _transitions(nodes, edges, weights).personalized_pagerank(reset, damping)
    graph = ig.Graph(n=nodes, edges=edges)
    theirs = graph.personalized_pagerank(directed=False, damping=damping, reset=list(reset), weights=weights)
    assert np.abs(ours - np.array(theirs)).max() < 1e-7


def test_a_relationship_weight_that_is_not_a_number_does_not_empty_the_walk():
    entities, relationships, units = tables()
    relationships.loc[0, "weight"] = float("nan")
    walk = EntityUnitGraph(entities, relationships, units).walk({"e-ADA VALE": 1.0}, {}, 0.5, 0.5)
    assert list(walk.units)[:2] == ["u0", "u1"]


def test_descriptions_whose_passages_are_all_in_the_sources_give_their_tokens_to_more_sources(tmp_path):
    index = index_of(tmp_path)
    long_unit = "Nobody came to the harbour that winter. " * 80  # does not fit beside the others
    index.text_units.loc[index.text_units["id"] == "u3", "text"] = long_unit
    index.entities["description"] = [f"{t} is described at length here, in a sentence copied from its passage."
                                     for t in ENTITIES]
    cfg = dict(max_context_tokens=500, community_prop=0, text_unit_prop=0.5)
    linked = {"e-ADA VALE": 1.0, "e-NOBODY": 0.1}  # u3 ranks last
    kept = build_local_context(index, LocalSearchConfig(**cfg), linked, 2)
    skipped = build_local_context(index, LocalSearchConfig(**cfg, skip_repeated_descriptions=True), linked, 2)
    assert [r["entity"] for r in kept.tables[1].rows] == ["ADA VALE", "NOBODY"] and kept.tables[2].rows
    assert 3 not in [r["id"] for r in skipped.sources.rows]  # u3 is not among the sources: NOBODY's stays whole
    entities = {r["entity"]: r["description"] for r in skipped.tables[1].rows}
    assert entities["ADA VALE"] == "" and entities["NOBODY"].startswith("NOBODY is described")
    assert all(r["description"] == "" for r in skipped.tables[2].rows) and skipped.tables[2].rows
    assert skipped.sources.rows[:len(kept.sources.rows)] == kept.sources.rows
    entity_use, relationship_use, sources = skipped.sections[1], skipped.sections[2], skipped.sections[-1]
    assert (entity_use.left_out, relationship_use.left_out) == (1, len(skipped.tables[2].rows))
    assert "1 description left out: their passages are all among the sources" in entity_use.why
    assert relationship_use.cap == kept.sections[2].cap  # what it was offered when it was packed
    assert sources.cap > kept.sections[-1].cap and sources.used >= kept.sections[-1].used
    assert skipped.entity_ids == kept.entity_ids and all(s.used <= s.cap for s in skipped.sections)


def test_a_row_with_no_text_units_keeps_its_description_and_a_hop_reads_the_left_out_ones(tmp_path):
    from graphrag_lite.query.hops import hop_context
    from graphrag_lite.query.local import LEFT_OUT

    index = index_of(tmp_path)
    index.entities["text_unit_ids"] = [[] if title == "NOBODY" else units for title, units in
                                       zip(index.entities["title"], index.entities["text_unit_ids"], strict=True)]
    cfg = LocalSearchConfig(max_context_tokens=500, community_prop=0, text_unit_prop=0.5,
                            skip_repeated_descriptions=True)
    context = build_local_context(index, cfg, {"e-ADA VALE": 1.0, "e-NOBODY": 0.5}, 2)
    entities = {r["entity"]: r for r in context.tables[1].rows}
    assert entities["NOBODY"]["description"] == "NOBODY." and LEFT_OUT not in entities["NOBODY"]  # nothing repeats it
    assert entities["ADA VALE"]["description"] == "" and entities["ADA VALE"][LEFT_OUT] == "ADA VALE."
    assert context.sections[1].left_out == 1
    read_by_a_hop = {r["entity"]: r["description"] for r in hop_context(context.tables, 4000)[0].rows}
    assert read_by_a_hop == {"ADA VALE": "ADA VALE.", "NOBODY": "NOBODY."}


def test_a_second_packing_goes_on_from_the_first_and_keeps_its_count_when_nothing_more_fits():
    from graphrag_lite.context_tables import pack

    rows = [{"id": i, "text": f"passage {i} " + "word " * 20} for i in range(5)]
    two = pack("Sources", ["id", "text"], rows[:2], 10**6).tokens
    first = pack("Sources", ["id", "text"], rows, two)
    assert len(first.rows) == 2 and first.tokens == two
    again = pack("Sources", ["id", "text"], rows[2:], two, after=first)
    assert again.rows == first.rows and again.tokens == two  # full already: the count stays
    more = pack("Sources", ["id", "text"], rows[2:], 10**6, after=first)
    assert more.rows == rows and more.tokens == pack("Sources", ["id", "text"], rows, 10**6).tokens


def test_a_leads_new_passages_take_the_turns_not_passages_already_sent():
    from graphrag_lite.query.local import with_lead

    earlier = ["a", "b", "c", "d", "e", "f", "g", "h"]  # the head (6) stays; g and h take turns with the lead
    walked = ["a", "b", "x", "y"]  # the merged seeds' walk puts passages already sent first
    assert with_lead(earlier, walked) == ["a", "b", "c", "d", "e", "f", "g", "x", "h", "y"]
