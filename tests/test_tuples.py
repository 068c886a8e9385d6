"""The tuple parser on the cases where Microsoft GraphRAG's parser loses or corrupts data."""

from graphrag_lite.extraction.tuples import parse_claims_reply, parse_graph_reply

E, R = '("entity"<|>', '("relationship"<|>'


def test_last_record_keeps_its_strength_and_a_clean_description():
    # GraphRAG #803: the final record keeps ")<|COMPLETE|>"; its strength falls back to 1.0
    reply = f"{E}ALICE<|>PERSON<|>Alice is an engineer)##{R}ALICE<|>ACME<|>Alice works at Acme<|>7)<|COMPLETE|>"
    parsed = parse_graph_reply(reply)
    assert parsed.relationships[0].strength == 7.0
    assert parsed.relationships[0].description == "Alice works at Acme"
    assert parsed.complete and not parsed.dropped


def test_last_entity_description_has_no_markup():
    parsed = parse_graph_reply(f"{E}ACME<|>ORGANIZATION<|>A firm (founded 1990))<|COMPLETE|>")
    assert parsed.entities[0].description == "A firm (founded 1990)"


def test_gleaning_replies_parsed_separately_lose_nothing():
    # GraphRAG #1183 concatenates replies with no separator; records found by their start survive even then
    first = f"{E}ALICE<|>PERSON<|>An engineer)<|COMPLETE|>"
    glean = f"{E}BOB<|>PERSON<|>A pilot)##{R}ALICE<|>BOB<|>Colleagues<|>4)<|COMPLETE|>"
    glued = parse_graph_reply(first + glean)
    assert [e.name for e in glued.entities] == ["ALICE", "BOB"]
    assert glued.relationships[0].strength == 4.0


def test_whitespace_quotes_lowercase_tags_and_missing_parentheses_are_tolerated():
    reply = ('  ("Entity" <|> "alice smith" <|> person <|>  Alice is   an engineer )\n##\n'
             'relationship<|>alice smith<|>acme<|>Employment<|>8\n##\n'
             "('entity'<|>Acme<|>organization<|>'A company')<|complete|>")
    parsed = parse_graph_reply(reply)
    assert [(e.name, e.type, e.description) for e in parsed.entities] == [
        ("ALICE SMITH", "PERSON", "Alice is an engineer"), ("ACME", "ORGANIZATION", "A company")]
    assert parsed.relationships[0].source == "ALICE SMITH" and parsed.relationships[0].strength == 8.0
    assert parsed.complete and not parsed.dropped


def test_markdown_fences_and_one_record_per_line_without_separators():
    reply = f"```\n{E}ALICE<|>PERSON<|>An engineer)\n{E}BOB<|>PERSON<|>A pilot)\n<|COMPLETE|>\n```"
    parsed = parse_graph_reply(reply)
    assert [e.name for e in parsed.entities] == ["ALICE", "BOB"]
    assert parsed.entities[1].description == "A pilot"


def test_records_with_too_few_fields_are_counted_as_dropped():
    reply = f"{E}ALICE<|>PERSON)##{R}ALICE<|>BOB)##{R}ALICE<|>ALICE<|>Self<|>3)##{E}BOB<|>PERSON<|>Pilot)"
    parsed = parse_graph_reply(reply)
    assert [e.name for e in parsed.entities] == ["BOB"]
    assert parsed.relationships == []
    assert len(parsed.dropped) == 3
    assert parsed.dropped[0].startswith("entity with 2 of 3 fields")
    assert not parsed.complete  # no completion marker: the caller can tell the reply may be cut off


def test_relationship_without_strength_defaults_to_one():
    parsed = parse_graph_reply(f"{R}ALICE<|>BOB<|>Friends)<|COMPLETE|>")
    assert parsed.relationships[0].strength == 1.0 and parsed.relationships[0].description == "Friends"


def test_prose_around_records_is_ignored_but_a_damaged_record_is_counted():
    parsed = parse_graph_reply(f"Here are the results:\n{E}ALICE<|>PERSON<|>Engineer)<|COMPLETE|>")
    assert len(parsed.entities) == 1 and parsed.dropped == []
    damaged = parse_graph_reply(f"ALICE<|>PERSON<|>Engineer)##{E}BOB<|>PERSON<|>Pilot)")
    assert len(damaged.entities) == 1 and len(damaged.dropped) == 1


def test_claims_parse_and_blank_claims_are_dropped_not_kept():
    reply = ("(ACME<|>GOV AGENCY<|>FRAUD<|>suspected<|>2022-01-10<|>NONE<|>Acme is suspected of fraud<|>quote one)"
             "##(NONE<|>NONE<|>NONE<|>TRUE<|>NONE<|>NONE<|><|>)##(BOB<|>NONE<|>FINE)<|COMPLETE|>")
    parsed = parse_claims_reply(reply)
    assert len(parsed.claims) == 1
    claim = parsed.claims[0]
    assert (claim.subject, claim.object, claim.type, claim.status) == ("ACME", "GOV AGENCY", "FRAUD", "SUSPECTED")
    assert claim.source_text == "quote one" and claim.end_date == "NONE"
    assert len(parsed.dropped) == 2 and parsed.complete


def test_claim_gleanings_concatenated_keep_both():
    first = "(ACME<|>NONE<|>FRAUD<|>TRUE<|>NONE<|>NONE<|>Fraud<|>q1)<|COMPLETE|>"
    glean = "(BOB<|>NONE<|>BRIBERY<|>FALSE<|>NONE<|>NONE<|>Bribery<|>q2)<|COMPLETE|>"
    assert [c.subject for c in parse_claims_reply(first + glean).claims] == ["ACME", "BOB"]


def test_json_extraction_format_gives_the_same_records_and_counts_drops():
    import pytest

    from graphrag_lite.answer_parsing import ParseError
    from graphrag_lite.extraction.tuples import parse_graph_json

    reply = ('```json\n{"entities": [{"name": "alice", "type": "person", "description": "An engineer"}, '
             '{"name": " ", "type": "person"}], "relationships": [{"source": "Alice", "target": "Acme", '
             '"description": "Works there", "strength": "7"}, {"source": "Alice", "target": "ALICE"}]}\n```')
    parsed = parse_graph_json(reply)
    assert [(e.name, e.type, e.description) for e in parsed.entities] == [("ALICE", "PERSON", "An engineer")]
    assert [(r.source, r.target, r.strength) for r in parsed.relationships] == [("ALICE", "ACME", 7.0)]
    assert len(parsed.dropped) == 2 and parsed.complete
    with pytest.raises(ParseError):
        parse_graph_json('{"entities": [{"type": "person"}]}')  # a name is required
