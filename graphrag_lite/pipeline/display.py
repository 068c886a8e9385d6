"""What a run shows and logs: a progress bar per stage (on a terminal), a line per stage, the model calls'
totals, and OUTPUT/logs/index.log."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

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

from graphrag_lite.pipeline.records import STATS_FILE
from graphrag_lite.version import __version__
from graphrag_lite.words import counted

LOG = logging.getLogger("graphrag_lite")

LOG_FILE = Path("logs") / "index.log"


@contextlib.contextmanager
def run_log(output: Path, pipeline: str, stages: Sequence[str]) -> Iterator[None]:
    """OUTPUT/logs/index.log, appended to for the run of `pipeline`'s `stages`: every stage, problem and model
    retry, timestamped."""
    path = output / LOG_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    LOG.addHandler(handler)
    level = LOG.level
    LOG.setLevel(logging.INFO)
    LOG.info("run of pipeline %s (%s), graphrag-lite %s", pipeline, " -> ".join(stages), __version__)
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


def log_stage(name: str, stage_stats: dict[str, Any]) -> None:
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


def spend_text(totals: dict[str, Any] | None) -> str:
    if not totals:
        return ""

    tokens = totals["prompt_tokens"] + totals["completion_tokens"]
    return f"{counted(totals['calls'], 'call')}, {tokens:,} tokens, ${totals['cost_usd']:.4f}"


def print_stage(console: Console, name: str, stage_stats: dict[str, Any]) -> None:
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
