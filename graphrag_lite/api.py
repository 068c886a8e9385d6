"""The composition root: how an index is built, updated and estimated, the same for `graphrag-lite index`
and `update` and for Python callers (the query engine, `GraphRAG`, answers questions).

    from graphrag_lite import build_index, run_experiment
    summary = build_index("my-project", {"chunking.size": 300}, method="fast")
    summary = build_index("my-project", update=True)   # keeps the method the index was built with
    results = run_experiment("experiments/example.yaml")   # a pandas DataFrame

An index run is planned first (`plan_index`: the settings, the pipeline, what changed in the input since the
last run), then run (`run_index`) or estimated (`estimate_index`, a dry run that calls no model).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from graphrag_lite.config import GraphRagConfig, Overrides, apply_overrides, place_working_copies
from graphrag_lite.documents import file_reads
from graphrag_lite.documents.changes import CHANGE_KINDS, document_changes, texts_if_ids_given
from graphrag_lite.documents.reading import read_documents
from graphrag_lite.errors import ConfigError, IndexDamaged, InputError, MissingIndex, index_command
from graphrag_lite.pipeline.committing import readable_last_run, readable_state, working_store
from graphrag_lite.pipeline.definition import Pipeline, indexed_pipeline, load_pipeline
from graphrag_lite.pipeline.dry_run import dry_run
from graphrag_lite.pipeline.fingerprints import stage_fingerprint
from graphrag_lite.pipeline.mirroring import pull_input, run_mirror
from graphrag_lite.pipeline.records import unfinished
from graphrag_lite.pipeline.runner import RunSummary, run_pipeline
from graphrag_lite.pipeline.settings import configure
from graphrag_lite.stages import STAGES
from graphrag_lite.stages.load_documents import STAGE as LOAD_DOCUMENTS

Changes = dict[str, list[str]]


@dataclass
class IndexPlan:
    """What an index run will do, decided before it starts."""

    config: GraphRagConfig
    pipeline: Pipeline
    built_with: tuple[str, str] | None  # the index already there: its method, and how to run it again
    notes: list[str] = field(default_factory=list)  # what the caller should be told before the run
    changes: Changes | None = None  # documents added, changed, deleted, renamed since the last run
    resuming: tuple[str, Changes] | None = None  # how the last run ended, and the changes it found and this run
    # finishes (it ended before its last stage)


def plan_index(config: str | Path | GraphRagConfig = ".", overrides: Overrides = (), method: str | None = None, *,
               update: bool = False, batch: bool = False, settings_file: Path | None = None,
               with_changes: bool = True) -> IndexPlan:
    """The settings and pipeline of a run (see `build_index`), and, over an existing index, what changed in
    the input since its last run, read before any model call (later, with `with_changes=False`: the CLI
    says what will run first, then calls `list_changes`). `settings_file`: the project folder's settings are in
    that file instead (the CLI's --config)."""
    file_reads.forget()  # a command's reads start here: a file read by an earlier command is read again
    cfg, pipeline = _configured(config, overrides, method, settings_file)
    pull_input(cfg)
    run_mirror(cfg).pull()  # an index on object storage: what it holds decides, before the run's lease
    built_with = indexed_pipeline(cfg.output.base_dir)
    if update and built_with is None:
        root = cfg.root_dir if isinstance(config, GraphRagConfig) else Path(config)
        raise MissingIndex(f"no index in {cfg.output.remote or cfg.output.base_dir} to update; build it first with "
                           f"`{index_command(root)}`")
    notes = []
    if built_with is not None and built_with[0] != pipeline.name:
        if update and method is None:  # an update keeps the method of the index it updates
            cfg, pipeline = _configured(config, overrides, built_with[1], settings_file)
        else:
            notes.append(f"the index in {cfg.output.base_dir} was built with the {built_with[0]} method; this run "
                         f"uses {pipeline.name}, and re-runs what it changes (`update`, or --method {built_with[1]}, "
                         f"keeps {built_with[0]})")
    cfg.batch.enabled = batch
    plan = IndexPlan(cfg, pipeline, built_with, notes)
    if with_changes:
        list_changes(plan)
    return plan


def list_changes(plan: IndexPlan) -> None:
    """Over an existing index, what changed in the input since its last run (`plan.changes`, `plan.resuming`)."""
    if plan.built_with is not None:
        plan.changes, plan.resuming = pending_changes(plan.config)


def run_index(plan: IndexPlan, console: Console | None = None, force: bool = False, from_stage: str | None = None,
              use_cache: bool = True) -> RunSummary:
    """Run the planned pipeline: the stages whose inputs or settings changed (all with `force`, those from
    `from_stage` on). stats.json records what every stage did, batch figures included."""
    try:
        return run_pipeline(plan.config, plan.pipeline, console or Console(quiet=True), force=force,
                            from_stage=from_stage, use_cache=use_cache)
    finally:
        file_reads.forget()  # what the command read ends with it


def estimate_index(plan: IndexPlan, console: Console | None = None, use_cache: bool = True) -> dict[str, Any]:
    """The planned run's model calls, tokens and cost per stage, estimated without calling a model."""
    try:
        return dry_run(plan.config, plan.pipeline, console or Console(quiet=True), use_cache=use_cache)
    finally:
        file_reads.forget()


def build_index(config: str | Path | GraphRagConfig = ".", overrides: Overrides = (), method: str | None = None,
                console: Console | None = None, *, update: bool = False, force: bool = False,
                from_stage: str | None = None, use_cache: bool = True, batch: bool = False,
                settings_file: Path | None = None) -> RunSummary:
    """Build (or resume) an index. `config` is a project folder, a settings file, or a GraphRagConfig;
    `overrides` are `--set` strings or a mapping of dotted keys; `method` a pipeline name or file (default:
    the settings' `pipeline`; with `update`, the method the index was built with). A folder or file gets the
    pipeline's recommended settings under the overrides, as `graphrag-lite index` does; a GraphRagConfig is
    taken as it is. Unchanged stages are skipped; `batch` sends the model calls as provider batch jobs."""
    plan = plan_index(config, overrides, method, update=update, batch=batch, settings_file=settings_file)
    if console is not None:
        for note in plan.notes:
            console.print(f"note: {note}", highlight=False, markup=False)
    return run_index(plan, console, force=force, from_stage=from_stage, use_cache=use_cache)


def pending_changes(config: GraphRagConfig) -> tuple[Changes | None, tuple[str, Changes] | None]:
    """What an update will find, before any stage runs: the input's documents against the last run's (None
    when there is no index yet); and, when the last run ended early after reading the input and nothing
    changed since, how it ended and what it had found (the changes this run finishes)."""
    changes = _changed_documents(config)
    last = readable_last_run(config.output.base_dir, None)
    found = last.get("stages", {}).get(LOAD_DOCUMENTS.name, {}).get("details", {}).get("documents_since_last_run")
    if not any((changes or {}).values()) and found and any(found.values()) and unfinished(last):
        return changes, (str(last.get("status")), found)
    return changes, None


def _changed_documents(config: GraphRagConfig) -> Changes | None:
    state = readable_state(config.output.base_dir, None)
    store = working_store(config.output.base_dir, state, None)
    if not store.has("input_documents"):
        return None
    last = state.get(LOAD_DOCUMENTS.name, {})
    with file_reads.keeping_bytes():  # for the parse that follows when something changed: one read of a file
        unchanged = last.get("fingerprint") == stage_fingerprint(LOAD_DOCUMENTS, config, {})
    if unchanged:
        file_reads.forget_parsed()  # nothing to parse: let the bytes go
        return {kind: [] for kind in CHANGE_KINDS}  # the same files, bytes and settings: nothing to parse again
    try:
        previous = store.read("input_documents", ["id", "title", *texts_if_ids_given(config.input)])
    except IndexDamaged:  # as after a first run: load_documents says so, and numbers the documents afresh
        return None
    try:  # kept for the stage, which then reads no file again
        loaded = read_documents(config.input, iter, frozenset(previous["title"]), keep=True)
    except InputError as err:
        raise InputError(f"{err}. The index in {config.output.base_dir} is left as it was (it still answers from "
                         "its documents); to start over, delete that folder") from None
    return document_changes(previous, loaded.table)


def _configured(config: str | Path | GraphRagConfig, overrides: Overrides, method: str | None,
                settings_file: Path | None = None) -> tuple[GraphRagConfig, Pipeline]:
    if not isinstance(config, GraphRagConfig):
        path = Path(config)
        root, settings = (path.parent, path) if path.is_file() else (path, settings_file)
        return configure(STAGES, root, settings, overrides, method)
    data = config.model_dump(mode="python", exclude={"root_dir"})
    data["models"] = {k: {**m, "api_key": config.models[k].api_key} for k, m in data["models"].items()}
    apply_overrides(data, overrides)
    try:
        cfg = GraphRagConfig.model_validate(data)
    except ValueError as err:
        raise ConfigError(f"build_index overrides: {err}") from None
    cfg.root_dir, cfg.settings_file = config.root_dir, config.settings_file
    for name in ("input", "cache", "output"):  # not in the dump: their base_dir is already the working copy
        getattr(cfg, name).remote = getattr(config, name).remote
    place_working_copies(cfg)  # a config made in code with an s3:// base_dir: its working copy, placed now
    return cfg, load_pipeline(method or cfg.pipeline, STAGES, cfg.root_dir)
