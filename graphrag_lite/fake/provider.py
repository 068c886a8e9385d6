"""`fake/...`: a LiteLLM custom provider that answers like a model, offline and deterministically.

It computes a well-formed answer to each kind of call (answers.py: the stage and step the gateway names)
from the text in the prompt, or gives a test's scripted reply (script.py). Options after `?` in the model
string (options.py) inject faults and latency, so retries, caching and budgets can be tested end to end:

    fake/default?latency=0.2&jitter=0.2&rate_limit=0.3&retry_after=0.05&server_error=0.1&timeout=0.1
                &malformed=0.2&fenced=1&truncate=0.1&auth=1&seed=7
    fake/embedding?dim=128

Fractions are probabilities per request (drawn from a seeded generator); `timeout` sleeps past the
gateway's timeout. A follow-up that asks to correct an unusable answer is always answered well.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import httpx
import litellm
from litellm import CustomLLM
from litellm.types.llms.openai import ChatCompletionUsageBlock
from litellm.types.utils import (
    GenericStreamingChunk,
    ModelResponse,
    PromptTokensDetailsWrapper,
    Usage,
)
from litellm.utils import custom_llm_setup

from graphrag_lite.fake.answers import UnknownCall, answer
from graphrag_lite.fake.extraction import COMPLETE
from graphrag_lite.fake.faults import STATS, draw, fault, forget_draws
from graphrag_lite.fake.options import FAKE_INPUT_PRICE, FAKE_OUTPUT_PRICE, PROVIDER_ENCODING, Options
from graphrag_lite.fake.script import SCRIPTS, Script, current_script
from graphrag_lite.fake.tokens import cut_at, provider_prompt_tokens
from graphrag_lite.llm.calls import CALL_STEP
from graphrag_lite.tokens import get_encoding


class FakeLLM(CustomLLM):
    def __init__(self) -> None:
        super().__init__()
        self._prompts: dict[str, list[list[int]]] = {}  # per model string: token lists of prompts seen
        self._served: dict[str, int] = {}  # per model string: calls started (for `hold`)

    # ------------------------------------------------------------ LiteLLM entry points

    def completion(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return asyncio.run(self.acompletion(*args, **kwargs))

    async def acompletion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> ModelResponse:
        options = Options.parse(model)
        STATS.completions += 1
        prompt_tokens = provider_prompt_tokens(messages)
        STATS.prompt_tokens += prompt_tokens
        STATS.asked(str(messages[0].get("content", "")) if messages else "")
        STATS.started.append(time.monotonic())
        STATS.in_flight += 1
        STATS.peak_in_flight = max(STATS.peak_in_flight, STATS.in_flight)
        try:
            if options.capacity and STATS.in_flight > options.capacity:
                await asyncio.sleep(0.01)  # a refusal is quick, not instant
                STATS.refused += 1
                raise _rate_limited(model, retry_after=None)
            if options.latency:
                await asyncio.sleep(options.latency * (1 + options.jitter * (2 * draw(options) - 1)))
            if options.hold:
                await self._held(options)
            text, finish = self._reply(options, model, messages)
            if not _is_correction(messages):
                await self._inject_fault(options, model)
        finally:
            STATS.in_flight -= 1
        text, finish, completion_tokens = cut_at(text, finish, (kwargs.get("optional_params") or {}).get("max_tokens"))
        response: ModelResponse = kwargs.get("model_response") or ModelResponse()
        response.choices[0].message.content = text
        response.choices[0].finish_reason = finish  # type: ignore[assignment]
        cached = self._cached_prefix(options, messages) if options.prefix_cache else 0
        details = PromptTokensDetailsWrapper(cached_tokens=cached) if cached else None
        response.usage = Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,  # type: ignore[attr-defined]
                               total_tokens=prompt_tokens + completion_tokens, prompt_tokens_details=details)
        response.model = options.name
        return response

    def _cached_prefix(self, options: Options, messages: list) -> int:
        """What OpenAI's prompt cache would serve: the longest prefix shared with an earlier prompt, counted
        in blocks of 128 tokens, once it reaches 1,024 tokens (a prompt's static part must come first)."""
        tokens = get_encoding(PROVIDER_ENCODING).encode_ordinary("\n".join(str(m.get("content", "")) for m in messages))
        seen = self._prompts.setdefault(options.key, [])
        shared = max((next((i for i, (a, b) in enumerate(zip(tokens, old, strict=False)) if a != b),
                           min(len(tokens), len(old))) for old in seen), default=0)
        seen.append(tokens)
        return shared // 128 * 128 if shared >= 1024 else 0

    def _reply(self, options: Options, model: str, messages: list) -> tuple[str, str]:
        """A scripted reply for this stage if there is one, else the computed answer (damaged as asked)."""
        call = CALL_STEP.get()
        scripted = current_script(options).next(*call)
        if scripted is not None:
            return scripted
        try:
            if _is_correction(messages):  # a follow-up asking to correct an unusable answer is answered well
                return answer(_without_corrections(messages), call), "stop"
            return self._damage(options, answer(messages, call))
        except UnknownCall as err:  # no retry helps: the run says so
            raise litellm.BadRequestError(str(err), llm_provider="fake", model=model) from None

    async def _held(self, options: Options) -> None:
        """With `hold`: past the first `hold_after` calls, wait while the hold file exists."""
        served = self._served.get(options.key, 0)
        self._served[options.key] = served + 1
        while served >= options.hold_after and Path(options.hold).exists():
            await asyncio.sleep(0.05)

    async def astreaming(self, model: str, messages: list, *args: Any, **kwargs: Any  # type: ignore[override]
                         ) -> AsyncIterator[GenericStreamingChunk]:
        """The same answer as acompletion, a word at a time (`piece_latency` apart; every other stream
        falls silent for `stall` seconds after its first word)."""
        options = Options.parse(model)
        response = await self.acompletion(model, messages, *args, **kwargs)
        text = str(response.choices[0].message.content)
        words = re.findall(r"\S+\s*", text) or [""]
        usage = response.usage  # type: ignore[attr-defined]
        STATS.streams += 1
        for i, word in enumerate(words):
            last = i == len(words) - 1
            if i and options.piece_latency:
                await asyncio.sleep(options.piece_latency)
            if i == 1 and options.stall and STATS.streams % 2:
                await asyncio.sleep(options.stall)
            yield GenericStreamingChunk(
                text=word, is_finished=last, finish_reason=str(response.choices[0].finish_reason) if last else "",
                index=0, tool_use=None,
                usage=ChatCompletionUsageBlock(prompt_tokens=usage.prompt_tokens,
                                               completion_tokens=usage.completion_tokens,
                                               total_tokens=usage.total_tokens) if last else None)

    # ------------------------------------------------------------ faults

    def forget_draws(self) -> None:
        self._prompts.clear()
        self._served.clear()

    async def _inject_fault(self, options: Options, model: str) -> None:
        found = fault(options)
        if found is None:
            return
        if found.status == -1:
            await asyncio.sleep(3600)  # the gateway's timeout fires first
        if found.status == 429:
            raise _rate_limited(model, found.retry_after)
        raise {400: litellm.BadRequestError, 401: litellm.AuthenticationError, 500: litellm.InternalServerError,
               0: litellm.APIConnectionError}[found.status](found.message, llm_provider="fake", model=model)

    def _damage(self, options: Options, text: str) -> tuple[str, str]:
        if options.malformed and draw(options) < options.malformed:
            return text[: len(text) // 3].replace("}", "").replace(COMPLETE, "") or "I cannot answer that.", "stop"
        if options.truncate and draw(options) < options.truncate:
            return text[: len(text) // 2], "length"
        if options.fenced and draw(options) < options.fenced and text.lstrip().startswith("{"):
            return f"Here is the answer you asked for:\n```json\n{text}\n```\nLet me know if you need more.", "stop"
        return text, "stop"


def _rate_limited(model: str, retry_after: float | None) -> Exception:
    request = httpx.Request("POST", "http://fake.invalid/v1/chat/completions")
    headers = {"retry-after": str(retry_after)} if retry_after is not None and retry_after >= 0 else {}
    response = httpx.Response(429, headers=headers, request=request)
    return litellm.RateLimitError("rate limited", llm_provider="fake", model=model, response=response)


def _without_corrections(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as it was before the unusable answer and the request to correct it."""
    while _is_correction(messages):
        messages = messages[:-2]
    return messages


def reset() -> None:
    """Forget what earlier calls did (statistics, fault generators, scripts): each test starts afresh."""
    STATS.reset()
    forget_draws()
    SCRIPTS.clear()
    SCRIPTS[""] = Script()
    for item in litellm.custom_provider_map:
        if item["provider"] == "fake" and isinstance(item["custom_handler"], FakeLLM):
            item["custom_handler"].forget_draws()


def register(models: Iterable[str] = ()) -> None:
    """Make `fake/...` model strings reach FakeLLM through LiteLLM (idempotent), with a nominal price in LiteLLM's price
    map: a gpt-4o-mini-like $0.15 / $0.60 per million tokens, so cost budgets and estimates can be tested
    offline (and because a model missing from the map, or priced at zero, costs LiteLLM slow lookups and
    diagnostics on every call)."""
    if not any(item["provider"] == "fake" for item in litellm.custom_provider_map):
        litellm.custom_provider_map.append({"provider": "fake", "custom_handler": FakeLLM()})
        custom_llm_setup()
    price = {"input_cost_per_token": FAKE_INPUT_PRICE, "output_cost_per_token": FAKE_OUTPUT_PRICE,
             "litellm_provider": "fake", "cache_creation_input_token_cost": 0.0,
             "cache_read_input_token_cost": FAKE_INPUT_PRICE / 2}  # OpenAI's discount for cached prompt tokens
    litellm.register_model({model: {**price, "mode": "embedding" if "embed" in model else "chat"}
                            for model in models if model not in litellm.model_cost})


def _is_correction(messages: list[dict[str, Any]]) -> bool:
    return len(messages) > 1 and "could not be used" in str(messages[-1].get("content", ""))


