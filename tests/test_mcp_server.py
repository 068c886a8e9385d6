"""`graphrag-lite mcp`: the server started as a client starts it (a subprocess over stdio, with the SDK's own
client), its five tools called on an index of Operation Dulce built with the fake model; and its failures
(an unknown entity, a missing index, a failing model) coming back as tool errors that carry the message."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client, ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from typer.testing import CliRunner

from graphrag_lite.cli import app
from graphrag_lite.serve.mcp_server import ServedIndex, build_server
from tests.conftest import DATA, REPO, make_project, write_settings

TOOLS = {"local_search", "global_search", "basic_search", "get_entity", "neighbourhood"}
CALLS = {
    "local_search": {"question": "Who is Agent Alex Mercer and what are his goals?"},
    "global_search": {"question": "Who leads the team to Dulce?", "community_level": 1},
    "basic_search": {"question": "Who is Jordan Hayes?", "response_type": "Single Paragraph"},
    "get_entity": {"entity": "alex mercer"},
    "neighbourhood": {"entity": "Sam Rivera", "hops": 2, "limit": 8},
    "unknown": {"entity": "Nobody Atall"},
}


@pytest.fixture(scope="module")
def dulce(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_project(tmp_path_factory.mktemp("mcp"), [DATA / "operation-dulce" / "dulce.txt"],
                        "extract_claims:\n  enabled: true\n")
    result = CliRunner().invoke(app, ["index", "--root", str(root)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return root


async def over_stdio(root: Path) -> dict[str, Any]:
    """Start `python -m graphrag_lite mcp` as a client would, list its tools and call each once."""
    env = {k: os.environ[k] for k in ("TIKTOKEN_CACHE_DIR", "LITELLM_LOCAL_MODEL_COST_MAP") if k in os.environ}
    server = StdioServerParameters(command=sys.executable, args=["-m", "graphrag_lite", "mcp", "--root", str(root)],
                                   env=env, cwd=REPO)
    faults: list[Exception] = []  # a line on stdout that is not the protocol arrives here

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            faults.append(message)

    with open(root / "server-stderr.log", "w", encoding="utf-8") as errlog:
        async with stdio_client(server, errlog=errlog) as (read, write), ClientSession(
                read, write, message_handler=on_message) as session:
            await session.initialize()
            found: dict[str, Any] = {"tools": {t.name: t for t in (await session.list_tools()).tools}}
            for name, arguments in CALLS.items():
                tool = "get_entity" if name == "unknown" else name
                found[name] = await session.call_tool(tool, arguments, read_timeout_seconds=30)
    found["faults"] = faults
    return found


@pytest.fixture(scope="module")
def served(dulce: Path) -> dict[str, Any]:
    return asyncio.run(asyncio.wait_for(over_stdio(dulce), timeout=60))


def text(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


def test_the_server_lists_its_five_tools_with_their_arguments(served):
    assert served["faults"] == []  # nothing but the protocol on stdout
    tools = served["tools"]
    assert set(tools) == TOOLS
    assert tools["local_search"].input_schema["required"] == ["question"]
    assert {"response_type", "community_level"} <= set(tools["global_search"].input_schema["properties"])
    assert "community_level" not in tools["basic_search"].input_schema["properties"]
    assert tools["neighbourhood"].input_schema["properties"]["hops"]["maximum"] == 3
    assert all(tool.description for tool in tools.values())


def test_searches_answer_with_their_resolved_citations(served):
    local = text(served["local_search"])
    assert not served["local_search"].is_error and "Based on the data" in local
    answer, _, cited = local.partition("\n\n")
    assert "[Data:" in answer and "Entities:" in cited and "ALEX MERCER (PERSON)" in cited
    basic = text(served["basic_search"])
    assert "\nSources:\n- [Sources " in basic and "dulce.txt: " in basic and "Jordan" in basic
    global_ = text(served["global_search"])
    assert not served["global_search"].is_error and "\nReports:\n- [Reports " in global_ and "community" in global_


def test_get_entity_and_neighbourhood_read_the_graph(served):
    entity = text(served["get_entity"])
    assert entity.startswith("ALEX MERCER (PERSON) - id ")
    for section in ("Relationships (", "Claims (", "Communities (broadest first):", "Sources ("):
        assert f"\n{section}" in entity, section
    assert "ALEX MERCER -> TAYLOR CRUZ" in entity and "dulce.txt: " in entity
    around = text(served["neighbourhood"])
    assert around.startswith("Neighbourhood of SAM RIVERA: 8 entities within 2 hop(s)")
    assert "- 0: SAM RIVERA (PERSON" in around and "\nRelationships:\n- " in around


def test_an_unknown_entity_is_a_tool_error_with_the_reason(served):
    result = served["unknown"]
    assert result.is_error
    message = text(result)
    assert "no entity 'Nobody Atall'" in message and "ask local_search" in message


def call_in_process(served: ServedIndex, tool: str, arguments: dict[str, Any]) -> Any:
    async def call() -> Any:
        async with Client(build_server(served)) as client:
            return await client.call_tool(tool, arguments)

    return asyncio.run(call())


def test_a_missing_index_is_reported_by_each_tool(tmp_path):
    root = tmp_path / "empty"
    write_settings(root, "models:\n  default_chat_model:\n    model: fake/default\n")
    served = ServedIndex((root, None, []))
    for tool, arguments in (("get_entity", {"entity": "x"}), ("basic_search", {"question": "who?"})):
        result = call_in_process(served, tool, arguments)
        assert result.is_error and "no index in" in text(result) and "graphrag-lite index --root" in text(result)


def test_a_failing_model_is_a_tool_error_and_the_server_goes_on(dulce):
    served = ServedIndex((dulce, None, ["models.default_chat_model.model=fake/default?auth=1"]))
    failed = call_in_process(served, "basic_search", {"question": "Who is Taylor Cruz?"})
    assert failed.is_error and "auth" in text(failed).lower()
    assert "TAYLOR CRUZ" in text(call_in_process(served, "get_entity", {"entity": "taylor cruz"}))


def test_an_index_run_while_serving_is_picked_up_at_the_next_call(tmp_path):
    """The served index is loaded whole and pinned; after an index run completes, the next call answers from
    the new index (not a mix of the old tables and the new LanceDB rows)."""
    root = make_project(tmp_path / "p", [DATA / "unrelated-documents" / "botany.txt"])
    assert CliRunner().invoke(app, ["index", "--root", str(root)], catch_exceptions=False).exit_code == 0
    served = ServedIndex((root, None, []))
    served.load_now()
    before = text(call_in_process(served, "basic_search", {"question": "Who kept the lighthouse?"}))
    assert "Pengelly" not in before
    (root / "input" / "lighthouse.txt").write_bytes((DATA / "unrelated-documents" / "lighthouse.txt").read_bytes())
    assert CliRunner().invoke(app, ["index", "--root", str(root)], catch_exceptions=False).exit_code == 0
    after = call_in_process(served, "basic_search", {"question": "Who kept the Godrevy lighthouse?"})
    assert not after.is_error and "Pengelly" in text(after)
    assert served.holder is not None and served.holder.reloads == 1


def test_a_blank_question_is_refused_before_any_call(dulce):
    result = call_in_process(ServedIndex((dulce, None, [])), "basic_search", {"question": "   "})
    assert result.is_error and "question" in text(result)


def test_initialize_is_answered_before_the_index_is_loaded(tmp_path, monkeypatch):
    """A new user's MCP client waited 19-21 s for `initialize` while the index loaded (clients with a short
    start-up time-out give up): the server now serves at once and a first call waits for the load."""
    import threading

    from graphrag_lite.serve import mcp_server

    root = make_project(tmp_path, [DATA / "operation-dulce" / "dulce.txt"])
    order: list[str] = []
    serving_started = threading.Event()

    class SlowHolder:
        def __init__(self, *args: Any) -> None:
            serving_started.wait(30)  # a load that ends only once the server serves (before: never, in time)
            order.append("loaded")

    async def serve(server: Any) -> None:
        order.append("serving")
        serving_started.set()

    monkeypatch.setattr(mcp_server, "IndexHolder", SlowHolder)
    monkeypatch.setattr(mcp_server, "serve_stdio", serve)
    mcp_server.run_stdio(root, None, [])
    assert order[0] == "serving"
