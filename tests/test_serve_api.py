"""`graphrag-lite serve`: the HTTP API over an index of five short documents, built with the fake model; bad
requests, the API key, and the swap to a newly built index."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from graphrag_lite.cli import app as cli_app
from graphrag_lite.errors import ConfigError
from graphrag_lite.fake.provider import STATS
from graphrag_lite.query.retrieval import by_keywords
from graphrag_lite.serve.access import check_binding
from graphrag_lite.serve.app import MAX_BODY_BYTES, create_app
from graphrag_lite.serve.holder import IndexHolder
from graphrag_lite.vector_store import connect
from tests.conftest import DATA, make_project

DOCUMENTS = sorted((DATA / "unrelated-documents").glob("*.txt"))
LOCAL = "http://127.0.0.1"
KEY = "s3cret-0123456789abcdef"  # 16 characters at least
TOLD_ONLY_BY_THE_NEW_DOCUMENT = "Who opened the Sunset Cafe in Bronzeville with Isaiah Whitfield's money?"  # jazz.txt


def index(root):
    result = CliRunner().invoke(cli_app, ["index", "--root", str(root)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return root


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return index(make_project(tmp_path_factory.mktemp("serve"), DOCUMENTS[:4]))


@pytest.fixture(scope="module")
def client(project):
    with TestClient(create_app(IndexHolder(project, None, []), watch=False), base_url=LOCAL) as client:
        yield client


def a_title(client) -> str:
    return client.get("/entities", params={"q": ""}).json()["entities"][0]["title"]


@pytest.mark.parametrize("method", ["local", "global", "basic"])
def test_a_query_answers_like_the_cli_json_with_resolved_citations(client, method):
    question = f"What is said about {a_title(client).title()}?"
    answer = client.post(f"/query/{method}", json={"question": question})
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert data["method"] == method and data["question"] == question and "[Data:" in data["answer"]
    assert any(data["citations"].values()) and not any(row.get("missing") for rows in data["citations"].values()
                                                       for row in rows)
    evidence = client.post(f"/query/{method}", json={"question": question, "no_model": True}).json()
    assert evidence["answer"].startswith("Retrieved evidence") and evidence["usage"] is None


def test_a_streamed_answer_comes_in_pieces_then_the_whole_result(client):
    question = f"Who is {a_title(client).title()}?"
    whole = client.post("/query/local", json={"question": question}).json()
    with client.stream("POST", "/query/local", json={"question": question, "stream": True}) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [block for block in response.read().decode().split("\n\n") if block]
    kinds = [block.split("\n")[0].removeprefix("event: ") for block in events]
    assert kinds[-1] == "result" and kinds.count("piece") >= 1
    pieces = "".join(json.loads(block.split("data: ", 1)[1]) for block in events if block.startswith("event: piece"))
    result = json.loads(events[-1].split("data: ", 1)[1])
    assert pieces == result["answer"] == whole["answer"]


@pytest.mark.parametrize("method", ["local", "basic"])
def test_context_is_the_ranked_context_with_no_chat_call(client, method):
    STATS.reset()
    context = client.post(f"/context/{method}", json={"question": f"Tell me about {a_title(client)}"})
    assert context.status_code == 200, context.text
    data = context.json()
    assert STATS.completions == 0 and data["context"]["Sources"] and "-----Sources-----" in data["context_text"]
    if method == "local":
        assert data["context"]["Entities"] and set(data["budgets"]) >= {"Entities", "Sources"}


def test_graph_look_ups_follow_an_entity_to_its_community(client):
    found = client.get("/entities", params={"q": a_title(client)[:4]}).json()["entities"]
    entity = client.get(f"/entities/{found[0]['id']}").json()
    assert entity["title"] == found[0]["title"] and entity["text_units"]
    by_short_id = client.get(f"/entities/{found[0]['human_readable_id']}").json()
    assert by_short_id["id"] == entity["id"]
    around = client.get(f"/graph/neighbourhood/{entity['id']}", params={"hops": 2}).json()
    assert around["center"] == entity["id"] and entity["id"] in {n["id"] for n in around["nodes"]}
    community = client.get(f"/communities/{entity['communities'][0]['community']}").json()
    assert entity["id"] in {m["id"] for m in community["members"]} and community["report"]["title"]


def test_health_and_stats_count_the_requests(client):
    assert client.get("/health").json()["status"] == "ok"
    client.get("/entities", params={"q": "x"})
    stats = client.get("/stats").json()
    assert stats["index"]["rows"]["entities"] > 0 and stats["index"]["last_run"]["status"] == "completed"
    assert stats["requests"]["GET /entities"]["requests"] >= 1 and "p50_ms" in stats["requests"]["GET /entities"]


BAD_REQUESTS = [
    ("get", "/entities/no-such-entity", None, 404, "no-such-entity"),
    ("get", "/communities/99999", None, 404, "99999"),
    ("get", "/communities/abc", None, 422, "community"),
    ("get", "/graph/neighbourhood/no-such-entity", None, 404, "no-such-entity"),
    ("get", "/graph/neighbourhood/x?hops=9", None, 422, "hops"),
    ("post", "/query/local", b'{"question": "unclosed', 422, "not valid JSON"),
    ("post", "/query/local", {"question": ""}, 422, "question"),
    ("post", "/query/local", {"question": "q", "temperature": 2}, 422, "temperature"),
    ("post", "/query/local", {"question": "q", "stream": "yes"}, 422, "stream"),
    ("post", "/query/local", ["q"], 422, "JSON object"),
    ("post", "/query/drift", {"question": "q"}, 422, "method"),
    ("post", "/context/global", {"question": "q"}, 422, "method"),
    ("post", "/query/local", {"question": "x" * (MAX_BODY_BYTES + 10)}, 413, "larger than"),
]


@pytest.mark.parametrize(("verb", "path", "body", "status", "said"), BAD_REQUESTS)
def test_a_bad_request_gets_a_4xx_with_a_message(client, verb, path, body, status, said):
    if isinstance(body, bytes):
        response = client.post(path, content=body, headers={"content-type": "application/json"})
    else:
        response = getattr(client, verb)(path, **({"json": body} if body is not None else {}))
    assert response.status_code == status, response.text
    detail = response.json()["detail"]
    assert said.lower() in str(detail).lower() and "Traceback" not in response.text


def test_a_chunked_body_is_cut_off_at_the_limit_too(client):
    def chunks():
        yield b'{"question": "'
        for _ in range(MAX_BODY_BYTES // 1000 + 2):
            yield b"x" * 1000
        yield b'"}'

    response = client.post("/query/basic", content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413 and "larger than" in response.json()["detail"]


def test_a_chunked_streamed_query_streams(client):
    """The chunked body is read ahead; the streaming response then waits on the client as usual."""
    body = json.dumps({"question": f"Who is {a_title(client)}?", "stream": True}).encode()

    def chunks():
        yield body[:10]
        yield body[10:]

    with client.stream("POST", "/query/local", content=chunks(), headers={"content-type": "application/json"}) as r:
        assert r.status_code == 200
        assert "event: result" in r.read().decode()


def test_a_keyless_server_answers_only_to_this_machines_names(project):
    with TestClient(create_app(IndexHolder(project, None, []), watch=False), base_url="http://evil.example") as other:
        assert other.get("/health").status_code == 400  # DNS rebinding: a page's name pointed at 127.0.0.1
    with TestClient(create_app(IndexHolder(project, None, []), watch=False), base_url="http://localhost:8000") as ok:
        assert ok.get("/health").status_code == 200


def test_stats_keep_one_entry_for_unmatched_paths(client):
    for n in range(3):
        client.get(f"/nope-{n}")
        client.get(f"/static/missing-{n}.js")
    routes = client.get("/stats").json()["requests"]
    assert not any("nope" in r or "missing" in r for r in routes) and routes["GET unmatched"]["requests"] >= 6


def test_a_whitespace_question_and_a_title_with_a_slash(client):
    assert client.post("/query/local", json={"question": "   "}).status_code == 422
    missing = client.get("/entities/AC/DC")
    assert missing.status_code == 404 and "AC/DC" in missing.json()["detail"]


def test_an_api_key_is_checked_on_every_data_request(project):
    with TestClient(create_app(IndexHolder(project, None, []), api_key=KEY, watch=False)) as client:
        assert client.get("/entities").status_code == 401
        wrong = client.get("/entities", headers={"X-API-Key": "nope"})
        assert wrong.status_code == 401 and "API key" in wrong.json()["detail"]
        assert client.get("/entities", headers={"X-API-Key": KEY}).status_code == 200
        assert client.get("/entities", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
        assert client.post("/query/basic", json={"question": "q"}).status_code == 401
        assert client.get("/health").status_code == 200  # no index data: load balancers need no key
        assert client.get("/openapi.json").status_code == 200  # the routes, no data: a browser can read the docs
        assert client.get("/entities", headers={"Authorization": f"bearer {KEY}"}).status_code == 200


def test_binding_beyond_this_machine_needs_a_key():
    check_binding("127.0.0.1", None)
    check_binding("localhost", None)
    with pytest.raises(ConfigError, match="--api-key"):
        check_binding("0.0.0.0", None)
    check_binding("0.0.0.0", KEY)


def test_a_finished_index_run_is_swapped_in_whole(tmp_path):
    root = index(make_project(tmp_path / "p", DOCUMENTS[:2]))
    holder = IndexHolder(root, None, [])
    with TestClient(create_app(holder, watch=False), base_url=LOCAL) as client:
        before = client.get("/stats").json()["index"]["rows"]["documents"]
        old = holder.current
        assert asyncio.run(holder.reload_if_changed()) is False  # nothing new
        shutil.copy(DOCUMENTS[2], root / "input" / DOCUMENTS[2].name)
        index(root)
        assert old.engine.index.documents.shape[0] == before  # requests holding the old index still see it whole
        # and its LanceDB tables stay at their versions: keyword search finds none of the new text units (an
        # unpinned table would return their ids, which the old tables do not hold)
        found = by_keywords(old.engines[("basic", True)]._database, "text_unit_text", TOLD_ONLY_BY_THE_NEW_DOCUMENT,
                            10)
        assert set(found) <= set(old.engine.index.text_units["id"])
        latest = by_keywords(connect(old.config.vector_store.db_uri), "text_unit_text", TOLD_ONLY_BY_THE_NEW_DOCUMENT,
                             10)
        assert set(latest) - set(old.engine.index.text_units["id"])  # the same search, unpinned, finds new units
        assert asyncio.run(holder.reload_if_changed()) is True
        assert client.get("/stats").json()["index"]["rows"]["documents"] == before + 1
        assert client.get("/health").json()["reloads"] == 1


def test_a_model_that_fails_every_call_is_a_502_not_an_empty_answer(project):
    failing = ["models.default_chat_model.model=fake/default?server_error=1", "models.default_chat_model.max_retries=0"]
    with TestClient(create_app(IndexHolder(project, None, failing), watch=False), base_url=LOCAL) as client:
        for method in ("global", "local"):  # global: every map call failed, which is not "nothing relevant"
            response = client.post(f"/query/{method}", json={"question": "What happened?"})
            assert response.status_code == 502 and "failed" in response.json()["detail"], response.text


def test_a_port_in_use_is_said_before_the_index_loads():
    import socket

    from graphrag_lite.serve.app import check_port

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(ConfigError, match="another --port"):
            check_port("127.0.0.1", taken.getsockname()[1])


def test_without_the_serve_extra_the_install_command_is_shown_whole(project, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "fastapi" else real(name, *a))
    result = CliRunner().invoke(cli_app, ["serve", "--root", str(project)])
    assert result.exit_code == 2 and "pip install 'graphrag-lite[serve]'" in result.output


def test_an_unexpected_failure_is_a_500_that_shows_no_internals(project, monkeypatch):
    from graphrag_lite.serve import browse

    def broken(*args, **kwargs):
        raise RuntimeError("lance error: Not found: /secret/path/data.lance")

    monkeypatch.setattr(browse, "find_entities", broken)
    app = create_app(IndexHolder(project, None, []), watch=False)
    with TestClient(app, base_url=LOCAL, raise_server_exceptions=False) as client:
        response = client.get("/entities", params={"q": "x"})
        assert response.status_code == 500 and "RuntimeError" in response.json()["detail"]
        assert "/secret/path" not in response.text and "Traceback" not in response.text
        assert client.get("/stats").json()["requests"]["GET /entities"]["errors"] == 1
