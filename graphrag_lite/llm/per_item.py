"""The one way to call the model once per item (a text unit, a description list, a community, a map batch).

All items run at once (the gateway's limiter paces them). An item whose calls still fail after the gateway's
retries and corrections becomes a failed `Attempt`, never an exception: the other items go on, and the
caller keeps what the item had (the first pass of an extraction, the descriptions joined, a report row
saying why) and counts it in its problems. The progress bar moves once per item, failed or not. Anything
else (a budget stop, a configuration error) cancels every item and goes on up.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from graphrag_lite.llm.calls import gather_all
from graphrag_lite.llm.errors import LLMCallError

Item = TypeVar("Item")
T = TypeVar("T")


@dataclass
class Attempt(Generic[T]):
    """What one item's model calls gave: its value, or the error that ended them."""

    value: T | None = None
    error: LLMCallError | None = None


async def attempt(call: Awaitable[T], advance: Callable[[], None] | None = None) -> Attempt[T]:
    try:
        return Attempt(await call)
    except LLMCallError as err:
        return Attempt(error=err)
    finally:
        if advance is not None:
            advance()


async def for_each(items: Iterable[Item], call: Callable[[Item], Awaitable[T]],
                   advance: Callable[[], None] | None = None) -> list[Attempt[T]]:
    """`call` for every item at once; the attempts in the items' order."""
    return await gather_all(attempt(call(item), advance) for item in items)
