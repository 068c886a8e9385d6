"""Calls straight to an OpenAI-compatible server (issue 37): the same answers as through LiteLLM, errors read as
LiteLLM's are, streams read whole and only while they pay, and an index built through a real HTTP server
(the fake model's, on 127.0.0.1) equal to one built in process."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from graphrag_lite.config import CacheConfig, GraphRagConfig, ModelConfig
from graphrag_lite.fake.http_server import FakeServer, call_of
from graphrag_lite.llm.errors import LLMCallError, LLMConfigurationError
from graphrag_lite.llm.gateway import Gateway
from graphrag_lite.llm.openai_http import speaks_openai
from graphrag_lite.llm.streaming import ANSWERS_BEFORE_PLAIN, StreamChoice
from tests.conftest import DATA, make_project

QUESTION = [{"role": "user", "content": "-----Sources-----\nid|text\n1|Pepys went to the Navy Office with Sir W. Pen "
             "and Mr. Gauden by water.\nWhere did Pepys go?"}]


@pytest.fixture
def server():
    running = FakeServer().start()
    yield running
    running.stop()


def gateway(tmp_path: Path, server: FakeServer, **args) -> Gateway:
    args.setdefault("max_retry_wait", 0.01)
    model = ModelConfig(model="openai/fake", api_base=server.url, api_key="sk-fake", **args)
    return Gateway(GraphRagConfig(models={"m": model}, cache=CacheConfig(enabled=False, base_dir=tmp_path / "cache")))


def ask(g: Gateway, messages=QUESTION):
    try:
        return asyncio.run(g.chat("m", messages, stage="t", step="answer"))
    finally:
        g.close()


def test_an_openai_compatible_server_at_an_api_base_is_called_straight():
    assert speaks_openai(ModelConfig(model="openai/qwen", api_base="http://127.0.0.1:8000/v1"))
    assert speaks_openai(ModelConfig(model="hosted_vllm/qwen", api_base="http://gpu:8000/v1"))
    assert not speaks_openai(ModelConfig(model="openai/gpt-4o-mini"))  # OpenAI's own API: LiteLLM knows its quirks
    assert not speaks_openai(ModelConfig(model="ollama/llama3", api_base="http://127.0.0.1:11434"))
    assert not speaks_openai(ModelConfig(model="openai/qwen", api_base="http://127.0.0.1:8000/v1", client="litellm"))
    assert speaks_openai(ModelConfig(model="openai/gpt-4o-mini", client="openai"))


def test_the_key_is_sent_as_a_bearer_token_from_the_settings_or_the_provider_s_variable(monkeypatch):
    from graphrag_lite.llm.openai_http import api_key

    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    assert api_key(ModelConfig(model="openai/qwen", api_base="http://127.0.0.1:1/v1", api_key="sk-set")) == "sk-set"
    assert api_key(ModelConfig(model="openai/qwen", api_base="http://127.0.0.1:1/v1")) == "sk-from-the-environment"
    assert api_key(ModelConfig(model="hosted_vllm/qwen", api_base="http://127.0.0.1:1/v1")) == ""


def test_a_streamed_answer_is_the_plain_answer(tmp_path, server):
    plain = gateway(tmp_path / "a", server, stream=False)
    streamed = gateway(tmp_path / "b", server, stream=True)
    assert ask(plain).text == ask(streamed).text != ""
    assert [body.get("stream") for body in server.requests] == [None, True]
    assert server.requests[1]["stream_options"] == {"include_usage": True}
    assert server.requests[0]["model"] == "fake"  # the model string without its provider
    assert server.keys == ["Bearer sk-fake"] * 2
    assert plain.ledger.totals()["prompt_tokens"] == streamed.ledger.totals()["prompt_tokens"] > 0


@pytest.mark.parametrize("fault", [
    (429, '{"error": {"message": "slow down"}}', {"Retry-After": "0"}),
    (500, "internal error", {}),
    (503, '{"error": {"message": "overloaded"}}', {}),
    (0, "", {}),  # the connection dropped
    (200, "this is not JSON", {}),  # a proxy's error page with a 200
])
def test_what_a_retry_can_fix_is_retried(tmp_path, server, fault):
    server.faults.append(fault)
    g = gateway(tmp_path, server, stream=False)
    assert ask(g).text and g.ledger.totals()["retries"] == 1


@pytest.mark.parametrize("stream", ['data: {"choices": [{"delta": {"content": "Pep', "data: [DONE]\n\n",
                                    'data: {"error": {"message": "model overloaded", "code": 503}}\n\n',
                                    "data: [1, 2]\n\n"])
def test_a_stream_that_cannot_be_read_is_retried(tmp_path, server, stream):
    server.faults.append((200, stream, {}))
    g = gateway(tmp_path, server, stream=True)
    assert ask(g).text and g.ledger.totals()["retries"] == 1


@pytest.mark.parametrize(("fault", "said"), [
    ((401, '{"error": {"message": "Incorrect API key provided"}}', {}), "authentication failed"),
    ((404, '{"error": {"message": "The model `fake` does not exist"}}', {}), "does not know this model"),
    ((400, '{"error": {"message": "This model\'s maximum context length is 4096 tokens. However, you requested '
      '9000 tokens"}}', {}), "larger than the model's context window"),
])
def test_what_no_retry_can_fix_stops_with_the_fix(tmp_path, server, fault, said):
    server.faults.append(fault)
    with pytest.raises(LLMConfigurationError, match=said):
        ask(gateway(tmp_path, server, stream=False))
    assert len(server.requests) == 1


def test_a_bad_request_is_not_retried_and_names_the_server_s_words(tmp_path, server):
    server.faults.append((400, '{"error": {"message": "unknown field: frobnicate"}}', {}))
    with pytest.raises(LLMCallError, match="unknown field: frobnicate"):
        ask(gateway(tmp_path, server, stream=False))


def reply_body(content, finish: str) -> str:
    return json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                    "finish_reason": finish}], "usage": {"prompt_tokens": 30, "completion_tokens": 5}})


@pytest.mark.parametrize(("content", "finish", "said"), [
    (None, "stop", "empty"),  # a reasoning model that spent its tokens thinking: no content at all
    ("Pepys went to the Navy Off", "length", "cut off"),  # stopped at max_tokens
])
def test_an_unusable_reply_over_http_is_asked_again_counted_and_never_cached(tmp_path, server, content, finish,
                                                                            said):
    from graphrag_lite.answer_parsing import ParseError

    def whole_sentence(text: str) -> str:
        if not text.strip():
            raise ParseError("the answer is empty")
        return text

    server.faults.append((200, reply_body(content, finish), {}))
    model = ModelConfig(model="openai/fake", api_base=server.url, api_key="sk-fake", stream=False)
    g = Gateway(GraphRagConfig(models={"m": model}, cache=CacheConfig(base_dir=tmp_path / "cache")))
    try:
        result = asyncio.run(g.chat("m", QUESTION, stage="t", step="answer", parse=whole_sentence, max_tokens=50))
        assert result.text and result.text != content
        assert g.cached_answer("m", QUESTION, max_tokens=50) == result.text  # the usable answer, not the first
    finally:
        g.close()
    assert len(server.requests) == 2 and said in server.requests[1]["messages"][-1]["content"]
    totals = g.ledger.totals()
    assert totals["parse_retries"] == 1 and totals["prompt_tokens"] >= 30  # both requests counted


def test_a_stream_that_falls_silent_is_abandoned_and_retried(tmp_path, server):
    server.stall = 5.0
    g = gateway(tmp_path, server, stream=True, timeout=0.5)
    started = time.monotonic()
    assert ask(g).text and g.ledger.totals()["retries"] == 1
    assert time.monotonic() - started < 4  # abandoned at the silence, not at the stall's end


def test_an_unreachable_server_is_named(tmp_path, server):
    g = gateway(tmp_path, server, stream=False)
    server.stop()
    with pytest.raises(LLMConfigurationError, match="cannot be reached"):
        ask(g)


def test_embeddings_come_back_in_order_and_are_counted(tmp_path, server):
    model = ModelConfig(model="openai/fake-embedding", api_base=server.url, api_key="sk-fake")
    g = Gateway(GraphRagConfig(models={"e": model}, cache=CacheConfig(enabled=False, base_dir=tmp_path / "cache")))
    try:
        vectors = asyncio.run(g.embed("e", ["alpha", "beta gamma"], stage="embed_text", dimension=16))
    finally:
        g.close()
    assert [len(v) for v in vectors] == [128, 128] and vectors[0] != vectors[1]
    assert g.ledger.totals()["prompt_tokens"] > 0 and server.requests[0]["input"] == ["alpha", "beta gamma"]


def test_a_local_model_is_streamed_until_its_answers_show_a_plain_call_cannot_time_out():
    local = ModelConfig(model="openai/qwen", api_base="http://127.0.0.1:8000/v1", timeout=60)
    choice = StreamChoice()
    for _ in range(ANSWERS_BEFORE_PLAIN):
        assert choice.streams("m", local, max_tokens=2000)
        choice.answered("m", seconds=1.5, first_piece_s=0.5, completion_tokens=1000)  # 1 ms a token
    assert not choice.streams("m", local, max_tokens=2000)  # 0.5 s + 2 s, well within 60 s
    assert choice.streams("m", local, max_tokens=100_000)  # 100 s would not be
    choice.answered("m", seconds=2.0, first_piece_s=None, completion_tokens=3)  # a plain answer measures nothing
    choice.timed_out("m")
    assert choice.streams("m", local, max_tokens=10)  # slower than it seemed: streamed for good


def test_a_slow_local_model_stays_streamed_and_explicit_settings_win():
    slow = ModelConfig(model="ollama/llama3", timeout=180)
    choice = StreamChoice()
    for _ in range(5):
        choice.answered("s", seconds=60.0, first_piece_s=10.0, completion_tokens=500)  # 10 tokens a second
    assert choice.streams("s", slow, max_tokens=None)  # 10 s + 4096 tokens at 0.1 s: past half the time-out
    assert not choice.streams("h", ModelConfig(model="openai/gpt-4o-mini"), None)  # hosted: plain
    assert choice.streams("h", ModelConfig(model="openai/gpt-4o-mini", stream=True), None)
    assert not choice.streams("s", ModelConfig(model="ollama/llama3", stream=False), None)


def test_the_server_tells_the_packaged_prompts_calls_apart():
    from graphrag_lite.extraction.gleaning import CONTINUE_GRAPH, LOOP_CHECK
    from graphrag_lite.resources import default_prompt

    extract = [{"role": "user", "content": default_prompt("extract_graph.txt").read_text()}]
    assert call_of(extract) == ("extract_graph", "extract")
    answered = [*extract, {"role": "assistant", "content": "x"}]
    assert call_of([*answered, {"role": "user", "content": CONTINUE_GRAPH}]) == ("extract_graph", "glean")
    assert call_of([*answered, {"role": "user", "content": LOOP_CHECK}]) == ("extract_graph", "check")
    report = [{"role": "user", "content": default_prompt("community_report.txt").read_text()}]
    assert call_of(report) == ("community_reports", "report") and call_of(QUESTION) == ("", "answer")


def test_an_index_through_a_real_http_server_equals_the_one_built_in_process(tmp_path, server, cli):
    documents = [DATA / "operation-dulce" / "dulce.txt"]
    in_process = make_project(tmp_path / "in_process", documents, "extract_graph:\n  format: tuples\n")
    over_http = make_project(tmp_path / "over_http", documents, "extract_graph:\n  format: tuples\n")
    (over_http / "settings.yaml").write_text(
        f"models:\n  default_chat_model:\n    model: openai/fake\n    api_base: {server.url}\n    api_key: sk-fake\n"
        "  default_embedding_model:\n    model: fake/embedding\n"  # a plug-in's embeddings: no LiteLLM either
        "extract_graph:\n  format: tuples\n", encoding="utf-8")
    assert cli("index", "--root", in_process).exit_code == 0
    # in a process of its own, to see which libraries it needed
    done = subprocess.run([sys.executable, "-c", "import sys\nfrom graphrag_lite.cli import run_command\nsys.argv = "
                           f"['graphrag-lite', 'index', '--root', {str(over_http)!r}, '--quiet']\n"
                           "try:\n run_command()\n"
                           "except SystemExit as end:\n assert not end.code, end.code\n"
                           "print(sorted(m for m in ('litellm', 'openai') if m in sys.modules))"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"  # neither LiteLLM nor the openai client was imported
    assert any(body.get("stream") for body in server.requests)  # a local server: its first answers streamed
    for table in ("entities", "relationships", "communities", "community_reports", "text_units"):
        ours, theirs = (pd.read_parquet(root / "output" / f"{table}.parquet") for root in (in_process, over_http))
        assert ours["id"].tolist() == theirs["id"].tolist(), table
    stats = json.loads((over_http / "output" / "stats.json").read_text())
    assert stats["llm"]["calls"] > 0 and stats["llm"]["prompt_tokens"] > 0
