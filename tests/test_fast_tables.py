"""The fast method's tables on hand-built input, value by value: the rule-based records (a relationship described by
the first window its pair shares in a text unit), and the extractive reports (a community's best sentences: those
naming the most of its entities, the first read on ties)."""

from __future__ import annotations

import pandas as pd

from graphrag_lite.config import ExtractGraphNlpConfig
from graphrag_lite.nlp.cooccurrence import extract_nlp_graph
from graphrag_lite.stages.community_reports_extractive import extractive_reports

UNITS = pd.DataFrame({"id": ["u1", "u2", "u3"], "text": [
    "John Smith met Mary Jones in London. It rained. Later John Smith and Mary Jones dined. Mary Jones left.",
    "It was cold. Mary Jones wrote to John Smith. Nobody answered.",
    "It snowed. John Smith slept. Mary Jones visited London at dawn."]})
MET, WROTE, VISITED = ("John Smith met Mary Jones in London.", "Mary Jones wrote to John Smith.",
                       "Mary Jones visited London at dawn.")


def together(a: str, b: str, window: str) -> str:
    return f"{a} and {b} are mentioned together: {window}"


def test_each_pair_of_a_unit_is_described_by_the_first_sentence_it_shares_there():
    graph = extract_nlp_graph(UNITS, ExtractGraphNlpConfig(min_entity_frequency=1, min_npmi=-1))
    assert graph.entities.to_dict("records") == [
        {"text_unit_id": "u1", "name": "JOHN SMITH", "type": "PERSON", "description": MET},
        {"text_unit_id": "u1", "name": "MARY JONES", "type": "PERSON", "description": MET},
        {"text_unit_id": "u1", "name": "LONDON", "type": "GEO", "description": MET},
        {"text_unit_id": "u2", "name": "MARY JONES", "type": "PERSON", "description": WROTE},
        {"text_unit_id": "u2", "name": "JOHN SMITH", "type": "PERSON", "description": WROTE},
        {"text_unit_id": "u3", "name": "JOHN SMITH", "type": "PERSON", "description": "John Smith slept."},
        {"text_unit_id": "u3", "name": "MARY JONES", "type": "PERSON", "description": VISITED},
        {"text_unit_id": "u3", "name": "LONDON", "type": "GEO", "description": VISITED}]
    rows = graph.relationships[["text_unit_id", "source", "target", "description"]].to_dict("split")["data"]
    assert rows == [  # u1's second shared sentence adds no row; u3's pair is in its third sentence
        ["u1", "JOHN SMITH", "LONDON", together("John Smith", "London", MET)],
        ["u1", "JOHN SMITH", "MARY JONES", together("John Smith", "Mary Jones", MET)],
        ["u1", "LONDON", "MARY JONES", together("London", "Mary Jones", MET)],
        ["u2", "JOHN SMITH", "MARY JONES", together("John Smith", "Mary Jones", WROTE)],
        ["u3", "LONDON", "MARY JONES", together("London", "Mary Jones", VISITED)]]


def test_with_text_unit_windows_a_pair_is_described_by_its_unit():
    graph = extract_nlp_graph(UNITS, ExtractGraphNlpConfig(window="text_unit", min_entity_frequency=1, min_npmi=-1))
    rows = graph.relationships[["text_unit_id", "source", "target", "description"]].to_dict("split")["data"]
    assert [row[:3] for row in rows] == [["u1", "JOHN SMITH", "LONDON"], ["u1", "JOHN SMITH", "MARY JONES"],
                                         ["u1", "LONDON", "MARY JONES"], ["u2", "JOHN SMITH", "MARY JONES"],
                                         ["u3", "JOHN SMITH", "LONDON"], ["u3", "JOHN SMITH", "MARY JONES"],
                                         ["u3", "LONDON", "MARY JONES"]]
    assert rows[3][3] == together("John Smith", "Mary Jones", UNITS["text"][1])
    assert rows[6][3] == together("London", "Mary Jones", UNITS["text"][2])


def test_a_communitys_report_is_made_of_its_sentences_naming_most_of_its_entities():
    text_units = pd.DataFrame({"id": ["t1", "t2"], "text": [
        "Ann sang. Ann met Bob. Nobody came. Ann, Bob and Cid ate. Bob and Cid left. Dan waved.",
        "Cid slept. Ann and Bob and Cid and Dan danced. Bob met Ann."]})
    entities = pd.DataFrame({"id": ["a", "b", "c", "d"], "title": ["ANN", "BOB", "CID", "DAN"],
                             "human_readable_id": [0, 1, 2, 3],
                             # Dan is listed for t2 only: his name in t1 is not his mention there
                             "text_unit_ids": [["t1", "t2"], ["t1", "t2"], ["t1", "t2"], ["t2"]]})
    relationships = pd.DataFrame({"id": ["r1", "r2"], "source": ["ANN", "BOB"], "target": ["BOB", "CID"]})
    communities = pd.DataFrame({
        "id": ["c0", "c1"], "human_readable_id": [0, 1], "community": [0, 1], "level": [0, 0], "parent": [-1, -1],
        "children": [[], []], "title": ["Community 0", "Community 1"], "entity_ids": [["a", "b", "c"], ["d"]],
        "relationship_ids": [["r1", "r2"], []], "text_unit_ids": [["t1", "t2"], ["t2"]], "period": ["", ""],
        "size": [3, 1]})
    reports = extractive_reports(communities, entities, relationships, text_units)
    first = reports.iloc[0]
    # three of its entities, twice: the first read wins; then two of them, three times, in the order read
    assert first["summary"] == "Ann, Bob and Cid ate."
    assert [f["explanation"] for f in first["findings"]] == [
        "Ann and Bob and Cid and Dan danced. [Data: Entities (0, 1, 2)]", "Ann met Bob. [Data: Entities (0, 1)]",
        "Bob and Cid left. [Data: Entities (1, 2)]", "Bob met Ann. [Data: Entities (0, 1)]",
        "Ann sang. [Data: Entities (0)]"]
    assert first["title"] == "Bob and Ann community"  # the most connected inside first, then by name
    assert reports.iloc[1]["summary"] == "Ann and Bob and Cid and Dan danced."
