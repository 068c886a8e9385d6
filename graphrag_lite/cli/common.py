"""What every command shares: the consoles, the options, and how a command fails (one line and an exit
code; the traceback with --verbose)."""

from __future__ import annotations

import functools
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from graphrag_lite.errors import GraphragLiteError

console = Console(soft_wrap=True)

errors = Console(stderr=True, soft_wrap=True)

RootOption = Annotated[Path, typer.Option("--root", "-r", help="project folder (holds settings.yaml)")]

ConfigOption = Annotated[Path | None, typer.Option("--config", "-c",
                                                   help="settings file; default: ROOT/settings.yaml")]

SetOption = Annotated[list[str] | None, typer.Option(
    "--set", "-s", help="override a setting, e.g. --set chunking.size=300 (repeatable)")]

VerboseOption = Annotated[bool, typer.Option("--verbose", "-v", help="show the full traceback on errors")]

MethodOption = Annotated[str | None, typer.Option(
    "--method", "-m", help="pipeline to run: standard, fast, or a pipeline file; default: settings' pipeline")]

QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="print errors only (the log file has the rest)")]

NoModelOption = Annotated[bool, typer.Option("--no-model", help="call no model: answer with the ranked evidence "
                                             "and find entities by keywords (no key needed)")]

BatchFlag = Annotated[bool, typer.Option("--batch", help="send the model calls as provider batch jobs: about half "
                                         "the price, answered within 24 hours; a stopped run re-attaches to its "
                                         "batches when run again")]

ResponseTypeOption = Annotated[str, typer.Option("--response-type", help="length and format of the answer, e.g. "
                                                 "'Single Paragraph', 'List of 3-7 Points'")]

LevelOption = Annotated[int, typer.Option("--community-level", min=0, help="community level of the reports used")]

StreamingOption = Annotated[bool, typer.Option("--streaming/--no-streaming", help="print the answer as it is "
                                                                                  "generated")]

DataOption = Annotated[Path | None, typer.Option("--data", "-d", help="the index's output folder (GraphRAG's "
                                                 "--data); default: output.base_dir of the settings")]

JsonOption = Annotated[bool, typer.Option("--json", help="print answer, context tables, resolved citations, "
                                          "usage and (global search) coverage as JSON")]

ExplainOption = Annotated[bool, typer.Option("--explain", help="also print the context sent, the token and "
                                             "cost usage, and (global search) how much of the corpus was read")]

NoCacheOption = Annotated[bool, typer.Option("--no-cache", help="send every model call; neither read nor write the "
                                             "answer cache")]

ExperimentFile = Annotated[Path, typer.Argument(help="experiment file (YAML)")]


def guarded(command: Callable[..., int | None]) -> Callable[..., None]:
    """A command that fails with a one-line reason and a non-zero exit code (the traceback with --verbose),
    and exits with the code it returns, if any."""
    @functools.wraps(command)
    def run(**options: Any) -> None:
        try:
            code = command(**options)
        except KeyboardInterrupt:
            errors.print("[yellow]interrupted[/yellow]: completed stages are kept; run the same command to resume")
            raise typer.Exit(130) from None
        except Exception as err:
            if options.get("verbose"):
                errors.print(traceback.format_exc(), markup=False, highlight=False)
            if isinstance(err, GraphragLiteError):
                errors.print(f"[red]error:[/red] {escape(str(err))}", highlight=False)  # "[serve]" is no markup
                raise typer.Exit(err.exit_code) from None
            # an unexpected failure still gets one clear line
            errors.print(f"[red]error:[/red] {type(err).__name__}: {escape(str(err))} (run with --verbose for the "
                         "traceback)", highlight=False)
            raise typer.Exit(1) from None
        if code is not None:
            raise typer.Exit(code)

    return run


def print_table(table: Any, title: str) -> None:
    """Results on the terminal: scores, then index figures, with the columns worth a glance (see
    experiment/report.py). Numbers never wrap; long names fold."""
    from rich.table import Table

    from graphrag_lite.experiment.report import format_value, terminal_tables

    for part, rows in terminal_tables(table):
        listing = Table(title=f"{title}: {part}", title_justify="left", padding=(0, 1))
        for column in rows.columns:
            names = column in ("variant", "method", "group", "index")
            widest = max([len(str(column)), *(len(str(v)) for v in rows[column])])
            listing.add_column(str(column), justify="left" if names else "right", overflow="fold",
                               no_wrap=not names, min_width=min(widest, 14 if names else widest))
        for _, row in rows.iterrows():
            listing.add_row(*(format_value(value) for value in row))
        console.print(listing)
