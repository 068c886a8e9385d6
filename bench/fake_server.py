"""The fake provider behind an OpenAI-compatible HTTP server, in its own process (for benchmarks).

    .venv/bin/python bench/fake_server.py [--port 8799] [--latency 0.5]

Run in process, the fake provider computes its answers on the client's event loop, so its CPU (and its
LiteLLM round trip) is charged to graphrag-lite. Here it runs where a model server would, in another
process: POST /v1/chat/completions and /v1/embeddings answer as `fake/default?latency=L` and
`fake/embedding?latency=L` do, with the same answers (so an index built through it has the same ids), and
the client sees only HTTP. Point a project at it with `model: openai/fake` (chat) and
`model: openai/fake-embedding`, `api_base: http://127.0.0.1:PORT/v1`, `api_key: sk-fake`, `stream: false`.
"""

from __future__ import annotations

import argparse
from typing import Any

import litellm
from aiohttp import web

import graphrag_lite  # noqa: F401  # the offline defaults (LiteLLM's local price map)
from graphrag_lite.fake.provider import register as register_fake_provider


def app(latency: float) -> web.Application:
    chat_model, embedding_model = f"fake/default?latency={latency}", f"fake/embedding?latency={latency}"
    register_fake_provider([chat_model, embedding_model])

    async def chat(request: web.Request) -> web.Response:
        body: dict[str, Any] = await request.json()
        wanted = {k: body[k] for k in ("max_tokens", "response_format") if body.get(k) is not None}
        response = await litellm.acompletion(model=chat_model, messages=body["messages"], **wanted)
        return web.json_response(response.model_dump())

    async def embeddings(request: web.Request) -> web.Response:
        body: dict[str, Any] = await request.json()
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        response = await litellm.aembedding(model=embedding_model, input=texts)
        return web.json_response(response.model_dump())

    async def models(request: web.Request) -> web.Response:  # what a client asks to see the server is up
        return web.json_response({"data": []})

    server = web.Application(client_max_size=64 * 2**20)
    server.add_routes([web.post("/v1/chat/completions", chat), web.post("/v1/embeddings", embeddings),
                       web.get("/v1/models", models)])
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=8799)
    parser.add_argument("--latency", type=float, default=0.5)
    args = parser.parse_args()
    web.run_app(app(args.latency), host="127.0.0.1", port=args.port, print=None)


if __name__ == "__main__":
    main()
