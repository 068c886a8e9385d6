"""The `graphrag-lite` command line: the commands, registered here in the order `--help` lists them; each
group's commands live in a module of their own, parse their options, call the API and print. A command
imports what it runs inside its own function, so that `--help`, `init` or a query never load the index
stack, LiteLLM or LanceDB they do not use (tests/test_cold_cli.py holds them to it)."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
from typing import NoReturn

import typer

from graphrag_lite.cli import experiments, indexing, inspecting, project, querying, serving
from graphrag_lite.cli.common import errors
from graphrag_lite.cli.graphrag_style import graphrag_style
from graphrag_lite.errors import GraphragLiteError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Build a knowledge-graph index of a folder of documents and query it.")
export_app = typer.Typer(no_args_is_help=True, help="Export an index for other tools.")
app.add_typer(export_app, name="export")
query_app = typer.Typer(no_args_is_help=True, help="Ask a question of an index (local, global or basic search).")
app.add_typer(query_app, name="query")
experiment_app = typer.Typer(no_args_is_help=True, help="Config-driven experiments: variants of a project's "
                             "settings, indexed with shared work and scored on a question set.")
app.add_typer(experiment_app, name="experiment")

app.command()(project.init)
app.command()(indexing.index)
app.command()(indexing.update)
app.command()(inspecting.show)
app.command()(inspecting.aliases)
app.command()(inspecting.check)
app.command("prompt-tune")(project.prompt_tune)
export_app.command("graphml")(inspecting.export_graphml)
export_app.command("neo4j")(inspecting.export_neo4j)
query_app.command("local")(querying.query_local)
query_app.command("global")(querying.query_global)
query_app.command("basic")(querying.query_basic)
experiment_app.command("run")(experiments.experiment_run)
experiment_app.command("show")(experiments.experiment_show)
app.command("serve")(serving.serve)
app.command("mcp")(serving.mcp)
app.command("eval")(experiments.evaluate)


class Terminated(KeyboardInterrupt):
    """SIGTERM, from `kill`, a container or a CI job: ended as Ctrl-C ends a run (its status and stats written,
    a message, exit 130), not cut off with stats.json still saying "running". A subclass, not KeyboardInterrupt
    itself: some of CPython's own entry points mark a KeyboardInterrupt passing through them (an exact-type
    check) as unhandled, and the process then ends by SIGINT (exit -2) even after the program handled it (1
    run in 6 of the test did); a subclass is not marked."""


def main() -> NoReturn:
    """The `graphrag-lite` command, then the end of the process (end_process)."""
    try:
        run_command()
    except SystemExit as end:
        end_process(end.code)
    end_process(0)


def end_process(code: object) -> NoReturn:
    """End the process without Python's teardown, which frees the objects of LanceDB, pandas and igraph one by
    one and collects them once more: 1 to 2.5 s after an index run's last word, on this 2-core machine. What a
    command writes is closed when it returns (tables, caches, LanceDB); the exit handlers still run (the
    log's among them), and the terminal is flushed. Under a profiler or a debugger, Python ends it as usual."""
    if sys.getprofile() is not None or sys.gettrace() is not None:  # a profiler or a debugger writes at the end
        raise SystemExit(code)
    if code is not None and not isinstance(code, int):  # SystemExit("message"), as Python ends it
        print(code, file=sys.stderr)
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more can be said there
            stream.flush()
    os._exit(code or 0)


def run_command() -> None:
    """The command line's command, ended by SystemExit with its exit code."""
    signal.signal(signal.SIGTERM, _stopped)
    try:
        args = graphrag_style(sys.argv[1:])
    except GraphragLiteError as err:
        errors.print(f"[red]error:[/red] {err}", highlight=False)
        raise SystemExit(err.exit_code) from None
    app(args=args, prog_name="graphrag-lite")


def _stopped(signum: int, frame: object) -> None:
    raise Terminated
