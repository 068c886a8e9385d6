"""`graphrag-lite serve`: the index over HTTP, kept warm in one process.

    POST /query/{local,global,basic}   {"question": ..., "response_type", "community_level", "no_model", "stream"}
    POST /context/{local,basic}        the ranked context only, no model call
    GET  /entities?q=  /entities/{id}  /communities/{id}  /graph/neighbourhood/{id}?hops=N
    GET  /health  /stats  /docs (OpenAPI)  /  (the graph explorer page)

It binds to 127.0.0.1 by default; an address beyond this machine's loopback needs an API key (access.py), sent
with every request as an `X-API-Key` header or a Bearer token (the explorer page and /health carry no index
data and need none). Searches, and look-ups, with the JSON of their answers, run on two threads of their own
(work_thread.py), so the event loop stays free to answer /health and to read other requests. Bad requests
get a 4xx with a message (`{"detail": ...}`), never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import sys
import time
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import Body, FastAPI, HTTPException, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, StreamingResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field, StrictBool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from graphrag_lite.context_tables import render
from graphrag_lite.errors import ConfigError, GraphragLiteError
from graphrag_lite.llm.errors import LLMCallError
from graphrag_lite.llm.ledger import request_scope
from graphrag_lite.query import SearchMethod
from graphrag_lite.query.engine import DEFAULT_RESPONSE_TYPE, GraphRAG, SearchResult
from graphrag_lite.query.index import IndexTables
from graphrag_lite.serve import browse
from graphrag_lite.serve.access import LoopbackHostsOnly, check_binding, checked_api_key, key_matches
from graphrag_lite.serve.bounds import CommunityLevel, Hops, Matches, Neighbours, Question, ResponseType
from graphrag_lite.serve.holder import TABLES, IndexHolder
from graphrag_lite.serve.work_thread import WorkThread

LOG = logging.getLogger("graphrag_lite.serve")
STATIC = Path(__file__).with_name("static")
MAX_BODY_BYTES = 64 * 1024
# no index data: reachable without the key (the page asks for it; the API docs describe the routes only)
PUBLIC = ("/", "/health", "/favicon.ico", "/docs", "/redoc", "/openapi.json", "/docs/oauth2-redirect")
LATENCIES_KEPT = 1000  # per route, for /stats


class QueryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: Question
    response_type: ResponseType = DEFAULT_RESPONSE_TYPE
    community_level: CommunityLevel | None = None
    no_model: StrictBool = Field(False, description="call no model: the ranked evidence is the answer")
    stream: StrictBool = Field(False, description="the answer as server-sent events (`piece` events, then "
                               "`result`, or `error`)")


class ContextRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: Question
    community_level: CommunityLevel | None = None
    no_model: StrictBool = Field(False, description="find entities and text units by keywords only (no embedding "
                                 "call)")


class QueryStats:
    """Requests and latencies per route, for /stats."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = defaultdict(int)
        self.errors: dict[str, int] = defaultdict(int)
        self.latencies: dict[str, deque[float]] = defaultdict(lambda: deque(maxlen=LATENCIES_KEPT))

    def add(self, route: str, seconds: float, status: int) -> None:
        self.counts[route] += 1
        self.latencies[route].append(seconds)
        if status >= 400:
            self.errors[route] += 1

    def summary(self) -> dict[str, Any]:
        return {route: {"requests": count, "errors": self.errors[route], **_percentiles(self.latencies[route])}
                for route, count in sorted(self.counts.items())}


def _percentiles(values: deque[float]) -> dict[str, float]:
    ordered = sorted(values)  # never empty: a route is counted with its latency
    pick = lambda share: round(ordered[min(len(ordered) - 1, int(share * len(ordered)))] * 1000, 2)  # noqa: E731
    return {"p50_ms": pick(0.5), "p95_ms": pick(0.95), "max_ms": pick(1.0)}


def create_app(holder: IndexHolder, api_key: str | None = None, watch: bool = True) -> FastAPI:
    """The app over `holder`'s index; `watch`: reload the index when an index run completes. A key given is
    checked first (access.checked_api_key)."""
    api_key = checked_api_key(api_key)
    # look-ups take milliseconds: on a thread of their own, they do not wait behind 50 clients' searches
    searches, look_ups = WorkThread("graphrag-lite-search"), WorkThread("graphrag-lite-look-up")

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        task = asyncio.create_task(holder.watch()) if watch else None
        yield
        if task:
            task.cancel()
        searches.close()
        look_ups.close()

    app = FastAPI(title="graphrag-lite", lifespan=lifespan,
                  description="Queries, context and graph look-ups over one graphrag-lite index.")
    app.state.holder, app.state.stats = holder, QueryStats()
    app.state.searches, app.state.look_ups = searches, look_ups
    _add_guards(app, api_key)
    app.add_middleware(BodyLimit)
    if not api_key:
        app.add_middleware(LoopbackHostsOnly)
    _add_error_handlers(app)
    _add_search_routes(app)
    _add_graph_routes(app)
    _add_page_routes(app)
    return app


def _add_guards(app: FastAPI, api_key: str | None) -> None:
    @app.middleware("http")
    async def guard(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        started = time.perf_counter()
        status = 500  # unless a response comes back: an exception passes on to the 500 handler
        try:
            with request_scope():  # the usage a response reports is its own request's
                response = await _guarded(request, call_next, api_key)
            status = response.status_code
            return response
        finally:
            route = request.scope.get("route")  # unmatched paths share one entry: /stats cannot be inflated
            app.state.stats.add(f"{request.method} {getattr(route, 'path', 'unmatched')}",
                                time.perf_counter() - started, status)


async def _guarded(request: Request, call_next: Callable[[Request], Awaitable[Response]],
                   api_key: str | None) -> Response:
    path = request.url.path
    if api_key and not (path in PUBLIC or path.startswith("/static/")) and not key_matches(request.headers, api_key):
        return JSONResponse({"detail": "missing or wrong API key: send it as an X-API-Key header or "
                                       "'Authorization: Bearer <key>'"}, status_code=401)
    if int(request.headers.get("content-length") or 0) > MAX_BODY_BYTES:  # said beforehand: not read at all
        return _too_large()
    return await call_next(request)


def _too_large() -> JSONResponse:
    return JSONResponse({"detail": f"the request body is larger than {MAX_BODY_BYTES:,} bytes"}, status_code=413)


class BodyLimit:
    """A request body sent without its length (chunked) is read first, up to MAX_BODY_BYTES, and answered
    413 past it; the app then reads it from memory. (One with a Content-Length is checked before reading.)"""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers") or [])
        if scope["type"] != "http" or b"content-length" in headers or scope.get("method") in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False) and message["type"] == "http.request"
            if len(body) > MAX_BODY_BYTES:
                await _too_large()(scope, receive, send)
                return

        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:  # then what the client does next (a streaming response waits for a disconnect)
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(browse.NotFound)
    async def not_found(_: Request, err: browse.NotFound) -> JSONResponse:
        return JSONResponse({"detail": str(err.args[0]) if err.args else str(err)}, status_code=404)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, err: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": "; ".join(_problem(e) for e in err.errors()) or "invalid request"},
                            status_code=422)

    @app.exception_handler(LLMCallError)
    async def model_failed(_: Request, err: LLMCallError) -> JSONResponse:
        return JSONResponse({"detail": f"the model failed: {err}"}, status_code=502)

    @app.exception_handler(GraphragLiteError)
    async def index_problem(_: Request, err: GraphragLiteError) -> JSONResponse:
        return JSONResponse({"detail": str(err)}, status_code=503)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, err: Exception) -> JSONResponse:  # a bug: logged whole, told briefly
        LOG.exception("%s %s failed", request.method, request.url.path)
        # its text may name files and internals: the log has it, the client gets the kind only
        return JSONResponse({"detail": f"internal error ({type(err).__name__}); the server log has the details"},
                            status_code=500)


def _problem(error: Any) -> str:
    """One validation error as a reader fixes it."""
    where = ".".join(str(p) for p in error.get("loc", ()))
    if error.get("type") == "json_invalid":
        return (f"the body is not valid JSON (at character {where.rpartition('.')[2]}): "
                f"{error.get('ctx', {}).get('error', '')}".rstrip(": "))
    if error.get("loc") == ("body",):
        return ('the body must be a JSON object such as {"question": "..."}, sent with '
                "Content-Type: application/json")
    return f"{where}: {error.get('msg')}"


def _add_search_routes(app: FastAPI) -> None:
    @app.post("/query/{method}", summary="Answer a question (local, global or basic search)")
    async def query(method: SearchMethod, body: Annotated[QueryRequest, Body()], request: Request) -> Response:
        engine = request.app.state.holder.current.engines[(method, body.no_model)]
        searches: WorkThread = request.app.state.searches
        options: dict[str, Any] = {"response_type": body.response_type}
        if body.community_level is not None and method != "basic":
            options["community_level"] = body.community_level
        if body.stream:
            return StreamingResponse(_events(searches, engine, method, body.question, options),
                                     media_type="text/event-stream")
        return await searches.run(_as_json(engine.asearch(method, body.question, **options)))

    @app.post("/context/{method}", summary="The ranked context a search would send, with no model call")
    async def context(method: Literal["local", "basic"], body: Annotated[ContextRequest, Body()],
                      request: Request) -> JSONResponse:
        engine = request.app.state.holder.current.engines[(method, body.no_model)]
        searches: WorkThread = request.app.state.searches
        return await searches.run(_context(engine, method, body.question, body.community_level))


async def _as_json(search: Awaitable[SearchResult]) -> JSONResponse:
    """The search's result as the response, rendered where the search ran (the search thread)."""
    return JSONResponse((await search).to_dict())


async def _context(engine: GraphRAG, method: str, question: str, community_level: int | None) -> JSONResponse:
    if method == "basic":
        tables = [await engine.abasic_context(question)]
        budgets = {"Sources": engine.config.basic_search.max_context_tokens}
    else:
        local = await engine.alocal_context(question, 2 if community_level is None else community_level)
        tables, budgets = local.tables, local.budgets
    return JSONResponse({"method": method, "question": question, "context_text": render(tables),
                         "context": {t.name: t.column_rows() for t in tables}, "budgets": budgets})


async def _events(searches: WorkThread, engine: GraphRAG, method: str, question: str,
                  options: dict[str, Any]) -> AsyncIterator[str]:
    """Server-sent events: `piece` events as the answer is written, then one `result` (the whole result) or
    one `error` event."""
    loop = asyncio.get_running_loop()
    pieces: asyncio.Queue[str | None] = asyncio.Queue()

    def on_piece(piece: str) -> None:  # called on the search thread: the queue is this loop's
        loop.call_soon_threadsafe(pieces.put_nowait, piece)

    search = engine.asearch(method, question, on_piece=on_piece, **options)
    task = asyncio.ensure_future(searches.run(_result_event(search)))
    task.add_done_callback(lambda _: pieces.put_nowait(None))  # after every piece: they were queued before
    try:
        while (piece := await pieces.get()) is not None:
            yield _event("piece", piece)
        try:
            yield task.result()
        except Exception as err:  # the stream has begun: the failure can only be told as an event
            if not isinstance(err, GraphragLiteError):
                LOG.exception("streamed search failed")
            yield _event("error", {"detail": str(err)})
    finally:
        task.cancel()  # a client that went away stops its search: no more model calls paid for it


async def _result_event(search: Awaitable[SearchResult]) -> str:
    return _event("result", (await search).to_dict())


def _event(kind: str, data: Any) -> str:
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False, allow_nan=False)}\n\n"


def _add_graph_routes(app: FastAPI) -> None:
    @app.get("/entities", summary="Entities whose name matches the text, best first")
    async def entities(request: Request, q: Annotated[str, Query(max_length=200)] = "",
                       limit: Matches = 20) -> JSONResponse:
        return await _look_up(request, lambda index: {"entities": browse.find_entities(index, q, limit)})

    @app.get("/entities/{key:path}", summary="An entity (id, short id or title) with its relationships, claims, "
                                         "communities and text units")
    async def entity(key: str, request: Request) -> JSONResponse:
        return await _look_up(request, lambda index: browse.entity_detail(index, key))

    @app.get("/communities/{community}", summary="A community's report, members and children")
    async def community(community: int, request: Request) -> JSONResponse:
        return await _look_up(request, lambda index: browse.community_detail(index, community))

    @app.get("/graph/neighbourhood/{key:path}", summary="The entities within N hops of one, and their relationships")
    async def neighbourhood(key: str, request: Request, hops: Hops = 1, limit: Neighbours = 150) -> JSONResponse:
        return await _look_up(request, lambda index: browse.neighbourhood(index, key, hops, limit))


async def _look_up(request: Request, look_up: Callable[[IndexTables], Any]) -> JSONResponse:
    """`look_up` of the current index, done and rendered on the look-up thread."""
    index = request.app.state.holder.current.engine.index
    look_ups: WorkThread = request.app.state.look_ups
    return await look_ups.call(lambda: JSONResponse(look_up(index)))


def _add_page_routes(app: FastAPI) -> None:
    @app.get("/health", summary="Whether the server answers, and since when its index is loaded")
    async def health(request: Request) -> dict[str, Any]:
        holder: IndexHolder = request.app.state.holder
        return {"status": "ok", "worker": os.getpid(), "loaded_at": holder.current.loaded_at,
                "reloads": holder.reloads, "commit": holder.current.committed["commit"], "pending_run": holder.pending}

    @app.get("/stats", summary="The index's figures, and the requests served with their latencies")
    async def stats(request: Request) -> dict[str, Any]:
        holder: IndexHolder = request.app.state.holder
        loaded = holder.current
        tables = {name: len(getattr(loaded.engine.index, name)) for name in TABLES if name != "covariates"}
        run = loaded.last_run
        return {"index": {"output": str(loaded.config.output.base_dir), "rows": tables,
                          "last_run": {k: run.get(k) for k in ("status", "pipeline", "started", "finished",
                                                               "wall_s")},
                          "commit": loaded.committed["commit"], "committed": loaded.committed["committed"],
                          "pending_run": holder.pending,
                          "loaded_at": loaded.loaded_at, "reloads": holder.reloads,
                          "reload_problem": holder.reload_problem},
                "requests": request.app.state.stats.summary()}

    if STATIC.is_dir():
        app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        if not (STATIC / "index.html").is_file():
            raise HTTPException(404, "the explorer page is not installed (graphrag_lite/serve/static/index.html)")
        return FileResponse(STATIC / "index.html")


def check_port(host: str, port: int) -> None:
    """Before the index is loaded: a port in use is a setting to change, said at once."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((host, port))
        except OSError as err:
            raise ConfigError(f"cannot listen on {host}:{port} ({err.strerror}); choose another --port, or stop "
                              "what uses it") from None


def run_server(root: Path, config: Path | None, overrides: list[str], host: str = "127.0.0.1", port: int = 8000,
               api_key: str | None = None) -> None:
    import uvicorn

    check_binding(host, api_key)  # and the key: both before the index loads
    check_port(host, port)
    started = time.perf_counter()
    holder = IndexHolder(root, config, overrides)
    where = f"[{host}]" if ":" in host else host
    sys.stderr.write(f"index in {holder.current.config.output.base_dir} loaded in {time.perf_counter() - started:.1f} "
                     f"s; serving on http://{where}:{port} (explorer at /, API docs at /docs"
                     f"{', every data request needs the API key' if api_key else ''})\n")
    uvicorn.run(create_app(holder, api_key), host=host, port=port, log_level="warning")
