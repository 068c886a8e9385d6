"""Where the servers do their CPU work: a thread of its own, with its own event loop, beside the loop that
answers requests.

A search ranks, packs and renders its context in Python (tens of milliseconds of CPU each); a look-up and
the JSON of an answer take milliseconds more. Done on the server's event loop, the work of 50 clients queued
every other request behind it, /health too (1 to 3 s under 50 clients). On such a thread, the server's loop
only reads requests and writes answers: CPU work waits there in turn, while model calls still overlap (they
await on that thread's loop, which also keeps the loop-bound locks of the model gateway on one loop). The
HTTP server has two, searches on one and look-ups on the other, so that a look-up does not wait behind
searches; the MCP server has one.

A thread shares the GIL with the server's loop, but a thread waiting for the GIL gets it within the
interpreter's switch interval (5 ms): /health stays within tens of milliseconds (bench/serve_under_load.py).
Worker processes would each hold a copy of the index and reload it on their own; threads meet the goal.

A task started here runs in a copy of its caller's context (contextvars), as `asyncio.create_task` does: a
request's usage scope (llm/ledger.py) follows its search. Cancelling the awaiting caller (a client that went
away) cancels the work here.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class WorkThread:
    """One daemon thread running an event loop, started at its first use; `close` stops it."""

    def __init__(self, name: str = "graphrag-lite-search") -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._starting = threading.Lock()

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._starting:
            if self._loop is None:
                ready = threading.Event()
                # asyncio.run: at the end, what still runs there is cancelled and the loop closed cleanly
                self._thread = threading.Thread(target=asyncio.run, args=(self._serve(ready),), name=self.name,
                                                daemon=True)
                self._thread.start()
                ready.wait()
            assert self._loop is not None
            return self._loop

    async def _serve(self, ready: threading.Event) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        ready.set()
        await self._stop.wait()

    async def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Await `work` (a coroutine not yet started) on this thread's loop."""
        future = asyncio.run_coroutine_threadsafe(work, self._running_loop())
        return await asyncio.wrap_future(future)

    async def call(self, work: Callable[[], T]) -> T:
        """Call `work` (plain, CPU-bound) on this thread."""
        async def called() -> T:
            return work()

        return await self.run(called())

    def close(self) -> None:
        """Stop the thread: work still running there is cancelled (the server is stopping)."""
        with self._starting:
            loop, stop, thread = self._loop, self._stop, self._thread
            self._loop = self._stop = self._thread = None
        if loop is None or stop is None or thread is None:
            return
        loop.call_soon_threadsafe(stop.set)
        thread.join()
