"""The stage runner: runs a pipeline's stages in order, skips the ones whose inputs and configuration are
unchanged since their last successful run, and records what every stage did in stats.json.

A stage is a small I/O wrapper (`Stage.run`) around a pure core function over tables. It reads tables
written by earlier stages, returns the tables it writes, and the runner writes them atomically. Each table
has exactly one writer, so a stage's fingerprint (its name, the package version, its configuration slice,
and the digests of the tables it reads) says everything about whether it must run again.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import difflib
import functools
import gc
import logging
import os
import resource
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pandas as pd
import yaml
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from graphrag_lite.config import GraphRagConfig, Overrides, OverrideSources
from graphrag_lite.errors import ConfigError, IndexIncomplete, PipelineError, PipelineFileError, UnknownStage
from graphrag_lite.ids import json_digest
from graphrag_lite.large_imports import collector_paused
from graphrag_lite.llm.ledger import EARLY_WORK, BudgetExceeded, read_spend, write_spend
from graphrag_lite.resources import data_dir
from graphrag_lite.storage import OutputLock, OutputStore, link_or_copy, read_json, write_json
from graphrag_lite.tables import conform
from graphrag_lite.tokens import count_with
from graphrag_lite.version import __version__

if TYPE_CHECKING:
    from graphrag_lite.estimate import CallEstimate
    from graphrag_lite.llm.cache import AnswerCache
    from graphrag_lite.llm.gateway import Gateway

STATE_FILE = "pipeline_state.json"
STATS_FILE = "stats.json"
EFFECTIVE_SETTINGS_FILE = "settings.effective.yaml"
T = TypeVar("T")


@dataclass
class StageResult:
    tables: dict[str, pd.DataFrame]
    summary: str = ""  # one line for the terminal
    problems: list[str] = field(default_factory=list)  # each failure or skipped input, one line
    details: dict[str, Any] = field(default_factory=dict)  # stage-specific figures for stats.json
    # False when some items failed after their retries: the tables are written and later stages run, but
    # the stage is not marked reusable, so the next run tries it again (finished calls come from the cache).
    complete: bool = True


@dataclass
class StageContext:
    config: GraphRagConfig
    store: OutputStore
    progress: Progress
    stage: Stage
    models: ModelAccess

    @property
    def stage_name(self) -> str:
        return self.stage.name

    @property
    def llm(self) -> Gateway:
        """The LLM gateway, created on first use (model-free stages never import LiteLLM)."""
        return self.models.gateway()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Model calls (`coroutine`) run to their end on the run's one event loop."""
        return self.models.run(coroutine)

    def read(self, table: str) -> pd.DataFrame:
        if table not in self.stage.reads + self.stage.early_reads:  # an undeclared input would escape the
            # fingerprint that decides re-runs
            raise AssertionError(f"stage {self.stage_name} reads {table}, which it does not declare in `reads`")
        return self.store.read(table)

    def early(self) -> asyncio.Task[Any] | None:
        """The stage's early work (`Stage.early`), started before its turn; None when none was started."""
        return self.models.early_work(self.stage_name)

    def previous(self, table: str, columns: list[str] | None = None) -> pd.DataFrame | None:
        """What the last run left of a table this stage writes (its outputs are written only after it
        returns), or None on a first run: an update keeps the numbers, communities and reports it can."""
        return self.store.read(table, columns) if self.store.has(table) else None

    def previous_numbers(self, table: str) -> dict[str, int] | None:
        """The last run's human_readable_id of each row id of `table`, for `ids.kept_numbers`."""
        previous = self.previous(table, ["id", "human_readable_id"])
        return None if previous is None else dict(zip(previous["id"], previous["human_readable_id"], strict=True))

    @contextlib.contextmanager
    def bar(self, total: int | None, what: str) -> Iterator[Callable[[], None]]:
        """A progress bar for work that finishes out of order (concurrent model calls): call the yielded
        function once per finished item. A model stage's bar also shows its calls, tokens and cost so far."""
        label = f"{self.stage_name}: {what}"
        task = self.progress.add_task(label, total=total, spend="")
        refreshed, shown = [0.0], [True]

        def advance() -> None:
            if not shown[0]:  # an item that ends after its bar went (left running by an interrupted run)
                return
            self.progress.advance(task)
            if time.monotonic() - refreshed[0] > 0.5:  # the ledger is summed at most twice a second
                refreshed[0] = time.monotonic()
                self.progress.update(task, spend=_spend(self.models.totals(self.stage_name)))

        try:
            yield advance
        finally:
            shown[0] = False
            self.progress.remove_task(task)

    def track(self, items: Iterable[T], total: int | None, what: str) -> Iterator[T]:
        """Iterate with a progress bar for this stage."""
        with self.bar(total, what) as advance:
            for item in items:
                yield item
                advance()


@dataclass(frozen=True)
class Stage:
    name: str
    description: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    config_sections: tuple[str, ...]
    run: Callable[[StageContext], StageResult]
    # A digest of what the stage reads from outside the output folder (the input documents).
    external_digest: Callable[[GraphRagConfig], str] | None = None
    uses_model: bool = False
    # A digest of what the stage writes outside the output folder (LanceDB), so a resumed run notices when
    # it is gone; None when it is missing.
    external_output_digest: Callable[[GraphRagConfig], str | None] | None = None
    # For --dry-run: the calls the stage would make, from its inputs, without calling a model (None: the
    # stage's calls depend on what earlier model calls return and cannot be known in advance).
    estimate: Callable[[StageContext], CallEstimate | None] | None = None
    # Work the stage can start before its turn, once the stages that write `early_reads` have run: it returns
    # a coroutine (None: nothing worth starting this run), which goes on on the run's event loop while the
    # stages in between wait on their model calls; the stage's run takes it with `ctx.early()`. Early work
    # only saves time: what the stage writes follows from its `reads` alone, so `early_reads` are not part of
    # its fingerprint.
    early: Callable[[StageContext], Coroutine[Any, Any, Any] | None] | None = None
    early_reads: tuple[str, ...] = ()


@dataclass
class Pipeline:
    name: str
    description: str
    stages: list[Stage]
    settings: dict[str, Any] = field(default_factory=dict)  # recommended settings, over settings.yaml
    source: str = ""  # the pipeline file, so `update` can run an index's own pipeline again


def load_pipeline(name_or_path: str, registry: dict[str, Stage], root: Path | None = None) -> Pipeline:
    """A pipeline file: `description:` and `stages:` (stage names, in order)."""
    path = _pipeline_path(name_or_path, root)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise PipelineFileError(f"{path}: not valid YAML: {err}") from err
    names = data.get("stages")
    if not isinstance(names, list) or not names:
        raise PipelineFileError(f"{path}: expected a non-empty list under `stages:`")
    stages = []
    written: set[str] = set()
    for name in names:
        if name not in registry:
            close = difflib.get_close_matches(str(name), list(registry), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else f"; known stages: {', '.join(registry)}"
            raise PipelineFileError(f"{path}: unknown stage '{name}'{hint}")
        stage = registry[name]
        missing = [t for t in stage.reads if t not in written]
        if missing:
            raise PipelineFileError(f"{path}: stage '{name}' reads {missing}, which no earlier stage writes")
        twice = [t for t in stage.writes if t in written]
        if twice:
            raise PipelineFileError(f"{path}: stage '{name}' writes {twice}, already written by an earlier stage")
        written.update(stage.writes)
        stages.append(stage)
    settings = data.get("settings") or {}
    if not isinstance(settings, dict):
        raise PipelineFileError(f"{path}: `settings:` must be a mapping of sections")
    return Pipeline(name=path.stem, description=str(data.get("description", "")), stages=stages, settings=settings,
                    source=str(path.resolve()))


QUERY_SECTIONS = ("local_search", "global_search", "basic_search")


def configure(root: Path, config_file: Path | None = None, overrides: Overrides = (), method: str | None = None,
              overrides_from: OverrideSources = "--set") -> tuple[GraphRagConfig, Pipeline]:
    """The settings and the pipeline of an index run: the settings file, under the settings the pipeline
    recommends (`method`, else the file's `pipeline`), under `overrides`."""
    from graphrag_lite.config import override_items, read_settings, resolve_config
    from graphrag_lite.stages import STAGES

    # the pipeline's name comes first, unvalidated: its settings may be what makes the rest valid
    path, data = read_settings(root, config_file)
    named = [value for key, value in override_items(overrides) if key == ["pipeline"]]
    name = method or (named[-1] if named else data.get("pipeline")) or GraphRagConfig.model_fields["pipeline"].default
    pipeline = load_pipeline(str(name), STAGES, path.parent)
    cfg = resolve_config(path, data, overrides, pipeline.settings or None, overrides_from)
    # what runs, also when --method chose it (a pipeline file by its full path): settings.effective.yaml runs it again
    cfg.pipeline = pipeline.name if str(name) == pipeline.name else pipeline.source
    return cfg, pipeline


def write_effective_settings(config: GraphRagConfig, pipeline: Pipeline, output_dir: Path) -> None:
    """The settings a run uses, every value resolved (the settings file, the pipeline's settings, --set), beside
    the index: what built it, to compare runs or to build it again. An API key is written as the ${VAR} the
    settings file reads it from, else as asterisks (which a run refuses as a placeholder)."""
    from graphrag_lite.compat import is_graphrag_settings
    from graphrag_lite.compat import translate as translate_graphrag_settings

    values = _dollars_literal(config.model_dump(mode="json", exclude={"root_dir"}))
    written = yaml.safe_load(config.settings_file.read_text(encoding="utf-8")) if config.settings_file else None
    if isinstance(written, dict) and is_graphrag_settings(written):  # its keys where ours are, ${VAR}s kept
        written = translate_graphrag_settings(written)[0]
    for model_id, model in values["models"].items():
        if model["api_key"] is not None and (reference := _key_reference(written, model_id)):
            model["api_key"] = reference
    header = (f"# The settings of the last index run in this folder ({time.strftime('%Y-%m-%d %H:%M:%S')}, pipeline "
              f"{pipeline.name}): {config.settings_file or 'settings given in code'} under the pipeline's settings, "
              "under --set.\n"
              "# Usable as a settings file; API keys are the ${VAR}s they were read from, or hidden (put them "
              "back).\n")
    text = header + yaml.safe_dump(values, sort_keys=False, allow_unicode=True)
    (output_dir / EFFECTIVE_SETTINGS_FILE).write_text(text, encoding="utf-8")


def _dollars_literal(value: Any) -> Any:
    """Resolved values written so that reading the file back gives them again: a `$` as `$$`."""
    if isinstance(value, str):
        return value.replace("$", "$$")
    if isinstance(value, dict):
        return {k: _dollars_literal(v) for k, v in value.items()}
    return [_dollars_literal(v) for v in value] if isinstance(value, list) else value


def _key_reference(settings: Any, model_id: str) -> str | None:
    """The ${VAR} a settings file's model reads its API key from, if it does."""
    models = settings.get("models") if isinstance(settings, dict) else None
    model = models.get(model_id) if isinstance(models, dict) else None
    key = model.get("api_key") if isinstance(model, dict) else None
    return key if isinstance(key, str) and "${" in key else None


def read_state(output_dir: Path) -> dict[str, Any]:
    """pipeline_state.json: per stage, its fingerprint, output digests and stats ({} before a first run)."""
    path = output_dir / STATE_FILE
    return read_json(path) if path.is_file() else {}


def last_run(output_dir: Path) -> dict[str, Any]:
    """The last run's stats.json ({} before a first run)."""
    path = output_dir / STATS_FILE
    return read_json(path) if path.is_file() else {}


def unfinished(stats: dict[str, Any]) -> bool:
    """Whether the run these stats describe ended before its last stage (interrupted, stopped, failed)."""
    return "status" in stats and not str(stats["status"]).startswith("completed")


def indexed_pipeline(output_dir: Path) -> tuple[str, str] | None:
    """The method the index in `output_dir` was built with: its name, and the name or pipeline file that runs
    it again (as its last run's stats.json says); None when there is no index there yet (no entities table)."""
    built = built_with(last_run(output_dir)) if (output_dir / "entities.parquet").is_file() else {}
    name, source = built.get("pipeline"), built.get("pipeline_file")
    if not isinstance(name, str):
        return None
    if name in available_pipelines() or not isinstance(source, str) or not Path(source).is_file():
        return name, name
    return name, source


def recommended_query_settings(output_dir: Path) -> dict[str, Any]:
    """The query sections of the `settings:` of the packaged pipeline that built the index in `output_dir`
    (stats.json names it), so an index is searched the way its method intends; {} when none apply."""
    name = built_with(last_run(output_dir)).get("pipeline")
    path = data_dir("pipelines") / f"{name}.yaml"
    if not isinstance(name, str) or not path.is_file():
        return {}
    settings = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("settings") or {}
    return {k: v for k, v in settings.items() if k in QUERY_SECTIONS}


def built_with(stats: dict[str, Any]) -> dict[str, Any]:
    """The pipeline of the last run that finished (stats.json's `built_with`): a run that failed or was
    stopped before it finished does not change what the index is, nor how it is queried."""
    return stats.get("built_with") or {"pipeline": stats.get("pipeline"), "pipeline_file": stats.get("pipeline_file")}


def available_pipelines() -> list[str]:
    return sorted(p.stem for p in data_dir("pipelines").glob("*.yaml"))


def _pipeline_path(name_or_path: str, root: Path | None) -> Path:
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml"):
        path = candidate if candidate.is_absolute() or root is None else root / candidate
        if path.is_file():
            return path
        raise PipelineFileError(f"pipeline file {path} not found")
    path = data_dir("pipelines") / f"{name_or_path}.yaml"
    if path.is_file():
        return path
    known = available_pipelines()
    close = difflib.get_close_matches(name_or_path, known, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    raise PipelineFileError(f"unknown pipeline '{name_or_path}'; {hint}available: {', '.join(known)}")


# ---------------------------------------------------------------- dry run


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
    with scratch_copy(config) if read_state(config.output.base_dir) else contextlib.nullcontext(config) as trial:
        store = OutputStore(trial.output.base_dir)
        ran: set[str] = set()  # model-free stages the dry run ran, each once
        for _ in pipeline.stages:  # each pass runs the model-free stages that became runnable, or ends
            state = read_state(store.base_dir)
            # judged with the real settings: a real run's fingerprints, and the index's own LanceDB
            reused = reusable_prefix(pipeline, config, store, state, len(pipeline.stages)) if state else 0
            estimates, model_free = _dry_plan(pipeline, trial, reused, ran)
            if not model_free:
                break
            run_pipeline(trial.model_copy(update={"compat_notes": []}),  # printed above, once
                         Pipeline(pipeline.name, pipeline.description, model_free), console, brief=True)
            ran.update(stage.name for stage in model_free)
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
    parent = output.parent if os.access(output.parent, os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix=".graphrag-lite-dry-run-", dir=parent) as scratch:
        trial = config.model_copy(deep=True)
        trial.output.base_dir = Path(scratch) / "output"
        trial.output.base_dir.mkdir()
        if "://" not in config.vector_store.db_uri:
            trial.vector_store.db_uri = str(Path(scratch) / "lancedb")
        for table in [*output.glob("*.parquet"), output / STATE_FILE]:
            if table.is_file():
                link_or_copy(table, trial.output.base_dir / table.name)
        yield trial
def print_compat_notes(config: GraphRagConfig, console: Console, brief: bool = False) -> None:
    """Once per command: a Microsoft GraphRAG settings file's keys that are accepted but ignored, and why
    (`brief`, for each query: how many, and where the list is)."""
    if config.compat_notes:
        console.print(f"[yellow]note:[/yellow] a Microsoft GraphRAG settings file, read as graphrag-lite settings; "
                      f"{len(config.compat_notes)} of its keys are ignored or read otherwise here"
                      + (" (`graphrag-lite index` lists them as it starts)" if brief else ":"), highlight=False)
        for note in config.compat_notes if not brief else []:
            console.print(f"  {note}", highlight=False, markup=False)


def check_model_keys(config: GraphRagConfig, stages: list[Stage]) -> None:
    """Before any stage runs: every model the stages to run will call has a usable key (not init's
    placeholder, not missing where the provider needs one), else a ConfigError that says what to do."""
    from graphrag_lite.llm.providers import key_problem, no_key_choices

    for stage in (s for s in stages if needs_model(s, config)):
        own = getattr(config, stage.config_sections[0])
        for key in ("model_id", "chat_model_id", "embedding_model_id"):
            model_id = getattr(own, key, None)
            model = config.models.get(model_id) if isinstance(model_id, str) else None
            if model is not None and (problem := key_problem(model)) is not None:
                raise ConfigError(f"{stage.config_sections[0]}.{key} '{model_id}' ({model.model}), used by "
                                  f"{stage.name}: {problem}; {no_key_choices(config.root_dir)}")


def needs_model(stage: Stage, config: GraphRagConfig) -> bool:
    """Whether the stage calls a model as configured: not when its own section (the first it reads) is
    disabled, names no model (extract_claims.enabled: false, embed_text.model_id: null) or leaves the model
    out (entity_resolution.confirm_with_model: false)."""
    if not stage.uses_model or not stage.config_sections:
        return stage.uses_model
    own = getattr(config, stage.config_sections[0])
    if getattr(own, "enabled", True) is False or getattr(own, "confirm_with_model", True) is False:
        return False
    ids = [getattr(own, key) for key in ("model_id", "chat_model_id", "embedding_model_id") if hasattr(own, key)]
    return not ids or any(model_id is not None for model_id in ids)


# ---------------------------------------------------------------- running


class ModelAccess:
    """Owns the run's LLM gateway: one cache connection, one ledger, one set of limits per model."""

    def __init__(self, config: GraphRagConfig, use_cache: bool, spare_collector: bool = False) -> None:
        self._config = config
        self._use_cache = use_cache
        self._spare_collector = spare_collector  # the run leaves the objects made before it out of collections
        self._gateway: Gateway | None = None
        # seconds the gateway took to make, LiteLLM's import (1.5-2 s) most of it unless the key check before
        # the run imported it: the wall time of the stage that made it includes them, before its first call
        self.client_start_s: float | None = None
        self._cache: AnswerCache | None = None  # opened without the gateway, for model-free stages
        # one event loop for the run's model calls: the limiters keep what they learnt (a provider's real
        # concurrency, its rate limits) from one stage to the next, and a stage may leave work to the next
        self._runner: asyncio.Runner | None = None
        self._early: dict[str, asyncio.Task[Any]] = {}  # stage -> its early work (Stage.early), until taken
        self._early_begun: set[str] = set()  # the stages whose early work was considered (started or not)

    def cache(self) -> AnswerCache | None:
        """The answer cache (None with --no-cache or cache.enabled: false), also for what a model-free stage
        remembers (the communities of a graph clustered before), without importing LiteLLM."""
        if self._gateway is not None:
            return self._gateway.cache
        if self._cache is None and self._use_cache and self._config.cache.enabled:
            from graphrag_lite.llm.cache import AnswerCache

            self._cache = AnswerCache(self._config.cache.base_dir)
        return self._cache

    @property
    def use_cache(self) -> bool:
        """False with --no-cache: every answer is asked for again, and no earlier answer is kept."""
        return self._use_cache

    def gateway(self) -> Gateway:
        if self._gateway is None:
            started = time.perf_counter()
            earlier = read_spend(self._config.output.base_dir) if self._config.budget.scope == "index" else (0.0, 0)
            # LiteLLM, imported with the gateway, is left out of the run's collections too, frozen before any
            # collection runs: the first one after its import would walk all of its objects (0.15 s)
            with collector_paused():
                from graphrag_lite.llm.gateway import Gateway

                self._gateway = Gateway(self._config, use_cache=self._use_cache, prior_spend=earlier,
                                        batch=self._config.batch.enabled)
                if self._spare_collector:
                    gc.freeze()
            self.client_start_s = round(time.perf_counter() - started, 3)
        return self._gateway

    def totals(self, stage: str | None = None, early_only: bool = False) -> dict[str, Any] | None:
        if self._gateway is None or not self._gateway.ledger.records:
            return None
        totals = self._gateway.ledger.totals(stage, early_only)
        return totals if totals["calls"] or totals["failed_attempts"] else None

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """`coroutine` to its end on the run's event loop. Interrupted (Ctrl-C, SIGTERM), the calls it left in
        flight are cancelled and ended here, while their stage is still running: closing the loop later would
        end them after the stage's bar and records are gone."""
        runner = self._loop_runner()
        try:
            return runner.run(coroutine)
        except KeyboardInterrupt:
            self._end_tasks()
            raise

    def begin_early(self, stage: str, early: Callable[[], Coroutine[Any, Any, Any] | None]) -> None:
        """Start `stage`'s early work (`early()`; None: nothing worth starting) on the run's event loop, once: it
        goes on whenever a stage runs model calls."""
        if stage in self._early_begun:
            return
        self._early_begun.add(stage)
        if (coroutine := early()) is None:
            return
        context = contextvars.copy_context()
        context.run(EARLY_WORK.set, True)  # its calls are recorded as early (stats.json: early_llm)
        task = self._loop_runner().get_loop().create_task(coroutine, context=context)
        task.add_done_callback(functools.partial(self._early_ended, stage))
        self._early[stage] = task

    @staticmethod
    def _early_ended(stage: str, task: asyncio.Task[Any]) -> None:
        """Say at once when a stage's early work failed."""
        if not task.cancelled() and (error := task.exception()) is not None:
            LOG.warning("%s: the work it started early failed (%s: %s); the stage does it again at its turn, if the "
                        "run gets there", stage, type(error).__name__, error)

    def early_work(self, stage: str) -> asyncio.Task[Any] | None:
        """`stage`'s early work, for the stage to take at its turn (None: none was started)."""
        return self._early.pop(stage, None)

    def unclaimed_early(self) -> set[str]:
        """The stages whose early work was started and that did not take it (the run stopped before)."""
        return set(self._early)

    def _loop_runner(self) -> asyncio.Runner:
        if self._runner is None:
            self._runner = asyncio.Runner()
        return self._runner

    def _end_tasks(self) -> None:
        loop = self._loop_runner().get_loop()
        left = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in left:
            task.cancel()
        with contextlib.suppress(BaseException):  # a second interrupt cuts the clean-up short, not the first's report
            loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()
        if self._gateway is not None:
            write_spend(self._config.output.base_dir, self._gateway.ledger)
            self._gateway.close()
        if self._runner is not None:
            self._runner.close()


@dataclass
class RunSummary:
    status: str  # completed | failed | interrupted | unchanged
    stages: dict[str, dict[str, Any]]
    output_dir: Path
    problems: int
    llm: dict[str, Any] | None = None
    incomplete: list[str] = field(default_factory=list)  # stages with failed items (exit code 4)


def run_pipeline(config: GraphRagConfig, pipeline: Pipeline, console: Console, force: bool = False,
                 from_stage: str | None = None, use_cache: bool = True, brief: bool = False) -> RunSummary:
    """Run the stages that are not reusable, holding the output folder's lock. A read-only output folder
    is fine when nothing has to run. `brief`: one line, not one per stage, when nothing has to run."""
    count_with(config.chunking.encoding_model)
    print_compat_notes(config, console)
    store = OutputStore(config.output.base_dir)
    state = read_state(store.base_dir)
    names = [s.name for s in pipeline.stages]
    if from_stage is not None and from_stage not in names:
        raise UnknownStage(f"--from {from_stage}: not a stage of pipeline '{pipeline.name}' ({', '.join(names)})")
    rerun_from = names.index(from_stage) if from_stage is not None else (0 if force else len(names))
    reusable = reusable_prefix(pipeline, config, store, state, rerun_from)
    if reusable == len(names):  # nothing to do: write nothing at all
        if brief:
            last = max(state[name]["finished"] for name in names)
            console.print(f"[dim]= all {len(names)} stages unchanged since their last run ({last}), skipped[/dim]")
        for stage in pipeline.stages if not brief else []:
            console.print(f"[dim]= {stage.name}: unchanged since {state[stage.name]['finished']}, skipped[/dim]")
        return RunSummary(status="unchanged", output_dir=store.base_dir, problems=0,
                          stages={s.name: reused_stats(state[s.name]["stats"])
                                  for s in pipeline.stages})
    check_model_keys(config, pipeline.stages[reusable:])
    lock = OutputLock(store.base_dir)
    try:
        lock.acquire()
    except OSError as err:
        raise ConfigError(f"cannot write to the output folder {store.base_dir} ({err.strerror}); make it writable, "
                          "or set output.base_dir to a folder you can write") from None
    try:
        current = read_state(store.base_dir)
        if current != state:  # another run finished in between: judge again by what it left
            state, reusable = current, reusable_prefix(pipeline, config, store, current, rerun_from)
        write_effective_settings(config, pipeline, store.base_dir)
        return _run_locked(config, pipeline, console, store, state, (rerun_from, reusable), use_cache)
    finally:
        lock.release()


@contextlib.contextmanager
def _collector_spared() -> Iterator[None]:
    """Leave the objects that exist before the run (the imported modules: pandas, pydantic and, once the
    gateway is made, LiteLLM bring hundreds of thousands) out of the garbage collector's passes while it
    runs: a full pass walks them all, about 0.3 s of CPU each time, and frees none of them. Reference cycles
    among them that are already garbage are collected after the run."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def reusable_prefix(pipeline: Pipeline, config: GraphRagConfig, store: OutputStore, state: dict[str, Any],
                     rerun_from: int) -> int:
    """How many leading stages can be reused as they are (their outputs are hashed once, here)."""
    digests: dict[str, str] = {}
    for position, stage in enumerate(pipeline.stages):
        previous = state.get(stage.name, {})
        if position >= rerun_from or not _reusable(previous, stage_fingerprint(stage, config, digests), store, stage,
                                                   config):
            return position
        digests.update(previous["outputs"])
    return len(pipeline.stages)


def reused_stats(earlier: dict[str, Any]) -> dict[str, Any]:
    """A reused stage's figures: those of the run that made it, without the start of a model client this run
    did not pay."""
    return {**{k: v for k, v in earlier.items() if k != "model_client_start_s"}, "status": "unchanged, reused"}


def _run_locked(config: GraphRagConfig, pipeline: Pipeline, console: Console, store: OutputStore,
                state: dict[str, Any], plan: tuple[int, int], use_cache: bool) -> RunSummary:
    """Run the pipeline; `plan` is (the first stage --force/--from re-runs, how many leading stages were
    already found reusable)."""
    rerun_from, reusable = plan
    earlier = last_run(store.base_dir)  # until this run finishes, the index is what the last finished run built
    stats: dict[str, Any] = {"pipeline": pipeline.name, "pipeline_file": pipeline.source, "version": __version__,
                             "status": "running", "started": _now(), "stages": {},
                             **({"built_with": built_with(earlier)} if earlier else {})}
    # a run after an unfinished one finishes its update: the update's record goes on from the earlier one
    resumed = earlier.get("update", {}) if unfinished(earlier) else None
    run_started = time.perf_counter()
    digests: dict[str, str] = {}  # table -> digest of the version the next stages read
    status = "completed"
    spare = not gc.get_freeze_count()  # a program that froze objects itself keeps them frozen as it chose
    models = ModelAccess(config, use_cache, spare_collector=spare)
    progress = progress_display(console)
    try:
        with progress, run_log(store.base_dir, pipeline), _collector_spared() if spare else contextlib.nullcontext():
            for position, stage in enumerate(pipeline.stages):
                fingerprint = stage_fingerprint(stage, config, digests) if position >= reusable else ""
                previous = state.get(stage.name, {})
                if position < reusable or (position < rerun_from and _reusable(previous, fingerprint, store, stage,
                                                                               config)):
                    digests.update(previous["outputs"])
                    stats["stages"][stage.name] = _reused(stage.name, previous, console)
                    continue
                LOG.info("%s: started", stage.name)
                _start_early_work(pipeline, position, StageContext(config=config, store=store, progress=progress,
                                                                   stage=stage, models=models))
                result, stage_stats = _run_and_record(stage, config, store, state, fingerprint, progress, models)
                digests.update(state[stage.name]["outputs"])
                stats["stages"][stage.name] = stage_stats
                _print_stage(console, stage.name, stage_stats)
                _log_stage(stage.name, stage_stats)
                _write_stats(store, stats, run_started)
                _stop_if_mostly_failed(stage.name, result, config)
    except KeyboardInterrupt:
        status = "interrupted"
        _record_stop(stats, pipeline, models, console, status)
        raise
    except BudgetExceeded as err:
        status = "budget reached"
        stopped = _record_stop(stats, pipeline, models, console, "stopped by budget")
        stats["error"] = (f"{err} during stage {stopped}; the stages before it are complete and its finished model "
                          "calls are cached: run the same command to continue (each run may spend the budget again; "
                          "budget.scope: index counts earlier runs too)")
        raise BudgetExceeded(stats["error"]) from None
    except IndexIncomplete as err:
        status, stats["error"] = "stopped: too many failures", str(err)
        raise
    except Exception as err:
        status, stats["error"] = "failed", f"{type(err).__name__}: {err}"
        _record_stop(stats, pipeline, models, console, status)
        raise
    finally:
        incomplete = _finish(stats, (status, resumed), models, store, run_started)
    problems = sum(len(s.get("problems", [])) for s in stats["stages"].values())
    return RunSummary(status=stats["status"], stages=stats["stages"], output_dir=store.base_dir, problems=problems,
                      llm=stats["llm"], incomplete=incomplete)


def _record_stop(stats: dict[str, Any], pipeline: Pipeline, models: ModelAccess, console: Console,
                 status: str) -> str:
    """Record the stage the run stopped in (the first one not recorded) with the model calls it made before
    it stopped, and show them: stats.json's stages add up to its totals, and a stopped run says what it spent.
    Returns the stage's name ("" when the run stopped after its last stage)."""
    stopped = next((s.name for s in pipeline.stages if s.name not in stats["stages"]), "")
    if stopped and (llm := models.totals(stopped)) is not None:
        stats["stages"][stopped] = {"status": status, "llm": llm}
        console.print(f"[yellow]![/yellow] {stopped} ({status}): {describe_llm_totals(llm)}", highlight=False)
    return stopped


def _reused(name: str, previous: dict[str, Any], console: Console) -> dict[str, Any]:
    """Say that a stage is skipped as unchanged; its figures for this run's stats."""
    console.print(f"[dim]= {name}: unchanged since {previous['finished']}, skipped[/dim]")
    LOG.info("%s: unchanged since %s, skipped", name, previous["finished"])
    return reused_stats(previous["stats"])


def _start_early_work(pipeline: Pipeline, position: int, context: StageContext) -> None:
    """Before the stage at `position` runs, start the early work (`Stage.early`) of the later stages whose
    early inputs the stages before it have written (once each: a later stage's work started earlier goes on)."""
    written = {table for stage in pipeline.stages[:position] for table in stage.writes}
    for later in pipeline.stages[position + 1:]:
        if later.early is not None and set(later.early_reads) <= written:
            context.models.begin_early(later.name, functools.partial(later.early, replace(context, stage=later)))


def _finish(stats: dict[str, Any], ending: tuple[str, dict[str, Any] | None], models: ModelAccess,
            store: OutputStore, run_started: float) -> list[str]:
    """Write the run's final stats.json (status, model totals, the update record); returns the stages that
    ran with failures. `ending`: how the run ended, and the update record of the unfinished run it resumed."""
    status, resumed = ending
    incomplete = [name for name, s in stats["stages"].items() if str(s.get("status", "")).startswith("ran with")]
    if status == "completed" and incomplete:
        status = "completed with failures"
    stats["status"] = status
    if status.startswith("completed"):
        stats["built_with"] = {"pipeline": stats["pipeline"], "pipeline_file": stats["pipeline_file"]}
    stats["llm"] = models.totals()
    for name in models.unclaimed_early() - stats["stages"].keys():  # its early work spent, then the run stopped
        if (llm := models.totals(name)) is not None:
            stats["stages"][name] = {"status": "early work only (the run stopped before the stage's own calls)",
                                     "llm": llm}
    if (update := update_record(stats["stages"], stats["llm"], resumed)) is not None:
        stats["update"] = update
    _write_stats(store, stats, run_started)
    models.close()
    return incomplete


def update_record(stages: dict[str, Any], llm: dict[str, Any] | None, resumed: dict[str, Any] | None
                  ) -> dict[str, Any] | None:
    """What a run over an existing index changed, for stats.json: documents added, changed, deleted and
    renamed, text units new and removed, reports written and kept, and the model calls it cost (None on a
    first run, or when the input was not read again). `resumed`: the record of the interrupted run this one
    finishes (its calls are added, its reports kept when this run did not write them again)."""
    reading = stages.get("load_documents", {})
    changes = reading.get("details", {}).get("documents_since_last_run")
    if not changes or (str(reading.get("status", "")).startswith("unchanged") and resumed is None):
        return None
    units = stages.get("chunk_text", {}).get("details", {})
    stage: dict[str, Any] = next((s for name, s in stages.items() if name.startswith("community_reports")), {})
    reports: dict[str, Any] = stage.get("details", {})
    if str(stage.get("status", "")).startswith("unchanged"):  # skipped: its details are an earlier run's
        reports = (resumed or {}).get("reports") or {
            "reports_written": 0, "reports_kept": stage.get("rows_out", {}).get("community_reports", 0)}
    llm, before = llm or {}, (resumed or {}).get("llm", {})
    hits = llm.get("cache_hits", 0)
    return {"documents": {kind: len(names) for kind, names in changes.items()},
            "documents_listed": changes,
            "text_units": {key: units[key] for key in ("new_text_units", "removed_text_units") if key in units},
            "reports": {key: reports[key] for key in ("reports_written", "reports_kept") if key in reports},
            "llm": {"calls_sent": llm.get("calls", 0) - hits + before.get("calls_sent", 0),
                    "cache_hits": hits + before.get("cache_hits", 0),
                    "cost_usd": round(llm.get("cost_usd", 0.0) + before.get("cost_usd", 0.0), 6)},
            **({"runs": resumed.get("runs", 1) + 1} if resumed is not None else {})}


LOG = logging.getLogger("graphrag_lite")
LOG_FILE = Path("logs") / "index.log"


@contextlib.contextmanager
def run_log(output: Path, pipeline: Pipeline) -> Iterator[None]:
    """OUTPUT/logs/index.log, appended to for the run: every stage, problem and model retry, timestamped."""
    path = output / LOG_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    LOG.addHandler(handler)
    level = LOG.level
    LOG.setLevel(logging.INFO)
    LOG.info("run of pipeline %s (%s), graphrag-lite %s", pipeline.name, " -> ".join(s.name for s in pipeline.stages),
             __version__)
    try:
        yield
    except BaseException as err:
        LOG.error("run stopped: %s: %s", type(err).__name__, err)
        raise
    finally:
        LOG.info("run ended")
        LOG.removeHandler(handler)
        LOG.setLevel(level)
        handler.close()


def _log_stage(name: str, stage_stats: dict[str, Any]) -> None:
    LOG.info("%s: %s in %.2fs: %s", name, stage_stats["status"], stage_stats["wall_s"], stage_stats["summary"])
    if "llm" in stage_stats:
        LOG.info("%s: %s", name, describe_llm_totals(stage_stats["llm"]).replace("[red]", "").replace("[/red]", ""))
    for problem in stage_stats["problems"]:
        LOG.warning("%s: %s", name, problem)


def progress_display(console: Console) -> Progress:
    """The bars of a run: on a terminal only (a pipe or CI gets the plain stage lines), gone when done. Each
    shows done/total, the rate, the time so far and left, and for a model stage its calls, tokens and cost."""
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    _RateColumn(), TimeElapsedColumn(),
                    TextColumn("eta"), TimeRemainingColumn(), _SpendColumn(),
                    console=console, transient=True, disable=not console.is_terminal)


class _RateColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:.1f}/s" if speed else "", style="progress.data.speed")


class _SpendColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        return Text(str(task.fields.get("spend", "")))


def _spend(totals: dict[str, Any] | None) -> str:
    if not totals:
        return ""
    from graphrag_lite.words import counted

    tokens = totals["prompt_tokens"] + totals["completion_tokens"]
    return f"{counted(totals['calls'], 'call')}, {tokens:,} tokens, ${totals['cost_usd']:.4f}"


def _run_and_record(stage: Stage, config: GraphRagConfig, store: OutputStore, state: dict[str, Any],
                    fingerprint: str, progress: Progress, models: ModelAccess) -> tuple[StageResult, dict[str, Any]]:
    """Run one stage and write its tables and its state entry (reusable only when no item failed)."""
    state_path = store.base_dir / STATE_FILE
    state.pop(stage.name, None)  # a failed or interrupted re-run must not look reusable
    write_json(state_path, state)
    result, stage_stats = _run_stage(stage, config, store, progress, models)
    outputs = {name: store.write(name, result.tables[name]) for name in stage.writes}
    state[stage.name] = {"fingerprint": fingerprint if result.complete else None, "outputs": outputs,
                         "finished": _now(), "stats": stage_stats, "external": _external(stage, config)}
    write_json(state_path, state)
    return result, stage_stats


def _stop_if_mostly_failed(stage: str, result: StageResult, config: GraphRagConfig) -> None:
    """More than `extract_graph.max_failed_share` of the text units failed: what follows would be built on
    a fraction of the corpus (and cost money for it). Stop, keeping what was done."""
    share = result.details.get("failed_share")
    limit = config.extract_graph.max_failed_share
    if share is None or share <= limit:
        return
    reasons = Counter(p.split(": ", 2)[-1][:160] for p in result.problems)
    common = reasons.most_common(1)[0][0] if reasons else "unknown"
    raise IndexIncomplete(f"{stage}: {share:.0%} of the text units failed, more than "
                          f"extract_graph.max_failed_share={limit:.0%}, so the run stopped after this stage (its "
                          f"tables are kept). Most common problem: {common}. Fix the model or its settings and run "
                          "the same command: only the failed units are sent again")


def _run_stage(stage: Stage, config: GraphRagConfig, store: OutputStore, progress: Progress,
               models: ModelAccess) -> tuple[StageResult, dict[str, Any]]:
    rows_in = {name: store.rows(name) for name in stage.reads}
    _reset_peak_memory()
    started, client_existed = time.perf_counter(), models.client_start_s is not None
    result = stage.run(StageContext(config=config, store=store, progress=progress, stage=stage, models=models))
    result.tables = {name: conform(name, table) for name, table in result.tables.items()}
    wall = time.perf_counter() - started
    missing = [name for name in stage.writes if name not in result.tables]
    if missing:
        raise PipelineError(f"stage '{stage.name}' did not produce {missing}")
    stage_stats = {
        "status": "ran" if result.complete else "ran with failures (re-run to retry them)",
        "wall_s": round(wall, 3),
        **({"model_client_start_s": models.client_start_s}
           if not client_existed and models.client_start_s is not None else {}),
        "rows_in": rows_in,
        "rows_out": {name: len(result.tables[name]) for name in stage.writes},
        "peak_rss_mb": _peak_memory_mb(),
        "summary": result.summary,
        "problems": result.problems,
        **({"details": result.details} if result.details else {}),
        **({"llm": llm} if (llm := models.totals(stage.name)) else {}),
        **({"early_llm": early} if (early := models.totals(stage.name, early_only=True)) else {}),
    }
    return result, stage_stats


def stage_fingerprint(stage: Stage, config: GraphRagConfig, digests: dict[str, str]) -> str:
    payload = {
        "stage": stage.name,
        "version": __version__,
        "config": config.section_fingerprint(stage.config_sections),
        "inputs": {name: digests.get(name) for name in stage.reads},
        "external": stage.external_digest(config) if stage.external_digest else None,
    }
    return json_digest(payload, 16)


def _reusable(previous: dict[str, Any], fingerprint: str, store: OutputStore, stage: Stage,
              config: GraphRagConfig) -> bool:
    if previous.get("fingerprint") != fingerprint:
        return False
    if previous.get("external") != _external(stage, config):
        return False
    return all(store.digest(name) == digest for name, digest in previous.get("outputs", {}).items())


def _external(stage: Stage, config: GraphRagConfig) -> str | None:
    return stage.external_output_digest(config) if stage.external_output_digest else None


def _print_stage(console: Console, name: str, stage_stats: dict[str, Any]) -> None:
    mark = "[green]✓[/green]" if stage_stats["status"] == "ran" else "[yellow]![/yellow]"
    start = stage_stats.get("model_client_start_s") or 0.0
    client = f", {start:.1f}s of it starting the model client, LiteLLM" if start >= 0.1 else ""
    line = f"{mark} {name} ({stage_stats['wall_s']:.2f}s{client})"
    if stage_stats["summary"]:
        line += f": {stage_stats['summary']}"
    console.print(line)
    if "llm" in stage_stats:
        console.print(f"  {describe_llm_totals(stage_stats['llm'])}", highlight=False)
    problems = stage_stats["problems"]
    for problem in problems[:5]:
        console.print(f"  [yellow]! {problem}[/yellow]", markup=True, highlight=False)
    if len(problems) > 5:
        console.print(f"  [yellow]! … and {len(problems) - 5} more, listed in {STATS_FILE}[/yellow]")


def describe_llm_totals(totals: dict[str, Any]) -> str:
    from graphrag_lite.words import counted

    unpriced = totals["unpriced_calls"]
    cost = f"${totals['cost_usd']:.4f}" + (f" (+{unpriced} calls not in the price map)" if unpriced else "")
    cached = totals.get("provider_cached_prompt_tokens", 0)
    share = f" ({cached / totals['prompt_tokens']:.0%} from the provider's prompt cache)" if cached else ""
    text = (f"LLM: {counted(totals['calls'], 'call')} ({totals['cache_hits']:,} from cache), "
            f"{totals['prompt_tokens']:,} prompt{share} + {totals['completion_tokens']:,} completion tokens, {cost}")
    if totals["retries"] or totals["parse_retries"]:
        text += f", {totals['retries']} retries, {totals['parse_retries']} corrected answers"
    if totals.get("failed_attempts"):  # e.g. embedding calls refused for their size, then split
        text += f", {totals['failed_attempts']} attempts refused or failed"
    if totals["failures"]:
        text += f", [red]{totals['failures']} failed[/red]"
    return text


def _write_stats(store: OutputStore, stats: dict[str, Any], run_started: float) -> None:
    stats["finished"] = _now()
    stats["wall_s"] = round(time.perf_counter() - run_started, 3)
    write_json(store.base_dir / STATS_FILE, stats)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _reset_peak_memory() -> None:
    """Linux lets a process reset its peak resident size, so each stage reports its own peak."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def _peak_memory_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
