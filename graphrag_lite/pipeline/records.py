"""The run's records in the output folder: pipeline_state.json (per stage: its fingerprint, the digests of the
tables it wrote, its figures: what decides re-runs) and stats.json (what the last run did, and how it
ended), read and written here only."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from graphrag_lite.storage import OutputStore, read_record, write_json

STATE_FILE = "pipeline_state.json"


STATS_FILE = "stats.json"


def read_state(output_dir: Path) -> dict[str, Any]:
    """pipeline_state.json: per stage, its fingerprint, output digests and stats ({} before a first run)."""
    path = output_dir / STATE_FILE
    return read_record(path) if path.is_file() else {}


def last_run(output_dir: Path) -> dict[str, Any]:
    """The last run's stats.json ({} before a first run)."""
    path = output_dir / STATS_FILE
    return read_record(path) if path.is_file() else {}


def same_run(committed: dict[str, Any], stats: dict[str, Any]) -> bool:
    """Whether a commit's run record and stats.json describe one run (its id; its start, to the second, for
    records written before runs had ids)."""
    if committed.get("run_id") or stats.get("run_id"):
        return committed.get("run_id") == stats.get("run_id")
    return bool(stats.get("started")) and committed.get("started") == stats.get("started")


def unfinished(stats: dict[str, Any]) -> bool:
    """Whether the run these stats describe ended before its last stage (interrupted, stopped, failed)."""
    return "status" in stats and not str(stats["status"]).startswith("completed")


def built_with(stats: dict[str, Any]) -> dict[str, Any]:
    """The pipeline of the last run that finished (stats.json's `built_with`): a run that failed or was
    stopped before it finished does not change what the index is, nor how it is queried."""
    return stats.get("built_with") or {"pipeline": stats.get("pipeline"), "pipeline_file": stats.get("pipeline_file")}


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


def reused_stats(earlier: dict[str, Any]) -> dict[str, Any]:
    """A reused stage's figures: those of the run that made it, without the start of a model client this run
    did not pay."""
    return {**{k: v for k, v in earlier.items() if k != "model_client_start_s"}, "status": "unchanged, reused"}


def write_stats(store: OutputStore, stats: dict[str, Any], run_started: float) -> None:
    stats["finished"] = now()
    stats["wall_s"] = round(time.perf_counter() - run_started, 3)
    write_json(store.base_dir / STATS_FILE, stats)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
