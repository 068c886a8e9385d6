"""`graphrag-lite serve` (HTTP API and graph explorer) and `mcp` (tools for an MCP client over stdio)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer

from graphrag_lite.cli.common import (
    ConfigOption,
    RootOption,
    SetOption,
    VerboseOption,
    guarded,
)
from graphrag_lite.errors import ConfigError


@guarded
def serve(
    root: RootOption = Path("."), config: ConfigOption = None, set_: SetOption = None,
    host: Annotated[str, typer.Option("--host", help="address to bind; another than this machine's loopback "
                                      "(127.0.0.0/8, ::1, localhost) needs an API key")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="port to listen on")] = 8000,
    api_key: Annotated[str | None, typer.Option("--api-key", envvar="GRAPHRAG_LITE_API_KEY", show_envvar=True,
                                                help="key every request must send (X-API-Key header or Bearer "
                                                "token); 16 characters at least")] = None,
    workers: Annotated[int, typer.Option("--workers", min=1, max=64, help="server processes on the port, each "
                                         "loading the index and following its new commits")] = 1,
    verbose: VerboseOption = False,
) -> None:
    """Serve the index over HTTP: queries, context, entities, communities and the graph explorer page at /,
    with the index, its tables and models kept warm (OpenAPI docs at /docs)."""
    _needs_serve_extra("serve", "fastapi", "uvicorn")
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C stops a server: nothing to resume
        if workers > 1:
            from graphrag_lite.serve.replicas import run_replicas

            run_replicas(root, config, set_ or [], host, port, api_key, workers)
        else:
            from graphrag_lite.serve.app import run_server

            run_server(root, config, set_ or [], host=host, port=port, api_key=api_key)


@guarded
def mcp(root: RootOption = Path("."), config: ConfigOption = None, set_: SetOption = None,
        verbose: VerboseOption = False) -> None:
    """Serve the index to an MCP client (Claude Desktop, an IDE, an agent) over stdio: local, global and
    basic search, entities and their neighbourhood as tools."""
    _needs_serve_extra("mcp", "mcp")
    from graphrag_lite.serve.mcp_server import run_stdio

    with contextlib.suppress(KeyboardInterrupt):
        run_stdio(root, config, set_ or [])


def _needs_serve_extra(command: str, *modules: str) -> None:
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(f"`graphrag-lite {command}` needs {', '.join(missing)}: pip install 'graphrag-lite[serve]'")
