"""The fake model behind an OpenAI-compatible HTTP server, as a self-hosted model is (vLLM, llama.cpp, LM Studio):
for benchmarks that must pay what a real server costs the client (HTTP, server-sent events, JSON), and for
tests of the client that talks to such servers.

    server = FakeServer(latency=0.0)          # in a thread of its own; or `python -m graphrag_lite.fake.http_server`
    server.start(); server.url                # http://127.0.0.1:PORT/v1
    ... model: openai/fake, api_base: server.url, api_key: sk-fake ...
    server.stop()

POST /v1/chat/completions answers as `fake/default` does (the same answers, so an index built through it has the
same ids), streamed when asked (`stream: true`: one event per piece of about a token, the usage in a last event
when `stream_options.include_usage`), and POST /v1/embeddings as `fake/embedding`. A request carries no stage
and step, so the kind of call is read from the packaged prompt it uses (call_of); a prompt it does not know
gets a plain answer. Faults for tests: `faults` is a list of (status, body, headers) answered before any
other, one per request (status 0: the connection is dropped), and `stall` makes the next `stalls` streams fall
silent after their first piece.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from graphrag_lite.extraction.gleaning import FOUND_NAMES
from graphrag_lite.fake.answers import UnknownCall, answer, plain_answer
from graphrag_lite.fake.embedding import embed_text
from graphrag_lite.fake.options import PROVIDER_ENCODING
from graphrag_lite.fake.tokens import cut_at, provider_prompt_tokens
from graphrag_lite.tokens import count_tokens

# the kind of call a packaged prompt makes: a phrase of its first message -> (stage, step)
PROMPT_CALLS = (
    ("identify every entity of those types", ("extract_graph", "extract")),
    ("identify all entities of those types", ("extract_graph", "extract")),  # Microsoft GraphRAG's, nano-graphrag's
    ("analyze claims against certain entities", ("extract_claims", "extract")),
    ("generating a comprehensive summary of the data provided", ("summarize_descriptions", "summarize")),
    ("general information discovery", ("community_reports", "report")),
    ("short name from a knowledge graph", ("merge_graph", "choose_alias")),
    ("Write a list of key points", ("query_global", "map")),
    ("Rate from 0 to 5 how relevant", ("query_global_rate", "rate")),
    ("Write the search query for the next step", ("query_local_hop", "next_hop")),
)
# the follow-ups of an extraction, by a phrase at the end of the last message
FOLLOW_UPS = (("were missed in the last extraction", "glean"), ("may have still been missed", "check"))
FOLLOW_UP_LENGTH = 1000
FOUND_NAMES_OPENING = FOUND_NAMES.partition("{")[0]  # a compact follow-up: the first prompt, the names, the ask
# the size of the vectors OpenAI's models return unasked (the fake's own is 128, as fake/embedding's)
OPENAI_DIMENSIONS = {"text-embedding-3-small": 1536, "text-embedding-ada-002": 1536, "text-embedding-3-large": 3072}
PIECE = re.compile(r"\s*\S{1,4}|\s+")  # about a token: what a server sends in one event


def call_of(messages: list[dict[str, Any]]) -> tuple[str, str]:
    """The stage and step a request's packaged prompt serves; ("", "answer") for any other prompt."""
    first = str(messages[0].get("content", "")) if messages else ""
    for phrase, (stage, step) in PROMPT_CALLS:
        if phrase in first:
            if step == "extract":  # a follow-up ends the conversation (compact: the one message)
                tail = str(messages[-1].get("content", ""))[-FOLLOW_UP_LENGTH:] if len(messages) > 1 or \
                    FOUND_NAMES_OPENING in first else ""
                step = next((follow for marker, follow in FOLLOW_UPS if marker in tail), step)
            return stage, step
    return "", "answer"


def reply(messages: list[dict[str, Any]], max_tokens: int | None) -> tuple[str, str, int, int]:
    """The answer's text, finish reason, prompt and completion tokens (cut at max_tokens as a model stops)."""
    try:
        text = answer(messages, call_of(messages))
    except UnknownCall:  # a prompt of another tool: a plain answer from its text
        text = plain_answer(str(messages[0].get("content", "")), str(messages[-1].get("content", "")))
    text, finish, completion = cut_at(text, "stop", max_tokens)
    return text, finish, provider_prompt_tokens(messages), completion


@dataclass
class FakeServer:
    """The server, on 127.0.0.1 in a thread of its own (`port` 0: any free port)."""

    latency: float = 0.0  # seconds from a request's arrival to its answer (a stream's first piece)
    port: int = 0
    stall: float = 0.0  # the next `stalls` streams fall silent this long after their first piece
    stalls: int = 1
    pieces_per_write: int = 8  # events sent in one write (a server flushes what it has generated)
    faults: list[tuple[int, str, dict[str, str]]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)  # the bodies received, in order (for tests)
    keys: list[str] = field(default_factory=list)  # their Authorization headers ("" when none)
    served: dict[str, int] = field(default_factory=lambda: {"chat": 0, "streamed": 0, "embeddings": 0,
                                                            "prompt_tokens": 0})
    _thread: threading.Thread | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def app(self) -> web.Application:
        server = web.Application(client_max_size=64 * 2**20)
        server.add_routes([web.post("/v1/chat/completions", self._chat), web.post("/v1/embeddings", self._embeddings),
                           web.get("/v1/models", self._models), web.get("/stats", self._stats)])
        return server

    def start(self) -> FakeServer:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(ready,), daemon=True, name="fake-http-server")
        self._thread.start()
        ready.wait(30)
        return self

    def stop(self) -> None:
        """Stop serving (again: nothing)."""
        if self._loop is not None and self._runner is not None and self._loop.is_running():
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._runner = None

    def _serve(self, ready: threading.Event) -> None:
        self._loop = asyncio.new_event_loop()
        self._runner = web.AppRunner(self.app(), access_log=None)
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        ready.set()
        self._loop.run_forever()

    async def _received(self, request: web.Request) -> tuple[dict[str, Any], web.Response | None]:
        """The request's body, recorded with its key, and the fault it meets (None: it is answered)."""
        body: dict[str, Any] = await request.json()
        self.requests.append(body)
        self.keys.append(request.headers.get("Authorization", ""))
        if not self.faults:
            return body, None
        status, text, headers = self.faults.pop(0)
        if status == 0:  # the connection drops before an answer
            request.transport.close()  # type: ignore[union-attr]
        return body, web.Response(status=status or 500, text=text, headers=headers, content_type="application/json")

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        arrived = time.monotonic()
        body, fault = await self._received(request)
        if fault is not None:
            return fault
        text, finish, prompt, completion = reply(body["messages"], body.get("max_tokens"))
        await self._wait(arrived)
        self.served["chat"] += 1
        self.served["prompt_tokens"] += prompt
        usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        head = {"id": f"chatcmpl-{len(self.requests)}", "created": int(time.time()), "model": body.get("model", "")}
        if body.get("stream"):
            self.served["streamed"] += 1
            return await self._stream(request, head, text, finish,
                                      usage if (body.get("stream_options") or {}).get("include_usage") else None)
        return web.json_response({**head, "object": "chat.completion", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}], "usage": usage})

    async def _wait(self, arrived: float) -> None:
        """Answer `latency` seconds after the request arrived, the answer's computing included: a model server's
        latency is its own work, so the fake's (a few milliseconds an answer, one after another) must not come
        on top of it."""
        await asyncio.sleep(max(0.0, self.latency - (time.monotonic() - arrived)))

    async def _stream(self, request: web.Request, head: dict[str, Any], text: str, finish: str,
                      usage: dict[str, int] | None) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        chunk = {**head, "object": "chat.completion.chunk"}
        events = [{**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": piece},
                                         "finish_reason": None}]} for piece in PIECE.findall(text)]
        events.append({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        if usage is not None:
            events.append({**chunk, "choices": [], "usage": usage})
        lines = [f"data: {json.dumps(event)}\n\n".encode() for event in events] + [b"data: [DONE]\n\n"]
        await response.write(lines[0])
        if self.stall and self.stalls > 0:
            self.stalls -= 1
            await asyncio.sleep(self.stall)
        for start in range(1, len(lines), self.pieces_per_write):
            await response.write(b"".join(lines[start:start + self.pieces_per_write]))
        await response.write_eof()
        return response

    async def _embeddings(self, request: web.Request) -> web.Response:
        arrived = time.monotonic()
        body, fault = await self._received(request)
        if fault is not None:
            return fault
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        dimension = int(body.get("dimensions") or OPENAI_DIMENSIONS.get(str(body.get("model")), 128))
        tokens = sum(count_tokens(str(t), PROVIDER_ENCODING) for t in texts)
        self.served["embeddings"] += 1
        self.served["prompt_tokens"] += tokens
        rows = [{"object": "embedding", "index": i, "embedding": embed_text(str(t), dimension)}
                for i, t in enumerate(texts)]
        await self._wait(arrived)
        return web.json_response({"object": "list", "model": body.get("model", ""), "data": rows,
                                  "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    async def _models(self, request: web.Request) -> web.Response:  # what a client asks to see the server is up
        return web.json_response({"object": "list", "data": [{"id": "fake", "object": "model"}]})

    async def _stats(self, request: web.Request) -> web.Response:
        """What the server was asked since it started, and the CPU it spent (for benchmarks)."""
        return web.json_response({**self.served, "cpu_s": time.process_time()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=8799)
    parser.add_argument("--latency", type=float, default=0.0)
    args = parser.parse_args()
    web.run_app(FakeServer(latency=args.latency, port=args.port).app(), host="127.0.0.1", port=args.port, print=None)


if __name__ == "__main__":
    main()
