"""Export an index's graph for other tools: GraphML (Gephi, yEd, networkx, igraph) and CSV files with a Cypher
script for Neo4j."""

from __future__ import annotations

import csv
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import pandas as pd

from graphrag_lite.errors import MissingIndex, index_command
from graphrag_lite.storage import OutputStore, atomic_path
from graphrag_lite.tables import community_memberships

NO_COMMUNITY = -1
# characters XML 1.0 cannot hold even escaped (control characters a document may carry into a description):
# written as they are, every GraphML reader refuses the whole file
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# entity types that can be a Neo4j label as they are: in the Cypher script unquoted, and in the :LABEL column
# (where ';' would split it)
_LABEL = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
GRAPHML_NS = "http://graphml.graphdrawing.org/xmlns"


@dataclass
class _Graph:
    entities: pd.DataFrame
    relationships: pd.DataFrame
    levels: list[int]  # the community levels of the index, coarsest (0) first
    memberships: dict[str, dict[int, int]]  # entity id -> level -> community

    def community(self, entity_id: str, level: int | None = None) -> int:
        """The entity's community at `level`; its finest (deepest level) one when `level` is None."""
        levels = self.memberships.get(entity_id, {})
        if level is None:
            return levels[max(levels)] if levels else NO_COMMUNITY
        return levels.get(level, NO_COMMUNITY)


def _read_graph(store: OutputStore, root: Path) -> _Graph:
    if not (store.has("entities") and store.has("relationships")):
        raise MissingIndex(f"no entities/relationships tables in {store.base_dir}; build the index with "
                           f"`{index_command(root)}`")
    entities = store.read("entities").fillna({"type": "", "description": ""})
    relationships = store.read("relationships").fillna({"description": ""})
    memberships: dict[str, dict[int, int]] = {}
    levels: set[int] = set()
    # a pipeline that stops before clustering has a graph but no communities: every entity is in none
    if store.has("communities"):
        communities = store.read("communities")
        levels = {int(level) for level in communities["level"]}
        memberships = {entity_id: dict(pairs) for entity_id, pairs in community_memberships(communities).items()}
    return _Graph(entities, relationships, sorted(levels), memberships)


def _xml(value: Any) -> str:
    return _NOT_XML.sub("", str(value))


def export_graphml(store: OutputStore, target: Path, root: Path) -> tuple[int, int]:
    """Write entities as nodes (GraphML id: the title) and relationships as weighted edges; returns (nodes,
    edges). Nodes carry `community` (the finest community, -1 for none) and `community_level_<n>` for each
    level. `root`: the project, for the message when there is no index."""
    graph = _read_graph(store, root)
    level_keys = {level: f"community_level_{level}" for level in graph.levels}
    # the entity id is `entity_id`: igraph reads GraphML node ids into an `id` attribute (a warning if taken)
    node_keys = {"title": "string", "entity_id": "string", "type": "string", "description": "string",
                 "degree": "long", "frequency": "long", "community": "long"} | dict.fromkeys(level_keys.values(),
                                                                                            "long")
    edge_keys = {"id": "string", "description": "string", "weight": "double", "combined_degree": "long"}
    document = ET.Element("graphml", {"xmlns": GRAPHML_NS})
    for kind, keys in (("node", node_keys), ("edge", edge_keys)):
        for name, type_ in keys.items():
            ET.SubElement(document, "key", {"id": f"{kind[0]}_{name}", "for": kind, "attr.name": name,
                                            "attr.type": type_})
    body = ET.SubElement(document, "graph", {"id": "G", "edgedefault": "undirected"})
    for entity in graph.entities.itertuples():
        values = {"title": entity.title, "entity_id": entity.id, "type": entity.type,
                  "description": entity.description, "degree": entity.degree, "frequency": entity.frequency,
                  "community": graph.community(str(entity.id))}
        values |= {key: graph.community(str(entity.id), level) for level, key in level_keys.items()}
        node = ET.SubElement(body, "node", {"id": _xml(entity.title)})
        for name, value in values.items():
            ET.SubElement(node, "data", {"key": f"n_{name}"}).text = _xml(value)
    for relationship in graph.relationships.itertuples():
        edge = ET.SubElement(body, "edge", {"source": _xml(relationship.source), "target": _xml(relationship.target)})
        for name in edge_keys:
            ET.SubElement(edge, "data", {"key": f"e_{name}"}).text = _xml(getattr(relationship, name))
    ET.indent(document)
    with atomic_path(target) as tmp:
        ET.ElementTree(document).write(tmp, encoding="utf-8", xml_declaration=True)
    return len(graph.entities), len(graph.relationships)


class Neo4jExport(TypedDict):
    nodes: int
    relationships: int
    files: list[Path]


NODE_HEADER = ["id:ID", "title", "type", "description", "degree:int", "frequency:int", "community:int", ":LABEL"]
RELATIONSHIP_HEADER = [":START_ID", ":END_ID", ":TYPE", "id", "weight:float", "description"]
ENTITY_LABEL, RELATIONSHIP_TYPE = "Entity", "RELATED"


def export_neo4j(store: OutputStore, folder: Path, root: Path) -> Neo4jExport:
    """Write `nodes.csv` and `relationships.csv` (headers as `neo4j-admin database import full` reads them) and
    `import.cypher` (the same graph through LOAD CSV) into `folder`. Nodes: entities, keyed by entity id,
    labelled Entity and their type where it can be a label; relationships: RELATED, with weight and description."""
    graph = _read_graph(store, root)
    ids = dict(zip(graph.entities["title"], graph.entities["id"], strict=True))  # relationships name titles
    labels = sorted({str(t) for t in graph.entities["type"] if _LABEL.fullmatch(str(t)) and t != ENTITY_LABEL})
    nodes = [[e.id, e.title, e.type, e.description, e.degree, e.frequency, graph.community(str(e.id)),
              ";".join([ENTITY_LABEL, str(e.type)] if e.type in labels else [ENTITY_LABEL])]
             for e in graph.entities.itertuples()]
    relationships = [[ids[r.source], ids[r.target], RELATIONSHIP_TYPE, r.id, r.weight, r.description]
                     for r in graph.relationships.itertuples()]
    files = [folder / "nodes.csv", folder / "relationships.csv", folder / "import.cypher"]
    _write_csv(files[0], NODE_HEADER, nodes)
    _write_csv(files[1], RELATIONSHIP_HEADER, relationships)
    with atomic_path(files[2]) as tmp:
        tmp.write_text(_cypher(labels), encoding="utf-8")
    return {"nodes": len(nodes), "relationships": len(relationships), "files": files}


def _write_csv(path: Path, header: list[str], rows: list[list[Any]]) -> None:
    # the csv module quotes any field with a comma, quote or line break (a quote doubled), as both LOAD CSV and
    # neo4j-admin read it; line breaks inside fields need neo4j-admin's --multiline-fields=true
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def _cypher(labels: list[str]) -> str:
    """The Cypher script that loads the two CSV files; one statement per entity type label, since plain Cypher
    cannot take a label from a value."""
    type_labels = "".join(f"MATCH (n:{ENTITY_LABEL} {{type: '{label}'}}) SET n:{label};\n" for label in labels)
    return f"""\
// The entity graph of a graphrag-lite index. Copy nodes.csv and relationships.csv into the import folder of
// the Neo4j server, then run: cypher-shell -f import.cypher
// Or, into a new database: neo4j-admin database import full --nodes=nodes.csv
//   --relationships=relationships.csv --multiline-fields=true <database>
CREATE CONSTRAINT entity_id IF NOT EXISTS FOR (n:{ENTITY_LABEL}) REQUIRE n.id IS UNIQUE;

LOAD CSV WITH HEADERS FROM 'file:///nodes.csv' AS row
MERGE (n:{ENTITY_LABEL} {{id: row.`id:ID`}})
SET n.title = row.title, n.type = row.type, n.description = row.description,
    n.degree = toInteger(row.`degree:int`), n.frequency = toInteger(row.`frequency:int`),
    n.community = toInteger(row.`community:int`);

{type_labels}
LOAD CSV WITH HEADERS FROM 'file:///relationships.csv' AS row
MATCH (source:{ENTITY_LABEL} {{id: row.`:START_ID`}})
MATCH (target:{ENTITY_LABEL} {{id: row.`:END_ID`}})
MERGE (source)-[r:{RELATIONSHIP_TYPE} {{id: row.id}}]->(target)
SET r.weight = toFloat(row.`weight:float`), r.description = row.description;
"""
