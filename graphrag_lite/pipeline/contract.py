"""The stage contract: what a stage declares (`Stage`), what it is given to run (`StageContext`) and what it
gives back (`StageResult`). A stage is a small I/O wrapper around a pure core over tables: it reads the tables
earlier stages wrote, returns the tables it writes, and the runner writes them. Stages import this module,
never the runner."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import pandas as pd
import pyarrow as pa
from rich.progress import Progress

from graphrag_lite.config import GraphRagConfig
from graphrag_lite.errors import IndexDamaged
from graphrag_lite.pipeline.display import spend_text
from graphrag_lite.pipeline.model_access import ModelAccess
from graphrag_lite.storage import OutputStore

if TYPE_CHECKING:  # the model stack is loaded by the stages that call a model
    from graphrag_lite.estimate import CallEstimate
    from graphrag_lite.llm.gateway import Gateway

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
    notes: list[str] = field(default_factory=list)  # what the run should report besides the stage's problems

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

    def read(self, table: str, columns: list[str] | None = None) -> pd.DataFrame:
        """A table the stage declares, or only `columns` of it (a large table's other columns stay on disk)."""
        return self.store.read(self._declared(table), columns)

    def read_arrow(self, table: str, columns: list[str] | None = None) -> pa.Table:
        """`read` as an Arrow table, for a stage that hands large columns on without looking at each row."""
        return self.store.read_arrow(self._declared(table), columns)

    def _declared(self, table: str) -> str:
        if table not in self.stage.reads + self.stage.early_reads:  # an undeclared input would escape the
            # fingerprint that decides re-runs
            raise AssertionError(f"stage {self.stage_name} reads {table}, which it does not declare in `reads`")
        return table

    def early(self) -> asyncio.Task[Any] | None:
        """The stage's early work (`Stage.early`), started before its turn; None when none was started."""
        return self.models.early_work(self.stage_name)

    def previous(self, table: str, columns: list[str] | None = None) -> pd.DataFrame | None:
        """What the last run left of a table this stage writes (its outputs are written only after it
        returns), or None on a first run: an update keeps the numbers, communities and reports it can."""
        if not self.store.has(table):
            return None
        try:
            previous = self.store.read(table, columns)
        except (IndexDamaged, ValueError, KeyError) as err:  # damaged, or columns it does not have
            # taken as absent: this run numbers rows and communities afresh, as a first run does
            self.notes.append(f"the previous version of table '{table}' cannot be read ({err}); it is taken as "
                              "absent: its rows are numbered afresh (human_readable_id and community numbers may "
                              "change, and its reports are written again)")
            return None
        missing = [c for c in (columns or []) if c not in previous.columns]
        if missing:
            self.notes.append(f"the previous version of table '{table}' lacks the columns {missing}; it is taken as "
                              "absent: its rows are numbered afresh")
            return None
        return previous

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
            if time.monotonic() - refreshed[0] > 0.5:  # shown at most twice a second
                refreshed[0] = time.monotonic()
                self.progress.update(task, spend=spend_text(self.models.running(self.stage_name)))

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
