"""The stage runner: runs a pipeline's stages in order, skips those whose inputs and configuration are
unchanged since their last successful run (fingerprints.py), and records what every stage did
(records.py). Each table has exactly one writer, and the runner writes every table a stage returns,
atomically."""

from __future__ import annotations

import contextlib
import functools
import gc
import resource
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
from rich.console import Console
from rich.progress import Progress

from graphrag_lite.config import GraphRagConfig
from graphrag_lite.errors import ConfigError, IndexIncomplete, PipelineError, UnknownStage
from graphrag_lite.llm.batch_store import BATCH_FILE, BatchStore
from graphrag_lite.llm.ledger import BudgetExceeded
from graphrag_lite.pipeline.checks import check_model_keys, print_compat_notes
from graphrag_lite.pipeline.committing import (
    commit_run,
    is_committed,
    readable_last_run,
    readable_state,
    working_store,
)
from graphrag_lite.pipeline.contract import Stage, StageContext, StageResult
from graphrag_lite.pipeline.definition import Pipeline
from graphrag_lite.pipeline.display import LOG, describe_llm_totals, log_stage, print_stage, progress_display, run_log
from graphrag_lite.pipeline.fingerprints import is_reusable, outside_outputs_digest, reusable_prefix, stage_fingerprint
from graphrag_lite.pipeline.mirroring import LocalRun, run_mirror
from graphrag_lite.pipeline.model_access import ModelAccess
from graphrag_lite.pipeline.records import (
    STATE_FILE,
    built_with,
    now,
    reused_stats,
    unfinished,
    update_record,
    write_stats,
)
from graphrag_lite.pipeline.settings import write_effective_settings
from graphrag_lite.storage import OutputLock, OutputStore, write_json
from graphrag_lite.tables import conform
from graphrag_lite.tokens import count_with
from graphrag_lite.version import __version__


@dataclass
class RunSummary:
    status: str  # completed | failed | interrupted | unchanged
    stages: dict[str, dict[str, Any]]
    output_dir: Path
    problems: int
    llm: dict[str, Any] | None = None
    incomplete: list[str] = field(default_factory=list)  # stages with failed items (exit code 4)
    batches: dict[str, dict[str, int]] = field(default_factory=dict)  # per stage: calls by batch and online
    forgotten_batches: list[str] = field(default_factory=list)  # earlier runs' batches no call needs any more


def run_pipeline(config: GraphRagConfig, pipeline: Pipeline, console: Console, force: bool = False,
                 from_stage: str | None = None, use_cache: bool = True, brief: bool = False) -> RunSummary:
    """Run the stages that are not reusable, holding the output folder's lock. A read-only output folder
    is fine when nothing has to run. `brief`: one line, not one per stage, when nothing has to run."""
    count_with(config.chunking.encoding_model)
    print_compat_notes(config, console)
    mirror = run_mirror(config)
    mirror.pull()
    state = readable_state(config.output.base_dir, console)
    store = working_store(config.output.base_dir, state, console)
    names = [s.name for s in pipeline.stages]
    if from_stage is not None and from_stage not in names:
        raise UnknownStage(f"--from {from_stage}: not a stage of pipeline '{pipeline.name}' ({', '.join(names)})")
    rerun_from = names.index(from_stage) if from_stage is not None else (0 if force else len(names))
    reusable = reusable_prefix(pipeline, config, store, state, rerun_from)
    if reusable == len(names) and is_committed(pipeline, store):  # nothing to do: write nothing at all
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
        mirror.acquire()
        current = readable_state(store.base_dir, None)
        if current != state:  # another run finished in between: judge again by what it left
            state, store = current, working_store(store.base_dir, current, None)
            reusable = reusable_prefix(pipeline, config, store, current, rerun_from)
        write_effective_settings(config, pipeline, store.base_dir)
        return _run_locked(config, pipeline, console, (store, mirror), state, (rerun_from, reusable), use_cache)
    finally:
        try:
            mirror.release()
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


def _run_locked(config: GraphRagConfig, pipeline: Pipeline, console: Console, where: tuple[OutputStore, LocalRun],
                state: dict[str, Any], plan: tuple[int, int], use_cache: bool) -> RunSummary:
    """Run the pipeline; `where`: the output store and its mirror on object storage; `plan` is (the first
    stage --force/--from re-runs, how many leading stages were already found reusable)."""
    (rerun_from, reusable), (store, mirror) = plan, where
    # until this run finishes, the index is what the last finished run built
    earlier = readable_last_run(store.base_dir, console)
    stats = _started(pipeline, earlier)
    # a run after an unfinished one finishes its update: the update's record goes on from the earlier one
    resumed = earlier.get("update", {}) if unfinished(earlier) else None
    run_started = time.perf_counter()
    digests: dict[str, str] = {}  # table -> digest of the version the next stages read
    status = "completed"
    spare = not gc.get_freeze_count()  # a program that froze objects itself keeps them frozen as it chose
    models = ModelAccess(config, use_cache, spare_collector=spare)
    progress = progress_display(console)
    try:
        with progress, run_log(store.base_dir, pipeline.name, [s.name for s in pipeline.stages]), \
                _collector_spared() if spare else contextlib.nullcontext():
            for position, stage in enumerate(pipeline.stages):
                fingerprint = stage_fingerprint(stage, config, digests) if position >= reusable else ""
                previous = state.get(stage.name, {})
                if position < reusable or (position < rerun_from and is_reusable(previous, fingerprint, store, stage,
                                                                               config)):
                    digests.update(previous["outputs"])
                    stats["stages"][stage.name] = _reused(stage.name, previous, console)
                    continue
                LOG.info("%s: started", stage.name)
                _start_early_work(pipeline, position, StageContext(config=config, store=store, progress=progress,
                                                                   stage=stage, models=models))
                result, stage_stats = _run_and_record(stage, config, where, state, fingerprint, progress, models)
                digests.update(state[stage.name]["outputs"])
                stats["stages"][stage.name] = stage_stats
                print_stage(console, stage.name, stage_stats)
                log_stage(stage.name, stage_stats)
                write_stats(store, stats, run_started)
                mirror.stats_written()
                _stop_if_mostly_failed(stage.name, result, config)
            stats["commit"] = commit_run(config, pipeline, (store, mirror), stats, state)
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
        incomplete = _finish(stats, (status, resumed), models, (store, mirror), run_started)
    return _summary(stats, store.base_dir, incomplete)


def _started(pipeline: Pipeline, earlier: dict[str, Any]) -> dict[str, Any]:
    """stats.json as a run starts; until it finishes, the index is what the `earlier` finished run built."""
    return {"pipeline": pipeline.name, "pipeline_file": pipeline.source, "version": __version__, "status": "running",
            "started": now(), "run_id": uuid.uuid4().hex, "stages": {},
            **({"built_with": built_with(earlier)} if earlier else {})}


def _summary(stats: dict[str, Any], output_dir: Path, incomplete: list[str]) -> RunSummary:
    problems = sum(len(s.get("problems", [])) for s in stats["stages"].values())
    return RunSummary(status=stats["status"], stages=stats["stages"], output_dir=output_dir, problems=problems,
                      llm=stats["llm"], incomplete=incomplete, batches=stats.get("batch", {}),
                      forgotten_batches=stats.get("batches_forgotten", []))


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
            where: tuple[OutputStore, LocalRun], run_started: float) -> list[str]:
    """Write the run's final stats.json (status, model totals, the update record, batch figures) and close
    the models; after a completed run, drop the batches earlier runs left from llm_batches.json. Returns the
    stages that ran with failures. `ending`: how the run ended, and the update record of the unfinished run it
    resumed."""
    store, mirror = where
    try:
        if (figures := mirror.figures()) is not None:
            stats["object_storage"] = figures
        incomplete = _final_stats(stats, ending, models, store, run_started)
        mirror.stats_written()
        return incomplete
    finally:
        models.close()


def _final_stats(stats: dict[str, Any], ending: tuple[str, dict[str, Any] | None], models: ModelAccess,
                 store: OutputStore, run_started: float) -> list[str]:
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
    if batches := models.batch_counts():
        stats["batch"] = batches
    if status.startswith("completed"):
        _forget_batches(stats, store)
    write_stats(store, stats, run_started)
    return incomplete


def _forget_batches(stats: dict[str, Any], store: OutputStore) -> None:
    """Once the index is complete, no call waits for the batches earlier runs left: dropped from the batch file,
    and named in stats.json for cancelling at the provider. A batch file that cannot be read or written is said
    there and in the log, and does not undo the run."""
    try:
        dropped = BatchStore(store.base_dir / BATCH_FILE).forget()
        if dropped:
            stats["batches_forgotten"] = [str(batch.get("id")) for batch in dropped]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        stats["batches_not_forgotten"] = f"{BATCH_FILE}: {type(err).__name__}: {err}"
        LOG.warning("the batches earlier runs left were not forgotten: %s", stats["batches_not_forgotten"])


def _run_and_record(stage: Stage, config: GraphRagConfig, where: tuple[OutputStore, LocalRun], state: dict[str, Any],
                    fingerprint: str, progress: Progress, models: ModelAccess) -> tuple[StageResult, dict[str, Any]]:
    """Run one stage and write its tables and its state entry (reusable only when no item failed); a remote
    index gets the state entry's removal, then the tables and the entry."""
    store, mirror = where
    state_path = store.base_dir / STATE_FILE
    state.pop(stage.name, None)  # a failed or interrupted re-run must not look reusable
    write_json(state_path, state)
    mirror.state_written()
    result, stage_stats = _run_stage(stage, config, store, progress, models)
    outputs = {name: store.write(name, result.tables[name]) for name in stage.writes}
    result.tables = {}  # written: the next stage reads what it needs from disk, not from a copy kept alive here
    state[stage.name] = {"fingerprint": fingerprint if result.complete else None, "outputs": outputs,
                         "finished": now(), "stats": stage_stats, "external": outside_outputs_digest(stage, config)}
    write_json(state_path, state)
    mirror.stage_recorded()
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
    pa.default_memory_pool().release_unused()  # Arrow keeps what earlier stages freed, and it would count here
    start_rss = _memory_mb("VmRSS")  # what earlier stages left: the stage's own need is its peak minus this
    _reset_peak_memory()
    started, client_existed = time.perf_counter(), models.client_start_s is not None
    context = StageContext(config=config, store=store, progress=progress, stage=stage, models=models)
    result = stage.run(context)
    result.problems = [*context.notes, *result.problems]
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
        "start_rss_mb": start_rss,
        "peak_rss_mb": _memory_mb("VmHWM"),
        "summary": result.summary,
        "problems": result.problems,
        **({"details": result.details} if result.details else {}),
        **({"llm": llm} if (llm := models.totals(stage.name)) else {}),
        **({"early_llm": early} if (early := models.totals(stage.name, early_only=True)) else {}),
    }
    return result, stage_stats


def _reset_peak_memory() -> None:
    """Linux lets a process reset its peak resident size, so each stage reports its own peak."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def _memory_mb(field: str) -> float:
    """The process's resident size now (VmRSS) or its high-water mark since the last reset (VmHWM)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # not Linux: the process's peak
