"""The run's access to models: one gateway (LiteLLM's import, on first use), one answer cache, one event
loop for every stage's model calls, and the stages' early work."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import gc
import logging
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from graphrag_lite.config import GraphRagConfig
from graphrag_lite.large_imports import collector_paused
from graphrag_lite.llm.ledger import EARLY_WORK, read_spend, write_spend

if TYPE_CHECKING:  # the model stack is loaded by the stages that call a model
    from graphrag_lite.llm.cache import AnswerCache
    from graphrag_lite.llm.gateway import Gateway

T = TypeVar("T")
ENDING_PASSES = 5  # of cancelling what an interrupt left running (each re-raise of it stops the loop once)

LOG = logging.getLogger("graphrag_lite")


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
        self._interrupt: BaseException | None = None  # the interrupt the run stopped on, raised again by waiters

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
            # LiteLLM, imported with the gateway when a model may need it, is left out of the run's collections
            # too, frozen before any collection runs: the first one after its import would walk all of its
            # objects (0.15 s)
            with collector_paused():
                from graphrag_lite.llm.gateway import Gateway

                self._gateway = Gateway(self._config, use_cache=self._use_cache, prior_spend=earlier,
                                        batch=self._config.batch.enabled)
                self._gateway.start_litellm()
                if self._spare_collector:
                    gc.freeze()
            self.client_start_s = round(time.perf_counter() - started, 3)
        return self._gateway

    def running(self, stage: str) -> dict[str, Any] | None:
        """A stage's calls, tokens and cost so far (for its progress bar; None before its first call)."""
        return None if self._gateway is None else self._gateway.ledger.running(stage)

    def totals(self, stage: str | None = None, early_only: bool = False) -> dict[str, Any] | None:
        if self._gateway is None or not self._gateway.ledger.records:
            return None
        totals = self._gateway.ledger.totals(stage, early_only)
        return totals if totals["calls"] or totals["failed_attempts"] else None

    def batch_counts(self) -> dict[str, dict[str, int]]:
        """Per stage, what this run sent by batch and online (batch mode), for stats.json."""
        batcher = self._gateway.batcher if self._gateway is not None else None
        return {stage: dict(counts) for stage, counts in batcher.counts.items()} if batcher is not None else {}

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """`coroutine` to its end on the run's event loop. Interrupted (Ctrl-C, SIGTERM), the calls it left in
        flight are cancelled and ended here, while their stage is still running: closing the loop later would
        end them after the stage's bar and records are gone."""
        runner = self._loop_runner()
        try:
            return runner.run(coroutine)
        except KeyboardInterrupt as interrupt:
            self._interrupt = interrupt
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
            self._runner.get_loop().set_exception_handler(_interrupt_reported_once)
        return self._runner

    def _end_tasks(self) -> None:
        """Cancel the tasks left running (by an interrupt, or by a run that stopped between stages) and let them
        end. A task that waited for the one the interrupt landed in raises that interrupt again as it ends,
        which stops the loop: it runs again until no task is left. A second interrupt cuts the clean-up short,
        not the first's report."""
        loop = self._loop_runner().get_loop()
        for _ in range(ENDING_PASSES):
            left = [task for task in asyncio.all_tasks(loop) if not task.done()]
            if not left:
                return
            for task in left:
                task.cancel()
            try:
                loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
            except BaseException as raised:  # told apart: the first interrupt again, or a new one
                if raised is not self._interrupt:
                    return

    def close(self) -> None:
        """End what is still running on the run's loop (a run stopped between two stages leaves a stage's early
        work), while the answer cache and the gateway are still open to take what it finishes; then close them."""
        if self._runner is not None:
            self._end_tasks()
        if self._cache is not None:
            self._cache.close()
        if self._gateway is not None:
            write_spend(self._config.output.base_dir, self._gateway.ledger)
            self._gateway.close()
        if self._runner is not None:
            self._runner.close()


def _interrupt_reported_once(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The loop's handler of errors nobody awaited. An interrupt (Ctrl-C, SIGTERM) that lands while a task's
    code runs is raised out of the loop, where the run handles and reports it, and is also stored on that
    task, which nobody awaits once the run stops: that copy is not a second error to print ("Task exception
    was never retrieved", with a traceback, under a stopped run's last line). Anything else is reported."""
    if not isinstance(context.get("exception"), KeyboardInterrupt):
        loop.default_exception_handler(context)
