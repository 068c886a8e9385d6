"""One model call's vocabulary: its messages, its answer and what that cost, the stage and step it serves,
and how an answer is parsed, checked and stored."""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from graphrag_lite.answer_parsing import ParseError
from graphrag_lite.config import ModelConfig
from graphrag_lite.llm.cache import cache_key
from graphrag_lite.tokens import count_tokens, counting_encoding

T = TypeVar("T")


Messages = list[dict[str, str]]


CUT_OFF = "the answer was cut off at the length limit (max_tokens); give a complete, shorter answer"


CORRECTION = ("Your previous answer could not be used: {error}. Answer again, in exactly the format the "
              "first message asked for, with nothing before or after it.")


# The stage and step of the call in progress (set by the gateway), for plug-in providers that answer by the
# kind of call, such as the offline fake model; a context variable, so concurrent calls each see their own.
CALL_STEP: contextvars.ContextVar[tuple[str, str]] = contextvars.ContextVar("graphrag_lite_call_step",
                                                                            default=("", ""))


@dataclass
class ChatResult(Generic[T]):
    value: T
    text: str
    cached: bool
    stored: dict[str, Any] | None = None  # the cache entry it came from


@dataclass
class Answer:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    retries: int
    finish_reason: str | None = None
    provider_cached_tokens: int = 0  # prompt tokens the provider served from its prompt cache (cheaper)
    first_piece_s: float | None = None  # a streamed answer: seconds from sending to its first piece

    def plus(self, other: Answer) -> Answer:
        """Totals over the attempts of one call; the text is the latest answer's."""
        priced = self.cost_usd is not None or other.cost_usd is not None
        cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0) if priced else None
        return Answer(other.text, self.prompt_tokens + other.prompt_tokens,
                       self.completion_tokens + other.completion_tokens, cost, self.retries + other.retries,
                       other.finish_reason, self.provider_cached_tokens + other.provider_cached_tokens)


def stored_answer(text: str, spent: Answer) -> dict[str, Any]:
    """A cache entry: the answer, and what it cost to get (so a cache hit can say what it saved)."""
    return {"text": text, "usage": [spent.prompt_tokens, spent.completion_tokens, spent.cost_usd]}


def provider_cached_tokens(usage: Any) -> int:
    """The prompt tokens a provider served from its prompt cache, as LiteLLM reports them: OpenAI's (and
    DeepSeek's, Gemini's) `prompt_tokens_details.cached_tokens`, Anthropic's `cache_read_input_tokens`."""
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) or getattr(usage, "cache_read_input_tokens", None) or 0
    return int(cached) if isinstance(cached, int | float) else 0


def cached_usage(stored: dict[str, Any] | None) -> Answer:
    """What a cached answer cost when it was first asked (unknown for entries written before this was kept)."""
    prompt, completion, cost = (stored or {}).get("usage") or (0, 0, None)
    return Answer("", int(prompt), int(completion), cost, 0)


async def gather_all(calls: Iterable[Awaitable[T]]) -> list[T]:
    """asyncio.gather, except that when one call raises (a budget stop, a configuration error) the others
    are cancelled and awaited before the error goes on: nothing is left running, and nothing half-done is
    reported at shutdown."""
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def prompt_estimate(messages: Messages) -> Callable[[], int]:
    """The prompt tokens of `messages` as they are now (a conversation grows after an unusable answer), as
    counted here with 4 a message for its role and framing; counted on the first call only."""
    contents = [m["content"] for m in messages]
    return functools.cache(lambda: sum(message_tokens(content) for content in contents))


def message_tokens(content: str) -> int:
    """A message's tokens (estimated before sending; the provider's count is reconciled after)."""
    return _message_tokens(content, counting_encoding())


@functools.lru_cache(maxsize=256)
def _message_tokens(content: str, encoding: str) -> int:
    """Remembered for the last messages: a follow-up (a gleaning, a correction) sends the conversation so far
    again, which would otherwise be counted again."""
    return count_tokens(content, encoding) + 4


def parse_answer(parser: Callable[[str], Any], answer: Answer) -> Any:
    """The parsed answer; ParseError for anything that cannot be used, including a parser that fails in an
    unforeseen way (a reply it has never seen must not stop the run) and an answer cut off by max_tokens."""
    try:
        value = parser(answer.text)
    except ParseError as err:
        if answer.finish_reason == "length":
            raise ParseError(f"{CUT_OFF} ({err})", partial=err.partial) from None
        raise
    except Exception as err:
        raise ParseError(f"the answer could not be read ({type(err).__name__}: {err})") from None
    if answer.finish_reason == "length":
        raise ParseError(CUT_OFF, partial=value)
    return value


def tokens_used(response: Any) -> int | None:
    if isinstance(response, Answer):
        return response.prompt_tokens + response.completion_tokens
    usage = getattr(response, "usage", None)
    return int(getattr(usage, "total_tokens", 0) or 0) or None


def any_text(text: str) -> str:
    return text


def call_key(kind: str, model: ModelConfig, payload: Any, args: dict[str, Any]) -> str:
    """The cache key of a call: everything that changes the answer (model, endpoint, version, call arguments),
    never the API key. In a provider batch, it is the request's custom_id."""
    return cache_key(kind, model.model, payload, args, endpoint=f"{model.api_base or ''}|{model.api_version or ''}")
