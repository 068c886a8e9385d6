"""Community reports (bottom-up, validated, never silently missing) and the LanceDB tables."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from graphrag_lite.answer_parsing import ParseError, json_parser
from graphrag_lite.cli import app
from graphrag_lite.config import load_config
from graphrag_lite.graph import report_context
from graphrag_lite.graph.report_context import ChildReport, ContextBuilder
from graphrag_lite.tables import Report
from graphrag_lite.tokens import count_tokens
from graphrag_lite.vector_store import IndexMismatchError, check_embedding_model, connect, read_manifest
from tests.conftest import DATA, check_index, make_project

NOVELLA = DATA / "operation-dulce" / "operation-dulce-full.md"


def index(root, *args):
    return CliRunner().invoke(app, ["index", "--root", str(root), *args], catch_exceptions=False)


@pytest.fixture(scope="module")
def novella(tmp_path_factory):
    root = make_project(tmp_path_factory.mktemp("novella"), [NOVELLA])
    result = index(root)
    assert result.exit_code == 0, result.output
    return root


def table(root, name):
    return pd.read_parquet(root / "output" / f"{name}.parquet")


def test_every_community_at_every_level_has_a_report(novella):
    communities, reports = table(novella, "communities"), table(novella, "community_reports")
    assert communities["level"].nunique() >= 2
    assert sorted(reports["community"]) == sorted(communities["community"])
    assert (reports["status"] == "ok").all()
    for row in reports.itertuples():
        assert row.full_content.startswith(f"# {row.title}\n\n{row.summary}")
        assert 0 <= row.rank <= 10 and len(row.findings) >= 1
        assert json.loads(row.full_content_json)["title"] == row.title
    assert check_index(novella / "output")[0] == 0


def test_lancedb_tables_answer_vector_and_full_text_searches(novella):
    cfg = load_config(novella)
    db = connect(cfg.vector_store.db_uri)
    manifest = check_embedding_model(cfg, "default_embedding_model", read_manifest(cfg.output.base_dir))
    ids = {"entity_description": set(table(novella, "entities")["id"]),
           "text_unit_text": set(table(novella, "text_units")["id"]),
           "community_full_content": set(table(novella, "community_reports")["id"])}
    for name, expected in ids.items():
        lance = db.open_table(name)
        assert lance.count_rows() == len(expected) == manifest["tables"][name]
        assert {i.index_type for i in lance.list_indices()} >= {"FTS"}
        keyword = lance.search("Mercer", query_type="fts").limit(3).to_pandas()
        assert len(keyword) and set(keyword["id"]) <= expected and keyword["text"].str.contains("Mercer").all()
        if name == "community_full_content":  # no search reads report vectors: not made unless embed_text.names asks
            assert lance.schema.names == ["id", "text"]
            continue
        probe = lance.search().limit(1).to_pandas()["vector"][0]
        nearest = lance.search(np.asarray(probe, dtype="float32")).limit(1).to_pandas()
        assert nearest["_distance"][0] < 1e-4  # a row's own vector finds that row
    assert manifest["vectors"] == ["entity_description", "text_unit_text"]


def test_embed_text_names_choose_the_tables_with_vectors(novella, tmp_path):
    """Adding a table to embed_text.names embeds its texts alone (the other tables keep their vectors);
    a search still works on an index whose text units have no vectors, by keywords."""
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(novella, root)
    assert index(root).exit_code == 0
    copied = json.loads((root / "output" / "stats.json").read_text(encoding="utf-8"))["stages"]["embed_text"]
    assert not any(t["rebuilt"] or t["added"] for t in copied["details"].values())  # a copied project keeps its vectors
    reports = table(root, "community_reports")
    result = index(root, "--set", "embed_text.names=[entity_description, text_unit_text, community_full_content]")
    assert result.exit_code == 0, result.output
    stats = json.loads((root / "output" / "stats.json").read_text(encoding="utf-8"))
    details = stats["stages"]["embed_text"]["details"]
    assert details["community_full_content"] == {"added": len(reports), "removed": 0, "kept": 0, "rebuilt": True}
    assert details["text_unit_text"]["added"] == details["entity_description"]["added"] == 0
    db = connect(load_config(root).vector_store.db_uri)
    assert str(root) in db.uri
    assert db.open_table("community_full_content").schema.names == ["id", "text", "vector"]
    result = index(root, "--set", "embed_text.names=[entity_description]")
    assert result.exit_code == 0, result.output
    assert db.open_table("text_unit_text").schema.names == ["id", "text"]
    answer = CliRunner().invoke(app, ["query", "basic", "Who is Alex Mercer?", "--root", str(root), "--json"],
                                catch_exceptions=False)
    assert answer.exit_code == 0, answer.output
    found = json.loads(answer.output)
    assert found["context"]["Sources"] and all("Mercer" in row["text"] for row in found["context"]["Sources"])
    assert found["problems"] == ["text_unit_text: no vectors in this index (embed_text.names), searched by keywords "
                                 "only; add it to embed_text.names and run `graphrag-lite index` to search by "
                                 "meaning too"]


def test_embedding_model_mismatch_says_how_to_re_embed(novella):
    cfg = load_config(novella, overrides=["models.default_embedding_model.model=openai/text-embedding-3-large"])
    with pytest.raises(IndexMismatchError) as err:
        check_embedding_model(cfg, "default_embedding_model", read_manifest(cfg.output.base_dir))
    message = str(err.value)
    assert "fake/embedding" in message and "openai/text-embedding-3-large" in message
    assert "graphrag-lite index --from embed_text" in message
    with pytest.raises(IndexMismatchError, match="dimensions"):
        check_embedding_model(load_config(novella), "default_embedding_model",
                              read_manifest(novella / "output"), dimension=64)


def builder_for(root, max_tokens):
    return ContextBuilder(table(root, "entities"), table(root, "relationships"), table(root, "covariates"), max_tokens)


def test_contexts_fit_the_budget_and_count_each_row_once(novella, monkeypatch):
    communities = table(novella, "communities")
    calls = []
    real = report_context.count_tokens
    monkeypatch.setattr(report_context, "count_tokens", lambda text, enc=None: calls.append(1) or real(text, enc))
    builder = builder_for(novella, 400)
    counted_at_start = len(calls)
    assert counted_at_start == len(builder.entities) + len(builder.relationships) + 4  # rows + headers, once
    for row in communities.itertuples():
        context = builder.build(list(row.entity_ids), list(row.relationship_ids))
        assert count_tokens(context.text, "o200k_base") <= context.tokens <= 400
    assert len(calls) == counted_at_start  # packing never re-counts


def test_only_edges_inside_the_community_and_all_of_them(novella):
    communities, relationships = table(novella, "communities"), table(novella, "relationships")
    builder = builder_for(novella, 10**6)
    row = communities.iloc[0]
    context = builder.build(list(row.entity_ids), list(row.relationship_ids))
    listed = context.text.split("-----Relationships-----\n")[1].split("\n\n")[0].splitlines()[1:]
    assert len(listed) == len(row.relationship_ids)
    inside = relationships[relationships["id"].isin(set(row.relationship_ids))]
    assert {int(line.split("|")[0]) for line in listed} == set(inside["human_readable_id"])


def test_parent_context_uses_child_reports_when_its_detail_does_not_fit(novella):
    communities = table(novella, "communities")
    parent = communities[communities["children"].map(len) > 0].iloc[0]
    children = communities[communities["community"].isin(list(parent["children"]))]
    full = builder_for(novella, 10**6).build(list(parent.entity_ids), list(parent.relationship_ids))
    builder = builder_for(novella, int(full.tokens * 0.6))
    reports = [ChildReport(int(c.community), int(c.size), frozenset(c.entity_ids),
                           builder.report_row(int(c.community), "Child", f"REPORT OF CHILD {c.community}"))
               for c in children.itertuples()]
    context = builder.build(list(parent.entity_ids), list(parent.relationship_ids), reports)
    assert context.substituted and "-----Reports-----" in context.text
    largest = max(reports, key=lambda r: (r.size, -r.community))
    assert f"REPORT OF CHILD {largest.community}" in context.text
    entity_lines = context.text.split("-----Entities-----\n")[1].split("\n\n")[0] \
        if "-----Entities-----" in context.text else ""  # every entity may be covered by child reports
    titles = dict(zip(table(novella, "entities")["id"], table(novella, "entities")["title"], strict=True))
    for entity_id in largest.entity_ids:  # the substituted child's own detail is gone
        assert f"|{titles[entity_id]}|" not in entity_lines
    assert context.tokens <= builder.max_tokens


@pytest.mark.parametrize("answer", [
    '```json\n{"title": "T", "summary": "S", "rating": "7.5", "findings": [{"summary": "a", "explanation": "b"}]}\n```',
    'Here you go: {"title": "T", "summary": "S", "rating": 7, "findings": [{"summary": "a", "explanation": "b"},]} Bye',
])
def test_fenced_or_slightly_broken_report_json_parses(answer):
    report = json_parser(Report)(answer)
    assert report.title == "T" and report.rating in (7.0, 7.5)


@pytest.mark.parametrize("answer", [
    '{"title": "T", "rating": 7, "findings": []}',  # no summary (a report without findings is kept: test below)
    '{"title": "T", "summary": "S", "rating": 17, "findings": [{"summary": "a", "explanation": "b"}]}',
    '{"title": "T", "summ',  # truncated
    "I cannot write this report.",
])
def test_malformed_report_json_is_rejected(answer):
    with pytest.raises(ParseError):
        json_parser(Report)(answer)


def test_failed_reports_are_recorded_and_only_they_are_retried(tmp_path):
    # reports have their own model here: malformed half of the time, and no corrective retry at first
    settings = ("  report_model:\n    model: fake/default?malformed=0.5&seed=SEED\n    max_parse_retries: 0\n"
                "community_reports:\n  model_id: report_model\n")
    root = make_project(tmp_path, [DATA / "operation-dulce" / "dulce.txt"], settings.replace("SEED", "2"))
    first = index(root)
    assert first.exit_code == 4, first.output  # reports failed: the run says so in its exit code
    stats = json.loads((root / "output" / "stats.json").read_text())["stages"]["community_reports"]
    reports = table(root, "community_reports")
    failed = reports[reports["status"] != "ok"]
    assert 0 < len(failed) < len(reports) and stats["details"]["failed_reports"] == len(failed)
    assert failed["title"].str.endswith("(report missing)").all() and failed["rank"].isna().all()
    assert "report failed" in first.output and stats["status"].startswith("ran with failures")
    code, output = check_index(root / "output")
    assert code == 1 and "rank missing" in output  # a missing report is a visible problem, not a silent gap
    (root / "settings.yaml").write_text((root / "settings.yaml").read_text().replace(
        "max_parse_retries: 0", "max_parse_retries: 3"))
    second = index(root)
    assert second.exit_code == 0
    stats = json.loads((root / "output" / "stats.json").read_text())["stages"]["community_reports"]
    assert (table(root, "community_reports")["status"] == "ok").all()
    assert stats["details"]["reports_kept"] == len(reports) - len(failed)  # the good ones are kept as they were
    assert (table(root, "community_reports").set_index("id").loc[reports.loc[reports["status"] == "ok", "id"],
                                                                  "full_content"]
            == reports.loc[reports["status"] == "ok"].set_index("id")["full_content"]).all()
    assert stats["llm"]["calls"] - stats["llm"]["cache_hits"] == len(failed)


def test_cut_off_json_is_not_silently_completed():
    cut = '{"title": "T", "summary": "S", "rating": 7, "findings": [{"summary": "a", "explanation": "the fi'
    with pytest.raises(ParseError, match="cut off"):
        json_parser(Report)(cut)
    with pytest.raises(ParseError, match="cut off"):
        json_parser(Report)(cut + '"}, {"summary": "b"')  # closes a string and an object, but not the list


def test_a_report_waits_for_its_sub_communities_only_when_it_needs_their_reports(novella):
    """A parent whose detail fits is written at once, beside its children; one whose detail does not fit
    is written once its children's reports exist, and uses them."""
    import asyncio

    from graphrag_lite.graph.reports import ReportWriter

    communities = table(novella, "communities")
    parents = communities[communities["children"].map(len) > 0]
    sizes = {int(p.community): builder_for(novella, 10**6).build(list(p.entity_ids), list(p.relationship_ids)).tokens
             for p in parents.itertuples()}
    builder = builder_for(novella, int(max(sizes.values()) * 0.6))  # the largest parents do not fit, others do
    answer = json_parser(Report)('{"title": "T", "summary": "S", "rating": 5, '
                                 '"findings": [{"summary": "a", "explanation": "b"}]}')
    times: dict[int, tuple[float, float]] = {}  # id(context) -> (start, end)

    class Timed(ReportWriter):
        async def _write(self, context, advance):
            started = asyncio.get_running_loop().time()
            await asyncio.sleep(0.05)
            times[id(context)] = (started, asyncio.get_running_loop().time())
            advance()
            return answer, "ok"

    rows, contexts = Timed(None, "m", "{input_text}", builder, {}, salt="").generate(communities, lambda: None)
    span = {number: times[id(context)] for number, context in contexts.items()}
    waited = fitted = 0
    for parent in parents.itertuples():
        children_end = max(span[int(c)][1] for c in parent.children)
        start = span[int(parent.community)][0]
        if builder.fits(list(parent.entity_ids), list(parent.relationship_ids)):
            assert start < children_end and not contexts[int(parent.community)].substituted
            fitted += 1
        else:
            assert start >= children_end and contexts[int(parent.community)].substituted
            waited += 1
    assert waited and fitted and len(rows) == len(communities)


def waiting_parents(novella):
    """The communities, a context builder in which the largest parents' own detail does not fit, and the
    communities a waiting parent needs first: those parents and their sub-communities."""
    communities = table(novella, "communities")
    parents = communities[communities["children"].map(len) > 0]
    sizes = {int(p.community): builder_for(novella, 10**6).build(list(p.entity_ids), list(p.relationship_ids)).tokens
             for p in parents.itertuples()}
    builder = builder_for(novella, int(max(sizes.values()) * 0.6))
    waiting = {int(p.community) for p in parents.itertuples()
               if not builder.fits(list(p.entity_ids), list(p.relationship_ids))}
    needed = waiting | {int(c) for p in parents.itertuples() if int(p.community) in waiting for c in p.children}
    assert waiting
    return communities, builder, needed


def test_the_reports_a_waiting_parent_needs_get_the_model_first(novella):
    """With one slot, the sub-community reports a parent waits for (and that parent, and the chain above)
    are written before any report nothing waits for: in order of asking, the waiting parents would come last
    and, with more slots, add rounds of calls."""
    import asyncio

    from graphrag_lite.graph.reports import ReportWriter
    from graphrag_lite.llm.limits import PRIORITY, AdaptiveConcurrency

    communities, builder, needed = waiting_parents(novella)
    answer = json_parser(Report)('{"title": "T", "summary": "S", "rating": 5, '
                                 '"findings": [{"summary": "a", "explanation": "b"}]}')
    written: list[int] = []  # id(context), in the order the one slot was given
    slots = AdaptiveConcurrency(1)

    class OneSlot(ReportWriter):
        async def _write(self, context, advance):
            await slots.acquire(PRIORITY.get())
            written.append(id(context))
            await asyncio.sleep(0.001)
            slots.release()
            advance()
            return answer, "ok"

    _, contexts = OneSlot(None, "m", "{input_text}", builder, {}, salt="").generate(communities, lambda: None)
    number_of = {id(context): number for number, context in contexts.items()}
    assert len(needed) < len(communities)
    assert {number_of[i] for i in written[:len(needed)]} == needed


def test_a_report_call_s_priority_reaches_the_model_s_queue_through_the_gateway(novella, tmp_path):
    """The same order as above, through Gateway.chat and the model's limiter (one call at a time): the
    priority a community's task sets is what its call waits with."""
    import asyncio

    from graphrag_lite.config import CacheConfig, GraphRagConfig, ModelConfig
    from graphrag_lite.fake.provider import STATS
    from graphrag_lite.graph.reports import ReportWriter
    from graphrag_lite.llm.gateway import Gateway
    from graphrag_lite.prompts import fill, section_prompt

    communities, builder, needed = waiting_parents(novella)
    config = GraphRagConfig(models={"m": ModelConfig(model="fake/default?latency=0.002", concurrency=1)},
                            cache=CacheConfig(base_dir=tmp_path / "cache"))
    template = fill(section_prompt(config.community_reports, required=("input_text",)), max_report_length=500)
    STATS.reset()
    writer = ReportWriter(Gateway(config, use_cache=False), "m", template, builder, {}, salt="")
    _, contexts = writer.generate(communities, lambda: None, asyncio.run)
    number_of = {fill(template, input_text=c.text): n for n, c in contexts.items()}
    asked: list[int] = []
    for prompt in STATS.first_messages:  # a corrective follow-up repeats its first message: counted once
        if number_of[prompt] not in asked:
            asked.append(number_of[prompt])
    assert len(asked) == len(communities)
    assert set(asked[:len(needed)]) == needed
