"""`graphrag-lite index` and `update`: the run planned and run by the API (api.py), and what the terminal
is told before, during and after it."""

from __future__ import annotations

import contextlib
import logging
import shlex
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from graphrag_lite.cli.common import (
    BatchFlag,
    ConfigOption,
    MethodOption,
    QuietOption,
    RootOption,
    SetOption,
    VerboseOption,
    console,
    errors,
    guarded,
)
from graphrag_lite.errors import IndexIncomplete
from graphrag_lite.words import counted

if TYPE_CHECKING:
    from graphrag_lite.config import GraphRagConfig


@guarded
def index(
    root: RootOption = Path("."),
    config: ConfigOption = None,
    method: MethodOption = None,
    set_: SetOption = None,
    force: Annotated[bool, typer.Option("--force", help="run every stage, even unchanged ones")] = False,
    from_stage: Annotated[str | None, typer.Option("--from", help="re-run this stage and every later one")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="send every model call; neither read nor "
                                           "write the answer cache")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="estimate model calls, tokens and cost per stage "
                                          "without calling a model (model-free stages run)")] = False,
    batch: BatchFlag = False,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
) -> int:
    """Build (or resume) the index: runs the pipeline's stages, skipping those whose inputs are unchanged.
    Over an existing index this is an update (see `graphrag-lite update`)."""
    return build_index(Console(quiet=True) if quiet else console, root, config, set_ or [], method, force=force,
                       from_stage=from_stage, no_cache=no_cache, dry_run=dry_run, batch=batch)


@guarded
def update(
    root: RootOption = Path("."),
    config: ConfigOption = None,
    method: MethodOption = None,
    set_: SetOption = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="send every model call and keep no earlier report")
                        ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="list what changed and estimate the update's model "
                                          "calls, tokens and cost, without calling a model")] = False,
    batch: BatchFlag = False,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
) -> int:
    """Update an existing index after documents were added, changed, renamed or deleted in the input folder.

    Lists what changed before any model call, then extracts only new text units; what only deleted text
    supported disappears; communities start from the last partition, and a community with the same members,
    relationships and claims keeps its report. An interrupted update resumes when run again."""
    return build_index(Console(quiet=True) if quiet else console, root, config, set_ or [], method, update=True,
                       no_cache=no_cache, dry_run=dry_run, batch=batch)


def build_index(out: Console, root: Path, config: Path | None, set_: list[str], method: str | None, *,
                update: bool = False, force: bool = False, from_stage: str | None = None, no_cache: bool = False,
                dry_run: bool = False, batch: bool = False) -> int:
    """`index` and `update`: the run the API plans, run (or estimated), and how it ended; returns the exit
    code. Over an existing index, what changed in the input is listed before any model call."""
    from graphrag_lite import api  # the index stack: loaded by the commands that build an index

    plan = api.plan_index(root, set_, method, update=update, batch=batch, settings_file=config, with_changes=False)
    for note in plan.notes:
        out.print(f"[yellow]note:[/yellow] {note}", highlight=False)
    verb = "Updating" if plan.built_with is not None else "Indexing"
    out.print(f"{verb} with pipeline [bold]{plan.pipeline.name}[/bold] "
              f"({' → '.join(s.name for s in plan.pipeline.stages)})", highlight=False)
    api.list_changes(plan)  # said after what runs: reading a large input takes a while
    print_pending_changes(out, plan)
    if dry_run:
        print_estimates(api.estimate_index(plan, out, use_cache=not no_cache), batch)
        return 0
    started = time.perf_counter()
    with batch_progress(out, plan.config):
        summary = api.run_index(plan, out, force=force, from_stage=from_stage, use_cache=not no_cache)
    print_run_end(out, summary, next_query(plan.config, root, config), time.perf_counter() - started)
    print_batch_end(out, summary)
    if summary.problems:
        out.print(f"[yellow]{summary.problems} {'problem' if summary.problems == 1 else 'problems'}[/yellow], "
                  f"listed in {summary.output_dir}/stats.json")
    if summary.incomplete:
        errors.print(f"[red]error:[/red] finished with failures in {describe_failures(summary)}. The tables are "
                     "written and finished work is kept: run the same command to retry only what failed "
                     f"(exit code {IndexIncomplete.exit_code})", highlight=False)
        return IndexIncomplete.exit_code
    return 0


@contextlib.contextmanager
def batch_progress(out: Console, cfg: Any) -> Iterator[None]:
    """With --batch, the batches' lines (sent, a poll's progress, done) on the terminal as they come, and the
    batches left running when the run is stopped; without it, a note on batches an earlier run left."""
    from graphrag_lite.llm.batch import LOG
    from graphrag_lite.llm.batch_store import pending

    if not cfg.batch.enabled:
        if left := pending(cfg.output.base_dir):
            out.print(f"[yellow]note:[/yellow] an earlier `--batch` run left {counted(len(left), 'batch')} whose "
                      "answers no run has taken; with --batch this run would take them instead of sending those "
                      "calls again", highlight=False)
        yield
        return
    handler = _ConsoleLines(out)
    LOG.addHandler(handler)
    level = LOG.level
    LOG.setLevel(logging.INFO)
    try:
        yield
    except KeyboardInterrupt:
        if left := pending(cfg.output.base_dir):
            calls = counted(sum(len(b["custom_ids"]) for b in left), "call")
            errors.print(f"{counted(len(left), 'batch')} ({calls}) left at the provider: the same command takes the "
                         "answers without sending the calls again", highlight=False)
        raise
    finally:
        LOG.removeHandler(handler)
        LOG.setLevel(level)


class _ConsoleLines(logging.Handler):
    """Log records as plain lines on the command's console (above the progress bars while they show)."""

    def __init__(self, out: Console) -> None:
        super().__init__(logging.INFO)
        self.out = out

    def emit(self, record: logging.LogRecord) -> None:
        style = "yellow" if record.levelno >= logging.WARNING else "dim"
        self.out.print(f"[{style}]{escape(record.getMessage())}[/{style}]", highlight=False)


def print_batch_end(out: Console, summary: Any) -> None:
    """What the run sent by batch and online (a --batch run); after a run that finished, with --batch or not,
    the batches earlier runs left, which no call waits for any more (named, to cancel at the provider)."""
    from graphrag_lite.llm.batch_store import describe_run

    if summary.batches:
        out.print(describe_run(summary.batches), highlight=False)
    if dropped := summary.forgotten_batches:
        out.print(f"[yellow]note:[/yellow] no call of this index needs the {counted(len(dropped), 'batch')} left by "
                  f"earlier runs ({', '.join(dropped)}); cancel them at the provider if they still run",
                  highlight=False)


def print_pending_changes(out: Console, plan: Any) -> None:
    """What an update will do, before any call: the documents changed since the last run, or, when that run
    was interrupted after reading the input, the changes it still has to finish."""
    from graphrag_lite.documents.changes import describe_changes

    if plan.resuming is not None:
        status, found = plan.resuming
        out.print(f"Resuming the last run ({status}), which found: {describe_changes(found, shown=10)}",
                  highlight=False)
    elif plan.changes is not None:
        out.print(f"Documents since the last run: {describe_changes(plan.changes, shown=10)}", highlight=False)


def next_query(cfg: GraphRagConfig, root: Path, config: Path | None) -> str:
    """The query to try after an index run, with this run's --root and --config; --no-model when local search
    has no chat model, or one whose key is still a placeholder."""
    chat = cfg.local_search.chat_model_id
    model = cfg.models.get(chat) if chat else None
    from graphrag_lite.llm.providers import key_problem

    keyless = model is None or key_problem(model) is not None
    return (f"graphrag-lite query local \"<your question>\" --root {shlex.quote(str(root))}"
            + (f" --config {shlex.quote(str(config))}" if config else "") + (" --no-model" if keyless else ""))


def print_run_end(out: Console, summary: Any, next_command: str, seconds: float) -> None:
    """The end of an index run: the time, the cost, GraphRAG's tables (not every intermediate one: those are
    kept for resuming) and the command to try next."""
    from graphrag_lite.pipeline.display import describe_llm_totals
    from graphrag_lite.tables import INDEX_TABLES

    rows = {t: n for s in summary.stages.values() for t, n in s.get("rows_out", {}).items()}
    tables = ", ".join(f"{t} {rows[t]:,}" for t in INDEX_TABLES if t in rows)
    out.print(f"Done in {seconds:.1f}s: {tables or 'no table changed'} (GraphRAG's tables, in "
                  f"{summary.output_dir}; the log is in {summary.output_dir}/logs/index.log)", highlight=False)
    if summary.llm:
        out.print(f"Total {describe_llm_totals(summary.llm)}", highlight=False)
    if not summary.incomplete:
        out.print(f"Next: {next_command}", highlight=False, markup=False)


def describe_failures(summary: Any) -> str:
    """One line per stage that had failures: what share of its items failed, and what was dropped."""
    parts = []
    for name in summary.incomplete:
        details = summary.stages[name].get("details", {})
        if "failed_text_units" in details:
            parts.append(f"{name} ({details['failed_text_units']} of {details.get('text_units', 0)} text units failed, "
                         f"{details.get('partly_extracted_text_units', 0)} partly extracted)")
        else:
            count = len(summary.stages[name].get("problems", []))
            parts.append(f"{name} ({count} {'problem' if count == 1 else 'problems'})")
    return "; ".join(parts)


def print_estimates(estimates: dict[str, Any], batch: bool = False) -> None:
    """The dry run's table; `batch`: its costs are at the batch price (a --batch run)."""
    estimated = {stage: found for stage, found in estimates.items() if "calls" in found}
    notes = {stage: str(found.get("note", "")) for stage, found in estimates.items() if stage not in estimated}
    unknown = [stage for stage, note in notes.items() if note.startswith(("depends", "will call"))]
    unchanged = [stage for stage, note in notes.items() if note.startswith("unchanged")]
    if estimated:
        console.print(_estimate_table(estimated, batch))
    else:
        console.print("No stage that would run has calls that can be counted in advance.")
    if any(found.get("up_to_extra_calls") for found in estimated.values()):
        console.print("'+ ≤N' calls: gleanings (from the second on, each after a yes/no check), made only while "
                      "the model keeps finding more; '+ ~N' prompt tokens: theirs, estimated (a gleaning resends the "
                      "names found, or with gleaning: history the model's answers). First calls and their prompt "
                      "tokens are counted; completion tokens are a guess from the length of the text each call reads "
                      "(models write more or less; budget.max_cost_usd caps what a run spends).", highlight=False)
    if unchanged:
        console.print(f"Unchanged since the last run, so skipped with no call: {', '.join(unchanged)}")
    if unknown:
        console.print(f"Not estimable before they run (their calls depend on earlier answers): {', '.join(unknown)}")
    for line in _price_notes(estimated, batch):
        console.print(line, highlight=False)


def _estimate_table(estimated: dict[str, Any], batch: bool) -> Any:
    from rich.table import Table

    table = Table(title="Model calls this run would make (dry run: no model was called)")
    for column in ("stage", "calls", "prompt tokens", "completion (est.)", "batch cost (est.)" if batch else
                   "cost (est.)"):
        table.add_column(column, justify="left" if column == "stage" else "right")
    for stage, found in estimated.items():
        cost = found["estimated_cost_usd"]
        shown = "?" if cost is None else f"${cost:.4f}"
        if batch and found.get("priced_at", "").startswith("online"):
            shown += " (online)"
        table.add_row(stage, f"{found['calls']:,} + ≤{found['up_to_extra_calls']:,}",
                      f"{found['prompt_tokens']:,} + ~{found['estimated_extra_prompt_tokens']:,}",
                      f"{found['estimated_completion_tokens']:,}", shown)
    return table


def _price_notes(estimated: dict[str, Any], batch: bool) -> list[str]:
    """The total, and what it leaves out: stages whose model has no price, calls that go online in batch mode."""
    if not estimated:
        return []
    lines = []
    online = {stage: found["priced_at"].removeprefix("online: ") for stage, found in estimated.items()
              if batch and found.get("priced_at", "").startswith("online: ")}
    if online:
        lines.append("Online even with --batch, at the online price: "
                     + "; ".join(f"{stage}: {why}" for stage, why in online.items()))
    unpriced = [f"{stage} ({found['model_id']})" for stage, found in estimated.items()
                if found["estimated_cost_usd"] is None]
    if unpriced:
        lines.append(f"Cost unknown ('?'), the model is not in LiteLLM's price map: {', '.join(unpriced)}")
    if len(unpriced) == len(estimated):
        return [*lines, "Estimated cost of the estimable stages: unknown. Details: dry_run.json in the output folder."]
    total = sum(found["estimated_cost_usd"] or 0.0 for found in estimated.values())
    gleaning = any(found.get("up_to_extra_calls") for found in estimated.values())
    at_batch = batch and len(online) < len(estimated)
    lines.append(f"Estimated cost{' at the batch price' if at_batch else ''} of the estimable stages: ${total:.4f}"
                 + (" (the priced ones only)" if unpriced else "")
                 + (", with every possible gleaning call" if gleaning else "")
                 + ". Details: dry_run.json in the output folder.")
    return lines
