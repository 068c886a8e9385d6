"""`index --dry-run`: the model calls of every stage, estimated without making one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

from graphrag_lite.commits import COMMIT_FILE
from graphrag_lite.config import GraphRagConfig
from graphrag_lite.pipeline.checks import needs_model, print_compat_notes
from graphrag_lite.pipeline.committing import readable_state, working_store
from graphrag_lite.pipeline.contract import Stage, StageContext
from graphrag_lite.pipeline.definition import Pipeline
from graphrag_lite.pipeline.fingerprints import reusable_prefix
from graphrag_lite.pipeline.mirroring import run_mirror
from graphrag_lite.pipeline.model_access import ModelAccess
from graphrag_lite.pipeline.records import STATE_FILE
from graphrag_lite.pipeline.runner import run_pipeline
from graphrag_lite.storage import TABLES_DIR, link_or_copy, write_json
from graphrag_lite.tokens import count_with


def dry_run(config: GraphRagConfig, pipeline: Pipeline, console: Console, use_cache: bool = True) -> dict[str, Any]:
    """Estimate the model calls of every stage without making one. Stages that need no model run for real
    (they give the counts: documents, text units): in the output folder when it holds no index yet (the real
    run then reuses them), else in a scratch copy of it, so an index is left exactly as it was. Then, as a
    real run does, the stages whose inputs came out the same are unchanged (a touched or copied input file
    changes nothing). Model stages are estimated from their inputs (calls the answer cache holds are free,
    unless `use_cache` is off); stages that need a model stage's answers are listed as not estimable.
    The estimates are written to OUTPUT/dry_run.json."""
    count_with(config.chunking.encoding_model)
    print_compat_notes(config, console)
    # an index already there keeps its tables as they were; a new output folder keeps what the dry run did
    with scratch_copy(config) if readable_state(config.output.base_dir, None) else \
            contextlib.nullcontext(config) as trial:
        ran: set[str] = set()  # model-free stages the dry run ran, each once
        for _ in pipeline.stages:  # each pass runs the model-free stages that became runnable, or ends
            state = readable_state(trial.output.base_dir, None)
            store = working_store(trial.output.base_dir, state, None)
            # judged with the real settings: a real run's fingerprints, and the index's own LanceDB
            reused = reusable_prefix(pipeline, config, store, state, len(pipeline.stages)) if state else 0
            estimates, model_free = _dry_plan(pipeline, trial, reused, ran)
            if not model_free:
                break
            run_pipeline(trial.model_copy(update={"compat_notes": []}),  # printed above, once
                         Pipeline(pipeline.name, pipeline.description, model_free), console, brief=True)
            ran.update(stage.name for stage in model_free)
        store = working_store(trial.output.base_dir, readable_state(trial.output.base_dir, None), None)
        # estimated from the tables the dry run has, with the real settings: the index's own LanceDB and
        # embeddings manifest (read only), which a real run would update
        models = ModelAccess(config, use_cache=use_cache)
        progress = Progress(console=console, disable=True)
        for stage in pipeline.stages:
            if stage.name in estimates and estimates[stage.name] is None:
                if stage.estimate is None:  # it will call a model, how often only its run can tell
                    estimates[stage.name] = {"note": "will call the model: not estimable before it runs"}
                    continue
                estimated = stage.estimate(StageContext(config, store, progress, stage, models))
                estimates[stage.name] = estimated.as_dict(config) if estimated else {
                    "note": "makes no model calls as configured"}
    config.output.base_dir.mkdir(parents=True, exist_ok=True)
    write_json(config.output.base_dir / "dry_run.json", estimates)
    return estimates


def _dry_plan(pipeline: Pipeline, config: GraphRagConfig, reused: int, ran: set[str]
              ) -> tuple[dict[str, Any], list[Stage]]:
    """What a dry run says of each stage (None: to estimate) when the first `reused` are as their outputs
    are now, and the model-free stages still to run for real (those whose inputs need no model answer, and
    not already in `ran`)."""
    pending: set[str] = set()  # tables that only model answers would produce
    model_free: list[Stage] = []
    estimates: dict[str, Any] = {}
    for position, stage in enumerate(pipeline.stages):
        if stage.name in ran:  # no model: it ran in the dry run, as it will in the real run
            estimates[stage.name] = {"note": "needs no model: ran by the dry run, no calls"}
        elif position < reused:  # a real run would skip it: it calls nothing
            estimates[stage.name] = {"note": "unchanged since the last run: skipped, no calls"}
        elif set(stage.reads) & pending:
            pending.update(stage.writes)
            if needs_model(stage, config):
                estimates[stage.name] = {"note": "depends on the answers of earlier model stages: not estimable"}
        elif needs_model(stage, config):
            pending.update(stage.writes)
            estimates[stage.name] = None
        else:
            model_free.append(stage)
    return estimates, model_free


@contextlib.contextmanager
def scratch_copy(config: GraphRagConfig) -> Iterator[GraphRagConfig]:
    """The configuration pointed at a scratch output folder that starts as a linked copy of the real one's
    tables and state (so finished stages are reused, and nothing written there reaches the index); removed
    afterwards. It sits beside the output folder when it can, so the links need no copies."""
    output = config.output.base_dir
    run_mirror(config).pull()  # an index on object storage: estimated from what it holds now
    parent = output.parent if os.access(output.parent, os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix=".graphrag-lite-dry-run-", dir=parent) as scratch:
        trial = config.model_copy(deep=True)
        trial.output.remote = None  # nothing written in the scratch copy reaches the index, wherever it lives
        trial.output.base_dir = Path(scratch) / "output"
        trial.output.base_dir.mkdir()
        if "://" not in config.lancedb_uri:
            trial.vector_store.db_uri = str(Path(scratch) / "lancedb")
        for table in [*output.glob("*.parquet"), output / STATE_FILE, output / COMMIT_FILE]:
            if table.is_file():
                link_or_copy(table, trial.output.base_dir / table.name)
        for version in (output / TABLES_DIR).glob("*.parquet"):
            (trial.output.base_dir / TABLES_DIR).mkdir(exist_ok=True)
            link_or_copy(version, trial.output.base_dir / TABLES_DIR / version.name)
        yield trial
