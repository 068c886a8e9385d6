"""`graphrag-lite mcp`: an index as tools for an MCP client (Claude Desktop, an IDE, an agent) over stdio.

Tools: `local_search`, `global_search` and `basic_search` answer through one engine opened at start (tables,
vector store and model gateway stay warm between calls) and return the answer followed by the rows it cites;
`get_entity` and `neighbourhood` read the graph (browse.py). Their arguments are bounded as the HTTP API's
are (bounds.py), and their work runs on a thread of its own (work_thread.py), as the HTTP server's does. A
failure (an unknown entity, a missing index, a model error) comes back as a tool error carrying its message; the
server keeps running. Only the protocol goes to stdout: the SDK's stdio transport moves every other write on
stdout to stderr while it serves, and a line it cannot read is answered with a JSON-RPC error (mcp_stdio.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, ParamSpec

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from graphrag_lite.errors import GraphragLiteError, MissingIndex
from graphrag_lite.query.citations import KINDS
from graphrag_lite.query.engine import DEFAULT_RESPONSE_TYPE, GraphRAG, SearchResult
from graphrag_lite.query.index import IndexTables
from graphrag_lite.serve import browse
from graphrag_lite.serve.bounds import CommunityLevel, Hops, Neighbours, Question, ResponseType
from graphrag_lite.serve.holder import IndexHolder
from graphrag_lite.serve.mcp_stdio import serve_stdio
from graphrag_lite.serve.work_thread import WorkThread
from graphrag_lite.version import __version__

logger = logging.getLogger(__name__)
P = ParamSpec("P")

SHORT = 240  # characters of a cited row's text: enough to check a claim, short enough for a model's context
LISTED = 25  # rows of one kind in an entity's description before "... and N more"

EntityKey = Annotated[str, Field(description="the entity's name (any case, e.g. 'Alex Mercer'), its id or its "
                                 "short id (the number a citation such as [Data: Entities (12)] gives)")]

INSTRUCTIONS = ("Tools over a GraphRAG knowledge-graph index of a document collection. local_search answers "
                "questions about specific entities (people, organisations, places, events); global_search "
                "answers questions about the whole collection (themes, summaries) from community reports; "
                "basic_search answers from the most similar text chunks. Answers cite their evidence as "
                "[Data: Sources (ids); Entities (ids); ...], resolved after the answer. get_entity and "
                "neighbourhood read the graph around one entity.")


def run_stdio(root: Path, config: Path | None, overrides: list[str]) -> None:
    """Serve the index of the project in `root` over stdio until the client closes the connection. The
    settings are read now (a settings error stops here, with its message); the index is loaded whole, as
    `graphrag-lite serve` loads it, and swapped for the new one when an index run has completed since the
    last call; a missing index is reported by each tool call, so a client shows why. The index loads in the
    background while the server answers: a client's `initialize` is answered at once (clients give up on a
    server that takes seconds to start), and a first call waits for the load."""
    GraphRAG.from_config(root, config, overrides)  # a settings error stops here
    served = ServedIndex((root, config, overrides))
    server = build_server(served)
    served.start_loading()  # tables, LanceDB and the model library, loaded before the first call if it comes late
    anyio.run(serve_stdio, server)


class ServedIndex:
    """The index the tools answer from: loaded whole (LanceDB pinned) by an IndexHolder, once there is an
    index, and reloaded before a call when an index run has completed since."""

    def __init__(self, args: tuple[Path, Path | None, list[str]]) -> None:
        self.args = args
        self.holder: IndexHolder | None = None
        self.work = WorkThread("graphrag-lite-mcp-work")
        self._loading: concurrent.futures.Future[IndexHolder | None] | None = None

    def load_now(self) -> IndexHolder | None:
        try:
            self.holder = IndexHolder(*self.args)
        except MissingIndex as err:
            logger.warning("%s (every tool call will say so until the index is built)", err)
        return self.holder

    def start_loading(self) -> None:
        """`load_now` on a thread of its own (a daemon: a client that closes at once does not wait for it)."""
        loading: concurrent.futures.Future[IndexHolder | None] = concurrent.futures.Future()

        def load() -> None:
            try:
                loading.set_result(self.load_now())
            except BaseException as err:  # handed to the first call, which raises it
                loading.set_exception(err)

        threading.Thread(target=load, name="graphrag-lite-mcp-load", daemon=True).start()
        self._loading = loading

    async def engine(self) -> GraphRAG:
        if self._loading is not None:  # the first calls wait for the load started with the server
            loading = self._loading
            try:
                await asyncio.wrap_future(loading)
            finally:
                if self._loading is loading:
                    self._loading = None
        if self.holder is None:
            self.holder = await asyncio.to_thread(IndexHolder, *self.args)  # MissingIndex: the tool says so
        else:
            await self.holder.reload_if_changed()
        return self.holder.current.engine

    async def searched(self, search: Callable[[GraphRAG], Awaitable[SearchResult]]) -> str:
        """The text of `search` of the current engine, searched and written on the work thread."""
        engine = await self.engine()
        return await self.work.run(_text_of(search(engine)))

    async def looked_up(self, look_up: Callable[[IndexTables], str]) -> str:
        """`look_up` of the current index, done on the work thread."""
        index = (await self.engine()).index
        return await self.work.call(lambda: look_up(index))


async def _text_of(search: Awaitable[SearchResult]) -> str:
    return search_text(await search)


def build_server(served: ServedIndex) -> MCPServer:
    """An MCP server whose tools answer from the served index's current engine; its work thread stops when
    the server does."""
    @contextlib.asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[None]:
        try:
            yield
        finally:
            served.work.close()

    server: MCPServer = MCPServer("graphrag-lite", instructions=INSTRUCTIONS, version=__version__,
                                  log_level="WARNING", lifespan=lifespan)

    @server.tool(structured_output=False)
    @_reported
    async def local_search(question: Question, response_type: ResponseType = DEFAULT_RESPONSE_TYPE,
                           community_level: CommunityLevel = 2) -> str:
        """Answer a question about specific entities from the knowledge graph: the entities it names, their
        relationships, claims, community reports and source text. Returns the answer, then its sources."""
        return await served.searched(lambda engine: engine.alocal_search(
            question, response_type=response_type, community_level=community_level))

    @server.tool(structured_output=False)
    @_reported
    async def global_search(question: Question, response_type: ResponseType = DEFAULT_RESPONSE_TYPE,
                            community_level: CommunityLevel = 2) -> str:
        """Answer a question about the whole collection (main themes, overall summary) by map-reduce over
        the community reports of a level. Returns the answer, then the reports it cites."""
        return await served.searched(lambda engine: engine.aglobal_search(
            question, response_type=response_type, community_level=community_level))

    @server.tool(structured_output=False)
    @_reported
    async def basic_search(question: Question, response_type: ResponseType = DEFAULT_RESPONSE_TYPE) -> str:
        """Answer a question from the text chunks most similar to it (plain retrieval, no graph). Returns
        the answer, then the chunks it cites."""
        return await served.searched(lambda engine: engine.abasic_search(question, response_type=response_type))

    @server.tool(structured_output=False)
    @_reported
    async def get_entity(entity: EntityKey) -> str:
        """An entity of the graph: its description, relationships (strongest first), claims, communities
        and the documents it comes from."""
        return await served.looked_up(lambda index: entity_text(browse.entity_detail(index, entity)))

    @server.tool(structured_output=False)
    @_reported
    async def neighbourhood(entity: EntityKey, hops: Hops = 1, limit: Neighbours = 50) -> str:
        """The entities within `hops` relationships of an entity (nearest, then best connected, first)
        and the relationships between them."""
        return await served.looked_up(lambda index: neighbourhood_text(
            browse.neighbourhood(index, entity, hops=hops, limit=limit), hops))

    return server


def _reported(tool: Callable[P, Awaitable[str]]) -> Callable[P, Awaitable[str]]:
    """The tool with every failure turned into a tool error that carries its message, so the client (and
    the model using it) reads why, and the server goes on."""

    @functools.wraps(tool)
    async def reported(*args: P.args, **kwargs: P.kwargs) -> str:
        try:
            return await tool(*args, **kwargs)
        except browse.NotFound as err:  # its HTTP search hint means nothing here
            hint = "" if err.suggestions else "; try a part of the name, or ask local_search about it"
            raise ToolError(err.message(None) + hint) from err
        except (GraphragLiteError, ValueError) as err:
            raise ToolError(str(err)) from err
        except Exception as err:  # unexpected: still one readable line for the client, the traceback in the log
            logger.exception("tool %s failed", tool.__name__)
            raise ToolError(f"{type(err).__name__}: {err}") from err

    return reported


# ------------------------------------------------------------------ text for a model to read


def search_text(result: SearchResult) -> str:
    """The answer, then each cited row under its kind, then any problem the search met."""
    lines = [result.answer.strip(), ""]
    citations = result.citations()
    cited = [kind for kind in KINDS if citations.get(kind)]
    if not cited:
        lines.append("Citations: the answer cites no rows of the index.")
    for kind in cited:
        lines.append(f"{kind}:")
        lines.extend(f"- [{kind} {row.get('short_id', row['id'])}] {_cited_row(kind, row)}"
                     for row in citations[kind])
    if result.problems:
        lines += ["", "Notes:", *(f"- {problem}" for problem in result.problems)]
    return "\n".join(lines)


def _cited_row(kind: str, row: dict[str, Any]) -> str:
    if row.get("missing"):
        return "(not in the index: the answer cites an id the context did not have)"
    if kind == "Sources":
        return f"{row.get('document_title') or 'untitled document'}: {_short(row.get('text'))}"
    if kind == "Entities":
        return f"{row.get('title')} ({row.get('type')}): {_short(row.get('description'))}"
    if kind == "Relationships":
        return f"{row.get('source')} -> {row.get('target')}: {_short(row.get('description'))}"
    if kind == "Reports":
        return f"{row.get('title')} (community {row.get('community')}, level {row.get('level')}): " \
               f"{_short(row.get('summary'))}"
    return f"{row.get('subject_id')} ({row.get('type')}, {row.get('status')}): {_short(row.get('description'))}"


def entity_text(detail: dict[str, Any]) -> str:
    """An entity's detail as text: what it is, then its relationships, claims, communities and sources."""
    lines = [f"{detail['title']} ({detail.get('type')}) - id {detail['id']}, short id "
             f"{detail.get('human_readable_id')}, {detail.get('degree')} relationships",
             "", detail.get("description") or "(no description)"]
    relationships = detail["relationships"]
    lines += ["", f"Relationships ({len(relationships)}, strongest first):"]
    lines += [f"- [Relationships {r['human_readable_id']}] {r['source']} -> {r['target']} (weight {r['weight']}): "
              f"{_short(r['description'])}" for r in relationships[:LISTED]]
    lines += _more(len(relationships)) or ([] if relationships else ["- none"])
    if detail["claims"]:
        lines += ["", f"Claims ({len(detail['claims'])}):"]
        lines += [f"- [Claims {c.get('human_readable_id')}] {c.get('type')}, {c.get('status')}: "
                  f"{_short(c.get('description'))}" for c in detail["claims"][:LISTED]]
        lines += _more(len(detail["claims"]))
    lines += ["", "Communities (broadest first):"]
    lines += [f"- level {c['level']}: community {c['community']}, {c['title']}" for c in detail["communities"]
              ] or ["- none (the entity is outside the clustered graph)"]
    units = detail["text_units"]
    lines += ["", f"Sources ({len(units)} text units):"]
    lines += [f"- [Sources {u['human_readable_id']}] {u['document_title']}: {_short(u['text'])}"
              for u in units[:LISTED]]
    return "\n".join(lines + _more(len(units)))


def neighbourhood_text(found: dict[str, Any], hops: int) -> str:
    """A neighbourhood as text: the entities by distance, then the relationships between them by title."""
    titles = {node["id"]: node["title"] for node in found["nodes"]}
    center = titles[found["center"]]
    lines = [f"Neighbourhood of {center}: {len(found['nodes'])} entities within {hops} hop(s), "
             f"{len(found['edges'])} relationships between them.", "", "Entities (hop: title, type, degree):"]
    lines += [f"- {node['hop']}: {node['title']} ({node['type']}, degree {node['degree']})"
              for node in found["nodes"]]
    lines += ["", "Relationships:"]
    lines += [f"- {titles[e['source']]} -> {titles[e['target']]} (weight {e['weight']}): {_short(e['description'])}"
              for e in found["edges"]] or ["- none"]
    return "\n".join(lines)


def _more(count: int) -> list[str]:
    return [f"- ... and {count - LISTED} more"] if count > LISTED else []


def _short(text: Any) -> str:
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= SHORT else flat[:SHORT - 1].rstrip() + "…"
