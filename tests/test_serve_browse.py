"""The look-ups the HTTP API, the graph explorer and the MCP server share (graphrag_lite/serve/browse.py), on
a small index of Operation Dulce built with the fake model (claims on, small communities so there are two
levels), and on a synthetic index of 10,000 entities for speed."""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

from graphrag_lite.cli import app
from graphrag_lite.config import load_config
from graphrag_lite.query.index import IndexTables
from graphrag_lite.serve.browse import (
    NotFound,
    community_detail,
    entity_detail,
    find_entities,
    neighbourhood,
)
from tests.conftest import DATA, make_project, write_settings

SETTINGS = "extract_claims:\n  enabled: true\ncluster_graph:\n  max_cluster_size: 4\n"


@pytest.fixture(scope="module")
def dulce(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_project(tmp_path_factory.mktemp("browse"), [DATA / "operation-dulce" / "dulce.txt"], SETTINGS)
    result = CliRunner().invoke(app, ["index", "--root", str(root)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return root


@pytest.fixture
def index(dulce: Path) -> IndexTables:
    return IndexTables(load_config(dulce))


def plain_json(value: object) -> object:
    """The value after a JSON round trip; json.dumps fails on numpy values and (allow_nan=False) on NaN."""
    return json.loads(json.dumps(value, allow_nan=False))


def tier(title: str, q: str) -> int:
    title, q = title.casefold(), q.casefold()
    if title == q:
        return 0
    if title.startswith(q):
        return 1
    if q in title:
        return 2
    return 3 if all(w in title for w in q.split()) else 4


def test_find_entities_ranks_exact_then_prefix_then_substring_then_words_ties_by_degree(index):
    for q in ("alex", "Sam Rivera", "mercer alex", "r", "agent mercer"):
        found = find_entities(index, q)
        assert found, q
        ranks = [(tier(e["title"], q), -e["degree"]) for e in found]
        assert ranks == sorted(ranks), q
    assert find_entities(index, "  sAm   RIVERA ")[0]["title"] == "SAM RIVERA"  # case and spaces do not matter
    assert find_entities(index, "alex")[0]["title"] == "ALEX MERCER"  # a prefix before the substrings
    assert find_entities(index, "mercer alex")[0]["title"] == "ALEX MERCER"  # every word, in any order
    assert "ALEX MERCER" in [e["title"] for e in find_entities(index, "agent mercer")]  # a shared word
    assert find_entities(index, "zzzz nothing") == []
    assert len(find_entities(index, "e", limit=3)) == 3


def test_find_entities_rows_are_json_ready_with_a_snippet_and_the_deepest_community(index):
    entities = index.entities.set_index("title")
    [alex] = find_entities(index, "alex mercer", limit=1)
    assert set(alex) == {"id", "human_readable_id", "title", "type", "description", "degree", "community"}
    assert alex["id"] == entities.loc["ALEX MERCER", "id"] and type(alex["human_readable_id"]) is int
    assert len(entities.loc["ALEX MERCER", "description"]) > 300 and len(alex["description"]) <= 300
    deepest = index.communities[index.communities["entity_ids"].map(lambda ids: alex["id"] in ids)]
    assert alex["community"] == int(deepest.sort_values("level")["community"].iloc[-1])
    silence = find_entities(index, "silence", limit=1)[0]
    assert silence["community"] in set(index.communities.loc[index.communities["level"] == 1, "community"])
    assert plain_json(find_entities(index, "a")) == find_entities(index, "a")


def test_an_empty_query_gives_the_highest_degree_entities(index):
    found = find_entities(index, "   ", limit=5)
    assert [e["degree"] for e in found] == sorted(index.entities["degree"], reverse=True)[:5]
    with pytest.raises(ValueError, match="limit must be at least 1, got 0"):
        find_entities(index, "alex", limit=0)


def test_an_entity_is_found_by_id_short_id_or_title(index):
    row = index.entities[index.entities["title"] == "TAYLOR CRUZ"].iloc[0]
    for key in (row["id"], str(row["human_readable_id"]), "taylor cruz", " Taylor  Cruz "):
        assert entity_detail(index, key)["id"] == row["id"], key
    with pytest.raises(NotFound) as raised:
        entity_detail(index, "taylor cru")
    message = str(raised.value)
    assert "no entity 'taylor cru'" in message and "'TAYLOR CRUZ'" in message
    assert "GET /entities?q=taylor%20cru" in message and raised.value.suggestions[0] == "TAYLOR CRUZ"
    assert raised.value.message(None).endswith("?")  # another front end leaves the HTTP hint out
    with pytest.raises(NotFound, match="no entity '9999'"):
        entity_detail(index, "9999")


def test_entity_detail_has_its_relationships_claims_communities_and_text_units(index):
    detail = entity_detail(index, "alex mercer")
    assert plain_json(detail) == detail
    entities = index.entities.set_index("title")
    assert detail["title"] == "ALEX MERCER" and detail["id"] == entities.loc["ALEX MERCER", "id"]
    relationships = detail["relationships"]
    assert len(relationships) == detail["degree"] > 1
    weights = [r["weight"] for r in relationships]
    assert weights == sorted(weights, reverse=True)
    for r in relationships:
        other = r["target"] if r["source"] == "ALEX MERCER" else r["source"]
        assert "ALEX MERCER" in (r["source"], r["target"]) and r["other_id"] == entities.loc[other, "id"]
        assert {"id", "human_readable_id", "description"} <= set(r)
    assert detail["claims"] and {c["subject_id"] for c in detail["claims"]} == {"ALEX MERCER"}
    assert len(detail["claims"]) == int((index.covariates["subject_id"] == "ALEX MERCER").sum())
    levels = [c["level"] for c in detail["communities"]]
    assert levels == sorted(levels) and detail["communities"][-1]["community"] == detail["community"]
    reports = index.reports.set_index("community")
    assert all(c["title"] == reports.loc[c["community"], "title"] and c["has_report"] for c in detail["communities"])
    units = detail["text_units"]
    assert [u["id"] for u in units] == list(entities.loc["ALEX MERCER", "text_unit_ids"])
    assert all(u["document_title"] == "dulce.txt" and u["text"] and type(u["human_readable_id"]) is int
               for u in units)


def test_community_detail_with_its_hierarchy_report_and_members(index):
    parent = index.communities[index.communities["children"].map(len) > 0].iloc[0]
    detail = community_detail(index, int(parent["community"]))
    assert plain_json(detail) == detail
    assert detail["level"] == 0 and detail["parent"] == -1 and detail["children"] == list(parent["children"])
    report = index.reports.set_index("community").loc[int(parent["community"])]
    assert detail["title"] == report["title"] and detail["report"]["summary"] == report["summary"]
    assert detail["report"]["findings"] and set(detail["report"]["findings"][0]) == {"summary", "explanation"}
    assert {m["id"] for m in detail["members"]} == set(parent["entity_ids"])
    assert detail["size"] == len(detail["members"])
    degrees = [m["degree"] for m in detail["members"]]
    assert degrees == sorted(degrees, reverse=True)
    child = community_detail(index, detail["children"][0])
    assert child["level"] == 1 and child["parent"] == detail["community"]
    with pytest.raises(NotFound, match="no community 99; communities are numbered 0 to"):
        community_detail(index, 99)


def test_a_community_without_a_report_has_none(dulce):
    index = IndexTables(load_config(dulce))
    index.reports = index.reports[index.reports["community"] != 1]
    detail = community_detail(index, 1)
    assert detail["report"] is None and detail["title"] == "Community 1" and detail["members"]
    member = entity_detail(index, detail["members"][0]["id"])
    assert {"community": 1, "level": 0, "title": "Community 1", "has_report": False} in member["communities"]


def test_neighbourhood_walks_hops_and_keeps_the_nearest_then_best_connected(index):
    alex = entity_detail(index, "ALEX MERCER")
    ids = dict(zip(index.entities["title"], index.entities["id"], strict=True))
    rels = index.relationships
    one = neighbourhood(index, "ALEX MERCER")
    assert plain_json(one) == one and one["center"] == alex["id"]
    assert one["nodes"][0] == {**one["nodes"][0], "id": alex["id"], "hop": 0}
    direct = {ids[t] for t in rels.loc[rels["source"] == "ALEX MERCER", "target"]} | {
        ids[s] for s in rels.loc[rels["target"] == "ALEX MERCER", "source"]}
    assert {n["id"] for n in one["nodes"] if n["hop"] == 1} == direct and len(one["nodes"]) == len(direct) + 1
    kept = {n["id"] for n in one["nodes"]}
    between = rels[rels["source"].map(ids).isin(kept) & rels["target"].map(ids).isin(kept)]
    assert {e["id"] for e in one["edges"]} == set(between["id"])
    assert all(e["source"] in kept and e["target"] in kept for e in one["edges"])
    two = neighbourhood(index, alex["id"], hops=2)
    assert kept < {n["id"] for n in two["nodes"]} and max(n["hop"] for n in two["nodes"]) == 2
    three = neighbourhood(index, "ALEX MERCER", hops=3, limit=4)
    assert [n["hop"] for n in three["nodes"]] == [0, 1, 1, 1]
    nearest = sorted((n for n in one["nodes"] if n["hop"] == 1), key=lambda n: (-n["degree"], n["title"]))
    assert [n["id"] for n in three["nodes"][1:]] == [n["id"] for n in nearest[:3]]
    assert all(e["source"] in {n["id"] for n in three["nodes"]} for e in three["edges"])
    lonely = neighbourhood(index, index.entities[index.entities["degree"] == 0]["title"].iloc[0], hops=3)
    assert len(lonely["nodes"]) == 1 and lonely["edges"] == []
    for hops in (0, 4):
        with pytest.raises(ValueError, match=f"hops must be between 1 and 3, got {hops}"):
            neighbourhood(index, "ALEX MERCER", hops=hops)
    with pytest.raises(NotFound):
        neighbourhood(index, "nobody at all")


def test_look_ups_are_kept_per_index(dulce):
    first, second = IndexTables(load_config(dulce)), IndexTables(load_config(dulce))
    assert find_entities(first, "alex mercer")[0]["title"] == "ALEX MERCER"
    second.entities = second.entities[second.entities["title"] != "ALEX MERCER"]
    assert "ALEX MERCER" not in [e["title"] for e in find_entities(second, "alex mercer")]
    assert find_entities(first, "alex mercer")[0]["title"] == "ALEX MERCER"


def synthetic_index(root: Path, n: int = 10_000, edges: int = 30_000) -> IndexTables:
    """An index of `n` entities and `edges` relationships with a few hubs, as a real graph has."""
    write_settings(root)
    out = root / "output"
    out.mkdir()
    rng = random.Random(7)
    titles = [f"ENTITY {i} {rng.choice(['ALPHA', 'BETA', 'GAMMA'])}" for i in range(n)]
    pairs: set[tuple[int, int]] = set()
    while len(pairs) < edges:
        a, b = min(int(rng.paretovariate(1.2)) - 1, n - 1), rng.randrange(n)
        if a != b:
            pairs.add((a, b))
    rels = pd.DataFrame({"id": [f"r{i}" for i in range(edges)], "human_readable_id": range(edges),
                         "source": [titles[a] for a, _ in pairs], "target": [titles[b] for _, b in pairs],
                         "description": "related", "weight": 1.0})
    degree = pd.concat([rels["source"], rels["target"]]).value_counts()
    ids = [f"e{i}" for i in range(n)]
    pd.DataFrame({"id": ids, "human_readable_id": range(n), "title": titles, "type": "THING",
                  "description": "an entity", "degree": [int(degree.get(t, 0)) for t in titles]}
                 ).to_parquet(out / "entities.parquet")
    rels.to_parquet(out / "relationships.parquet")
    pd.DataFrame({"id": [f"c{i}" for i in range(100)], "community": range(100), "level": 0, "parent": -1,
                  "title": [f"Community {i}" for i in range(100)], "entity_ids": [ids[i::100] for i in range(100)]}
                 ).to_parquet(out / "communities.parquet")
    return IndexTables(load_config(root))


@contextlib.contextmanager
def no_table_reads(index: IndexTables) -> Iterator[None]:
    """Every table of `index` replaced by one that lets a look-up take a row by its position and fails on any
    other read (a column, a filter, a scan)."""
    class RowsOnly:
        def __init__(self, frame: pd.DataFrame) -> None:
            self._frame = frame

        @property
        def iloc(self) -> Any:
            frame = self._frame

            class Position:
                def __getitem__(self, position: Any) -> Any:
                    assert isinstance(position, int), f"a look-up read rows {position!r} of a table"
                    return frame.iloc[position]
            return Position()

        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"a look-up read a table ({name})")

        def __getitem__(self, key: Any) -> Any:
            raise AssertionError(f"a look-up read a table ([{key!r}])")

        def __len__(self) -> int:
            raise AssertionError("a look-up read a table's length")

    names = ("documents", "text_units", "entities", "relationships", "communities", "reports", "covariates",
             "entities_by_id")
    kept = {name: index.__dict__.pop(name) for name in names if name in index.__dict__}
    index.__dict__.update({name: RowsOnly(kept[name]) if name in kept else RowsOnly(pd.DataFrame())
                           for name in names})
    try:
        yield
    finally:
        for name in names:
            index.__dict__.pop(name, None)
        index.__dict__.update(kept)


def test_look_ups_take_milliseconds_on_ten_thousand_entities(tmp_path):
    index = synthetic_index(tmp_path)
    title = index.entities["title"][5000].lower()
    looks = [lambda: find_entities(index, "entity 77"), lambda: find_entities(index, ""),
             lambda: neighbourhood(index, "e0", hops=3), lambda: neighbourhood(index, "e9999", hops=3),
             lambda: entity_detail(index, "e0"), lambda: entity_detail(index, title)]
    for look in looks:  # the first of each builds the look-ups it needs, once (a server builds all at load)
        look()
    # what keeps a look-up at milliseconds: it walks the prebuilt look-ups, never a table (a pass over 10,000
    # rows of pandas per request is what took seconds); checked by counting, not timed (a busy machine)
    with no_table_reads(index):
        for look in looks:
            look()
    hub = neighbourhood(index, "e0", hops=1)
    assert len(hub["nodes"]) == 150 and hub["nodes"][0]["hop"] == 0
    assert [n["degree"] for n in hub["nodes"][1:]] == sorted((n["degree"] for n in hub["nodes"][1:]), reverse=True)


def test_an_index_whose_look_ups_were_used_is_freed_without_waiting_for_the_collector(dulce):
    """A server reload drops its old index: with no cycle between the tables and their look-ups, reference
    counting frees them at once (the cyclic collector may run much later, holding every DataFrame)."""
    import gc
    import weakref

    index = IndexTables(load_config(dulce))
    assert find_entities(index, "alex")  # builds the look-ups, which point back at the tables
    gone = weakref.ref(index)
    gc.disable()
    try:
        del index
        assert gone() is None
    finally:
        gc.enable()
