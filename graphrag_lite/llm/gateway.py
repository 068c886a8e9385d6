"""The one way the project calls a model: LiteLLM behind concurrency and rate limits, retries, a validated
cache, a cost ledger and a budget.

    gateway = Gateway(config)
    result = await gateway.chat("default_chat_model", messages, stage="extract_graph", parse=my_parser)
    vectors = await gateway.embed("default_embedding_model", texts, stage="embed_text")

A chat answer is returned (and cached) only after `parse` accepted it; an answer `parse` rejects is sent
back to the model once per `max_parse_retries` with the reason, then the call fails with LLMCallError,
which stages count and report. Problems no retry can fix (a wrong key, an unknown model, a prompt larger
than the context window) raise LLMConfigurationError and stop the run with the fix in the message.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import ipaddress
import logging
import random
import re
import shlex
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar
from urllib.parse import urlparse

from graphrag_lite.answer_parsing import ParseError
from graphrag_lite.config import EmbedTextConfig, GraphRagConfig, ModelConfig
from graphrag_lite.errors import GraphragLiteError
from graphrag_lite.large_imports import import_large
from graphrag_lite.llm.cache import AnswerCache, cache_key
from graphrag_lite.llm.ledger import EARLY_WORK, BudgetExceeded, CallRecord, Ledger
from graphrag_lite.llm.limits import ModelLimiter
from graphrag_lite.tokens import count_tokens, counting_encoding

if TYPE_CHECKING:
    from graphrag_lite.llm.batch import Batcher

T = TypeVar("T")
LOG = logging.getLogger("graphrag_lite.llm")  # retries, in the run's log file (OUTPUT/logs/index.log)
Messages = list[dict[str, str]]
UNREACHABLE_AFTER = 3  # connection failures before a model that never answered is declared unreachable
RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 529}
EMBEDDING_BATCH = (EmbedTextConfig.model_fields["batch_size"].default,  # texts and tokens per embedding call
                   EmbedTextConfig.model_fields["batch_max_tokens"].default)
SAME_ERROR_STOPS_AFTER = 3  # identical non-retryable errors, before any answer, that stop the run
LOCAL_PROVIDERS = {"ollama", "ollama_chat", "lm_studio", "llamafile", "hosted_vllm", "vllm", "xinference"}
CUT_OFF = "the answer was cut off at the length limit (max_tokens); give a complete, shorter answer"
CORRECTION = ("Your previous answer could not be used: {error}. Answer again, in exactly the format the "
              "first message asked for, with nothing before or after it.")


class LLMCallError(GraphragLiteError):
    """One call failed after its retries; the caller counts it and goes on. `partial` holds what could be
    used of an answer that was cut off (complete records before the cut), or None."""

    def __init__(self, message: str, partial: Any = None) -> None:
        super().__init__(message)
        self.partial = partial


def no_key_choices(root: Path) -> str:
    """What to do without a key, for the project in `root`."""
    where = shlex.quote(str(root))
    return (f"put the key in {root / '.env'} (GRAPHRAG_API_KEY=...) or the environment; or work without a model: "
            f"`graphrag-lite index --root {where} --method fast` builds an index with none, and "
            f"`graphrag-lite query local \"...\" --root {where} --no-model` answers with the ranked evidence")


def key_problem(model: ModelConfig) -> str | None:
    """Why the model's calls would fail for want of a key, found before any call: a placeholder such as
    `init`'s <your-api-key>, or no key at all where the provider needs one and no api_base names a server
    that may not. None when the key looks usable (or the provider needs none)."""
    if model.model.startswith("fake/"):  # the offline test provider takes any key
        return None
    if model.api_key is not None:
        value = model.api_key.get_secret_value()
        if value.strip() and set(value.strip()) == {"*"} and not is_local_model(model):  # a local server takes any
            return (f"the API key is hidden ({value!r}, as output/settings.effective.yaml writes a key the settings "
                    "file held): write the key, or the ${VAR} that holds it, in its place")
        if model.placeholder_key() and not (model.api_base and value.strip()):
            return f"the API key is the placeholder {value!r}" if value.strip() else "the API key is empty"
        return None
    if model.api_base:
        return None
    litellm = import_large("litellm")
    try:
        missing = litellm.validate_environment(model=model.model).get("missing_keys", [])
    except Exception:  # a provider LiteLLM cannot check offline: let the first call say
        return None
    keys = [k for k in missing if k.endswith("_API_KEY")]
    return f"no API key (LiteLLM looks for {', '.join(keys)})" if keys else None


class LLMConfigurationError(GraphragLiteError):
    """A call can never succeed as configured (authentication, unknown model, context window)."""

    exit_code = 2


# The stage and step of the call in progress, for providers that answer by stage (the fake's scripted
# replies); a context variable, so concurrent calls each see their own.
CALL_STEP: contextvars.ContextVar[tuple[str, str]] = contextvars.ContextVar("graphrag_lite_call_step",
                                                                            default=("", ""))


@dataclass
class ChatResult(Generic[T]):
    value: T
    text: str
    cached: bool
    stored: dict[str, Any] | None = None  # the cache entry it came from


@dataclass
class _Answer:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    retries: int
    finish_reason: str | None = None
    provider_cached_tokens: int = 0  # prompt tokens the provider served from its prompt cache (cheaper)

    def plus(self, other: _Answer) -> _Answer:
        """Totals over the attempts of one call; the text is the latest answer's."""
        priced = self.cost_usd is not None or other.cost_usd is not None
        cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0) if priced else None
        return _Answer(other.text, self.prompt_tokens + other.prompt_tokens,
                       self.completion_tokens + other.completion_tokens, cost, self.retries + other.retries,
                       other.finish_reason, self.provider_cached_tokens + other.provider_cached_tokens)


class Gateway:
    def __init__(self, config: GraphRagConfig, use_cache: bool = True, prior_spend: tuple[float, int] = (0.0, 0),
                 batch: bool = False) -> None:
        """`batch`: first attempts of chat calls go in provider batches (an index run with --batch; a query
        never waits for a batch)."""
        self.models = config.models
        self.cache = AnswerCache(config.cache.base_dir) if use_cache and config.cache.enabled else None
        self.ledger = Ledger(config.budget.max_cost_usd, config.budget.max_tokens, prior_spend)
        self._limiters: dict[tuple[str, int], ModelLimiter] = {}
        self._answered: set[str] = set()  # models that answered at least once in this run
        self._supported: dict[str, set[str]] = {}  # OpenAI parameters LiteLLM supports, per model string
        self._unreachable: dict[str, int] = {}  # connection failures of models that never answered
        self._early_errors: dict[str, list[str]] = {}  # errors of models that never answered
        self._checked: set[str] = set()  # model ids whose provider LiteLLM knows
        self._keyed: set[str] = set()  # model ids whose key looked usable before their first call
        # model id -> the size of the vectors it returned in this run (its cached vectors may be a former model's)
        self.returned_dimension: dict[str, int] = {}
        self._root = config.root_dir
        self._unit_prices: dict[str, tuple[float, float, float] | None] = {}  # USD per prompt, completion, cached token
        self._embedding_caps: dict[str, int] = {}  # texts per call a model's provider accepted, after refusing more
        self._litellm = load_litellm(self.models.values())
        self.batcher: Batcher | None = None
        if batch:
            from graphrag_lite.llm.batch import Batcher

            self.batcher = Batcher(config, self.ledger, self._litellm, self._connection)

    # ------------------------------------------------------------ chat

    def cached_answer(self, model_id: str, messages: Messages, json_mode: bool = False,
                      max_tokens: int | None = None) -> str | None:
        """The answer the cache holds for this call, if any (for estimates: such a call costs nothing)."""
        model = self._model(model_id)
        cached = self._cached_answer(self._key("chat", model, messages, self._call_args(model, json_mode, max_tokens)),
                                     _any_text)
        return None if cached is None else cached.text

    async def chat(self, model_id: str, messages: Messages, *, stage: str, parse: Callable[[str], T] | None = None,
                   json_mode: bool = False, max_tokens: int | None = None, step: str = "",
                   resent_prefix: bool = False) -> ChatResult[T]:
        """A parsed answer. `max_tokens` caps the answer's length; an answer cut off there is handled like
        any other that cannot be used (the parser's partial result survives in LLMCallError.partial).
        `resent_prefix`: later calls send this call's first message again (gleaning), so a provider that
        caches only marked prefixes (Anthropic; writing costs 1.25x, reading 0.1x) is asked to cache it."""
        model = self._model(model_id)
        args = self._call_args(model, json_mode, max_tokens)
        parser: Callable[[str], Any] = parse or _any_text
        key = self._key("chat", model, messages, args)
        CALL_STEP.set((stage, step))
        cached = self._cached_answer(key, parser)
        if cached is not None:
            self._record(stage, model_id, "chat", cached_usage(cached.stored), None, 0, ok=True)
            return cached
        conversation = list(messages)
        started = time.perf_counter()
        spent = _Answer("", 0, 0, None, 0)
        problems: list[str] = []
        partial: Any = None
        for parse_attempt in range(model.max_parse_retries + 1):
            try:
                answer = await self._send_chat(model_id, model, conversation, args, stage,
                                               key if parse_attempt == 0 else None, resent_prefix)
            except LLMCallError as err:
                self._record(stage, model_id, "chat", spent, started, parse_attempt, ok=False)
                raise LLMCallError(str(err), partial) from None
            spent = spent.plus(answer)
            try:
                value = _parse(parser, answer)
            except ParseError as err:
                partial = err.partial if err.partial is not None else partial
                problems.append(str(err))
                repeated = problems[-2:-1] == problems[-1:]  # the same failure twice: asking again will not help
                if err.soft and (repeated or parse_attempt == model.max_parse_retries):
                    value = err.partial  # a wish the model does not meet: its answer stands
                elif repeated:
                    break
                else:
                    conversation += [{"role": "assistant", "content": answer.text},
                                     {"role": "user", "content": CORRECTION.format(error=err)}]
                    continue
            self._record(stage, model_id, "chat", spent, started, parse_attempt, ok=True)
            if self.cache is not None:
                self.cache.put(key, "chat", stored_answer(answer.text, spent))
            return ChatResult(value=value, text=answer.text, cached=False)
        self._record(stage, model_id, "chat", spent, started, len(problems) - 1, ok=False)
        hint = f"; if its answers are long, raise {stage}.max_completion_tokens (now {max_tokens})" \
            if problems[-1].startswith(CUT_OFF) and max_tokens else ""
        raise LLMCallError(f"model '{model_id}' gave no usable answer in {len(problems)} tries; the last: "
                           f"{problems[-1]}{hint}", partial)

    def _cached_answer(self, key: str, parser: Callable[[str], Any]) -> ChatResult[Any] | None:
        cached = self.cache.get(key) if self.cache is not None else None
        if cached is None:
            return None
        try:
            value = parser(cached["text"])
        except Exception as err:
            if not (isinstance(err, ParseError) and err.soft):  # stored by an older parser that accepted more
                assert self.cache is not None
                self.cache.delete(key)
                return None
            value = err.partial  # a soft wish the model did not meet when it answered: its answer stood
        return ChatResult(value=value, text=cached["text"], cached=True, stored=cached)

    async def _send_chat(self, model_id: str, model: ModelConfig, messages: Messages, args: dict[str, Any],
                         stage: str, batch_key: str | None = None, resent_prefix: bool = False) -> _Answer:
        """An answer: from a provider batch for a first attempt in batch mode (`batch_key`: the call's cache
        key) when the batch answers it, else online."""
        if batch_key is not None and self.batcher is not None:
            batched = await self.batcher.answer(model_id, model, messages, args, batch_key, stage)
            if batched is not None:
                return batched
        estimate = prompt_estimate(messages)
        streamed = self._streams(model)
        sent_args = {**args, **self._cache_marker(model)} if resent_prefix else args  # not part of the cache key

        async def call() -> _Answer:
            if streamed:
                return await self._read_stream(model, messages, sent_args, estimate)
            response = await self._litellm.acompletion(model=model.model, messages=messages,
                                                       **self._connection(model), **sent_args)
            usage = getattr(response, "usage", None)
            choice = response.choices[0]
            return _Answer(choice.message.content or "", int(getattr(usage, "prompt_tokens", 0) or estimate()),
                           int(getattr(usage, "completion_tokens", 0) or 0), self._cost(response), 0,
                           getattr(choice, "finish_reason", None), provider_cached_tokens(usage))

        answer, retries = await self._with_retries(model_id, model, estimate, call, stage, streamed,
                                                   completion=args.get("max_tokens"))
        answer.retries = retries
        return answer

    async def _read_stream(self, model: ModelConfig, messages: Messages, args: dict[str, Any],
                           estimate: Callable[[], int]) -> _Answer:
        """A streamed answer, abandoned (TimeoutError, retried) when no piece comes for `timeout` seconds:
        a slow local model may take minutes for a long answer, but a silent one has stalled."""
        response = await asyncio.wait_for(self._litellm.acompletion(
            model=model.model, messages=messages, stream=True, **self._connection(model), **args), model.timeout)
        pieces: list[str] = []
        usage: Any = None
        finish: str | None = None
        chunks = response.__aiter__()
        while True:
            try:
                chunk = await asyncio.wait_for(chunks.__anext__(), model.timeout)
            except StopAsyncIteration:
                break
            usage = getattr(chunk, "usage", None) or usage
            if chunk.choices:
                pieces.append(chunk.choices[0].delta.content or "")
                finish = chunk.choices[0].finish_reason or finish
        return self._streamed(model, "".join(pieces), usage, estimate, 0, finish)

    def _streamed(self, model: ModelConfig, text: str, usage: Any, estimate: Callable[[], int], retries: int,
                  finish: str | None = None) -> _Answer:
        """A streamed answer's accounting: the usage the provider sent, or counts of what arrived."""
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or estimate())
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or count_tokens(text))
        cached = provider_cached_tokens(usage)
        return _Answer(text, prompt_tokens, completion_tokens,
                       self._price(model, prompt_tokens, completion_tokens, cached), retries, finish, cached)

    async def stream(self, model_id: str, messages: Messages, *, stage: str) -> AsyncIterator[str]:
        """An answer as it is generated. A cached answer comes at once; a new one is cached once complete and
        non-empty. A connection that fails before the first piece is retried; one that fails mid-answer is
        not (the caller has shown part of it) and raises LLMCallError."""
        model = self._model(model_id)
        args = self._call_args(model, json_mode=False)
        key = self._key("chat", model, messages, args)
        CALL_STEP.set((stage, "answer"))
        cached = self.cache.get(key) if self.cache is not None else None
        if cached is not None:
            self._record(stage, model_id, "chat", cached_usage(cached), None, 0, ok=True)
            yield cached["text"]
            return
        estimate = prompt_estimate(messages)
        started = time.perf_counter()

        async def call() -> Any:
            return await self._litellm.acompletion(model=model.model, messages=messages, stream=True,
                                                   **self._connection(model), **args)

        response, retries = await self._with_retries(model_id, model, estimate, call, stage, False)
        pieces: list[str] = []
        usage: Any = None
        try:
            async for chunk in response:
                usage = getattr(chunk, "usage", None) or usage
                piece = chunk.choices[0].delta.content if chunk.choices else None
                if piece:
                    pieces.append(piece)
                    yield piece
        except Exception as err:  # the stream broke: what was shown cannot be taken back
            self._record(stage, model_id, "chat", _Answer("", estimate(), 0, None, retries), started, 0, ok=False)
            raise LLMCallError(f"model '{model_id}' stopped in the middle of its answer: {_describe(err, model)}"
                               ) from None
        text = "".join(pieces)
        spent = self._streamed(model, text, usage, estimate, retries)
        self._record(stage, model_id, "chat", spent, started, 0, ok=bool(text.strip()))
        if text.strip() and self.cache is not None:
            self.cache.put(key, "chat", stored_answer(text, spent))

    # ------------------------------------------------------------ embeddings

    async def embed(self, model_id: str, texts: Sequence[str], *, stage: str, batch_size: int = EMBEDDING_BATCH[0],
                    batch_max_tokens: int = EMBEDDING_BATCH[1], dimension: int | None = None) -> list[list[float]]:
        """Vectors for `texts`, in order. Cached texts are not sent; the rest go in batches bounded by count
        and by tokens, concurrently within the model's limits. A cached vector of another dimension than
        `dimension` (or than the vectors the model returns now) was made by another model: it is replaced."""
        model = self._model(model_id)
        CALL_STEP.set((stage, "embed"))
        keys, vectors = self._cached_vectors(model, texts, dimension)
        hits = [texts[i] for i, v in enumerate(vectors) if v is not None]
        if hits:  # free now; what they cost when first embedded is counted for "without the cache" figures
            tokens = sum(count_tokens(t) for t in hits)
            self._record(stage, model_id, "embedding", _Answer("", tokens, 0, self._price(model, tokens, 0), 0), None,
                         0, ok=True)
        fresh = await self._embed_missing(model_id, model, texts, vectors, keys, stage, batch_size, batch_max_tokens)
        stale = [i for i, v in enumerate(vectors) if v is not None and fresh and len(v) != fresh]
        if stale:  # cached by a model of another dimension behind the same name
            for i in stale:
                vectors[i] = None
            await self._embed_missing(model_id, model, texts, vectors, keys, stage, batch_size, batch_max_tokens)
        return [v for v in vectors if v is not None]

    def embedding_estimate(self, model_id: str, texts: Sequence[str], batch_size: int = EMBEDDING_BATCH[0],
                           batch_max_tokens: int = EMBEDDING_BATCH[1], dimension: int | None = None
                           ) -> tuple[int, int, int]:
        """For a dry run: the calls, texts and tokens `embed` would send for `texts` (cached vectors of
        `dimension`, when it is known, are free)."""
        _, vectors = self._cached_vectors(self._model(model_id), texts, dimension)
        missing = [t for t, v in zip(texts, vectors, strict=True) if v is None]
        batches = _batches(missing, batch_size, batch_max_tokens)
        return len(batches), len(missing), sum(tokens for _, tokens in batches)

    def _cached_vectors(self, model: ModelConfig, texts: Sequence[str], dimension: int | None
                        ) -> tuple[list[str], list[list[float] | None]]:
        """Each text's cache key, and its cached vector (None when there is none, or when it has another
        dimension than `dimension`)."""
        args = dict(model.call_args)
        keys = [self._key("embedding", model, text, args) for text in texts]
        vectors = [self.cache.get(k) if self.cache is not None else None for k in keys]
        return keys, [v if v is not None and (dimension is None or len(v) == dimension) else None for v in vectors]

    async def _embed_missing(self, model_id: str, model: ModelConfig, texts: Sequence[str],
                             vectors: list[list[float] | None], keys: list[str], stage: str, batch_size: int,
                             batch_max_tokens: int) -> int | None:
        """Fill the missing vectors in place; returns the dimension of the new vectors (None: none sent)."""
        missing = [i for i, v in enumerate(vectors) if v is None]
        args = dict(model.call_args)
        dimensions: set[int] = set()

        async def run(batch: list[int], estimate: int) -> None:
            cap = self._embedding_caps.get(model_id, len(batch))
            if len(batch) > cap:  # the provider refused a batch this size before: send it in smaller ones
                await gather_all(run(part, 0) for part in _parts(batch, cap))
                return
            items = [texts[missing[i]] for i in batch]
            try:
                response = await self._embedding_call(model_id, model, items, args, stage, estimate)
            except _BatchTooLarge:
                self._embedding_caps[model_id] = min(self._embedding_caps.get(model_id, len(batch)), len(batch) // 2)
                LOG.info("%s: model %s refused %d texts in one call; sending at most %d", stage, model_id,
                         len(batch), self._embedding_caps[model_id])
                await run(batch, 0)
                return
            answered = []
            for position, item in zip(batch, response.data, strict=True):
                vector = list(item["embedding"] if isinstance(item, dict) else item.embedding)
                vectors[missing[position]] = vector
                dimensions.add(len(vector))
                answered.append((keys[missing[position]], vector))
            if self.cache is not None:
                self.cache.put_many("embedding", answered)

        batches = _batches([texts[i] for i in missing], batch_size, batch_max_tokens)
        await gather_all(run(batch, tokens) for batch, tokens in batches)
        if not dimensions:
            return None
        self.returned_dimension[model_id] = max(dimensions)
        return self.returned_dimension[model_id]

    async def _embedding_call(self, model_id: str, model: ModelConfig, items: list[str], args: dict[str, Any],
                              stage: str, estimate: int) -> Any:
        """The response of one embedding call, recorded; raises _BatchTooLarge when the provider refuses this
        many texts or tokens in one call (providers' limits differ: 2,048 texts and 300k tokens at OpenAI, 96
        texts at Cohere, 32 by default for a text-embeddings-inference server), so the caller can split."""
        started = time.perf_counter()

        async def call() -> Any:
            try:
                return await self._litellm.aembedding(model=model.model, input=items, **self._connection(model), **args)
            except Exception as err:
                if len(items) > 1 and _refuses_size(err):
                    raise _BatchTooLarge(str(err)) from None
                raise

        def counted() -> int:
            return estimate or sum(count_tokens(t) for t in items)

        try:
            response, retries = await self._with_retries(model_id, model, counted, call, stage, False, 0)
        except _BatchTooLarge:
            self._record_failed_attempt(stage, model_id, model, 0, billed=False)
            raise
        except LLMCallError:
            self._record(stage, model_id, "embedding", _Answer("", 0, 0, None, 0), started, 0, ok=False)
            raise
        usage = getattr(response, "usage", None)
        tokens = int(getattr(usage, "prompt_tokens", 0) or counted())
        self._record(stage, model_id, "embedding", _Answer("", tokens, 0, self._cost(response), retries), started,
                     0, ok=True)
        return response

    # ------------------------------------------------------------ transport

    async def _with_retries(self, model_id: str, model: ModelConfig, estimate: Callable[[], int],
                            call: Callable[[], Any], stage: str, streamed: bool, completion: int | None = None
                            ) -> tuple[Any, int]:
        """`call()` within the model's limits and the budget, retried as its errors allow. A streamed call
        times out on silence (inside `call`), any other on its total time. `estimate()` counts the prompt's
        tokens, only when a tokens-per-minute limit or a budget needs them before sending, or when an attempt
        fails."""
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
                    response = await (call() if streamed else asyncio.wait_for(call(), timeout=model.timeout))
                finally:
                    self.ledger.release(reservation)
                answered = True
                latency = time.monotonic() - sent
                self._answered.add(model_id)
                used = _tokens_used(response)
                return response, attempt
            except (BudgetExceeded, _BatchTooLarge):
                raise
            except Exception as err:  # classified below: retried, or raised with a clear message
                answered = True
                rate_limited = _status(err) == 429
                if _reached_provider(err):  # the provider read the prompt: it counts, even unanswered
                    self._record_failed_attempt(stage, model_id, model, estimate(), _timed_out(err))
                delay = self._retry_delay(model_id, model, err, attempt)
                if attempt == model.max_retries:
                    LOG.warning("%s: model %s gave up after %d attempts: %s", stage, model_id, attempt + 1,
                                _describe(err, model))
                    raise LLMCallError(f"model '{model_id}' failed {attempt + 1} times in stage {stage}: "
                                       f"{_describe(err, model)}") from None
                LOG.info("%s: model %s attempt %d failed (%s); retrying in %.1fs", stage, model_id, attempt + 1,
                         _describe(err, model), delay)
            finally:
                if answered:
                    limiter.done(counted, used, rate_limited, latency, level)
                else:  # the budget stopped it before it was sent, or it was cancelled in flight
                    limiter.concurrency.give_back()
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    def _counts_before_sending(self, model: ModelConfig) -> bool:
        """Whether a call's prompt tokens are needed before it is sent: to take them from a tokens-per-minute
        limit, or to reserve the call's likely cost against a budget. Otherwise they are not counted at all
        when the provider reports its own count (counting is the largest CPU cost of a call here)."""
        return bool(model.tokens_per_minute) or self.ledger.max_cost_usd is not None or \
            self.ledger.max_tokens is not None

    async def _reserve(self, model: ModelConfig, estimate: int, completion: int | None) -> tuple[float, int]:
        """Reserve a call's likely cost before it is sent (an answer as long as its prompt, at most
        max_tokens), so calls that waited for a slot cannot all go out once the budget is spent. Near the
        cap, a call waits for those in flight to be counted before it goes, or the run stops."""
        completion_tokens = estimate if completion is None else min(completion, estimate)
        cost = self._price(model, estimate, completion_tokens) or 0.0
        while True:
            reservation = self.ledger.reserve(cost, estimate + completion_tokens)
            if reservation is not None:
                return reservation
            await asyncio.sleep(0.05)

    def _price(self, model: ModelConfig, prompt_tokens: int, completion_tokens: int, cached: int = 0
               ) -> float | None:
        """USD from the model's per-token prices, looked up once per model: this runs before every call, and
        LiteLLM's look-up is slow for a model it does not know. `cached` prompt tokens (served from the
        provider's prompt cache) cost the model's cache-read price when LiteLLM's price map has one."""
        if model.model not in self._unit_prices:
            self._unit_prices[model.model] = unit_prices(self._litellm, model.model)
        return priced(self._unit_prices[model.model], prompt_tokens, completion_tokens, cached)

    def _record_failed_attempt(self, stage: str, model_id: str, model: ModelConfig, prompt_tokens: int,
                               billed: bool) -> None:
        """Its prompt tokens always count; its cost only when the provider may bill it (a call abandoned on
        time-out may have been answered; refused and failed requests are not billed)."""
        cost = (self._price(model, prompt_tokens, 0) or 0.0) if billed else 0.0
        self.ledger.add(CallRecord(stage=stage, model_id=model_id, kind="failed_attempt", prompt_tokens=prompt_tokens,
                                   completion_tokens=0, cost_usd=cost, latency_s=0.0, cache_hit=False, retries=0,
                                   parse_retries=0, ok=False, early=EARLY_WORK.get()))

    def _retry_delay(self, model_id: str, model: ModelConfig, err: Exception, attempt: int) -> float:
        """Seconds to wait before retrying `err`, or raise when retrying cannot help."""
        fatal = _fatal_reason(err, model_id, model)
        if fatal:
            raise LLMConfigurationError(fatal) from None
        if _is_connection_failure(err) and model_id not in self._answered:
            # a model never reached in this run, failing to connect again and again, is misconfigured or
            # offline: say so now instead of backing off for minutes on every call
            self._unreachable[model_id] = self._unreachable.get(model_id, 0) + 1
            if self._unreachable[model_id] >= UNREACHABLE_AFTER:
                where = f" at {model.api_base}" if model.api_base else ""
                raise LLMConfigurationError(
                    f"model '{model_id}' ({model.model}){where} cannot be reached ({_describe(err, model)}); "
                    "check the network, `api_base` and the model name in settings.yaml") from None
        if not _retryable(err):
            self._stop_if_always_failing(model_id, model, err)
            raise LLMCallError(f"model '{model_id}': {_describe(err, model)}") from None
        retry_after = _retry_after(err)
        if retry_after is not None:
            return min(retry_after, 600.0)
        ceiling = min(model.max_retry_wait, 2.0 ** attempt)
        return random.uniform(ceiling / 2, ceiling)  # jitter spreads retries that failed together

    def _stop_if_always_failing(self, model_id: str, model: ModelConfig, err: Exception) -> None:
        """A model that has never answered and fails its first calls for one reason no retry fixes (a bad
        request, an unknown model) would fail every call of the run: stop now with the provider's words."""
        if model_id in self._answered or _refused_content(err):  # a filtered text says nothing about the model
            return
        errors = self._early_errors.setdefault(model_id, [])
        errors.append(_describe(err, model))
        if len(errors) >= SAME_ERROR_STOPS_AFTER and len(set(errors[-SAME_ERROR_STOPS_AFTER:])) == 1:
            raise LLMConfigurationError(
                f"model '{model_id}' ({model.model}) failed its first {len(errors)} calls with the same error, which "
                f"retrying cannot fix: {errors[-1]}. Check `model` (a LiteLLM model string such as "
                "openai/gpt-4o-mini), `api_base` and `call_args` in settings.yaml") from None

    # ------------------------------------------------------------ helpers

    def _model(self, model_id: str) -> ModelConfig:
        if model_id not in self.models:
            raise LLMConfigurationError(f"model id '{model_id}' is not defined under `models` in settings.yaml")
        model = self.models[model_id]
        if model_id not in self._checked:  # before the first call: LiteLLM knows providers offline
            try:
                self._litellm.get_llm_provider(model.model, api_base=model.api_base)
            except Exception as err:
                raise LLMConfigurationError(_fatal_reason(err, model_id, model) or
                                            f"model '{model_id}' ({model.model}): {_describe(err, model)}") from None
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
        return self._limiter(model_id, self._model(model_id))

    def _call_args(self, model: ModelConfig, json_mode: bool, max_tokens: int | None = None) -> dict[str, Any]:
        args = dict(model.call_args)
        if json_mode and self._supports(model, "response_format"):
            args.setdefault("response_format", {"type": "json_object"})
        if max_tokens is not None:  # a stage's own cap wins over the model's default
            args["max_tokens"] = max_tokens
        return args

    def marks_prompt_cache(self, model_id: str) -> bool:
        return marks_prompt_cache(self._model(model_id).model)

    def supports_json(self, model_id: str) -> bool:
        """Whether LiteLLM says the model takes `response_format` (structured JSON output)."""
        return self._supports(self._model(model_id), "response_format")

    def _key(self, kind: str, model: ModelConfig, payload: Any, args: dict[str, Any]) -> str:
        """The cache key: everything that changes the answer (model, endpoint, version, call arguments),
        never the API key."""
        return cache_key(kind, model.model, payload, args, endpoint=f"{model.api_base or ''}|{model.api_version or ''}")

    @staticmethod
    def _streams(model: ModelConfig) -> bool:
        """Stream answers (and time out on silence, not on total time) for local servers, whose long answers
        take minutes; hosted APIs answer fast and streaming costs CPU per piece."""
        if model.stream != "auto":
            return bool(model.stream)
        return is_local_model(model)

    def _supports(self, model: ModelConfig, param: str) -> bool:
        """Asked once per model string: it is on the path of every JSON-mode call."""
        if model.model not in self._supported and model.model.startswith("fake/"):
            from graphrag_lite.llm.fake import supported_params

            self._supported[model.model] = supported_params(model.model)
        if model.model not in self._supported:
            try:
                self._supported[model.model] = set(self._litellm.get_supported_openai_params(model=model.model) or [])
            except Exception:  # litellm does not know the model: send only what was configured
                self._supported[model.model] = set()
        return param in self._supported[model.model]

    @staticmethod
    def _connection(model: ModelConfig) -> dict[str, Any]:
        connection: dict[str, Any] = {"num_retries": 0}  # retries are ours, with our limits and ledger
        if model.api_key is not None:
            connection["api_key"] = model.api_key.get_secret_value()
        if model.api_base:
            connection["api_base"] = model.api_base
        if model.api_version:
            connection["api_version"] = model.api_version
        return connection

    @staticmethod
    def _cache_marker(model: ModelConfig) -> dict[str, Any]:
        """LiteLLM's cache-control marker on the first message, for the models that need one."""
        return {"cache_control_injection_points": ANTHROPIC_CACHE_POINTS} if marks_prompt_cache(model.model) else {}

    def _cost(self, response: Any) -> float | None:
        hidden = getattr(response, "_hidden_params", None) or {}
        if "response_cost" in hidden:  # LiteLLM priced it while logging the call (None: it has no price)
            return None if hidden["response_cost"] is None else float(hidden["response_cost"])
        try:
            return float(self._litellm.completion_cost(completion_response=response))
        except Exception:  # not in the price map (local and fake models)
            return None

    def _record(self, stage: str, model_id: str, kind: str, answer: _Answer, started: float | None,
                parse_retries: int, ok: bool) -> None:
        """One record per logical call, summed over its attempts; `started` None marks a cache hit."""
        latency = 0.0 if started is None else time.perf_counter() - started
        self.ledger.add(CallRecord(stage=stage, model_id=model_id, kind=kind, prompt_tokens=answer.prompt_tokens,
                                   completion_tokens=answer.completion_tokens, cost_usd=answer.cost_usd,
                                   latency_s=latency, cache_hit=started is None, retries=answer.retries,
                                   parse_retries=parse_retries, ok=ok,
                                   provider_cached_tokens=answer.provider_cached_tokens, early=EARLY_WORK.get()))

    def close(self) -> None:
        if self.batcher is not None:
            self.batcher.close()
        if self.cache is not None:
            self.cache.close()


def stored_answer(text: str, spent: _Answer) -> dict[str, Any]:
    """A cache entry: the answer, and what it cost to get (so a cache hit can say what it saved)."""
    return {"text": text, "usage": [spent.prompt_tokens, spent.completion_tokens, spent.cost_usd]}


# Anthropic caches a prompt prefix only up to a block marked cache_control. The first message of an
# extraction holds the instructions and the text, and its gleanings send it again: marked, it is read from
# the cache at a tenth of the price (and written at 1.25x once, so only calls with follow-ups are marked).
ANTHROPIC_CACHE_POINTS = [{"location": "message", "index": 0}]


@functools.lru_cache(maxsize=64)
def marks_prompt_cache(model: str) -> bool:
    """Whether the model wants an explicit cache marker (Claude on Anthropic, Bedrock, Vertex AI), by
    LiteLLM's model map; other providers cache prefixes on their own."""
    if model.startswith("fake/"):
        return False
    try:
        from litellm import get_llm_provider
        from litellm.llms.anthropic.common_utils import supports_anthropic_cache_control

        name, provider, *_ = get_llm_provider(model=model)
    except Exception:  # an older LiteLLM, or a model it cannot route: no marker, no harm
        return False
    return bool(supports_anthropic_cache_control(name, provider))


def provider_cached_tokens(usage: Any) -> int:
    """The prompt tokens a provider served from its prompt cache, as LiteLLM reports them: OpenAI's (and
    DeepSeek's, Gemini's) `prompt_tokens_details.cached_tokens`, Anthropic's `cache_read_input_tokens`."""
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) or getattr(usage, "cache_read_input_tokens", None) or 0
    return int(cached) if isinstance(cached, int | float) else 0


def cached_usage(stored: dict[str, Any] | None) -> _Answer:
    """What a cached answer cost when it was first asked (unknown for entries written before this was kept)."""
    prompt, completion, cost = (stored or {}).get("usage") or (0, 0, None)
    return _Answer("", int(prompt), int(completion), cost, 0)


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


def _parse(parser: Callable[[str], Any], answer: _Answer) -> Any:
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


def _tokens_used(response: Any) -> int | None:
    if isinstance(response, _Answer):
        return response.prompt_tokens + response.completion_tokens
    usage = getattr(response, "usage", None)
    return int(getattr(usage, "total_tokens", 0) or 0) or None


def _any_text(text: str) -> str:
    return text


def is_local_model(model: ModelConfig) -> bool:
    """A model served on this machine or the local network (Ollama, llama.cpp, vLLM, LM Studio, ...)."""
    if model.model.split("/", 1)[0] in LOCAL_PROVIDERS:
        return True
    host = urlparse(model.api_base or "").hostname or ""
    if host in ("localhost", "host.docker.internal") or host.endswith(".local"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_unspecified


def model_price(litellm: Any, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """USD for these tokens from LiteLLM's offline price map; None when the model is not in it."""
    try:
        prompt_cost, completion_cost = litellm.cost_per_token(model=model, prompt_tokens=prompt_tokens,
                                                              completion_tokens=completion_tokens)
    except Exception:  # not in the price map (local models)
        return None
    return float(prompt_cost + completion_cost)


def unit_prices(litellm: Any, model: str) -> tuple[float, float, float] | None:
    """USD per prompt, completion and cached prompt token from LiteLLM's offline price map (the base tier of
    tiered prices; a cached token at the prompt price when the map has no cache-read price); None when the
    model is not in it."""
    per_prompt = model_price(litellm, model, 1000, 0)
    per_completion = model_price(litellm, model, 0, 1000)
    if per_prompt is None or per_completion is None:
        return None
    read = (litellm.model_cost.get(model) or {}).get("cache_read_input_token_cost")
    return per_prompt / 1000, per_completion / 1000, per_prompt / 1000 if read is None else float(read)


def priced(prices: tuple[float, float, float] | None, prompt_tokens: int, completion_tokens: int,
           cached: int = 0) -> float | None:
    """USD for these tokens at `prices` (unit_prices, or batch prices); None without prices."""
    if prices is None:
        return None
    return (prompt_tokens - cached) * prices[0] + completion_tokens * prices[1] + cached * prices[2]


def load_litellm(models: Any) -> Any:
    litellm: Any = import_large("litellm")  # on first use: it takes seconds, and model-free pipelines never need it

    litellm.suppress_debug_info = True
    litellm.drop_params = True  # a parameter a provider does not take is dropped, not an error
    fakes = [m.model for m in models if m.model.startswith("fake/")]
    if fakes:
        from graphrag_lite.llm.fake import register_fake_provider

        register_fake_provider(fakes)
    return litellm


def _batches(texts: list[str], size: int, max_tokens: int) -> list[tuple[list[int], int]]:
    """Batches of at most `size` texts and `max_tokens` tokens: the texts' positions and their tokens."""
    batches: list[tuple[list[int], int]] = []
    current: list[int] = []
    tokens = 0
    for index, text in enumerate(texts):
        n = count_tokens(text)
        if current and (len(current) >= size or tokens + n > max_tokens):
            batches.append((current, tokens))
            current, tokens = [], 0
        current.append(index)
        tokens += n
    if current:
        batches.append((current, tokens))
    return batches


def _parts(batch: list[int], size: int) -> list[list[int]]:
    return [batch[start:start + size] for start in range(0, len(batch), size)]


class _BatchTooLarge(Exception):
    """The provider refused an embedding call for its number of texts or tokens: split it."""


_SIZE_REFUSAL = re.compile(r"too (?:large|long|many)|batch size|maximum|max\b.{0,40}\b(?:tokens|inputs|texts|entries|"
                           r"items|batch)|exceed|context length|\$\.input", re.IGNORECASE)
# a server error says more than "exceeded" (a time-out does) before a batch is halved for the rest of the run
_SERVER_SIZE_REFUSAL = re.compile(r"too (?:large|long|many)|batch size", re.IGNORECASE)


def _refuses_size(err: Exception) -> bool:
    """A provider's refusal of a request's size (HTTP 400, 413 or 422, or a local server's 500, saying so),
    as opposed to a failure that splitting the request would not fix."""
    status = _status(err)
    if status == 413 or type(err).__name__ == "ContextWindowExceededError":
        return True
    if status == 500:
        return bool(_SERVER_SIZE_REFUSAL.search(str(err)))
    return status in (400, 422) and bool(_SIZE_REFUSAL.search(str(err)))


def _status(err: Exception) -> int | None:
    status = getattr(err, "status_code", None)
    return int(status) if isinstance(status, int) else None


def _retryable(err: Exception) -> bool:
    if isinstance(err, (asyncio.TimeoutError, TimeoutError, ConnectionError)):
        return True
    name = type(err).__name__
    if name in ("Timeout", "APIConnectionError", "RateLimitError", "InternalServerError",
                "ServiceUnavailableError", "BadGatewayError"):
        return True
    return _status(err) in RETRYABLE_STATUS


def _fatal_reason(err: Exception, model_id: str, model: ModelConfig) -> str | None:
    name = type(err).__name__
    where = f"model '{model_id}' ({model.model})"
    if name == "ContextWindowExceededError":
        return (f"{where}: the prompt is larger than the model's context window; lower chunking.size or the "
                "stage's max input tokens, or use a model with a larger context")
    if name in ("AuthenticationError", "PermissionDeniedError") or _status(err) in (401, 403):
        return (f"{where}: authentication failed; check api_key for this model in settings.yaml "
                "(or the variable it reads from .env / the environment)")
    if "LLM Provider NOT provided" in str(err):
        return (f"{where}: LiteLLM does not know this model's provider; write `model` as provider/name "
                "(openai/gpt-4o-mini, azure/<deployment>, ollama/llama3, anthropic/...)")
    if name == "NotFoundError" or _status(err) == 404:
        return f"{where}: the provider does not know this model or deployment; check `model` and `api_base`"
    return None


def _timed_out(err: Exception) -> bool:
    return isinstance(err, (asyncio.TimeoutError, TimeoutError)) or type(err).__name__ == "Timeout"


def _refused_content(err: Exception) -> bool:
    """The provider refused this text (a content filter), not every request."""
    text = str(err).lower()
    return any(marker in text for marker in ("content_filter", "content management policy", "safety", "blocked"))


def _reached_provider(err: Exception) -> bool:
    """Whether a failed attempt was read by the provider (an HTTP answer or a time-out), as opposed to one
    that never connected."""
    if _is_connection_failure(err):
        return False
    return _status(err) is not None or _timed_out(err) or type(err).__name__ in (
        "RateLimitError", "InternalServerError", "ServiceUnavailableError", "BadGatewayError", "BadRequestError")


def _is_connection_failure(err: BaseException) -> bool:
    """No connection was made (refused, DNS, unreachable); LiteLLM reports some as InternalServerError."""
    seen: BaseException | None = err
    for _ in range(6):  # the exception and what it was raised from
        if seen is None:
            return False
        name = type(seen).__name__
        if name in ("APIConnectionError", "ConnectError", "ConnectionRefusedError", "ConnectTimeout", "gaierror") \
                or "Connection error" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _retry_after(err: Exception) -> float | None:
    response = getattr(err, "response", None)
    headers = getattr(response, "headers", None) or getattr(err, "litellm_response_headers", None)
    if not headers:
        return None
    value = headers.get("retry-after") or headers.get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _describe(err: Exception, model: ModelConfig) -> str:
    """One line about an error, with the API key scrubbed from whatever the provider echoed back."""
    text = f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"
    if model.api_key is not None:
        secret = model.api_key.get_secret_value()
        if secret:
            text = text.replace(secret, "***")
    return text[:500]
