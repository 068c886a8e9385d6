"""The servers under a hostile tester (issue 36, item 6): every loopback address serves without a key, a key is
never blank nor short, a slow search or look-up does not hold up /health (nor a look-up), the MCP server answers
a line it cannot read with a JSON-RPC error and bounds its arguments as the HTTP API does (one definition)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from mcp.client import Client
from typer.testing import CliRunner

from graphrag_lite.cli import app as cli_app
from graphrag_lite.serve import browse
from graphrag_lite.serve.app import create_app
from graphrag_lite.serve.holder import IndexHolder
from graphrag_lite.serve.mcp_server import ServedIndex, build_server
from tests.conftest import DATA, REPO, make_project, write_settings

GUARD_S = 30  # a hang guard only: a broken server fails the test when it is reached, a working one long before


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_project(tmp_path_factory.mktemp("hardening"), sorted((DATA / "unrelated-documents").glob("*.txt"))[:2])
    result = CliRunner().invoke(cli_app, ["index", "--root", str(root)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return root


@pytest.fixture(scope="module")
def holder(project: Path) -> IndexHolder:
    return IndexHolder(project, None, [])


# ------------------------------------------------------------------ P3: loopback addresses and keys


@pytest.mark.parametrize("address", ["http://127.0.0.2:8000", "http://127.1.2.3", "http://[::1]:8000",
                                     "http://LOCALHOST:8000"])
def test_a_keyless_server_answers_every_loopback_address(holder, address):
    with TestClient(create_app(holder, watch=False), base_url=address) as client:
        assert client.get("/health").status_code == 200
        assert client.get("/entities").status_code == 200


def test_a_keyless_server_still_refuses_other_names(holder):
    with TestClient(create_app(holder, watch=False), base_url="http://127.0.0.1.evil.example") as client:
        refused = client.get("/health")
    assert refused.status_code == 400 and "addressed to this machine" in refused.text


def serve(project: Path, monkeypatch: pytest.MonkeyPatch, *options: str, env: dict[str, str] | None = None) -> Any:
    """`graphrag-lite serve` with `options`, uvicorn replaced by a stub: (the result, the apps it would serve)."""
    import uvicorn

    served: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **_: served.append(app))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    result = CliRunner().invoke(cli_app, ["serve", "--root", str(project), "--port", port, *options], env=env)
    return result, served


@pytest.mark.parametrize(("options", "env"), [(["--host", "0.0.0.0", "--api-key", "   "], None),
                                              (["--api-key", ""], None),
                                              (["--host", "0.0.0.0"], {"GRAPHRAG_LITE_API_KEY": " \t "})])
def test_a_blank_api_key_is_refused_naming_where_it_is_set(project, monkeypatch, options, env):
    result, served = serve(project, monkeypatch, *options, env=env)
    assert result.exit_code == 2 and not served, result.output
    said = " ".join(result.output.split())
    assert "the API key is blank" in said and "--api-key" in said and "GRAPHRAG_LITE_API_KEY" in said
    assert "at least 16 characters" in said


def test_a_short_api_key_is_refused_with_the_length_it_needs(project, monkeypatch):
    result, served = serve(project, monkeypatch, "--host", "0.0.0.0", "--api-key", "s3cret")
    assert result.exit_code == 2 and not served, result.output
    said = " ".join(result.output.split())
    assert "the API key is 6 characters long" in said and "at least 16" in said and "--api-key" in said


def test_a_long_enough_api_key_serves_and_is_what_clients_send(project, monkeypatch):
    result, served = serve(project, monkeypatch, "--host", "0.0.0.0", "--api-key", " 0123456789abcdef ")
    assert result.exit_code == 0 and len(served) == 1, result.output
    with TestClient(served[0]) as client:
        assert client.get("/entities", headers={"X-API-Key": "0123456789abcdef"}).status_code == 200


# ------------------------------------------------------------------ P4: the event loop stays free


class Blocking:
    """Stands for CPU-bound work: it holds the thread it runs on until released (or the guard's end)."""

    def __init__(self) -> None:
        self.started, self.release, self.ended = threading.Event(), threading.Event(), threading.Event()

    def hold(self) -> None:
        self.started.set()
        self.release.wait(GUARD_S)
        self.ended.set()


def while_blocked(client: TestClient, blocking: Blocking, slow: tuple[str, str, dict[str, Any]],
                  meanwhile: str) -> tuple[int, bool, int]:
    """Send the `slow` request, then, once its work is holding its thread, GET `meanwhile`: (meanwhile's
    status, whether the slow work was still held when it was answered, the slow request's status)."""
    statuses: list[int] = []
    verb, path, options = slow
    sender = threading.Thread(target=lambda: statuses.append(client.request(verb, path, **options).status_code))
    sender.start()
    try:
        assert blocking.started.wait(GUARD_S), "the slow request never started its work"
        answer = client.get(meanwhile)
        still_held = not blocking.ended.is_set()
    finally:
        blocking.release.set()
        sender.join(GUARD_S)
    return answer.status_code, still_held, statuses[0]


@pytest.mark.parametrize("meanwhile", ["/health", "/entities?q=a"])
def test_a_slow_search_holds_up_neither_health_nor_a_look_up(holder, monkeypatch, meanwhile):
    blocking = Blocking()
    engine = holder.current.engines[("local", True)]
    original = engine.asearch

    async def slow_search(method: str, question: str, **options: Any) -> Any:
        blocking.hold()  # blocks its thread, as a search's ranking and packing do
        return await original(method, question, **options)

    monkeypatch.setattr(engine, "asearch", slow_search)
    slow = ("POST", "/query/local", {"json": {"question": "Who is in the documents?", "no_model": True}})
    with TestClient(create_app(holder, watch=False), base_url="http://127.0.0.1") as client:
        assert while_blocked(client, blocking, slow, meanwhile) == (200, True, 200)


def test_a_slow_look_up_does_not_hold_up_health(holder, monkeypatch):
    blocking = Blocking()
    original = browse.find_entities

    def slow_find(*args: Any) -> Any:
        blocking.hold()
        return original(*args)

    monkeypatch.setattr(browse, "find_entities", slow_find)
    with TestClient(create_app(holder, watch=False), base_url="http://127.0.0.1") as client:
        assert while_blocked(client, blocking, ("GET", "/entities", {"params": {"q": "x"}}), "/health") == \
            (200, True, 200)


# ------------------------------------------------------------------ P5: MCP's malformed lines and bounds


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "test", "version": "0"}}}


def test_mcp_answers_a_line_it_cannot_read_with_a_json_rpc_error(tmp_path):
    """A line that is not JSON gets -32700, JSON that is not JSON-RPC -32600 (with its id when it has one),
    and the server goes on: the next request is answered."""
    root = tmp_path / "empty"  # no index: the transport is what is tested, and it answers before any tool
    write_settings(root, "models:\n  default_chat_model:\n    model: fake/default\n")
    lines = ["this is not json", '{"jsonrpc": "2.0", "id": 7}', "[1, 2]", json.dumps(INITIALIZE)]
    env = {k: os.environ[k] for k in ("TIKTOKEN_CACHE_DIR", "LITELLM_LOCAL_MODEL_COST_MAP", "PATH") if k in os.environ}
    server = subprocess.Popen([sys.executable, "-m", "graphrag_lite", "mcp", "--root", str(root)], cwd=REPO,
                              env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True)
    try:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write("\n".join(lines) + "\n")
        server.stdin.flush()
        answers = []
        while not answers or answers[-1].get("id") != 1:  # up to the initialize's answer
            line = server.stdout.readline()
            assert line, f"the server closed stdout after {answers}"
            answers.append(json.loads(line))
    finally:
        server.kill()
        server.wait()
    errors = [(a["id"], a["error"]["code"]) for a in answers if "error" in a]
    assert errors == [(None, -32700), (7, -32600), (None, -32600)], answers
    assert "not JSON" in answers[0]["error"]["message"] and "JSON-RPC" in answers[1]["error"]["message"]
    assert answers[-1]["result"]["serverInfo"]["name"] == "graphrag-lite"


def call_tool(served: ServedIndex, tool: str, arguments: dict[str, Any]) -> Any:
    async def call() -> Any:
        async with Client(build_server(served)) as client:
            return await client.call_tool(tool, arguments)

    return asyncio.run(call())


@pytest.mark.parametrize(("tool", "arguments", "named"), [
    ("basic_search", {"question": "Who?", "response_type": "x" * 1_000_000}, "response_type"),
    ("local_search", {"question": "Who?", "community_level": 10**30}, "community_level"),
    ("global_search", {"question": "Who?", "community_level": 21}, "community_level"),
    ("local_search", {"question": "Who? " * 1000}, "question"),
    ("neighbourhood", {"entity": "x", "limit": 501}, "limit"),
])
def test_mcp_bounds_its_arguments_as_http_does(project, tool, arguments, named):
    result = call_tool(ServedIndex((project, None, [])), tool, arguments)
    assert result.is_error and named in result.content[0].text


def test_http_and_mcp_share_one_definition_of_the_bounds(holder):
    http = create_app(holder, watch=False).openapi()
    query = http["components"]["schemas"]["QueryRequest"]["properties"]
    [hops, limit] = [p["schema"] for p in http["paths"]["/graph/neighbourhood/{key}"]["get"]["parameters"][1:]]

    async def tools() -> dict[str, Any]:
        async with Client(build_server(ServedIndex((Path("."), None, [])))) as client:
            return {t.name: t.input_schema["properties"] for t in (await client.list_tools()).tools}

    mcp = asyncio.run(tools())
    for name in ("local_search", "global_search"):
        assert mcp[name]["response_type"]["maxLength"] == query["response_type"]["maxLength"]
        assert mcp[name]["question"]["maxLength"] == query["question"]["maxLength"]
        level = next(s for s in query["community_level"]["anyOf"] if s.get("type") == "integer")
        assert (mcp[name]["community_level"]["minimum"], mcp[name]["community_level"]["maximum"]) == \
            (level["minimum"], level["maximum"])
    assert (mcp["neighbourhood"]["hops"]["maximum"], mcp["neighbourhood"]["limit"]["maximum"]) == \
        (hops["maximum"], limit["maximum"])
