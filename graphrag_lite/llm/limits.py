"""Per-model flow control: a concurrency limit that backs off under 429s (AIMD) and gives a free slot to the
waiting call of highest priority, and token buckets for requests per minute and tokens per minute."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import statistics
import time
from collections import deque
from contextvars import ContextVar

# a call's claim on the next free slot of its model: higher goes first (equal ones in order of asking). A
# stage sets it for the calls one item makes: each item runs in a task of its own, with its own context.
PRIORITY: ContextVar[int] = ContextVar("call_priority", default=0)


class AdaptiveConcurrency:
    """At most `limit` calls in flight, learning how many the provider serves at once.

    Each call remembers how many were in flight when it started (its level). A rate-limit answer (429) at
    some level lowers the limit below that level only when calls at that level or above are refused often
    (more than a third of the recent ones): the provider serves fewer at once. A 429 among calls at that
    level that mostly succeed is a random refusal (a shared quota, a busy node): it is retried, not taken as
    a verdict on capacity. While nothing is known yet, or when most recent answers are 429s, the limit
    halves (at most once per `cooldown`), as in TCP's AIMD; every `limit` successes add one back, up to the
    configured maximum, so the limit recovers after a burst and probes again for capacity."""

    CAPACITY_SHARE = 1 / 3  # refusals among calls at a level that mean the provider does not serve that many

    def __init__(self, maximum: int, cooldown: float = 1.0) -> None:
        self.maximum = maximum
        self.limit = maximum
        self.in_flight = 0
        self.peak = 0
        self.lowest = maximum  # the lowest limit 429s pushed it to, for the run's stats
        self._cooldown = cooldown
        self._last_decrease = -cooldown
        self._successes = 0
        self._recent: deque[tuple[int, bool]] = deque(maxlen=4 * maximum)  # (level, refused) of recent calls
        # calls waiting for a slot: (-priority, order of asking, what the slot's level is given to)
        self._waiting: list[tuple[int, int, asyncio.Future[int]]] = []
        self._asked = itertools.count()

    async def acquire(self, priority: int = 0) -> int:
        """Wait for a slot, the highest `priority` first, then in order of asking; returns the call's level
        (calls in flight, itself included)."""
        slot: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (-priority, next(self._asked), slot))
        self._give_slots()  # at once when a slot is free and no call of higher priority waits
        try:
            return await slot
        except asyncio.CancelledError:
            if slot.done() and not slot.cancelled():  # given a slot in the same moment
                self.give_back()
            raise

    def give_back(self) -> None:
        """A slot taken for a call that was never sent: freed, and not counted as an answer."""
        self.in_flight -= 1
        self._give_slots()

    def release(self, rate_limited: bool = False, level: int | None = None) -> None:
        self.in_flight -= 1
        self._recent.append((level if level is not None else self.limit, rate_limited))
        if rate_limited:
            self._lower(level if level is not None else self.limit)
            self._successes = 0
        else:
            self._successes += 1
            if self._successes >= self.limit and self.limit < self.maximum:
                self.limit += 1
                self._successes = 0
        self._give_slots()

    def _take(self) -> int:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        return self.in_flight

    def _give_slots(self) -> None:
        """The free slots to the first waiting calls (a cancelled one is skipped)."""
        while self._waiting and self.in_flight < self.limit:
            slot = heapq.heappop(self._waiting)[2]
            if not slot.done():
                slot.set_result(self._take())

    def _lower(self, level: int) -> None:
        now = time.monotonic()
        at_or_above = [refused for seen, refused in self._recent if seen >= level]
        served_any = any(not refused for _, refused in self._recent)
        if len(at_or_above) >= 3 and served_any and sum(at_or_above) > self.CAPACITY_SHARE * len(at_or_above):
            self._set(min(self.limit, max(1, level - 1)))  # the provider does not serve this many at once
        elif now - self._last_decrease >= self._cooldown and (
                not served_any or sum(r for _, r in self._recent) > len(self._recent) / 2):
            self._set(max(1, self.limit // 2))  # nothing known yet, or mostly refused: back off hard
            self._last_decrease = now

    def _set(self, limit: int) -> None:
        self.limit = limit
        self.lowest = min(self.lowest, limit)


class TokenBucket:
    """`per_minute` units a minute, in bursts of at most one second's worth. A request larger than the
    burst may go when the bucket is full and leaves it in debt, so the long-run rate holds for any size.
    Waiters are served in arrival order."""

    def __init__(self, per_minute: float) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate)
        self.level = self.capacity
        self._stamp = time.monotonic()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        self.level = min(self.capacity, self.level + (now - self._stamp) * self.rate)
        self._stamp = now

    async def take(self, amount: float) -> None:
        async with self._lock:
            need = min(amount, self.capacity)
            self._refill()
            while self.level < need:
                await asyncio.sleep((need - self.level) / self.rate)
                self._refill()
            self.level -= amount

    def adjust(self, delta: float) -> None:
        """Correct an estimate once the real amount is known (positive: more was used)."""
        self._refill()
        self.level = min(self.capacity, self.level - delta)


class StartPacer:
    """Spaces call starts, so that calls do not start (and finish) in lockstep waves, in which every answer
    waits for the client-side work of all the others (and providers see bursts).

    The spacing is the client's own work per answer: the event loop's CPU time between two answers (the
    median of the recent ones, so the work between two stages does not count). That is enough for answers
    to stop queueing behind each other, and a stage's first calls still all start within a few dozen ms.
    It is at most 0.7 x (typical latency / concurrency), a rate above what the concurrency limit allows, so
    throughput is never lowered. (A fixed 0.7 x latency / concurrency cost each model stage a ramp of 0.7
    latencies: 0.35 s a stage on bench/latency_bound.py.)"""

    HEADROOM = 0.7
    SMOOTHING = 0.2

    def __init__(self) -> None:
        self.latency: float | None = None  # moving average of call durations, seconds
        self._work: deque[float] = deque(maxlen=50)  # the loop's CPU seconds between recent answers
        self._typical_work: float | None = None  # their median, worked out as an answer arrives
        self._cpu_mark: float | None = None
        self._next = 0.0
        self._lock = asyncio.Lock()

    def spacing(self, concurrency: int) -> float:
        assert self.latency is not None
        most = self.HEADROOM * self.latency / concurrency
        return most if self._typical_work is None else min(most, self._typical_work)

    async def wait(self, concurrency: int) -> None:
        if self.latency is None or concurrency <= 1:
            return
        async with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self.spacing(concurrency)
        if start > now:
            await asyncio.sleep(start - now)

    def observe(self, seconds: float) -> None:
        """An answer came after `seconds` (called on the event loop's thread, whose CPU time it reads)."""
        self.latency = seconds if self.latency is None else (1 - self.SMOOTHING) * self.latency + \
            self.SMOOTHING * seconds
        cpu = time.thread_time()
        if self._cpu_mark is not None:
            self._work.append(cpu - self._cpu_mark)
            self._typical_work = statistics.median(self._work)
        self._cpu_mark = cpu


class ModelLimiter:
    """Everything that paces calls to one model."""

    def __init__(self, concurrency: int, requests_per_minute: int | None, tokens_per_minute: int | None) -> None:
        self.concurrency = AdaptiveConcurrency(concurrency)
        self.requests = TokenBucket(requests_per_minute) if requests_per_minute else None
        self.tokens = TokenBucket(tokens_per_minute) if tokens_per_minute else None
        self.pacer = StartPacer()

    async def admit(self, estimated_tokens: int) -> int:
        """Wait for a slot, the pacing and the rate limits; call `done` with the level returned afterwards."""
        level = await self.concurrency.acquire(PRIORITY.get())
        try:
            await self.pacer.wait(self.concurrency.limit)
            if self.requests:
                await self.requests.take(1)
            if self.tokens:
                await self.tokens.take(estimated_tokens)
        except BaseException:
            self.concurrency.give_back()  # not sent: not a success that would raise the limit
            raise
        return level

    def done(self, estimated_tokens: int, actual_tokens: int | None, rate_limited: bool,
             latency: float | None = None, level: int | None = None) -> None:
        if self.tokens and actual_tokens is not None:
            self.tokens.adjust(actual_tokens - estimated_tokens)
        if latency is not None:
            self.pacer.observe(latency)
        self.concurrency.release(rate_limited=rate_limited, level=level)
