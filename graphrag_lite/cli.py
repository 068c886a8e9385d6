"""The `graphrag-lite` command line."""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import functools
import logging
import shlex
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from graphrag_lite.errors import ConfigError, GraphragLiteError, IndexIncomplete, MissingIndex, index_command
from graphrag_lite.query import SEARCH_METHODS

if TYPE_CHECKING:
    from graphrag_lite.config import GraphRagConfig

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Build a knowledge-graph index of a folder of documents and query it.")
export_app = typer.Typer(no_args_is_help=True, help="Export an index for other tools.")
app.add_typer(export_app, name="export")
query_app = typer.Typer(no_args_is_help=True, help="Ask a question of an index (local, global or basic search).")
app.add_typer(query_app, name="query")

experiment_app = typer.Typer(no_args_is_help=True, help="Config-driven experiments: variants of a project's "
                              "settings, indexed with shared work and scored on a question set.")
app.add_typer(experiment_app, name="experiment")

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


@app.command()
@guarded
def init(
    root: Annotated[Path, typer.Argument(help="folder for the new project (created if missing)")] = Path("."),
    root_option: Annotated[Path | None, typer.Option("--root", "-r", help="the same folder, as GraphRAG's init "
                                                     "takes it")] = None,
    force: Annotated[bool, typer.Option("--force", "-f", help="overwrite existing settings, .env and prompts")
                     ] = False,
    verbose: VerboseOption = False,
) -> None:
    """Create a project: settings.yaml, .env (with a placeholder API key), input/ and the prompt files."""
    from graphrag_lite.project import init_project

    root = root_option or root
    for path in init_project(root, force=force):
        console.print(f"wrote {path}")
    where = shlex.quote(str(root))
    console.print(f"Next:\n  1. put your documents in {root / 'input'}\n"
                  f"  2. with a model: put your API key in {root / '.env'}, then  graphrag-lite index --root {where}\n"
                  f"     with no key:   graphrag-lite index --root {where} --method fast\n"
                  f"  3. graphrag-lite query local \"Who is ...?\" --root {where}   (with no key: add --no-model)",
                  highlight=False, markup=False)


BatchFlag = Annotated[bool, typer.Option("--batch", help="send the model calls as provider batch jobs: about half "
                                         "the price, answered within 24 hours; a stopped run re-attaches to its "
                                         "batches when run again")]


def build_index(out: Console, root: Path, config: Path | None, set_: list[str], method: str | None, *,
                update: bool = False, force: bool = False, from_stage: str | None = None, no_cache: bool = False,
                dry_run: bool = False, batch: bool = False) -> int:
    """`index` and `update`: run the pipeline (or estimate it), and say how it ended; returns the exit code.
    Over an existing index, what changed in the input is listed before any model call."""
    from graphrag_lite.pipeline.definition import indexed_pipeline
    from graphrag_lite.pipeline.dry_run import dry_run as estimate_pipeline
    from graphrag_lite.pipeline.runner import run_pipeline
    from graphrag_lite.pipeline.settings import configure
    from graphrag_lite.stages import STAGES

    cfg, pipeline = configure(STAGES, root, config, set_, method)
    built_with = indexed_pipeline(cfg.output.base_dir)
    if update and built_with is None:
        raise MissingIndex(f"no index in {cfg.output.base_dir} to update; build it first with "
                           f"`{index_command(root)}`")
    if built_with is not None and built_with[0] != pipeline.name:
        if update and method is None:  # an update keeps the method of the index it updates
            cfg, pipeline = configure(STAGES, root, config, set_, built_with[1])
        else:
            out.print(f"[yellow]note:[/yellow] the index in {cfg.output.base_dir} was built with the "
                      f"{built_with[0]} method; this run uses {pipeline.name}, and re-runs what it changes "
                      f"(`update`, or --method {built_with[1]}, keeps {built_with[0]})", highlight=False)
    cfg.batch.enabled = batch
    verb = "Updating" if built_with is not None else "Indexing"
    out.print(f"{verb} with pipeline [bold]{pipeline.name}[/bold] ({' → '.join(s.name for s in pipeline.stages)})",
              highlight=False)
    if built_with is not None:
        _print_pending_changes(out, cfg)
    if dry_run:
        print_estimates(estimate_pipeline(cfg, pipeline, out, use_cache=not no_cache), batch)
        return 0
    started = time.perf_counter()
    with batch_progress(out, cfg):
        summary = run_pipeline(cfg, pipeline, out, force=force, from_stage=from_stage, use_cache=not no_cache)
    print_run_end(out, summary, next_query(cfg, root, config), time.perf_counter() - started)
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
    from graphrag_lite.words import counted

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
    from graphrag_lite.words import counted

    if summary.batches:
        out.print(describe_run(summary.batches), highlight=False)
    if dropped := summary.forgotten_batches:
        out.print(f"[yellow]note:[/yellow] no call of this index needs the {counted(len(dropped), 'batch')} left by "
                  f"earlier runs ({', '.join(dropped)}); cancel them at the provider if they still run",
                  highlight=False)


def _print_pending_changes(out: Console, cfg: Any) -> None:
    """What an update will do, before any call: the documents changed since the last run, or, when that run
    was interrupted after reading the input, the changes it still has to finish."""
    from graphrag_lite.pipeline.records import last_run, unfinished
    from graphrag_lite.stages.load_documents import changes_since_last_run, describe_changes

    changes = changes_since_last_run(cfg) or {}
    last = last_run(cfg.output.base_dir)
    pending = last.get("stages", {}).get("load_documents", {}).get("details", {}).get("documents_since_last_run")
    if not any(changes.values()) and pending and any(pending.values()) and unfinished(last):
        out.print(f"Resuming the last run ({last.get('status')}), which found: {describe_changes(pending, shown=10)}",
                  highlight=False)
        return
    out.print(f"Documents since the last run: {describe_changes(changes, shown=10)}", highlight=False)


@app.command()
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


@app.command()
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


@app.command()
@guarded
def show(
    root: RootOption = Path("."),
    config: ConfigOption = None,
    set_: SetOption = None,
    top: Annotated[int, typer.Option("--top", help="how many entities and reports to list")] = 10,
    verbose: VerboseOption = False,
) -> None:
    """Summarize an index: its tables, top entities, communities per level, top reports."""
    from rich.table import Table

    from graphrag_lite.config import load_config
    from graphrag_lite.storage import OutputStore
    from graphrag_lite.tables import INDEX_TABLES

    cfg = load_config(root, config, set_ or [])
    store = OutputStore(cfg.output.base_dir)
    present = [n for n in (*INDEX_TABLES, "entity_aliases") if store.has(n)]
    if "entities" not in present:  # a dry run, or a run stopped early, leaves its first tables only
        so_far = f" (only {', '.join(present)} so far)" if present else ""
        raise MissingIndex(f"no index in {store.base_dir}{so_far}; build it with `{index_command(cfg.root_dir)}`")
    console.print(f"Index in {store.base_dir}: " + ", ".join(f"{n} {len(store.read(n)):,}" for n in present),
                  highlight=False)
    entities = store.read("entities").sort_values(["degree", "frequency"], ascending=False).head(top)
    listing = Table(title=f"Top {len(entities)} entities by degree")
    for column in ("entity", "type", "degree", "mentions"):
        listing.add_column(column)
    for row in entities.itertuples():
        listing.add_row(str(row.title), str(row.type), str(row.degree), str(row.frequency))
    console.print(listing)
    if store.has("communities"):
        levels = store.read("communities").groupby("level").size()
        console.print("Communities per level: " + ", ".join(f"level {k}: {v}" for k, v in levels.items()))
    if store.has("community_reports"):
        reports = store.read("community_reports").sort_values("rank", ascending=False).head(min(top, 5))
        for row in reports.itertuples():
            console.print(f"  [{row.rank:.1f}] level {row.level}: {row.title}", highlight=False)


@app.command()
@guarded
def aliases(
    root: RootOption = Path("."),
    config: ConfigOption = None,
    set_: SetOption = None,
    reason: Annotated[str | None, typer.Option("--reason", help="only merges whose reason contains this text")
                      ] = None,
    every: Annotated[bool, typer.Option("--all", help="also the names that differ only in case, punctuation, "
                                        "articles or honorifics")] = False,
    ambiguous: Annotated[bool, typer.Option("--ambiguous", help="list the names the rules left apart for you "
                                            "(or the model) to decide, with why, instead of the merges")] = False,
    csv: Annotated[Path | None, typer.Option("--csv", help="also write the merges listed as an overrides file "
                                             "(alias,title,action,reason): change a wrong merge's action to "
                                             "`never` and name the file in entity_resolution.overrides. An "
                                             "existing file keeps its lines; only names it lacks are added")] = None,
    verbose: VerboseOption = False,
) -> None:
    """Review entity resolution: the merges it made, with their reasons and counts, or the names it left apart."""
    from graphrag_lite.alias_overrides import NORMALIZED, write_alias_overrides
    from graphrag_lite.config import load_config
    from graphrag_lite.names import normalize_name
    from graphrag_lite.storage import OutputStore

    cfg = load_config(root, config, set_ or [])
    store = OutputStore(cfg.output.base_dir)
    if not store.has("entity_aliases"):
        raise MissingIndex(f"no entity_aliases table in {store.base_dir}; build the index with "
                           f"`{index_command(cfg.root_dir)}`")
    if ambiguous:
        if not store.has("ambiguous_aliases"):
            raise MissingIndex("this index predates the ambiguous_aliases table; rebuild it with "
                               f"`{index_command(cfg.root_dir, '--from merge_graph')}`")
        print_ambiguous(store.read("ambiguous_aliases"))
        return
    table = store.read("entity_aliases")
    ruled = table[table["reason"] != NORMALIZED]
    names = ruled.assign(key=ruled["alias"].map(normalize_name)).drop_duplicates("key")
    counts = names.groupby("reason").size().sort_values(ascending=False)
    console.print(f"names merged into another's node by a rule: {len(names):,} (" +
                  "; ".join(f"{r} {n:,}" for r, n in counts.items()) + f"); other spellings of one name "
                  f"(case, punctuation, a man's honorific): {len(table) - len(ruled):,}", highlight=False)
    shown = table if every else ruled
    if reason:
        shown = shown[shown["reason"].str.contains(reason, case=False, regex=False)]
    print_merges(shown)
    if csv is not None:
        added, kept = write_alias_overrides(shown, csv)
        console.print(f"wrote {csv}: merges added (action `merge`): {added:,}, one line per name (other "
                      "spellings of one name need none)" + (f"; lines it already had, kept: {kept:,}" if kept
                                                           else ""), highlight=False)


def print_merges(table: Any) -> None:
    from rich.table import Table

    listing = Table(title=f"spellings merged into another name: {len(table):,}", title_justify="left",
                    padding=(0, 1))
    for column in ("alias", "merged into", "reason"):
        listing.add_column(column, overflow="fold")
    for row in table.sort_values(["title", "alias"]).itertuples():
        listing.add_row(str(row.alias), str(row.title), str(row.reason))
    console.print(listing)


def print_ambiguous(table: Any) -> None:
    console.print(f"names the rules left apart for you to decide: {len(table):,} (a `merge` line in "
                  "entity_resolution.overrides joins one to the name meant; confirm_with_model asks the model)",
                  highlight=False)
    for row in table.itertuples():
        why = f"  ({row.why})" if "why" in table.columns else ""
        console.print(f"  {row.title}: {' | '.join(row.could_be)}{why}", highlight=False)


@app.command("prompt-tune")
@guarded
def prompt_tune(
    root: RootOption = Path("."),
    config: ConfigOption = None,
    set_: SetOption = None,
    domain: Annotated[str | None, typer.Option("--domain", help="the corpus's domain, e.g. 'maritime law'; "
                                               "default: the model says, from the sample")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="text units sampled")] = 15,
    examples: Annotated[int, typer.Option("--examples", min=0, max=5, help="worked examples in the "
                                          "extraction prompts")] = 2,
    seed: Annotated[int, typer.Option("--seed", help="of the sample, for a reproducible tuning")] = 0,
    output: Annotated[Path | None, typer.Option("--output", help="folder of the tuned prompts; default: the "
                                                "project's prompts/")] = None,
    verbose: VerboseOption = False,
) -> None:
    """Fit the prompts to your corpus (as GraphRAG's auto-tuning): from a sample of its text, the chat model
    names the domain, the entity types and worked examples; the tuned extraction, summary and report
    prompts are written and wired in settings.yaml."""
    from graphrag_lite.config import find_config_file, load_config
    from graphrag_lite.prompt_tune import tune_project

    cfg = load_config(root, config, set_ or [])
    settings = find_config_file(root, config)
    tuning, written = tune_project(cfg, settings, output or settings.parent / "prompts", domain, limit,
                                   examples, seed)
    console.print(f"domain: {tuning.domain}\nentity types: {', '.join(tuning.entity_types)}\n"
                  f"worked examples: {len(tuning.examples)}" +
                  (f" ({tuning.unusable_examples} sample units gave no usable example; "
                   "without one the packaged example stays)" if tuning.unusable_examples else ""),
                  highlight=False, markup=False)
    for path in written:
        console.print(f"wrote {path}", highlight=False, markup=False)
    console.print(f"{settings} now names them and the entity types; next: "
                  f"{index_command(cfg.root_dir)}", highlight=False, markup=False)


@export_app.command("graphml")
@guarded
def export_graphml(
    root: RootOption = Path("."),
    config: ConfigOption = None,
    set_: SetOption = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="file to write; default: OUTPUT/graph.graphml")
                   ] = None,
    verbose: VerboseOption = False,
) -> None:
    """Write the entity graph as GraphML: node ids are entity titles, with type, description, degree and the
    community at each level; edges carry weight and description (networkx and igraph read it)."""
    from graphrag_lite.config import load_config
    from graphrag_lite.export import export_graphml as write_graphml
    from graphrag_lite.storage import OutputStore

    cfg = load_config(root, config, set_ or [])
    target = out or cfg.output.base_dir / "graph.graphml"
    nodes, edges = write_graphml(OutputStore(cfg.output.base_dir), target, cfg.root_dir)
    console.print(f"wrote {target} ({nodes:,} nodes, {edges:,} edges)", highlight=False)


@export_app.command("neo4j")
@guarded
def export_neo4j(
    root: RootOption = Path("."),
    config: ConfigOption = None,
    set_: SetOption = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="folder to write; default: OUTPUT/neo4j")] = None,
    verbose: VerboseOption = False,
) -> None:
    """Write nodes.csv and relationships.csv in the form `neo4j-admin database import full` reads, and
    import.cypher, a LOAD CSV script that builds the same graph."""
    from graphrag_lite.config import load_config
    from graphrag_lite.export import export_neo4j as write_neo4j
    from graphrag_lite.storage import OutputStore

    cfg = load_config(root, config, set_ or [])
    folder = out or cfg.output.base_dir / "neo4j"
    done = write_neo4j(OutputStore(cfg.output.base_dir), folder, cfg.root_dir)
    console.print(f"wrote {folder}: {', '.join(Path(f).name for f in done['files'])} ({done['nodes']:,} nodes, "
                  f"{done['relationships']:,} relationships); import with `neo4j-admin database import full "
                  f"--nodes={folder / 'nodes.csv'} --relationships={folder / 'relationships.csv'} "
                  "--multiline-fields=true`, or run import.cypher with the files in Neo4j's import folder",
                  highlight=False, markup=False)


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


def _query(method: str, question: str, root: Path, config: Path | None, set_: list[str] | None, response_type: str,
           community_level: int | None, streaming: bool, as_json: bool, explain: bool, no_cache: bool,
           no_model: bool = False, data: Path | None = None) -> None:
    import json

    from graphrag_lite.config import no_model_overrides
    from graphrag_lite.pipeline.checks import print_compat_notes
    from graphrag_lite.pipeline.display import describe_llm_totals
    from graphrag_lite.query.engine import GraphRAG
    from graphrag_lite.query.hops import describe_round

    overrides = [*(set_ or []), *(no_model_overrides(method) if no_model else []),
                 *([f"output.base_dir={data}", f"vector_store.db_uri={data / 'lancedb'}"] if data else [])]
    rag = GraphRAG.from_config(root, config, overrides, use_cache=not no_cache)
    print_compat_notes(rag.config, errors, brief=True)
    options: dict[str, Any] = {"response_type": response_type}
    if community_level is not None:
        options["community_level"] = community_level
    if streaming and not as_json:
        options["on_piece"] = lambda piece: console.print(piece, end="", markup=False, highlight=False)
    result = asyncio.run(rag.asearch(method, question, **options))
    if as_json:
        console.print_json(json.dumps(result.to_dict(), default=str, ensure_ascii=False))
        return
    if streaming:
        console.print()
    else:
        console.print(result.answer, markup=False, highlight=False)
    for problem in result.problems:
        errors.print(f"[yellow]! {problem}[/yellow]", highlight=False)
    if explain:
        console.rule("context sent")
        console.print(result.context_text, markup=False, highlight=False)
        console.rule("usage")
        console.print(describe_llm_totals(result.usage) if result.usage else "no model calls", highlight=False)
        console.print(f"context budgets (tokens): {result.budgets}", highlight=False)
        for number, hop in enumerate(result.rounds if len(result.rounds) > 1 else [], start=1):
            console.print(describe_round(number, hop), markup=False, highlight=False)
        for section in result.sections:
            console.print(f"  {section['name']}: {section['used']:,} of {section['cap']:,} tokens, "
                          f"{section['rows']} of {section['candidates']} rows ({section['why']})",
                          markup=False, highlight=False)
        if result.coverage:
            console.print(result.coverage.describe(), highlight=False)


@query_app.command("local")
@guarded
def query_local(
    question: Annotated[str, typer.Argument(help="the question")],
    root: RootOption = Path("."), config: ConfigOption = None, set_: SetOption = None,
    response_type: ResponseTypeOption = "Multiple Paragraphs", community_level: LevelOption = 2,
    hops: Annotated[int | None, typer.Option("--hops", min=1, max=5, help="retrieval rounds; from 2 the model "
                                             "names what the context still lacks and the next round follows "
                                             "it (default: local_search.hops)")] = None,
    streaming: StreamingOption = False, as_json: JsonOption = False, explain: ExplainOption = False,
    no_cache: NoCacheOption = False, no_model: NoModelOption = False, data: DataOption = None,
    verbose: VerboseOption = False,
) -> None:
    """Answer from the neighbourhood of the entities the question is about (entities, relationships, claims,
    their communities' reports and the source text)."""
    overrides = [*(set_ or []), *([f"local_search.hops={hops}"] if hops else [])]
    _query("local", question, root, config, overrides, response_type, community_level, streaming, as_json, explain,
           no_cache, no_model, data)


@query_app.command("global")
@guarded
def query_global(
    question: Annotated[str, typer.Argument(help="the question")],
    root: RootOption = Path("."), config: ConfigOption = None, set_: SetOption = None,
    response_type: ResponseTypeOption = "Multiple Paragraphs", community_level: LevelOption = 2,
    streaming: StreamingOption = False, as_json: JsonOption = False, explain: ExplainOption = False,
    no_cache: NoCacheOption = False, no_model: NoModelOption = False, data: DataOption = None,
    verbose: VerboseOption = False,
) -> None:
    """Answer questions about the whole corpus: map-reduce over the community reports of one level."""
    _query("global", question, root, config, set_, response_type, community_level, streaming, as_json, explain,
           no_cache, no_model, data)


@query_app.command("basic")
@guarded
def query_basic(
    question: Annotated[str, typer.Argument(help="the question")],
    root: RootOption = Path("."), config: ConfigOption = None, set_: SetOption = None,
    response_type: ResponseTypeOption = "Multiple Paragraphs",
    streaming: StreamingOption = False, as_json: JsonOption = False, explain: ExplainOption = False,
    no_cache: NoCacheOption = False, no_model: NoModelOption = False, data: DataOption = None,
    verbose: VerboseOption = False,
) -> None:
    """Answer from the text units most similar to the question (vector and keyword search): plain RAG, the
    baseline to compare graph search against."""
    _query("basic", question, root, config, set_, response_type, None, streaming, as_json, explain, no_cache,
           no_model, data)


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


ExperimentFile = Annotated[Path, typer.Argument(help="experiment file (YAML)")]


@experiment_app.command("run")
@guarded
def experiment_run(
    file: ExperimentFile,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="estimate the model calls and cost of the whole "
                                          "experiment without calling a model")] = False,
    verbose: VerboseOption = False,
) -> int:
    """Build and evaluate every variant (re-running skips finished work), then print the results table and
    write results.csv, results.parquet and report.md to the experiment's output folder."""
    from graphrag_lite.experiment.run import run_experiment

    if dry_run:
        print_experiment_estimate(file)
        return 0
    table = run_experiment(file, console)
    print_table(table, f"Experiment {file.name}")
    console.print(f"Report: {table.attrs.get('report', '')}", highlight=False)
    return report_failures(table)


def report_failures(table: Any) -> int:
    """Exit code 4 when an index finished with failed items or a question got no answer: named, not hidden."""
    indexes = sorted(set(table.loc[table["index_status"].astype(str).str.contains("failures"), "variant"]))
    failed = table.get("query_failures")
    queries = sorted(set(table.loc[failed > 0, "variant"])) if failed is not None else []
    for what, names in (("indexes finished with failed items (their stats.json lists them) and are scored as they "
                         "are", indexes), ("questions got no answer (results.csv: query_failures)", queries)):
        if names:
            errors.print(f"[red]error:[/red] {', '.join(names)}: {what}; run the same command to retry only what "
                         f"failed (exit code {IndexIncomplete.exit_code})", highlight=False)
    return IndexIncomplete.exit_code if indexes or queries else 0


def print_experiment_estimate(file: Path) -> None:
    from rich.table import Table

    from graphrag_lite.experiment.estimate import estimate_experiment
    from graphrag_lite.experiment.runner import plan_experiment

    plan = plan_experiment(file)
    found = estimate_experiment(plan)
    variants = f"{len(plan.variants)} variants, {len({p.index for p in plan.variants})} distinct indexes"
    if not found.rows and not found.not_estimable:
        console.print(f"{variants}: no model calls (no stage calls a model as configured, and no answers are "
                      "generated). The model-free stages ran; the real run reuses them.", highlight=False)
        return
    listing = Table(title=f"Model calls experiment {file.name} would make (dry run: no model was called)")
    for column in ("what", "calls", "prompt tokens", "cost (est.)"):
        listing.add_column(column, justify="left" if column == "what" else "right")
    for row in found.rows:
        cost = "?" if row["cost_usd"] is None else f"${row['cost_usd']:.4f}"
        listing.add_row(row["what"], f"{row['calls']:,}", f"{row['prompt_tokens']:,}", cost)
    console.print(listing)
    gleaning = any(r["what"].endswith(("extract_graph", "extract_claims")) for r in found.rows)
    console.print(f"{variants}: {found.calls:,} calls at most, about ${found.cost_usd:.4f}. Answers are counted at "
                  "the full context budget" + (", and every possible gleaning call" if gleaning else "")
                  + ": upper bounds.", highlight=False)
    if found.not_estimable:
        console.print("Not estimable before extraction (their calls depend on its results): "
                      + ", ".join(found.not_estimable), highlight=False)


@experiment_app.command("show")
@guarded
def experiment_show(file: ExperimentFile, verbose: VerboseOption = False) -> None:
    """Print the results table of an experiment that has run."""
    import pandas as pd

    from graphrag_lite.experiment.run import RESULTS
    from graphrag_lite.experiment.spec import load_spec

    spec = load_spec(file)
    assert spec.output is not None
    if not (spec.output / RESULTS).is_file():
        raise ConfigError(f"no results in {spec.output}; run `graphrag-lite experiment run {file}` first")
    print_table(pd.read_parquet(spec.output / RESULTS), f"Experiment {file.name}")
    console.print(f"Report: {spec.output / 'report.md'}", highlight=False)


@app.command("serve")
@guarded
def serve(
    root: RootOption = Path("."), config: ConfigOption = None, set_: SetOption = None,
    host: Annotated[str, typer.Option("--host", help="address to bind; another than this machine's loopback "
                                      "needs an API key")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="port to listen on")] = 8000,
    api_key: Annotated[str | None, typer.Option("--api-key", envvar="GRAPHRAG_LITE_API_KEY", show_envvar=True,
                                                help="key every request must send (X-API-Key header or Bearer "
                                                "token)")] = None,
    verbose: VerboseOption = False,
) -> None:
    """Serve the index over HTTP: queries, context, entities, communities and the graph explorer page at /,
    with the index, its tables and models kept warm (OpenAPI docs at /docs)."""
    _needs_serve_extra("serve", "fastapi", "uvicorn")
    from graphrag_lite.serve.app import run_server

    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C stops a server: nothing to resume
        run_server(root, config, set_ or [], host=host, port=port, api_key=api_key)


@app.command("mcp")
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


@app.command("eval")
@guarded
def evaluate(
    questions: Annotated[Path, typer.Option("--questions", "-q", help="question file: JSONL, JSON or CSV with "
                                            "`question` and optional answers and gold evidence")],
    root: RootOption = Path("."), config: ConfigOption = None, set_: SetOption = None,
    methods: Annotated[str, typer.Option("--methods", help="query methods, comma-separated")] = "local,basic",
    answers: Annotated[bool, typer.Option("--answers/--no-answers", help="also generate answers with each "
                                          "method's chat model and score them (questions with answers); "
                                          "default: retrieval scores only, no model call")] = False,
    response_type: ResponseTypeOption = "Single Sentence",
    as_json: Annotated[bool, typer.Option("--json", help="print per-method and per-question results as JSON")
                       ] = False,
    verbose: VerboseOption = False,
) -> int:
    """Score an existing index on a question set: gold evidence recall (beside basic search packed to the
    same budget), answer exact match, token F1 and containment, and each method's calls, tokens and cost."""
    import json
    from dataclasses import asdict

    from graphrag_lite.evaluation.evaluate import evaluate_index, summary_table
    from graphrag_lite.evaluation.questions import load_questions
    from graphrag_lite.query.engine import GraphRAG
    from graphrag_lite.tables import plain_json

    chosen = [m.strip() for m in methods.split(",") if m.strip()]
    if not chosen or any(m not in SEARCH_METHODS for m in chosen):
        raise ConfigError(f"--methods {methods}: choose from {', '.join(SEARCH_METHODS)}")
    asked = load_questions(questions)
    rag = GraphRAG.from_config(root, config, set_ or [])
    results = asyncio.run(evaluate_index(rag, asked, chosen, answers, response_type))
    table = summary_table(results)
    if as_json:
        data = {"methods": table.to_dict("records"), "questions": [asdict(r) for r in results]}
        # NaN (not measured) as null: strict JSON readers reject NaN
        console.print_json(json.dumps(plain_json(data), allow_nan=False))
        return _failed_questions(results)
    print_table(table.rename(columns={"calls": "query_calls", "cost_usd": "query_cost_usd",
                                      "median_s": "query_median_s"}),
                f"{questions.name}: {len(asked)} questions")
    if "global" in chosen and not answers:
        console.print("Global search has no evidence recall (its context is community reports); it is scored "
                      "on answers only: add --answers.", highlight=False)
    if any(q.group for q in asked):
        print_table(summary_table(results, ("method", "group")).rename(columns={"calls": "query_calls"}),
                    "by group")
    return _failed_questions(results)


def _failed_questions(results: Any) -> int:
    failed = [r for r in results if r.failed]
    if not failed:
        return 0
    errors.print(f"[red]error:[/red] {len(failed)} questions got no usable answer ({failed[0].method}, "
                 f"{failed[0].question_id}: {failed[0].problems[0][:200]}); --json lists them all (exit code "
                 f"{IndexIncomplete.exit_code})", highlight=False)
    return IndexIncomplete.exit_code


def main() -> None:
    import signal
    import sys

    signal.signal(signal.SIGTERM, _stopped)
    try:
        args = graphrag_style(sys.argv[1:])
    except GraphragLiteError as err:
        errors.print(f"[red]error:[/red] {err}", highlight=False)
        raise SystemExit(err.exit_code) from None
    app(args=args, prog_name="graphrag-lite")


class Terminated(KeyboardInterrupt):
    """SIGTERM, from `kill`, a container or a CI job: ended as Ctrl-C ends a run (its status and stats written,
    a message, exit 130), not cut off with stats.json still saying "running". A subclass, not KeyboardInterrupt
    itself: some of CPython's own entry points mark a KeyboardInterrupt passing through them (an exact-type
    check) as unhandled, and the process then ends by SIGINT (exit -2) even after the program handled it (1
    run in 6 of the test did); a subclass is not marked."""


def _stopped(signum: int, frame: object) -> None:
    raise Terminated




def graphrag_style(args: list[str]) -> list[str]:
    """Microsoft GraphRAG's command lines as graphrag-lite's: `query "Q" --method local` is `query local "Q"`,
    `--dynamic-community-selection` the setting of that name, `index --method standard-update` the standard
    method (an index re-runs only what changed), and so for `update`. Other arguments pass unchanged."""
    if args[:1] in (["index"], ["update"]):
        return [a.removesuffix("-update") if a in ("standard-update", "fast-update") else a for a in args]
    if args[:1] != ["query"] or (args[1:2] and args[1] in SEARCH_METHODS):
        return args
    method_given = bool({"--method", "-m"} & set(args))
    if not method_given and (len(args) < 2 or args[1].startswith("-")):
        return args  # `query`, `query --help`: graphrag-lite's own
    # a mistyped method (locl, globl, basc) would be asked as a question by global search; a one-word question
    # (goal, vocal, total, logical) stays below the 0.85 similarity
    if not method_given and (near := difflib.get_close_matches(args[1].lower(), SEARCH_METHODS, 1, cutoff=0.85)):
        raise ConfigError(f"query {args[1]}: not a search method; did you mean `graphrag-lite query {near[0]}`? "
                          f"(To ask it as a question, add --method global.)")
    rest, method = list(args[1:]), "global"  # GraphRAG's default method
    for flag in ("--method", "-m"):
        while flag in rest:
            at = rest.index(flag)
            method = rest[at + 1] if at + 1 < len(rest) else ""
            del rest[at:at + 2]
    if method not in SEARCH_METHODS:
        raise ConfigError(f"query --method {method}: not a search method here (local, global, basic); for DRIFT's "
                          "follow-up questions, try `graphrag-lite query local --hops 2`")
    if "--dynamic-community-selection" in rest:
        rest.remove("--dynamic-community-selection")
        rest += ["--set", "global_search.dynamic_community_selection=true"]
    return ["query", method, *[a for a in rest if a != "--no-dynamic-selection"]]


if __name__ == "__main__":
    main()
