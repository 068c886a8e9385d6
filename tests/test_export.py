"""Graph out (issue 14, point 12): GraphML that networkx and igraph read cleanly, with titles as node ids and
the communities on the nodes; CSV files and a Cypher script for Neo4j."""

from __future__ import annotations

import csv
import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from graphrag_lite.cli import app
from graphrag_lite.errors import MissingIndex, index_command
from graphrag_lite.export import export_graphml, export_neo4j
from graphrag_lite.storage import OutputStore
from tests.conftest import SAMPLE, make_project

# what a description may hold: a comma, quotes, XML's special characters, a line break, and a control character
# XML 1.0 cannot hold at all (dropped from GraphML; kept as it is in the CSV files)
AWKWARD = 'He said, "so to bed" <at once> & slept.\nNext day\x0b: the office.'


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> Path:
    """A real index of the bundled sample (Pepys' diary), built with the fast method (no model)."""
    root = make_project(tmp_path_factory.mktemp("export") / "project", SAMPLE)
    result = CliRunner().invoke(app, ["index", "--root", str(root), "--method", "fast"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return root


@pytest.fixture(scope="module")
def awkward(indexed, tmp_path_factory) -> OutputStore:
    """A copy of the index whose first entity and first relationship have an awkward description, and whose
    first entity has a type that cannot be a Neo4j label."""
    store = OutputStore(tmp_path_factory.mktemp("awkward"))
    for table in ("entities", "relationships", "communities"):
        shutil.copy(indexed / "output" / f"{table}.parquet", store.path(table))
    entities, relationships = store.read("entities"), store.read("relationships")
    entities.loc[0, "description"] = relationships.loc[0, "description"] = AWKWARD
    entities.loc[0, "type"] = "MUSICAL GROUP;BAND"
    store.write("entities", entities)
    store.write("relationships", relationships)
    return store


def table(root: Path, name: str) -> pd.DataFrame:
    return pd.read_parquet(root / "output" / f"{name}.parquet")


def expected_communities(root: Path) -> dict[str, dict[int, int]]:
    """title -> level -> community, from the communities table."""
    titles = dict(zip(table(root, "entities")["id"], table(root, "entities")["title"], strict=True))
    expected: dict[str, dict[int, int]] = {title: {} for title in titles.values()}
    for row in table(root, "communities").itertuples():
        for entity_id in row.entity_ids:
            expected[titles[entity_id]][row.level] = row.community
    return expected


def read_strictly(reader, path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning of the reader fails the test
        return reader(str(path))


def test_graphml_reads_cleanly_with_titles_as_ids_and_communities_on_the_nodes(indexed, tmp_path):
    nx = pytest.importorskip("networkx")
    import igraph as ig

    target = tmp_path / "graph.graphml"
    result = CliRunner().invoke(app, ["export", "graphml", "--root", str(indexed), "--out", str(target)])
    assert result.exit_code == 0, result.output
    entities, relationships = table(indexed, "entities"), table(indexed, "relationships")
    graph = read_strictly(nx.read_graphml, target)
    assert set(graph.nodes) == set(entities["title"]) and graph.number_of_edges() == len(relationships)
    for row in relationships.itertuples():
        assert graph.edges[row.source, row.target]["weight"] == pytest.approx(row.weight)
    for row in entities.itertuples():
        node = graph.nodes[row.title]
        assert (node["type"], node["description"], node["degree"], node["entity_id"]) == (
            row.type, row.description, row.degree, row.id)
    levels = sorted(set(table(indexed, "communities")["level"]))
    assert len(levels) >= 2  # the sample has a hierarchy, so the finest community is not always level 0's
    for title, communities in expected_communities(indexed).items():
        node = graph.nodes[title]
        for level in levels:
            assert node[f"community_level_{level}"] == communities.get(level, -1), (title, level)
        assert node["community"] == (communities[max(communities)] if communities else -1), title
    assert any(graph.nodes[t]["community"] != graph.nodes[t]["community_level_0"] for t in graph.nodes)
    other = read_strictly(ig.Graph.Read_GraphML, target)
    assert other.vs["id"] == list(entities["title"]) and other.ecount() == len(relationships)
    assert other.vs["community"] == [graph.nodes[t]["community"] for t in entities["title"]]


def test_graphml_keeps_what_xml_can_hold_of_a_description(awkward, tmp_path):
    nx = pytest.importorskip("networkx")

    target = tmp_path / "graph.graphml"
    assert export_graphml(awkward, target, tmp_path) == (len(awkward.read("entities")),
                                                         len(awkward.read("relationships")))
    graph = read_strictly(nx.read_graphml, target)
    entity, relationship = awkward.read("entities").iloc[0], awkward.read("relationships").iloc[0]
    assert graph.nodes[entity["title"]]["description"] == AWKWARD.replace("\x0b", "")
    assert graph.edges[relationship["source"], relationship["target"]]["description"] == AWKWARD.replace("\x0b", "")


def test_graphml_of_an_index_with_no_communities_puts_every_entity_in_none(indexed, tmp_path):
    nx = pytest.importorskip("networkx")

    store = OutputStore(tmp_path / "output")
    store.base_dir.mkdir()
    for name in ("entities", "relationships"):
        shutil.copy(indexed / "output" / f"{name}.parquet", store.path(name))
    export_graphml(store, tmp_path / "g.graphml", tmp_path)
    graph = read_strictly(nx.read_graphml, tmp_path / "g.graphml")
    assert {data["community"] for _, data in graph.nodes(data=True)} == {-1}
    assert not any(key.startswith("community_level_") for _, data in graph.nodes(data=True) for key in data)


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


def test_neo4j_export_writes_import_ready_csv_files_and_a_cypher_script(indexed, tmp_path):
    folder = tmp_path / "neo4j"
    store = OutputStore(indexed / "output")
    done = export_neo4j(store, folder, indexed)
    entities, relationships = table(indexed, "entities"), table(indexed, "relationships")
    assert done == {"nodes": len(entities), "relationships": len(relationships),
                    "files": [folder / "nodes.csv", folder / "relationships.csv", folder / "import.cypher"]}
    header, nodes = read_csv(folder / "nodes.csv")
    assert header == ["id:ID", "title", "type", "description", "degree:int", "frequency:int", "community:int",
                      ":LABEL"]
    assert [n["id:ID"] for n in nodes] == list(entities["id"]) and [n["title"] for n in nodes] == list(
        entities["title"])
    finest = {title: (c[max(c)] if c else -1) for title, c in expected_communities(indexed).items()}
    for node, row in zip(nodes, entities.itertuples(), strict=True):
        assert node[":LABEL"] == f"Entity;{row.type}" and int(node["degree:int"]) == row.degree
        assert int(node["community:int"]) == finest[row.title]
    header, edges = read_csv(folder / "relationships.csv")
    assert header == [":START_ID", ":END_ID", ":TYPE", "id", "weight:float", "description"]
    assert len(edges) == len(relationships)
    ids = {n["id:ID"] for n in nodes}
    titles = dict(zip(entities["title"], entities["id"], strict=True))
    for edge, row in zip(edges, relationships.itertuples(), strict=True):
        assert edge[":START_ID"] in ids and edge[":END_ID"] in ids and edge[":TYPE"] == "RELATED"
        assert (edge[":START_ID"], edge[":END_ID"]) == (titles[row.source], titles[row.target])
        assert float(edge["weight:float"]) == pytest.approx(row.weight) and edge["description"] == row.description
    script = (folder / "import.cypher").read_text(encoding="utf-8")
    assert "LOAD CSV WITH HEADERS FROM 'file:///nodes.csv'" in script
    assert "LOAD CSV WITH HEADERS FROM 'file:///relationships.csv'" in script
    assert "MERGE (n:Entity {id: row.`id:ID`})" in script and "[r:RELATED {id: row.id}]" in script
    for type_ in set(entities["type"]):
        assert f"MATCH (n:Entity {{type: '{type_}'}}) SET n:{type_};" in script


def test_neo4j_csv_round_trips_awkward_descriptions_and_keeps_unsafe_types_out_of_labels(awkward, tmp_path):
    export_neo4j(awkward, tmp_path, tmp_path)
    _, nodes = read_csv(tmp_path / "nodes.csv")
    _, edges = read_csv(tmp_path / "relationships.csv")
    assert nodes[0]["description"] == AWKWARD and edges[0]["description"] == AWKWARD
    assert nodes[0]["type"] == "MUSICAL GROUP;BAND" and nodes[0][":LABEL"] == "Entity"
    assert "MUSICAL" not in (tmp_path / "import.cypher").read_text(encoding="utf-8")


def test_exports_without_an_index_say_how_to_build_it(tmp_path):
    store = OutputStore(tmp_path / "output")
    for export, target in ((export_graphml, tmp_path / "g.graphml"), (export_neo4j, tmp_path / "neo4j")):
        with pytest.raises(MissingIndex) as raised:
            export(store, target, tmp_path)
        assert f"no entities/relationships tables in {store.base_dir}" in str(raised.value)
        assert index_command(tmp_path) in str(raised.value)
        assert not target.exists()
