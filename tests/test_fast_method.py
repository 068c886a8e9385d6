"""The fast method: rule-based extraction, NPMI co-occurrence, pruning, extractive reports, and answers with no
model, end to end on the bundled Pepys diary."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from typer.testing import CliRunner

from graphrag_lite import GraphRAG
from graphrag_lite.cli import app
from graphrag_lite.config import ExtractGraphNlpConfig
from graphrag_lite.nlp.cooccurrence import extract_nlp_graph, npmi
from graphrag_lite.nlp.extractor import HONORIFICS, STARTERS, capitalised_mid_sentence, extract_mentions, sentences
from graphrag_lite.query.engine import EVIDENCE_HEADER
from tests.conftest import REPO, check_index, write_settings

PEPYS = REPO / "input" / "pepys-diary-1661.txt"


def mentions(text):
    return [(m.name, m.type) for m in extract_mentions(text, capitalised_mid_sentence([text]))]


def test_honorifics_make_people_and_stay_in_the_name():
    assert mentions("Yesterday I dined with Mr. Gauden and Sir W. Pen at the Dolphin.")[:2] == [
        ("MR GAUDEN", "PERSON"), ("SIR W PEN", "PERSON")]
    assert ("JOHN SMITH", "PERSON") in mentions("We met John Smith near the river.")


def test_organization_suffixes():
    found = dict(mentions("He joined Acme Corp last year, then the Bank of England hired him from Oxford University."))
    assert found["ACME CORP"] == "ORGANIZATION" and found["BANK OF ENGLAND"] == "ORGANIZATION"
    assert found["OXFORD UNIVERSITY"] == "ORGANIZATION"


def test_sentence_initial_words_are_not_names_unless_used_as_names_elsewhere():
    found = [name for name, _ in mentions("However the ship sailed. Tomorrow we go. We saw Deptford today. "
                                          "Deptford is busy.")]
    assert "HOWEVER" not in found and "TOMORROW" not in found
    assert found.count("DEPTFORD") == 2  # capitalised mid-sentence elsewhere, so a name at the start too
    assert [n for n, _ in mentions("Yesterday John Smith of Acme Corp came.")] == ["JOHN SMITH", "ACME CORP"]


def test_a_word_is_a_name_only_if_capitalised_mid_sentence_as_often_as_not_and_never_an_honorific_alone():
    text = ("Hence to the Wardrobe. We went hence by water, and hence home. I met him at the Wardrobe, then "
            "went thence to Hence Street? No. The King spoke to Lady Sandwich. The King and the Lady went out.")
    found = [name for name, _ in mentions(text)]
    assert "HENCE" not in found  # capitalised once mid-sentence, written "hence" twice
    assert found.count("WARDROBE") == 2 and "LADY SANDWICH" in found
    assert "KING" not in found and "LADY" not in found  # a title alone names nobody in particular


def test_possessives_dates_and_places():
    found = mentions("In June we read Holmes's letters at Whitehall on Monday, the 3rd of July.")
    names = [n for n, _ in found]
    assert "HOLMES" in names and not {"JUNE", "MONDAY", "JULY"} & set(names)
    assert ("WHITEHALL", "GEO") in found


def test_sentences_do_not_break_after_honorifics_or_initials():
    assert sentences("Sir W. Pen and Mr. Gauden went by water. Then home.") == [
        "Sir W. Pen and Mr. Gauden went by water.", "Then home."]


def test_npmi_values():
    assert npmi(10, 10, 10, 100) == pytest.approx(1.0)  # always together
    assert npmi(1, 10, 10, 100) == pytest.approx(0.0, abs=1e-9)  # as often as chance
    assert npmi(0, 10, 10, 100) == -1.0  # never together
    assert npmi(5, 10, 20, 100) == pytest.approx(math.log(2.5) / -math.log(0.05))


def units(*texts):
    return pd.DataFrame({"id": [f"u{i}" for i in range(len(texts))], "text": list(texts)})


def test_pruning_of_rare_entities_weak_edges_and_hubs():
    texts = ["Mr. Alpha met Mr. Beta in Paris.", "Mr. Alpha met Mr. Beta in Rome.", "Mr. Alpha saw Mr. Gamma.",
             "Mr. Alpha saw Mr. Gamma again.", "Mr. Delta waved once."]
    graph = extract_nlp_graph(units(*texts), ExtractGraphNlpConfig(min_entity_frequency=2, min_npmi=-1))
    assert set(graph.entities["name"]) == {"MR ALPHA", "MR BETA", "MR GAMMA"}  # seen in one unit only: pruned
    assert graph.counts["rare_entities_pruned"] == 3  # PARIS, ROME, MR DELTA
    pairs = {tuple(sorted(p)) for p in zip(graph.relationships["source"], graph.relationships["target"], strict=True)}
    assert pairs == {("MR ALPHA", "MR BETA"), ("MR ALPHA", "MR GAMMA")}
    assert (graph.relationships["strength"] > 0).all()
    strict = extract_nlp_graph(units(*texts), ExtractGraphNlpConfig(min_entity_frequency=2, min_npmi=0.99))
    assert strict.relationships.empty  # no pair co-occurs every time either appears
    no_hub = extract_nlp_graph(units(*texts), ExtractGraphNlpConfig(min_entity_frequency=2, min_npmi=-1,
                                                                    remove_top_hubs=1))
    assert "MR ALPHA" not in set(no_hub.entities["name"]) and no_hub.relationships.empty


@pytest.fixture(scope="module")
def pepys(tmp_path_factory):
    root = tmp_path_factory.mktemp("pepys")
    (root / "input").mkdir()
    (root / "input" / PEPYS.name).write_text(PEPYS.read_text(encoding="utf-8"), encoding="utf-8")
    # no model anywhere: the chat and embedding models are unset for every stage and query
    write_settings(root, "embed_text:\n  model_id: null\nlocal_search:\n  chat_model_id: null\n"
                         "  embedding_model_id: null\nglobal_search:\n  chat_model_id: null\n"
                         "basic_search:\n  chat_model_id: null\n  embedding_model_id: null\n")
    from graphrag_lite.fake.provider import STATS

    STATS.reset()
    result = CliRunner().invoke(app, ["index", "--root", str(root), "--method", "fast"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert STATS.completions == 0 and STATS.embeddings == 0
    return root


def test_pepys_index_passes_the_checker_with_his_people_and_places_on_top(pepys):
    code, output = check_index(pepys / "output", "--method", "fast")
    assert code == 0, output
    entities = pd.read_parquet(pepys / "output" / "entities.parquet").sort_values("degree", ascending=False)
    top = set(entities["title"].head(25))
    assert {"SIR W PEN", "SIR W BATTEN"} & top and {"WHITEHALL", "WOOLWICH", "BRAMPTON", "LONDON"} & top
    top20 = list(entities.sort_values(["degree", "frequency"], ascending=False)["title"].head(20))
    generic = {w.upper() for w in STARTERS} | {w.upper() for w in HONORIFICS} | {"HENCE", "DURING", "EVEN"}
    assert not generic & set(top20), top20  # no function word or bare title among the hubs
    assert json.loads((pepys / "output" / "embeddings_manifest.json").read_text())["model"] is None
    stats = json.loads((pepys / "output" / "stats.json").read_text())
    assert stats["stages"]["chunk_text"]["summary"].find("size 300") > 0  # the method's recommended chunks


def test_extractive_reports(pepys):
    reports = pd.read_parquet(pepys / "output" / "community_reports.parquet")
    communities = pd.read_parquet(pepys / "output" / "communities.parquet")
    entities = pd.read_parquet(pepys / "output" / "entities.parquet").set_index("id")
    assert sorted(reports["community"]) == sorted(communities["community"])
    for report, community in zip(reports.itertuples(), communities.sort_values("community").itertuples(), strict=True):
        members = entities.loc[list(community.entity_ids)]
        assert any(t.title() in report.title for t in members["title"])  # named after its own entities
        assert report.full_content.startswith(f"# {report.title}\n\n{report.summary}")
        assert 0 < report.rank <= 10 and len(report.findings) >= 1
        cited = {int(i) for f in report.findings for i in __import__("re").findall(r"\d+", f["explanation"].split(
            "[Data: Entities (")[-1]) if "[Data: Entities" in f["explanation"]}
        assert cited <= set(members["human_readable_id"])


@pytest.mark.parametrize("method", ["local", "global", "basic"])
def test_queries_without_a_model_return_labelled_evidence(pepys, method):
    rag = GraphRAG.from_config(pepys)
    search = {"local": rag.local_search, "global": rag.global_search, "basic": rag.basic_search}[method]
    result = search("Who went to Woolwich with Sir W. Pen?")
    assert result.answer.startswith(EVIDENCE_HEADER) and result.usage is None
    citations = result.citations()
    assert any(citations.values()) and all(not row.get("missing") for rows in citations.values() for row in rows)
    assert "Woolwich" in result.answer or "WOOLWICH" in result.answer
    for name, rows in result.context.items():  # a section longer than what is shown says so
        assert (f"{name}: the first 5 of {len(rows)} (--json lists all)" in result.answer) is (len(rows) > 5)
    assert ":  [Data:" not in result.answer  # a row whose description was left out says why, not nothing


def test_the_same_fast_index_answers_through_a_model_when_one_is_configured(pepys):
    rag = GraphRAG.from_config(pepys, overrides=["local_search.chat_model_id=default_chat_model",
                                                 "models.default_chat_model.model=fake/default"])
    result = rag.local_search("Who went to Woolwich with Sir W. Pen?")
    assert not result.answer.startswith(EVIDENCE_HEADER) and result.usage["calls"] == 1


def test_queries_of_a_fast_index_use_the_fast_methods_recommended_shares(pepys):
    rag = GraphRAG.from_config(pepys)
    assert (rag.config.local_search.text_unit_prop, rag.config.local_search.community_prop) == (0.9, 0.05)
    assert GraphRAG.from_config(pepys, overrides=["local_search.text_unit_prop=0.6"]).config.local_search \
        .text_unit_prop == 0.6  # --set still wins
    sources = next(s for s in rag.local_search("Who went to Woolwich with Sir W. Pen?").sections
                   if s["name"] == "Sources")
    assert sources["cap"] >= 0.9 * rag.config.local_search.max_context_tokens


def test_a_corpus_without_names_is_reported_and_queries_do_not_crash(tmp_path):
    (tmp_path / "input").mkdir()
    (tmp_path / "input" / "a.txt").write_text("nothing capitalised here, only plain words about nothing.\n")
    write_settings(tmp_path, "local_search:\n  chat_model_id: null\n  embedding_model_id: null\n"
                             "global_search:\n  chat_model_id: null\n")
    result = CliRunner().invoke(app, ["index", "--root", str(tmp_path), "--method", "fast"], catch_exceptions=False)
    assert result.exit_code == 4 and "no entities were extracted" in result.output  # an error, tables kept
    rag = GraphRAG.from_config(tmp_path)
    assert rag.local_search("anything?").answer.startswith(EVIDENCE_HEADER)
    assert "has no community reports" in rag.global_search("anything?").answer


def test_every_token_count_follows_chunking_encoding_model(pepys):
    """Context budgets are counted with chunking.encoding_model, the encoding the text units were cut with,
    not a fixed o200k_base (issue 18)."""
    import asyncio

    from graphrag_lite.context_tables import header, row_line
    from graphrag_lite.tokens import count_tokens

    totals = {}
    engines = {encoding: GraphRAG.from_config(pepys, overrides=[f"chunking.encoding_model={encoding}"])
               for encoding in ("cl100k_base", "o200k_base")}  # two engines in one process, each its own count
    for encoding, rag in engines.items():
        context = asyncio.run(rag.alocal_context("Who went to Woolwich with Sir W. Pen?"))
        for table in (t for t in context.tables if t.rows):
            lines = [header(table.name, table.columns), *(row_line([r[c] for c in table.columns]) for r in table.rows)]
            assert table.tokens == sum(count_tokens(line, encoding) for line in lines), (encoding, table.name)
        totals[encoding] = [t.tokens for t in context.tables]
    assert totals["cl100k_base"] != totals["o200k_base"]
