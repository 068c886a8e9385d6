"""Looking into a built index: `show`, `aliases` (entity resolution's merges) and `export`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from graphrag_lite.cli.common import (
    ConfigOption,
    RootOption,
    SetOption,
    VerboseOption,
    console,
    errors,
    guarded,
)
from graphrag_lite.errors import MissingIndex, index_command
from graphrag_lite.names import normalize_name

if TYPE_CHECKING:
    from graphrag_lite.config import GraphRagConfig
    from graphrag_lite.storage import OutputStore


def committed_store(cfg: GraphRagConfig) -> OutputStore:
    """The committed index's tables; a run that has not finished is said on stderr (its tables are not read)."""
    from graphrag_lite.pipeline.committed import open_committed

    committed = open_committed(cfg.output.base_dir, cfg.root_dir)
    if committed.pending:
        errors.print(f"[yellow]note:[/yellow] {escape(committed.pending)}", highlight=False)
    return committed.store


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
    from graphrag_lite.tables import INDEX_TABLES

    cfg = load_config(root, config, set_ or [])
    store = committed_store(cfg)
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

    cfg = load_config(root, config, set_ or [])
    store = committed_store(cfg)
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

    cfg = load_config(root, config, set_ or [])
    target = out or cfg.output.base_dir / "graph.graphml"
    nodes, edges = write_graphml(committed_store(cfg), target, cfg.root_dir)
    console.print(f"wrote {target} ({nodes:,} nodes, {edges:,} edges)", highlight=False)


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

    cfg = load_config(root, config, set_ or [])
    folder = out or cfg.output.base_dir / "neo4j"
    done = write_neo4j(committed_store(cfg), folder, cfg.root_dir)
    console.print(f"wrote {folder}: {', '.join(Path(f).name for f in done['files'])} ({done['nodes']:,} nodes, "
                  f"{done['relationships']:,} relationships); import with `neo4j-admin database import full "
                  f"--nodes={folder / 'nodes.csv'} --relationships={folder / 'relationships.csv'} "
                  "--multiline-fields=true`, or run import.cypher with the files in Neo4j's import folder",
                  highlight=False, markup=False)


@guarded
def check(
    root: RootOption = Path("."),
    config: ConfigOption = None,
    set_: SetOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="the report as JSON")] = False,
    verbose: VerboseOption = False,
) -> int:
    """Verify an index without changing it: every committed table against its digest, the LanceDB tables
    against their pinned versions, the run's records. Exit code 6 when something is damaged (then
    `graphrag-lite index` repairs it)."""
    import json

    from graphrag_lite.config import load_config
    from graphrag_lite.errors import IndexDamaged
    from graphrag_lite.pipeline.integrity import check_index

    report = check_index(load_config(root, config, set_ or []))
    if as_json:
        console.print_json(json.dumps(report.as_dict()))
    else:
        what = f"commit {report.commit}" if report.commit is not None else "an index from before versioned commits"
        console.print(f"Index in {report.output_dir} ({what}): {report.tables_checked} tables and "
                      f"{report.lancedb_checked} LanceDB tables checked", highlight=False)
        for finding in report.findings:
            mark = "[red]damaged[/red]" if finding.serious else "[yellow]note[/yellow]"
            console.print(f"{mark} {escape(finding.problem)}", highlight=False)
        if report.pending_run:
            console.print(f"[yellow]note[/yellow] {escape(report.pending_run)}", highlight=False)
        console.print(f"repair: {escape(report.repair)}" if report.findings else "[green]intact[/green]",
                      highlight=False)
    return IndexDamaged.exit_code if report.damaged else 0
