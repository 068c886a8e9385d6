"""The MCP server over stdio: the SDK's transport, with an answer for each line it cannot read.

The SDK's stdio transport hands a line that is not JSON, or not a JSON-RPC message, to the server as an
exception, and the server drops it, logged at debug level only (modelcontextprotocol/python-sdk issue #2751,
open): a client whose request was malformed waits for its answer forever. Here each such line is answered as
JSON-RPC 2.0 asks, and as the SDK's own streamable-HTTP transport answers: -32700 (parse error) for a line
that is not JSON, -32600 (invalid request) for JSON that is not a JSON-RPC message, with the request's id when
the line has one (else null); the server then goes on with the next line.
"""

from __future__ import annotations

from typing import Any

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError

Read = SessionMessage | Exception


async def serve_stdio(server: MCPServer) -> None:
    """Serve `server` over this process's stdin and stdout until the client closes stdin."""
    # MCPServer runs only over the streams it opens itself; its low-level server runs over given ones (the
    # SDK's in-memory client reaches it the same way)
    lowlevel = server._lowlevel_server
    async with stdio_server() as (lines, replies):
        messages, to_server = anyio.create_memory_object_stream[Read](0)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(answer_unreadable, lines, messages, replies)
            await lowlevel.run(to_server, replies, lowlevel.create_initialization_options())
            tasks.cancel_scope.cancel()  # the server stopped: stop reading stdin for it


async def answer_unreadable(lines: ObjectReceiveStream[Read], messages: ObjectSendStream[Read],
                            replies: Any) -> None:
    """Pass the messages read from `lines` on to `messages`; answer each line that could not be read with a
    JSON-RPC error on `replies` (the transport's write stream, which the server writes to as well)."""
    async with messages:
        async for read in lines:
            if not isinstance(read, Exception):
                await messages.send(read)
                continue
            try:
                await replies.send(SessionMessage(error_reply(read)))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return  # the server has closed its replies: it is stopping


def error_reply(problem: Exception) -> JSONRPCError:
    """The JSON-RPC error for a line the transport could not read (`problem`, pydantic's error for it)."""
    errors = problem.errors() if isinstance(problem, ValidationError) else []
    if not errors or any(e["type"] == "json_invalid" for e in errors):
        detail = errors[0]["msg"] if errors else str(problem)
        return JSONRPCError(jsonrpc="2.0", id=None,
                            error=ErrorData(code=PARSE_ERROR, message=f"Parse error: the line is not JSON ({detail})"))
    message: dict[str, Any] = next((e["input"] for e in errors if isinstance(e.get("input"), dict)), {})
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        request_id = None
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(
        code=INVALID_REQUEST, message="Invalid Request: the line is JSON but not a JSON-RPC 2.0 request, "
        'notification or response (one object with "jsonrpc": "2.0", a "method" and, for a request, an "id")'))
