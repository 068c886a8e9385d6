"""Re-indexing a changed folder (issue 15): the LanceDB tables are updated in place, not rebuilt; only new or
changed texts are embedded, and the full-text index finds added rows and no longer finds deleted ones."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from graphrag_lite.llm.calls import CALL_STEP, call_key
from graphrag_lite.vector_store import MANIFEST, ROWS, TableUpdate, apply_update, connect, plan_update, write_table
from tests.conftest import DATA, add_inputs, make_project


def rows_of(ids: list[str], texts: list[str]) -> pa.Table:
    return pa.table([pa.array(ids, pa.string()), pa.array(texts, pa.string())], schema=ROWS)


def update_table(db, name: str, ids: list[str], texts: list[str], vectors: list[list[float]] | None) -> TableUpdate:
    """What embed_text does to one table: plan the change, then make it with the added rows' vectors (the
    vectors given for unchanged rows are not used: the stored ones stay)."""
    dimension = None if vectors is None else len(vectors[0]) if vectors else stored_dimension(db, name)
    update = plan_update(db, name, rows_of(ids, texts), dimension)
    apply_update(db, name, rows_of(ids, texts), update, None if vectors is None else [vectors[k] for k in update.add])
    return update


def stored_dimension(db, name: str) -> int:
    try:
        kind = db.open_table(name).schema.field("vector").type
    except (ValueError, KeyError, FileNotFoundError):
        return 0
    return int(kind.list_size) if pa.types.is_fixed_size_list(kind) else 0



def vec(x: float, dimension: int = 4) -> list[float]:
    return [float(x), *[0.5] * (dimension - 1)]


def rows(table) -> dict[str, tuple[str, list[float] | None]]:
    found = table.to_arrow().to_pylist()
    return {r["id"]: (r["text"], r.get("vector")) for r in found}


def keyword(table, words: str, index_only: bool = False) -> list[str]:
    query = table.search(words, query_type="fts")
    if index_only:  # the FTS index alone, without the flat scan of rows it does not cover yet
        query = query.fast_search()
    return sorted(query.limit(50).to_pandas()["id"])


@pytest.fixture
def db(tmp_path: Path):
    return connect(str(tmp_path / "lancedb"))


def test_a_table_is_updated_in_place_and_its_full_text_index_follows(db):
    write_table(db, "t", rows_of(["a", "b", "c"], ["apple orchard", "banana plantation", "cherry blossom"]),
                [vec(1), vec(2), vec(3)])
    before = db.open_table("t").version
    # "a" unchanged (the vector given for it is not used: the stored one stays), "b" gone, "c" changed, "d" new
    update = update_table(db, "t", ["a", "c", "d"], ["apple orchard", "cherry jam", "durian market"],
                          [vec(9), vec(4), vec(5)])
    assert update.counts() == {"added": 2, "removed": 2, "kept": 1, "rebuilt": False}
    table = db.open_table("t")
    assert table.version > before
    assert rows(table) == {"a": ("apple orchard", vec(1)), "c": ("cherry jam", vec(4)),
                           "d": ("durian market", vec(5))}
    [index] = [i for i in table.list_indices() if i.index_type == "FTS"]
    assert (index.num_indexed_rows, index.num_unindexed_rows) == (3, 0)  # the index covers the added rows
    for index_only in (False, True):
        assert keyword(table, "durian", index_only) == ["d"] and keyword(table, "jam", index_only) == ["c"]
        assert keyword(table, "banana", index_only) == [] and keyword(table, "blossom", index_only) == []
        assert keyword(table, "apple", index_only) == ["a"]
    again = update_table(db, "t", ["a", "c", "d"], ["apple orchard", "cherry jam", "durian market"],
                         [vec(7), vec(7), vec(7)])
    assert again.counts() == {"added": 0, "removed": 0, "kept": 3, "rebuilt": False}
    assert db.open_table("t").version == table.version  # nothing to change: not a single commit
    assert rows(db.open_table("t"))["a"] == ("apple orchard", vec(1))


def test_a_table_whose_schema_does_not_fit_is_rebuilt(db):
    write_table(db, "t", rows_of(["a", "b"], ["apple orchard", "banana plantation"]), [vec(1), vec(2)])
    other = update_table(db, "t", ["a", "b"], ["apple orchard", "banana plantation"], [vec(1, 8), vec(2, 8)])
    assert other.counts() == {"added": 2, "removed": 0, "kept": 0, "rebuilt": True}
    table = db.open_table("t")
    assert table.schema.field("vector").type.list_size == 8
    assert rows(table) == {"a": ("apple orchard", vec(1, 8)), "b": ("banana plantation", vec(2, 8))}
    assert keyword(table, "banana") == ["b"]
    no_vectors = update_table(db, "t", ["a"], ["apple orchard"], None)
    assert no_vectors.rebuilt and db.open_table("t").schema.names == ["id", "text"]
    assert update_table(db, "new", ["x"], ["xylophone"], None).rebuilt  # missing: created


def test_a_full_text_only_table_is_updated_in_place(db):
    write_table(db, "t", rows_of(["a", "b"], ["apple orchard", "banana plantation"]), None)
    update = update_table(db, "t", ["a", "c"], ["apple orchard", "cherry blossom"], None)
    assert update.counts() == {"added": 1, "removed": 1, "kept": 1, "rebuilt": False}
    table = db.open_table("t")
    assert rows(table) == {"a": ("apple orchard", None), "c": ("cherry blossom", None)}
    assert keyword(table, "cherry", index_only=True) == ["c"] and keyword(table, "banana") == []
    reordered = update_table(db, "t", ["c", "a"], ["cherry blossom", "apple orchard"], None)
    assert reordered.counts() == {"added": 0, "removed": 0, "kept": 2, "rebuilt": False}
    removed_only = update_table(db, "t", ["c"], ["cherry blossom"], None)  # nothing added, one row gone
    assert removed_only.counts() == {"added": 0, "removed": 1, "kept": 1, "rebuilt": False}
    assert rows(db.open_table("t")) == {"c": ("cherry blossom", None)}
    write_table(db, "empty", rows_of([], []), None)  # created empty, so without a full-text index
    assert update_table(db, "empty", ["z"], ["zebra crossing"], None).rebuilt  # adds more than it keeps
    assert keyword(db.open_table("empty"), "zebra", index_only=True) == ["z"]
    db.create_table("unindexed", data=rows_of(["y"], ["yellow submarine"]))  # a run killed before its index
    assert update_table(db, "unindexed", ["y"], ["yellow submarine"], None).counts()["kept"] == 1
    assert keyword(db.open_table("unindexed"), "yellow", index_only=True) == ["y"]


def test_a_table_without_vectors_that_would_add_more_rows_than_it_keeps_is_rebuilt(db):
    write_table(db, "t", rows_of(["a", "b"], ["apple orchard", "banana plantation"]), None)
    update = update_table(db, "t", ["a", "b", "c", "d", "e"], ["apple orchard", "banana plantation", "cherry blossom",
                                                               "durian market", "elder flower"], None)
    assert update.counts() == {"added": 5, "removed": 0, "kept": 0, "rebuilt": True}
    assert sorted(rows(db.open_table("t"))) == ["a", "b", "c", "d", "e"]
    assert keyword(db.open_table("t"), "elder", index_only=True) == ["e"]
    with_vectors = update_table(db, "v", ["a"], ["apple orchard"], [vec(1)])
    assert with_vectors.rebuilt  # missing
    kept = update_table(db, "v", ["a", "b", "c"], ["apple orchard", "banana", "cherry"], [vec(1), vec(2), vec(3)])
    assert kept.counts() == {"added": 2, "removed": 0, "kept": 1, "rebuilt": False}  # its vectors are kept


def stats(root: Path) -> dict:
    return json.loads((root / "output" / "stats.json").read_text(encoding="utf-8"))["stages"]["embed_text"]


def test_a_re_index_embeds_only_the_new_texts_even_without_the_cache(tmp_path: Path, cli):
    documents = sorted((DATA / "unrelated-documents").glob("*.txt"))
    root = make_project(tmp_path / "p", documents[:-1], "embed_text:\n  batch_size: 1\n")  # one call per text
    built = cli("index", "--root", root)
    assert built.exit_code == 0, built.output
    first = stats(root)["details"]
    assert all(t["rebuilt"] and t["removed"] == 0 for t in first.values())
    add_inputs(root, documents[-1:])
    rerun = cli("index", "--root", root, "--no-cache")
    assert rerun.exit_code == 0, rerun.output
    embed = stats(root)
    details, llm = embed["details"], embed["llm"]
    assert not any(t["rebuilt"] for t in details.values())
    added = sum(t["added"] for t in details.values())
    assert 0 < added < sum(t["kept"] for t in details.values())  # a few rows; the rest kept their vectors
    assert details["text_unit_text"]["added"] >= 1 and details["text_unit_text"]["removed"] == 0
    manifest = json.loads((root / "output" / MANIFEST).read_text(encoding="utf-8"))
    assert manifest["vectors"] == ["entity_description", "text_unit_text"]  # reports: full-text only
    assert llm["calls"] - llm["cache_hits"] == sum(details[t]["added"] for t in manifest["vectors"])  # only new texts
    assert "text_unit_text (" in embed["summary"] and " added" in embed["summary"]
    table = connect(manifest["db_uri"]).open_table("text_unit_text")
    assert table.count_rows() == manifest["tables"]["text_unit_text"]
    assert documents[-1].name == "railway.txt" and keyword(table, "Kisumu", index_only=True)

    other = cli("index", "--root", root, "--set", "models.default_embedding_model.model=fake/embedding?dim=64")
    assert other.exit_code == 0, other.output
    rebuilt = stats(root)
    assert all(rebuilt["details"][t]["rebuilt"] for t in manifest["vectors"])  # another model: every vector is new
    assert not rebuilt["details"]["community_full_content"]["rebuilt"]  # no vectors there to redo
    assert json.loads((root / "output" / MANIFEST).read_text(encoding="utf-8"))["dimension"] == 64
    assert connect(manifest["db_uri"]).open_table("entity_description").schema.field("vector").type.list_size == 64


def test_an_update_keeps_the_version_a_server_reads_however_old():
    """optimize() deletes versions older than its cleanup age; the one the update started from (served by
    `graphrag-lite serve` until it swaps) must stay, even when it was written months ago."""
    from datetime import datetime, timedelta

    from graphrag_lite.vector_store import _cleanup_age

    assert _cleanup_age(datetime.now() - timedelta(hours=2)) == timedelta(days=7)
    assert _cleanup_age(datetime.now() - timedelta(days=90)) > timedelta(days=90)


def test_a_first_build_sends_its_embedding_calls_while_lancedb_is_being_opened(tmp_path: Path, cli, monkeypatch):
    """Importing LanceDB takes most of a second. On a first build every text of the tables with vectors is
    embedded whatever LanceDB holds, so the calls need not wait for it. Here opening LanceDB waits until an
    embedding call has reached the model: done one after the other, the stage would stall and fail."""
    import time

    from graphrag_lite.fake.provider import STATS
    from graphrag_lite.stages import embed_text

    before_the_stage = []  # the text units' vectors were asked for early, during extraction

    def counted_at_the_stage_s_start(ctx):
        before_the_stage.append(STATS.embeddings)
        return inputs(ctx)

    def once_an_embedding_call_is_sent(uri: str):
        deadline = time.monotonic() + 10
        while STATS.embeddings <= before_the_stage[0]:
            assert time.monotonic() < deadline, "LanceDB was opened before any embedding call was sent"
            time.sleep(0.01)
        return connect(uri)

    inputs = embed_text.inputs
    monkeypatch.setattr(embed_text, "inputs", counted_at_the_stage_s_start)
    monkeypatch.setattr(embed_text, "connect", once_an_embedding_call_is_sent)
    STATS.reset()
    documents = sorted((DATA / "unrelated-documents").glob("*.txt"))[:2]
    root = make_project(tmp_path / "p", documents)
    built = cli("index", "--root", root)
    assert built.exit_code == 0, built.output
    assert all(t["rebuilt"] for t in stats(root)["details"].values())


def recorded_fake_calls(monkeypatch) -> list[tuple[str, object]]:
    """Every call the fake provider gets, in order: ("chat", the stage asking) or ("embed", its texts)."""
    from graphrag_lite.fake import direct
    from graphrag_lite.fake import provider as fake

    calls: list[tuple[str, object]] = []
    chat, embed = fake.FakeLLM.acompletion, direct.embeddings

    async def recorded_chat(self, model, messages, *args, **kwargs):
        calls.append(("chat", CALL_STEP.get()[0]))
        return await chat(self, model, messages, *args, **kwargs)

    async def recorded_embed(model, texts):
        calls.append(("embed", list(texts)))
        return await embed(model, texts)

    monkeypatch.setattr(fake.FakeLLM, "acompletion", recorded_chat)
    monkeypatch.setattr(direct, "embeddings", recorded_embed)
    return calls


def stored_vectors(root: Path, table: str) -> dict[str, list[float]]:
    rows = connect(str(root / "output" / "lancedb")).open_table(table).to_pandas()
    return {text: list(vector) for text, vector in zip(rows["text"], rows["vector"], strict=True)}


def test_the_text_units_vectors_are_asked_for_while_the_graph_is_extracted(tmp_path: Path, cli, monkeypatch):
    """The text units are known once chunked, and the embedding model is idle while the graph is extracted:
    their vectors are asked for then, not after the reports. The index holds the same vectors as ever."""
    from graphrag_lite.fake.embedding import embed_text as fake_vector

    calls = recorded_fake_calls(monkeypatch)
    documents = sorted((DATA / "unrelated-documents").glob("*.txt"))[:3]
    root = make_project(tmp_path / "p", documents)
    built = cli("index", "--root", root)
    assert built.exit_code == 0, built.output
    units = set(pd.read_parquet(root / "output" / "text_units.parquet")["text"])
    early = next((i for i, (kind, what) in enumerate(calls) if kind == "embed" and set(what) <= units), None)
    extraction = [i for i, (kind, what) in enumerate(calls) if what == "extract_graph"]
    assert early is not None and early < extraction[-1], "the text units were not embedded during extraction"
    sent = [t for kind, what in calls if kind == "embed" for t in what]
    assert sorted(sent) == sorted(set(sent)), "a text was embedded twice"
    assert set(sent) >= units
    for table in ("text_unit_text", "entity_description"):
        vectors = stored_vectors(root, table)
        assert vectors and all(np.allclose(v, fake_vector(text, 128)) for text, v in vectors.items()), table
    embed = stats(root)  # the stage's calls, all counted; stats.json says which its early work made
    early_calls = sum(kind == "embed" and set(what) <= units for kind, what in calls)
    assert embed["llm"]["calls"] == sum(kind == "embed" for kind, _ in calls) > embed["early_llm"]["calls"]
    assert embed["early_llm"]["calls"] == early_calls >= 1


def test_a_failed_early_embedding_is_logged_and_done_again_at_the_stage_s_turn(tmp_path: Path, cli, monkeypatch):
    """The text units' early vectors fail (a provider's outage while the graph is extracted): the run goes on,
    the log says so at once, and embed_text asks for them again at its turn; nothing is lost or left over."""
    from graphrag_lite.fake import direct
    from graphrag_lite.llm.openai_http import ServerRefused

    embed, failed = direct.embeddings, []

    async def fails_once(model, texts):
        if not failed:
            failed.append(len(texts))
            raise ServerRefused(400, "the embedding service is down", {})
        return await embed(model, texts)

    monkeypatch.setattr(direct, "embeddings", fails_once)
    documents = sorted((DATA / "unrelated-documents").glob("*.txt"))[:2]
    root = make_project(tmp_path / "p", documents)
    built = cli("index", "--root", root)
    assert built.exit_code == 0, built.output
    assert failed, "no embedding call failed: the test tested nothing"
    log = (root / "output" / "logs" / "index.log").read_text(encoding="utf-8")
    warning = log.index("embed_text: the work it started early failed (")
    assert warning < log.index("merge_graph: started")  # said when it happened, not at the end
    units = pd.read_parquet(root / "output" / "text_units.parquet")
    assert set(stored_vectors(root, "text_unit_text")) == set(units["text"])
    assert stats(root)["llm"]["failures"] >= 1  # the failed call is counted


def test_early_vectors_and_cached_ones_of_a_former_model_are_never_mixed(tmp_path: Path, cli):
    """The entity descriptions' vectors are in the answer cache from a former model of the same name (64
    dimensions), the text units' are not: the early work gets the text units' from the model (128), and at its
    turn the stage asks for the entity descriptions' again rather than mixing sizes in one index."""
    from graphrag_lite.config import load_config
    from graphrag_lite.llm.gateway import Gateway
    from graphrag_lite.vector_store import texts_for

    documents = sorted((DATA / "unrelated-documents").glob("*.txt"))[:2]
    root = make_project(tmp_path / "p", documents)
    assert cli("index", "--root", root).exit_code == 0
    out = root / "output"
    contents = {name: rows["text"].to_pylist() for name, rows in texts_for(
        *(pq.read_table(out / f"{t}.parquet") for t in ("entities", "text_units", "community_reports"))).items()}
    config = load_config(root)
    gateway = Gateway(config, use_cache=True)
    model = config.models["default_embedding_model"]
    key = {t: call_key("embedding", model, t, dict(model.call_args)) for n in contents for t in contents[n]}
    assert gateway.cache is not None
    gateway.cache.put_many("embedding", [(key[t], [0.5] * 64) for t in contents["entity_description"]])
    gateway.cache._db.executemany("DELETE FROM answers WHERE key=?", [(key[t],) for t in contents["text_unit_text"]])
    gateway.close()
    shutil.rmtree(out)
    rebuilt = cli("index", "--root", root)
    assert rebuilt.exit_code == 0, rebuilt.output
    for table in ("entity_description", "text_unit_text"):
        assert {len(v) for v in stored_vectors(root, table).values()} == {128}, table
    assert json.loads((out / MANIFEST).read_text(encoding="utf-8"))["dimension"] == 128


def test_tables_are_written_and_indexed_without_lancedb_deprecation_warnings(db):
    """A new user saw LanceDB's deprecation warnings (create_fts_index) in every run."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        write_table(db, "t", rows_of(["a", "b"], ["the navy office", "a theatre"]), [vec(1), vec(2)])
        update_table(db, "t", ["a", "c"], ["the navy office", "the king's house"], [vec(1), vec(3)])
    assert [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)] == []
    assert keyword(db.open_table("t"), "king") == ["c"]
