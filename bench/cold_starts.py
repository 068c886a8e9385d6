"""Benchmark (issue 42, point 3): how long the long-running commands keep a client waiting when they start.

    .venv/bin/python bench/cold_starts.py [--root DIR] [--runs 5]

Builds a fast index of the bundled sample with fake/embedding vectors in a temporary folder (or uses the index
of --root), then measures, each in a new process, the commands taking turns so that the load of a shared
machine falls on all of them alike:

- `graphrag-lite mcp`: from the process's start to the answer to `initialize`, sent by the official MCP SDK's
  stdio client as an agent's host sends it (target: <= 2 s); and to the answer of a first `tools/call`;
- `graphrag-lite serve`: from the process's start to the first 200 from GET /health (target: <= 3 s);
- `graphrag-lite index --dry-run` on the built index, where nothing would change (target: <= 3 s).

Prints the median and the fastest of each, with the load average: compare figures of the same sitting.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FAKE_SETTINGS = ("models:\n  default_chat_model:\n    model: fake/default\n"
                 "  default_embedding_model:\n    model: fake/embedding\n")
TARGETS = {"mcp initialize": 2.0, "serve ready": 3.0, "no-op dry run": 3.0}
CLI = [sys.executable, "-m", "graphrag_lite"]


def build_index(root: Path) -> None:
    (root / "input").mkdir(parents=True)
    for document in sorted((REPO / "input").glob("*.txt")):
        shutil.copy(document, root / "input" / document.name)
    (root / "settings.yaml").write_text(FAKE_SETTINGS, encoding="utf-8")
    done = subprocess.run([*CLI, "index", "--root", str(root), "--method", "fast", "--quiet", "--set",
                           "embed_text.model_id=default_embedding_model"], capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"indexing the sample failed:\n{done.stdout}{done.stderr}")


def mcp_start(root: Path) -> tuple[float, float]:
    """Seconds to the answer to `initialize`, and to that of a first tool call."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def measure() -> tuple[float, float]:
        started = time.perf_counter()
        server = StdioServerParameters(command=CLI[0], args=[*CLI[1:], "mcp", "--root", str(root)],
                                       env={**os.environ})
        with open(os.devnull, "w", encoding="utf-8") as quiet:
            async with stdio_client(server, errlog=quiet) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                initialized = time.perf_counter() - started
                tools = await session.list_tools()
                await session.call_tool(tools.tools[0].name, first_arguments(tools.tools[0].input_schema))
                return initialized, time.perf_counter() - started

    return asyncio.run(measure())


def first_arguments(schema: dict) -> dict:
    """Arguments for a tool from its schema: a question for every required string."""
    return {name: "Who went to Woolwich with Sir W. Pen?" for name in schema.get("required", [])
            if schema["properties"][name].get("type") == "string"}


def serve_ready(root: Path) -> float:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.perf_counter()
    server = subprocess.Popen([*CLI, "serve", "--root", str(root), "--port", str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        while time.perf_counter() - started < 120:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
                    if answer.status == 200:
                        return time.perf_counter() - started
            except OSError:
                time.sleep(0.02)
        sys.exit("serve did not answer /health within 120 s")
    finally:
        server.terminate()
        server.wait(timeout=30)
    raise AssertionError("unreachable")


def noop_dry_run(root: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run([*CLI, "index", "--root", str(root), "--dry-run"], capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"the dry run failed:\n{done.stdout}{done.stderr}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, help="a project with a built fast index (default: the sample's)")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = args.root.resolve() if args.root else Path(scratch) / "sample"
        if args.root is None:
            print("indexing the bundled sample (fast method, fake/embedding vectors) ...")
            build_index(root)
        seconds: dict[str, list[float]] = {label: [] for label in (*TARGETS, "mcp first tool call")}
        measures: list[tuple[str, Callable[[], object]]] = [
            ("mcp", lambda: mcp_start(root)), ("serve ready", lambda: serve_ready(root)),
            ("no-op dry run", lambda: noop_dry_run(root))]
        for _ in range(args.runs):
            for label, measure in measures:
                figure = measure()
                if label == "mcp":
                    initialized, called = figure  # type: ignore[misc]
                    seconds["mcp initialize"].append(initialized)
                    seconds["mcp first tool call"].append(called)
                else:
                    seconds[label].append(float(figure))  # type: ignore[arg-type]
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"cold starts, {args.runs} runs each ({os.cpu_count()} CPUs, load average {load}):")
        for label, figures in seconds.items():
            target = TARGETS.get(label)
            verdict = "" if target is None else \
                f"   target <= {target:g} s: {'met' if statistics.median(figures) <= target else 'NOT met'}"
            print(f"  {label:<22} median {statistics.median(figures):6.2f} s   fastest {min(figures):6.2f} s{verdict}")


if __name__ == "__main__":
    main()
