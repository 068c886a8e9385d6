"""What the fake model was asked, and the faults it injects: one seeded generator per model string, drawn in
the same order by its chat answers (through LiteLLM's handler) and its embeddings (called directly), so a
test's faults do not depend on the path a call took."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from graphrag_lite.fake.options import Options

KEPT_FIRST_MESSAGES = 10_000


@dataclass
class FakeStats:
    """What the fake provider was asked, for tests and benchmarks."""

    completions: int = 0
    embeddings: int = 0
    streams: int = 0
    prompt_tokens: int = 0  # of every request received, answered or refused
    refused: int = 0  # 429 answers (rate limits and calls beyond the capacity)
    in_flight: int = 0
    peak_in_flight: int = 0
    started: list[float] = field(default_factory=list)
    first_messages: list[str] = field(default_factory=list)  # what each request began with, for the first
    # KEPT_FIRST_MESSAGES requests: enough for any test, and a benchmark's run of 10^5 calls does not keep
    # every prompt it sent in memory (gigabytes, which a real model's client does not hold)
    first_messages_not_kept: int = 0

    def asked(self, first_message: str) -> None:
        if len(self.first_messages) < KEPT_FIRST_MESSAGES:
            self.first_messages.append(first_message)
        else:
            self.first_messages_not_kept += 1

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]


STATS = FakeStats()
_GENERATORS: dict[str, random.Random] = {}


@dataclass(frozen=True)
class Fault:
    """A fault to inject: an HTTP status and message (0: the connection drops; -1: no answer, ever)."""

    status: int
    message: str
    retry_after: float | None = None


def draw(options: Options) -> float:
    # one generator per model string, so faults of one configured model do not depend on other models
    return _GENERATORS.setdefault(options.key, random.Random(options.seed)).random()


def forget_draws() -> None:
    _GENERATORS.clear()


def fault(options: Options) -> Fault | None:
    """The fault this request meets, if any (each kind asked for is drawn, in a fixed order)."""
    if options.bad_request:
        return Fault(400, "the model does not accept this request")
    if options.auth and draw(options) < options.auth:
        return Fault(401, "invalid api key")
    if options.rate_limit and draw(options) < options.rate_limit:
        STATS.refused += 1
        return Fault(429, "rate limited", options.retry_after if options.retry_after >= 0 else None)
    if options.server_error and draw(options) < options.server_error:
        return Fault(500, "fake server error")
    if options.drop and draw(options) < options.drop:
        return Fault(0, "Connection error: the server closed the connection")
    if options.timeout and draw(options) < options.timeout:
        return Fault(-1, "no answer")
    return None
