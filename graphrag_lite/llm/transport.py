"""Sending a call: within the model's concurrency and rate limits and the budget, retried as its errors
allow, and recorded in the ledger (one record per logical call, summed over its attempts). The gateway's
chat and embedding calls go through one Transport."""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graphrag_lite.config import ModelConfig
from graphrag_lite.llm.calls import Answer, tokens_used
from graphrag_lite.llm.errors import LLMCallError, LLMConfigurationError
from graphrag_lite.llm.failures import (
    describe,
    fatal_reason,
    http_status,
    is_connection_failure,
    reached_provider,
    refused_content,
    retry_after,
    retryable,
    timed_out,
)
from graphrag_lite.llm.ledger import EARLY_WORK, BudgetExceeded, CallRecord, Ledger
from graphrag_lite.llm.limits import ModelLimiter
from graphrag_lite.llm.openai_http import OpenAIHTTP, speaks_openai
from graphrag_lite.llm.prices import listed_unit_prices, longest_answer, priced, unit_prices
from graphrag_lite.llm.providers import key_problem, load_litellm, no_key_choices, plugged, plugged_prices

LOG = logging.getLogger("graphrag_lite.llm")  # retries, in the run's log file (OUTPUT/logs/index.log)
UNREACHABLE_AFTER = 3  # connection failures before a model that never answered is declared unreachable
SAME_ERROR_STOPS_AFTER = 3  # identical non-retryable errors, before any answer, that stop the run


class BatchTooLarge(Exception):
    """The provider refused an embedding call for its number of texts or tokens: split it."""


class Transport:
    def __init__(self, models: dict[str, ModelConfig], ledger: Ledger, root: Path) -> None:
        self.models = models
        self.ledger = ledger
        self.http = OpenAIHTTP()  # for the models whose calls go straight to an OpenAI-compatible server
        self._root = root
        self._limiters: dict[tuple[str, int], ModelLimiter] = {}
        self._answered: set[str] = set()  # models that answered at least once in this run
        self._unreachable: dict[str, int] = {}  # connection failures of models that never answered
        self._early_errors: dict[str, list[str]] = {}  # errors of models that never answered
        self._checked: set[str] = set()  # model ids whose provider LiteLLM knows
        self._keyed: set[str] = set()  # model ids whose key looked usable before their first call
        self._unit_prices: dict[str, tuple[float, float, float] | None] = {}  # USD per prompt, completion, cached token
        self._unbounded_answers: set[str] = set()  # model strings warned of: answers the budget cannot bound

    async def send(self, model_id: str, model: ModelConfig, estimate: Callable[[], int],
                            call: Callable[[], Any], stage: str, times_itself: bool, completion: int | None = None
                            ) -> tuple[Any, int]:
        """`call()` within the model's limits and the budget, retried as its errors allow. It times out on its
        total time unless it `times_itself` (a chat call: a streamed one times out on silence). `estimate()`
        counts the prompt's tokens, only when a tokens-per-minute limit or a budget needs them before sending,
        or when an attempt fails."""
        if model_id not in self._keyed:  # before the first call is sent (a cached answer needs no key)
            if (problem := key_problem(model)) is not None:
                raise LLMConfigurationError(f"model '{model_id}' ({model.model}): {problem}; "
                                            f"{no_key_choices(self._root)}")
            self._keyed.add(model_id)
        limiter = self._limiter(model_id, model)
        counted = estimate() if self._counts_before_sending(model) else 0
        for attempt in range(model.max_retries + 1):
            level = await limiter.admit(counted)
            rate_limited = False
            used: int | None = None
            latency: float | None = None
            sent = time.monotonic()
            answered = False  # by the provider, with a response or an error: else the slot is given back uncounted
            try:
                reservation = await self._reserve(model, counted, completion)
                try:
                    response = await (call() if times_itself else asyncio.wait_for(call(), timeout=model.timeout))
                finally:
                    self.ledger.release(reservation)
                answered = True
                latency = time.monotonic() - sent
                self._answered.add(model_id)
                used = tokens_used(response)
                return response, attempt
            except (BudgetExceeded, BatchTooLarge):
                raise
            except Exception as err:  # classified below: retried, or raised with a clear message
                answered = True
                rate_limited = http_status(err) == 429
                if reached_provider(err):  # the provider read the prompt: it counts, even unanswered
                    self.record_failed_attempt(stage, model_id, model, estimate(), timed_out(err))
                delay = self._retry_delay(model_id, model, err, attempt)
                if attempt == model.max_retries:
                    LOG.warning("%s: model %s gave up after %d attempts: %s", stage, model_id, attempt + 1,
                                describe(err, model))
                    raise LLMCallError(f"model '{model_id}' failed {attempt + 1} times in stage {stage}: "
                                       f"{describe(err, model)}") from None
                LOG.info("%s: model %s attempt %d failed (%s); retrying in %.1fs", stage, model_id, attempt + 1,
                         describe(err, model), delay)
            finally:
                if answered:
                    limiter.done(counted, used, rate_limited, latency, level)
                else:  # the budget stopped it before it was sent, or it was cancelled in flight
                    limiter.concurrency.give_back()
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    @functools.cached_property
    def litellm(self) -> Any:
        """LiteLLM, imported (seconds) when a call first needs it: never when every model is served over HTTP."""
        return load_litellm(self.models.values())

    def _counts_before_sending(self, model: ModelConfig) -> bool:
        """Whether a call's prompt tokens are needed before it is sent: to take them from a tokens-per-minute
        limit, or to reserve the call's likely cost against a budget. Otherwise they are not counted at all
        when the provider reports its own count (counting is the largest CPU cost of a call here)."""
        return bool(model.tokens_per_minute) or self.ledger.max_cost_usd is not None or \
            self.ledger.max_tokens is not None

    async def _reserve(self, model: ModelConfig, estimate: int, completion: int | None) -> tuple[float, int]:
        """Reserve a call's worst-case cost before it is sent: its prompt and the longest answer it may get
        (`completion`: the call's max_tokens, else the model's longest answer in the price map), so the calls
        in flight can never take the run past the budget, however long their answers. Near the cap, a call
        waits for those in flight to be counted at their real cost before it goes, or the run stops."""
        budgeted = self.ledger.max_cost_usd is not None or self.ledger.max_tokens is not None
        completion_tokens = self._longest_answer(model, completion, estimate) if budgeted else 0  # nothing to hold
        cost = self.price(model, estimate, completion_tokens) or 0.0
        while True:
            reservation = self.ledger.reserve(cost, estimate + completion_tokens)
            if reservation is not None:
                return reservation
            await asyncio.sleep(0.05)

    def _longest_answer(self, model: ModelConfig, max_tokens: int | None, estimate: int) -> int:
        """prices.longest_answer; when neither max_tokens nor the price map bounds it, an answer as long as the
        prompt, with a warning (once) that the budget then holds only as far as the answers are no longer."""
        longest = longest_answer(model.model, max_tokens)
        if longest is not None:
            return longest
        if model.model not in self._unbounded_answers:
            self._unbounded_answers.add(model.model)
            LOG.warning("model %s: calls without a longest answer (max_tokens) and no figure in LiteLLM's price map: "
                        "the budget counts each answer as long as its prompt until it is answered, so the run may "
                        "pass budget.max_cost_usd or max_tokens by what longer answers cost; set the stage's "
                        "max_completion_tokens to make the budget hold", model.model)
        return estimate

    def price(self, model: ModelConfig, prompt_tokens: int, completion_tokens: int, cached: int = 0
               ) -> float | None:
        """USD from the model's per-token prices, looked up once per model: this runs before every call, and
        LiteLLM's look-up is slow for a model it does not know. `cached` prompt tokens (served from the
        provider's prompt cache) cost the model's cache-read price when LiteLLM's price map has one."""
        if model.model not in self._unit_prices:
            if speaks_openai(model):
                self._unit_prices[model.model] = listed_unit_prices(model.model)
            elif (offered := plugged_prices(model.model)) is not None:
                self._unit_prices[model.model] = offered
            else:
                self._unit_prices[model.model] = unit_prices(self.litellm, model.model)
        return priced(self._unit_prices[model.model], prompt_tokens, completion_tokens, cached)

    def record_failed_attempt(self, stage: str, model_id: str, model: ModelConfig, prompt_tokens: int,
                               billed: bool) -> None:
        """Its prompt tokens always count; its cost only when the provider may bill it (a call abandoned on
        time-out may have been answered; refused and failed requests are not billed)."""
        cost = (self.price(model, prompt_tokens, 0) or 0.0) if billed else 0.0
        self.ledger.add(CallRecord(stage=stage, model_id=model_id, kind="failed_attempt", prompt_tokens=prompt_tokens,
                                   completion_tokens=0, cost_usd=cost, latency_s=0.0, cache_hit=False, retries=0,
                                   parse_retries=0, ok=False, early=EARLY_WORK.get()))

    def _retry_delay(self, model_id: str, model: ModelConfig, err: Exception, attempt: int) -> float:
        """Seconds to wait before retrying `err`, or raise when retrying cannot help."""
        fatal = fatal_reason(err, model_id, model)
        if fatal:
            raise LLMConfigurationError(fatal) from None
        if is_connection_failure(err) and model_id not in self._answered:
            # a model never reached in this run, failing to connect again and again, is misconfigured or
            # offline: say so now instead of backing off for minutes on every call
            self._unreachable[model_id] = self._unreachable.get(model_id, 0) + 1
            if self._unreachable[model_id] >= UNREACHABLE_AFTER:
                where = f" at {model.api_base}" if model.api_base else ""
                raise LLMConfigurationError(
                    f"model '{model_id}' ({model.model}){where} cannot be reached ({describe(err, model)}); "
                    "check the network, `api_base` and the model name in settings.yaml") from None
        if not retryable(err):
            self._stop_if_always_failing(model_id, model, err)
            raise LLMCallError(f"model '{model_id}': {describe(err, model)}") from None
        asked = retry_after(err)
        if asked is not None:
            return min(asked, 600.0)
        ceiling = min(model.max_retry_wait, 2.0 ** attempt)
        return random.uniform(ceiling / 2, ceiling)  # jitter spreads retries that failed together

    def _stop_if_always_failing(self, model_id: str, model: ModelConfig, err: Exception) -> None:
        """A model that has never answered and fails its first calls for one reason no retry fixes (a bad
        request, an unknown model) would fail every call of the run: stop now with the provider's words."""
        if model_id in self._answered or refused_content(err):  # a filtered text says nothing about the model
            return
        errors = self._early_errors.setdefault(model_id, [])
        errors.append(describe(err, model))
        if len(errors) >= SAME_ERROR_STOPS_AFTER and len(set(errors[-SAME_ERROR_STOPS_AFTER:])) == 1:
            raise LLMConfigurationError(
                f"model '{model_id}' ({model.model}) failed its first {len(errors)} calls with the same error, which "
                f"retrying cannot fix: {errors[-1]}. Check `model` (a LiteLLM model string such as "
                "openai/gpt-4o-mini), `api_base` and `call_args` in settings.yaml") from None

    def model(self, model_id: str) -> ModelConfig:
        if model_id not in self.models:
            raise LLMConfigurationError(f"model id '{model_id}' is not defined under `models` in settings.yaml")
        model = self.models[model_id]
        if model_id not in self._checked and not speaks_openai(model) and plugged(model.model) is None:
            # LiteLLM knows its providers offline (a plug-in is known by its name)
            try:
                self.litellm.get_llm_provider(model.model, api_base=model.api_base)
            except Exception as err:
                raise LLMConfigurationError(fatal_reason(err, model_id, model) or
                                            f"model '{model_id}' ({model.model}): {describe(err, model)}") from None
            self._checked.add(model_id)
        return model

    def _limiter(self, model_id: str, model: ModelConfig) -> ModelLimiter:
        # asyncio primitives belong to one event loop; stages may each run their own loop.
        key = (model_id, id(asyncio.get_running_loop()))
        if key not in self._limiters:
            self._limiters[key] = ModelLimiter(model.concurrency, model.requests_per_minute, model.tokens_per_minute)
        return self._limiters[key]

    def limiter(self, model_id: str) -> ModelLimiter:
        """The limiter of a model in the running event loop (for tests and benchmarks)."""
        return self._limiter(model_id, self.model(model_id))

    def cost(self, response: Any) -> float | None:
        hidden = getattr(response, "_hidden_params", None) or {}
        if "response_cost" in hidden:  # LiteLLM priced it while logging the call (None: it has no price)
            return None if hidden["response_cost"] is None else float(hidden["response_cost"])
        try:
            return float(self.litellm.completion_cost(completion_response=response))
        except Exception:  # not in the price map (local and fake models)
            return None

    def record(self, stage: str, model_id: str, kind: str, answer: Answer, started: float | None,
                parse_retries: int, ok: bool) -> None:
        """One record per logical call, summed over its attempts; `started` None marks a cache hit."""
        latency = 0.0 if started is None else time.perf_counter() - started
        self.ledger.add(CallRecord(stage=stage, model_id=model_id, kind=kind, prompt_tokens=answer.prompt_tokens,
                                   completion_tokens=answer.completion_tokens, cost_usd=answer.cost_usd,
                                   latency_s=latency, cache_hit=started is None, retries=answer.retries,
                                   parse_retries=parse_retries, ok=ok,
                                   provider_cached_tokens=answer.provider_cached_tokens, early=EARLY_WORK.get()))

    def close(self) -> None:
        self.http.close()
