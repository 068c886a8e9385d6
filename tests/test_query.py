"""Local, global and basic search over an index of Operation Dulce (and, for the coverage of global search, of
five unrelated documents), from the CLI and from Python."""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections import Counter, defaultdict

import pandas as pd
import pytest
from typer.testing import CliRunner

from graphrag_lite import GraphRAG
from graphrag_lite.cli import app
from graphrag_lite.context_tables import pack, render
from graphrag_lite.fake.script import scripted
from graphrag_lite.query.citations import cited_ids
from graphrag_lite.query.global_search import (
    REPORT_COLUMNS,
    Point,
    communities_at,
    community_themes,
    map_batches,
    reduce_context,
)
from graphrag_lite.query.local import LEAD_SHARE, build_local_context
from graphrag_lite.tokens import count_tokens
from tests.conftest import DATA, make_project

QUERIES = json.loads((DATA / "operation-dulce" / "fixture_queries.json").read_text())


def cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def novella(tmp_path_factory):
    root = make_project(tmp_path_factory.mktemp("query"), [DATA / "operation-dulce" / "operation-dulce-full.md"])
    result = cli("index", "--root", root)
    assert result.exit_code == 0, result.output
    return root


@pytest.mark.parametrize("method", ["local", "global", "basic"])
@pytest.mark.parametrize("query", [q["query"] for q in QUERIES])
def test_every_method_answers_the_fixture_queries_in_every_mode(novella, method, query):
    plain = cli("query", method, query, "--root", novella)
    assert plain.exit_code == 0, plain.output
    assert "Based on the data" in plain.output and "[Data:" in plain.output
    streamed = cli("query", method, query, "--root", novella, "--streaming")
    assert streamed.exit_code == 0 and streamed.output.strip() == plain.output.strip()
    as_json = cli("query", method, query, "--root", novella, "--json")
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.output)
    assert data["answer"].strip() == plain.output.strip() and data["method"] == method
    assert any(data["citations"].values()) and all(row.get("missing") is not True
                                                    for rows in data["citations"].values() for row in rows)


def test_local_context_sections_stay_within_their_caps_and_sources_get_the_rest(novella):
    rag = GraphRAG.from_config(novella, overrides=["local_search.max_context_tokens=6000"])
    result = rag.local_search("Who is Agent Alex Mercer and what are his goals?")
    assert {"Reports", "Entities", "Relationships", "Sources"} <= {k for k, rows in result.context.items() if rows}
    sections = {s["name"]: s for s in result.sections}
    assert sections["Reports"]["cap"] == 900 and sections["Entities"]["cap"] == 2100
    graph_used = sum(sections[n]["used"] for n in ("Entities", "Relationships", "Claims"))
    assert graph_used <= 2100 and all(s["used"] <= s["cap"] and s["rows"] <= s["candidates"] for s in result.sections)
    assert sections["Sources"]["cap"] == 6000 - sections["Reports"]["used"] - graph_used
    assert result.budgets["Sources"] == sections["Sources"]["cap"] >= 3000  # text_unit_prop is a minimum
    parts = result.context_text.split("-----")
    for name in ("Reports", "Sources"):
        text = "-----" + name + "-----" + parts[parts.index(name) + 1]
        assert count_tokens(text, "o200k_base") <= sections[name]["cap"]
    assert count_tokens(result.context_text, "o200k_base") <= 6000
    linked = [row["entity"] for row in result.context["Entities"]]
    assert linked[0] == "ALEX MERCER"  # named in the question: linked first


def test_shares_the_reports_and_graph_leave_unused_flow_to_the_sources(novella):
    settings = ["local_search.max_context_tokens=6000", "local_search.community_prop=0.5",
                "local_search.text_unit_prop=0.2", "local_search.top_k_entities=1"]
    result = GraphRAG.from_config(novella, overrides=settings).local_search("Who is Sam Rivera?")
    sections = {s["name"]: s for s in result.sections}
    assert sections["Reports"]["used"] < 3000  # one entity's reports do not fill half the budget ...
    assert sections["Sources"]["used"] > 6000 * 0.2 + 500  # ... and what they leave goes to source text
    assert "left" in sections["Sources"]["why"]
    explained = cli("query", "local", "Who is Sam Rivera?", "--root", novella, "--explain", *(
        x for s in settings for x in ("--set", s)))
    assert explained.exit_code == 0 and re.search(r"Sources: [\d,]+ of [\d,]+ tokens", explained.output)


def test_in_network_relationships_come_first(novella):
    rag = GraphRAG.from_config(novella)
    entities = rag.index.entities.set_index("title")
    linked = [entities.loc[t, "id"] for t in ("ALEX MERCER", "TAYLOR CRUZ")]
    context = build_local_context(rag.index, rag.config.local_search, linked, 2)
    rows = next(t for t in context.tables if t.name == "Relationships").rows
    inside = [{r["source"], r["target"]} == {"ALEX MERCER", "TAYLOR CRUZ"} for r in rows]
    assert inside[0] and inside == sorted(inside, reverse=True)
    links = [r["links"] for r in rows if r["links"] != 2]
    assert links == sorted(links, reverse=True)  # out-of-network ranked by how many linked entities they touch
    assert render(context.tables).count("-----Sources-----") == 1


def test_citations_resolve_to_rows_and_source_text(novella):
    rag = GraphRAG.from_config(novella)
    result = rag.basic_search("Who is Jordan Hayes?")
    citations = result.citations()
    source = citations["Sources"][0]
    assert source["document_title"] == "operation-dulce-full.md"
    assert source["text"] and "Jordan" in source["text"]
    assert result.usage is not None and result.usage["calls"] >= 1


def test_async_api_and_global_map_reduce(novella):
    rag = GraphRAG.from_config(novella)
    result = asyncio.run(rag.aglobal_search("What is the major conflict in this story?", community_level=1))
    assert result.context["Points"] and all(0 <= p["score"] <= 100 for p in result.context["Points"])
    assert result.citations()["Reports"]


def test_global_search_with_nothing_relevant_says_so_plainly(novella):
    result = GraphRAG.from_config(novella).global_search("Xylophone quasars zebra?")
    assert result.answer.startswith("No community report at level 2 held information relevant")
    assert "Considered" in result.answer and result.context["Points"] == []


def test_queries_against_missing_or_incomplete_indexes_say_what_to_build(tmp_path, novella):
    empty = make_project(tmp_path / "empty", [DATA / "operation-dulce" / "dulce.txt"])
    result = cli("query", "local", "Who?", "--root", empty)
    assert result.exit_code == 2 and "graphrag-lite index" in result.output
    [version] = (novella / "output" / "tables").glob("community_reports.*.parquet")
    version.rename(novella / "output" / "saved.parquet")
    (novella / "output" / "community_reports.parquet").unlink()  # a link to the same file, for other readers
    try:  # the committed version of a table gone: the index is damaged (exit 6), with the file and the repair
        missing = cli("query", "global", "What?", "--root", novella)
        assert missing.exit_code == 6
        assert "community_reports" in missing.output and "missing" in missing.output and "graphrag-lite index" in \
            missing.output
    finally:
        os.link(novella / "output" / "saved.parquet", novella / "output" / "community_reports.parquet")
        (novella / "output" / "saved.parquet").rename(version)
    other = cli("query", "local", "Who?", "--root", novella, "--set",
                "models.default_embedding_model.model=fake/embedding?dim=64")
    assert other.exit_code == 2 and "graphrag-lite index --from embed_text" in other.output


def test_explain_prints_context_and_usage(novella):
    result = cli("query", "basic", "Who is Jordan Hayes?", "--root", novella, "--explain")
    assert result.exit_code == 0
    assert "-----Sources-----" in result.output and "LLM:" in result.output


def test_dynamic_community_selection_descends_only_into_relevant_reports(novella):
    rag = GraphRAG.from_config(novella, overrides=["global_search.dynamic_community_selection=true",
                                                   "global_search.dynamic_threshold=2"])
    result = rag.global_search("What is the conflict between Alex Mercer and Taylor Cruz?")
    note = next(p for p in result.problems if p.startswith("dynamic community selection"))
    rated, kept = (int(n) for n in re.findall(r"\d+", note))
    assert 0 < kept < len(rag.index.reports) and rated <= len(rag.index.reports)
    stats = rag.gateway.ledger.by_stage()
    assert stats["query_global_rate"]["calls"] == rated
    used = {row["id"] for row in result.context["Reports"]}
    assert len(used) == kept and result.citations()["Reports"]
    assert result.coverage is not None and result.coverage.mapped_communities == kept


def test_local_sources_fuse_entity_units_with_directly_retrieved_units(novella):
    rag = GraphRAG.from_config(novella, overrides=["local_search.source_ranking=fusion"])
    entities = rag.index.entities.set_index("title")
    linked = [entities.loc["ALEX MERCER", "id"]]
    units = rag.index.text_units
    outside = units[~units["id"].isin(set(entities.loc["ALEX MERCER", "text_unit_ids"]))]
    assert len(outside), "every unit mentions Alex Mercer; pick another entity"
    found = outside["id"].iloc[0]
    fused = build_local_context(rag.index, rag.config.local_search, linked, 2, [found])
    only = build_local_context(rag.index, rag.config.local_search, linked, 2, [])
    ids = lambda context: [r["id"] for t in context.tables if t.name == "Sources" for r in t.rows]  # noqa: E731
    hrid = int(outside["human_readable_id"].iloc[0])
    assert hrid in ids(fused)[:2] and hrid not in ids(only)  # a direct hit ranks high; entity-only misses it
    off = GraphRAG.from_config(novella, overrides=["local_search.retrieved_text_units=0",
                                                  "local_search.source_ranking=fusion"])
    result = off.local_search("Who is Jordan Hayes?")
    titles = {row["entity"] for row in result.context["Entities"]}
    linked_units = {u for t, ids in zip(off.index.entities["title"], off.index.entities["text_unit_ids"], strict=True)
                    if t in titles for u in ids}
    readable = dict(zip(off.index.text_units["human_readable_id"], off.index.text_units["id"], strict=True))
    assert result.context["Sources"] and all(readable[r["id"]] in linked_units for r in result.context["Sources"])


def test_two_hops_from_the_cli_show_the_second_round_and_its_cost(novella):
    result = cli("query", "local", "Who works with Alex Mercer?", "--root", novella, "--hops", "2", "--json",
                 "--no-cache")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    first, second = data["rounds"]
    assert first["query"] == "Who works with Alex Mercer?" and first["calls"] == 0
    assert second["query"] and second["query"] != first["query"]  # the fake names the bridge entity
    assert second["calls"] == 1 and second["tokens"] > 0 and second["linked_entities"]
    final = {row["id"] for row in data["context"]["Sources"]}
    assert set(second["new_sources"]) <= final and second["kept_sources"] == second["new_sources"]
    assert set(first["kept_sources"]) == set(first["new_sources"]) & final and not second["cached"]
    assert data["usage"]["by_stage"]["query_local_hop"]["calls"] == 1
    stages = data["usage"]["by_stage"]
    assert stages["query_local"]["calls"] == 1 and stages["query_embed"]["calls"] == 2  # the question, the lead
    explained = cli("query", "local", "Who works with Alex Mercer?", "--root", novella, "--hops", "2", "--explain")
    assert re.search(r"round 1: Who works with Alex Mercer\? \(linked .+; \d+ new sources, \d+ in the final "
                     r"context\)", explained.output)
    assert re.search(r"round 2: .+ \(linked .+ in the final context; 1 call, [\d,]+ tokens\)", explained.output)


def test_the_next_round_follows_the_models_lead_into_new_sources(novella):
    rag = GraphRAG.from_config(novella, overrides=["local_search.max_context_tokens=12000", "local_search.hops=2",
                                                   "local_search.retrieved_text_units=0"], use_cache=False)
    one = asyncio.run(rag.alocal_context("Who is Alex Mercer?"))
    seen = {row["id"] for row in one.sources.rows}
    units = rag.index.text_units
    lead = next(title for title, ids in zip(rag.index.entities["title"], rag.index.entities["text_unit_ids"],
                                            strict=True)
                if not set(units[units["id"].isin(ids)]["human_readable_id"]) & seen)
    with scripted({"query_local_hop": f"Search query: {lead.title()}"}):
        result = rag.local_search("Who is Alex Mercer?")
    second = result.rounds[1]
    assert second["query"] == lead.title() and lead in second["linked_entities"]
    assert second["new_sources"]  # the lead's own passages, absent from the first round, came in
    first = result.rounds[0]["new_sources"]
    head = first[: int(len(first) * (1 - LEAD_SHARE))]
    assert head and set(head) <= {row["id"] for row in result.context["Sources"]}  # a lead never pushes these out


@pytest.mark.parametrize("reply, query, problem", [
    ("ENOUGH", "", None), ("**Enough.**", "", None), ("<think>Need the base.</think>\nDulce base location", "Dulce "
     "base location", None), ("```\nTaylor Cruz mission\n```", "Taylor Cruz mission", None),
    ("The context lacks the leader.\nSearch query: \"leader of Paranormal Military Squad\"",
     "leader of Paranormal Military Squad", None),
    ("", "", "named no next hop"), ("I'm sorry, but I can't help with that.", "", "named no next hop"),
    ({"content": "leader of the Paranormal Mil", "finish_reason": "length"}, "", "named no next hop"),
    (" ".join(["The information does not say who leads the team"] * 5), "", "named no next hop"),
])
def test_hop_replies_in_the_styles_real_models_give(novella, reply, query, problem):
    rag = GraphRAG.from_config(novella, overrides=["local_search.hops=2"], use_cache=False)
    with scripted({"query_local_hop": reply}):
        result = rag.local_search("Who is Alex Mercer?")
    assert result.answer and len(result.rounds) == 2 and result.rounds[1]["query"] == query
    assert (problem is None) == (not result.problems) and all(problem in p for p in result.problems)


def test_rounds_end_when_the_model_repeats_itself_or_no_model_is_set(novella):
    rag = GraphRAG.from_config(novella, overrides=["local_search.hops=4"], use_cache=False)
    with scripted({"query_local_hop": "Taylor Cruz"}):
        result = rag.local_search("Who is Alex Mercer?")
    assert [r["query"] for r in result.rounds] == ["Who is Alex Mercer?", "Taylor Cruz", ""]
    assert "already searched" in result.problems[0]
    assert result.usage["by_stage"]["query_local_hop"]["calls"] == 2
    evidence = GraphRAG.from_config(novella, overrides=["local_search.hops=2", "local_search.chat_model_id=null"])
    result = evidence.local_search("Who is Alex Mercer?")
    assert len(result.rounds) == 1 and "need a chat model" in result.problems[0]


@pytest.mark.parametrize("level", [0, 1, 2, 5])
def test_every_level_holds_every_clustered_entity_once(novella, level):
    communities = GraphRAG.from_config(novella).index.communities
    chosen = communities_at(communities, level)
    members = [entity for ids in chosen["entity_ids"] for entity in ids]
    clustered = {entity for ids in communities[communities["level"] == 0]["entity_ids"] for entity in ids}
    assert len(members) == len(set(members)) and set(members) == clustered
    if level:  # a theme too small to split down to the level is kept whole
        assert (chosen["level"] < level).any()


def test_map_batches_pack_theme_by_theme_and_open_each_batch_with_every_theme():
    reports = pd.DataFrame({"community": [1, 2, 3, 4, 5, 6, 7], "rank": [9, 8, 7, 6, 5, 4, 3],
                            "title": "Report", "full_content": "a finding of the same length " * 20})
    themes = {1: 0, 3: 0, 5: 0, 7: 0, 2: 10, 4: 10, 6: 20}
    row = {"id": 1, "title": "Report", "content": "a finding of the same length " * 20, "rank": 9}
    four_reports = pack("Reports", REPORT_COLUMNS, [row] * 4, 10**6).tokens
    batches = map_batches(reports, four_reports, themes)
    # by rating alone: [1, 2, 3, 4], [5, 6, 7], two themes in each call
    assert [[r["id"] for r in batch.rows] for batch in batches] == [[1, 3, 5, 7], [2, 6, 4]]


def test_reduce_gives_every_theme_its_best_point_before_the_rest_by_score():
    def point(score, report):
        return Point(description=f"A finding about the harbour records [Data: Reports ({report})]", score=score)

    points = [point(90, 1), point(80, 2), point(70, 1), point(60, 99), point(10, 3), point(0, 3)]
    three_points = 3 * count_tokens(f"----Analyst 1----\nImportance Score: 90\n{points[0].description}\n\n",
                                    "o200k_base")
    themes = {1: 0, 2: 0, 3: 7}  # report 99 was not read: the point citing it has no theme
    context = reduce_context(points, three_points, themes)
    assert [p.score for p in context.points] == [90, 80, 10]  # theme 7's only scored point gets in
    assert context.text.index("Score: 80") < context.text.index("Score: 10")
    assert count_tokens(context.text, "o200k_base") <= three_points
    by_score = reduce_context(points, three_points, {})  # points that cite nothing known compete on score
    assert [p.score for p in by_score.points] == [90, 80, 70]


UNRELATED = sorted((DATA / "unrelated-documents").glob("*.txt"))
THEMES_QUESTION = "What are the main communities and who are the key entities in each?"


@pytest.fixture(scope="module")
def unrelated(tmp_path_factory):
    # the default clusters every connected component: with use_lcc only the largest document would have communities
    root = make_project(tmp_path_factory.mktemp("unrelated"), UNRELATED)
    result = cli("index", "--root", root)
    assert result.exit_code == 0, result.output
    return root


def top_community_of_each_document(rag):
    """Each document's top-level community: the one holding most of its entities."""
    units, documents = rag.index.text_units, rag.index.documents
    document_title = dict(zip(documents["id"], documents["title"], strict=True))
    unit_document = dict(zip(units["id"], units["document_id"].map(document_title), strict=True))
    entity_documents = {entity: {unit_document[unit] for unit in ids}
                        for entity, ids in zip(rag.index.entities["id"], rag.index.entities["text_unit_ids"],
                                               strict=True)}
    top = rag.index.communities[rag.index.communities["level"] == 0]
    counts: dict[str, Counter] = defaultdict(Counter)
    for community, members in zip(top["community"], top["entity_ids"], strict=True):
        for entity in members:
            for document in entity_documents[entity]:
                counts[document][int(community)] += 1
    return {document: found.most_common(1)[0][0] for document, found in counts.items()}


def test_every_documents_top_community_reaches_the_reduce(unrelated):
    rag = GraphRAG.from_config(unrelated)
    result = rag.global_search(THEMES_QUESTION)
    themes = community_themes(rag.index.communities)
    reduced = {themes[report] for report in cited_ids(result.context_text)["Reports"]}
    top = top_community_of_each_document(rag)
    assert sorted(top) == [path.name for path in UNRELATED] and len(set(top.values())) == len(UNRELATED)
    assert set(top.values()) <= reduced


def test_every_entity_is_in_a_community_and_with_use_lcc_the_stage_says_who_is_left_out(unrelated, tmp_path):
    rag = GraphRAG.from_config(unrelated)
    clustered = {e for members in rag.index.communities["entity_ids"] for e in members}
    assert clustered == set(rag.index.entities["id"])
    root = make_project(tmp_path, UNRELATED, settings="cluster_graph:\n  use_lcc: true\n")
    result = cli("index", "--root", root)
    assert result.exit_code == 0 and "in no community (cluster_graph.use_lcc: true)" in result.output


def test_global_coverage_in_json_adds_up(unrelated):
    data = json.loads(cli("query", "global", THEMES_QUESTION, "--root", unrelated, "--json").output)
    coverage = data["coverage"]
    assert coverage["mapped_communities"] == len(data["context"]["Reports"]) == coverage["communities"]
    assert coverage["mapped_entities"] == coverage["clustered_entities"] == coverage["entities"]
    assert coverage["points"] == len(data["context"]["Points"])
    assert 0 < coverage["kept_points"] <= coverage["scored_points"] <= coverage["points"]
    assert 0 < coverage["kept_themes"] == coverage["scored_themes"] <= coverage["mapped_themes"] == coverage["themes"]
    assert data["usage"]["calls"] == coverage["map_calls"] + 1  # and one reduce call
    explained = cli("query", "global", THEMES_QUESTION, "--root", unrelated, "--explain").output
    assert f"top-level themes: {coverage['kept_themes']} of {coverage['themes']} kept" in explained


def test_a_hop_answered_from_the_cache_says_so(novella):
    args = ("query", "local", "Who leads the team with Taylor Cruz?", "--root", novella, "--hops", "2", "--explain")
    assert cli(*args).exit_code == 0
    assert re.search(r"round 2: .+; 1 call, from the cache\)", cli(*args).output)


def test_a_negative_community_level_is_refused_by_the_engine_itself(novella):
    from graphrag_lite.errors import ConfigError

    rag = GraphRAG.from_config(novella)
    for method in ("local", "global"):
        with pytest.raises(ConfigError, match="community level -1: levels start at 0"):
            asyncio.run(rag.asearch(method, "Who is Alex Mercer?", community_level=-1))
