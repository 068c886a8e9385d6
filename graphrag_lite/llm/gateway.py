"""The one way the project calls a model: LiteLLM behind concurrency and rate limits, retries, a validated
cache, a cost ledger and a budget.

    gateway = Gateway(config)
    result = await gateway.chat("default_chat_model", messages, stage="extract_graph", step="extract", parse=my_parser)
    vectors = await gateway.embed("default_embedding_model", texts, stage="embed_text")

A chat answer is returned (and cached) only after `parse` accepted it; an answer `parse` rejects is sent
back to the model once per `max_parse_retries` with the reason, then the call fails with LLMCallError,
which stages count and report. Problems no retry can fix (a wrong key, an unknown model, a prompt larger
than the context window) raise LLMConfigurationError and stop the run with the fix in the message.
`stage` and `step` name the call: the ledger counts by stage, and a plug-in provider may answer by step.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, TypeVar

from graphrag_lite.answer_parsing import ParseError
from graphrag_lite.config import GraphRagConfig, ModelConfig
from graphrag_lite.llm.batch import Batcher
from graphrag_lite.llm.cache import AnswerCache
from graphrag_lite.llm.calls import (
    CALL_STEP,
    CORRECTION,
    CUT_OFF,
    Answer,
    ChatResult,
    Messages,
    any_text,
    cached_usage,
    call_key,
    parse_answer,
    prompt_estimate,
    provider_cached_tokens,
    stored_answer,
)
from graphrag_lite.llm.embeddings import EMBEDDING_BATCH, Embedder
from graphrag_lite.llm.errors import LLMCallError
from graphrag_lite.llm.failures import describe
from graphrag_lite.llm.ledger import Ledger
from graphrag_lite.llm.limits import ModelLimiter
from graphrag_lite.llm.openai_http import ChatReply, speaks_openai
from graphrag_lite.llm.providers import (
    ANTHROPIC_CACHE_POINTS,
    connection,
    marks_prompt_cache,
    needs_litellm,
    supported_params,
)
from graphrag_lite.llm.streaming import StreamChoice
from graphrag_lite.llm.transport import Transport
from graphrag_lite.tokens import count_tokens

T = TypeVar("T")

# what an OpenAI-compatible server takes (as LiteLLM answers for openai/ model strings)
OPENAI_PARAMS = frozenset({"temperature", "top_p", "max_tokens", "max_completion_tokens", "stop", "seed",
                           "presence_penalty", "frequency_penalty", "response_format", "stream", "n", "logprobs"})


class Gateway:
    def __init__(self, config: GraphRagConfig, use_cache: bool = True, prior_spend: tuple[float, int] = (0.0, 0),
                 batch: bool = False) -> None:
        """`batch`: first attempts of chat calls go in provider batches (an index run with --batch; a query
        never waits for a batch)."""
        self.models = config.models
        self.cache = AnswerCache(config.cache.base_dir) if use_cache and config.cache.enabled else None
        self.ledger = Ledger(config.budget.max_cost_usd, config.budget.max_tokens, prior_spend)
        self._transport = Transport(self.models, self.ledger, config.root_dir)
        self._embedder = Embedder(self._transport, self.cache)
        self._streaming = StreamChoice()
        self._supported: dict[str, set[str]] = {}  # OpenAI parameters each model string takes
        self.batcher = Batcher(config, self.ledger, self._transport.litellm) if batch else None

    def start_litellm(self) -> None:
        """Import LiteLLM now (seconds) when a model may need it (llm.providers.needs_litellm)."""
        if any(needs_litellm(model) for model in self.models.values()):
            self._transport.litellm  # noqa: B018  # the property imports it

    # ------------------------------------------------------------ chat

    def cached_answer(self, model_id: str, messages: Messages, json_mode: bool = False,
                      max_tokens: int | None = None) -> str | None:
        """The answer the cache holds for this call, if any (for estimates: such a call costs nothing)."""
        model = self._transport.model(model_id)
        cached = self._cached_answer(call_key("chat", model, messages, self._call_args(model, json_mode, max_tokens)),
                                     any_text)
        return None if cached is None else cached.text

    async def chat(self, model_id: str, messages: Messages, *, stage: str, step: str,
                   parse: Callable[[str], T] | None = None, json_mode: bool = False, max_tokens: int | None = None,
                   resent_prefix: bool = False) -> ChatResult[T]:
        """A parsed answer. `stage` and `step` name the kind of call (the step: extract, glean, check,
        summarize, report, choose_alias, map, rate, next_hop, answer, judge, ...). `max_tokens` caps the
        answer's length; an answer cut off there is handled like any other that cannot be used (the parser's
        partial result survives in LLMCallError.partial).
        `resent_prefix`: later calls send this call's first message again (gleaning), so a provider that
        caches only marked prefixes (Anthropic; writing costs 1.25x, reading 0.1x) is asked to cache it."""
        model = self._transport.model(model_id)
        args = self._call_args(model, json_mode, max_tokens)
        parser: Callable[[str], Any] = parse or any_text
        key = call_key("chat", model, messages, args)
        CALL_STEP.set((stage, step))
        cached = self._cached_answer(key, parser)
        if cached is not None:
            self._transport.record(stage, model_id, "chat", cached_usage(cached.stored), None, 0, ok=True)
            return cached
        conversation = list(messages)
        started = time.perf_counter()
        spent = Answer("", 0, 0, None, 0)
        problems: list[str] = []
        partial: Any = None
        for parse_attempt in range(model.max_parse_retries + 1):
            try:
                answer = await self._send_chat(model_id, model, conversation, args, stage,
                                               key if parse_attempt == 0 else None, resent_prefix)
            except LLMCallError as err:
                self._transport.record(stage, model_id, "chat", spent, started, parse_attempt, ok=False)
                raise LLMCallError(str(err), partial) from None
            spent = spent.plus(answer)
            try:
                value = parse_answer(parser, answer)
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
            self._transport.record(stage, model_id, "chat", spent, started, parse_attempt, ok=True)
            if self.cache is not None:
                self.cache.put(key, "chat", stored_answer(answer.text, spent))
            return ChatResult(value=value, text=answer.text, cached=False)
        self._transport.record(stage, model_id, "chat", spent, started, len(problems) - 1, ok=False)
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
                         stage: str, batch_key: str | None = None, resent_prefix: bool = False) -> Answer:
        """An answer: from a provider batch for a first attempt in batch mode (`batch_key`: the call's cache
        key) when the batch answers it, else online."""
        if batch_key is not None and self.batcher is not None:
            batched = await self.batcher.answer(model_id, model, messages, args, batch_key, CALL_STEP.get())
            if batched is not None:
                return batched
        estimate = prompt_estimate(messages)
        sent_args = {**args, **self._cache_marker(model)} if resent_prefix else args  # not part of the cache key

        async def call() -> Answer:
            streamed = self._streaming.streams(model_id, model, sent_args.get("max_tokens"))
            sent = time.monotonic()
            asked = self._ask(model, messages, sent_args, estimate, streamed)
            try:  # a stream times out on silence (inside), a plain call on its total time
                answer = await (asked if streamed else asyncio.wait_for(asked, model.timeout))
            except TimeoutError:
                if not streamed:
                    self._streaming.timed_out(model_id)
                raise
            self._streaming.answered(model_id, time.monotonic() - sent, answer.first_piece_s, answer.completion_tokens)
            return answer

        answer, retries = await self._transport.send(model_id, model, estimate, call, stage, times_itself=True,
                                                     completion=args.get("max_tokens"))
        answer.retries = retries
        return answer

    async def _ask(self, model: ModelConfig, messages: Messages, args: dict[str, Any],
                   estimate: Callable[[], int], streamed: bool) -> Answer:
        """One attempt's answer: straight from an OpenAI-compatible server, or through LiteLLM."""
        if speaks_openai(model):
            return self._answer(model, await self._transport.http.chat(model, messages, args, streamed), estimate)
        if streamed:
            return await self._read_stream(model, messages, args, estimate)
        response = await self._transport.litellm.acompletion(model=model.model, messages=messages,
                                                             **connection(model), **args)
        usage = getattr(response, "usage", None)
        choice = response.choices[0]
        return Answer(choice.message.content or "", int(getattr(usage, "prompt_tokens", 0) or estimate()),
                      int(getattr(usage, "completion_tokens", 0) or 0), self._transport.cost(response), 0,
                      getattr(choice, "finish_reason", None), provider_cached_tokens(usage))

    async def _read_stream(self, model: ModelConfig, messages: Messages, args: dict[str, Any],
                           estimate: Callable[[], int]) -> Answer:
        """A streamed answer, abandoned (TimeoutError, retried) when no piece comes for `timeout` seconds:
        a slow local model may take minutes for a long answer, but a silent one has stalled."""
        sent = time.monotonic()
        response = await asyncio.wait_for(self._transport.litellm.acompletion(
            model=model.model, messages=messages, stream=True, **connection(model), **args), model.timeout)
        pieces: list[str] = []
        usage: Any = None
        finish: str | None = None
        first_piece_s: float | None = None
        chunks = response.__aiter__()
        while True:
            try:
                chunk = await asyncio.wait_for(chunks.__anext__(), model.timeout)
            except StopAsyncIteration:
                break
            first_piece_s = time.monotonic() - sent if first_piece_s is None else first_piece_s
            usage = getattr(chunk, "usage", None) or usage
            if chunk.choices:
                pieces.append(chunk.choices[0].delta.content or "")
                finish = chunk.choices[0].finish_reason or finish
        answer = self._streamed(model, "".join(pieces), usage, estimate, 0, finish)
        answer.first_piece_s = first_piece_s
        return answer

    def _answer(self, model: ModelConfig, reply: ChatReply, estimate: Callable[[], int]) -> Answer:
        """The answer of an OpenAI-compatible server, counted from the usage it reported (counted here only
        when it reported none)."""
        usage = reply.usage
        prompt_tokens = int(usage.get("prompt_tokens") or estimate())
        completion_tokens = int(usage.get("completion_tokens") or count_tokens(reply.text))
        details = usage.get("prompt_tokens_details")
        cached = int((details.get("cached_tokens") if isinstance(details, dict) else 0) or 0)
        return Answer(reply.text, prompt_tokens, completion_tokens,
                      self._transport.price(model, prompt_tokens, completion_tokens, cached), 0, reply.finish_reason,
                      cached, reply.first_piece_s)

    def _streamed(self, model: ModelConfig, text: str, usage: Any, estimate: Callable[[], int], retries: int,
                  finish: str | None = None) -> Answer:
        """A streamed answer's accounting: the usage the provider sent, or counts of what arrived."""
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or estimate())
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or count_tokens(text))
        cached = provider_cached_tokens(usage)
        return Answer(text, prompt_tokens, completion_tokens,
                       self._transport.price(model, prompt_tokens, completion_tokens, cached), retries, finish, cached)

    async def stream(self, model_id: str, messages: Messages, *, stage: str) -> AsyncIterator[str]:
        """An answer as it is generated. A cached answer comes at once; a new one is cached once complete and
        non-empty. A connection that fails before the first piece is retried; one that fails mid-answer is
        not (the caller has shown part of it) and raises LLMCallError."""
        model = self._transport.model(model_id)
        args = self._call_args(model, json_mode=False)
        key = call_key("chat", model, messages, args)
        CALL_STEP.set((stage, "answer"))
        cached = self.cache.get(key) if self.cache is not None else None
        if cached is not None:
            self._transport.record(stage, model_id, "chat", cached_usage(cached), None, 0, ok=True)
            yield cached["text"]
            return
        estimate = prompt_estimate(messages)
        started = time.perf_counter()

        async def call() -> Any:
            return await self._transport.litellm.acompletion(model=model.model, messages=messages, stream=True,
                                                   **connection(model), **args)

        response, retries = await self._transport.send(model_id, model, estimate, call, stage, times_itself=False)
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
            unanswered = Answer("", estimate(), 0, None, retries)
            self._transport.record(stage, model_id, "chat", unanswered, started, 0, ok=False)
            raise LLMCallError(f"model '{model_id}' stopped in the middle of its answer: {describe(err, model)}"
                               ) from None
        text = "".join(pieces)
        spent = self._streamed(model, text, usage, estimate, retries)
        self._transport.record(stage, model_id, "chat", spent, started, 0, ok=bool(text.strip()))
        if text.strip() and self.cache is not None:
            self.cache.put(key, "chat", stored_answer(text, spent))

    # ------------------------------------------------------------ embeddings

    async def embed(self, model_id: str, texts: Sequence[str], *, stage: str, batch_size: int = EMBEDDING_BATCH[0],
                    batch_max_tokens: int = EMBEDDING_BATCH[1], dimension: int | None = None) -> list[list[float]]:
        """Vectors for `texts`, in order (embeddings.Embedder.embed: cached ones are not sent)."""
        return await self._embedder.embed(model_id, texts, stage=stage, batch_size=batch_size,
                                          batch_max_tokens=batch_max_tokens, dimension=dimension)

    def embedding_estimate(self, model_id: str, texts: Sequence[str], batch_size: int = EMBEDDING_BATCH[0],
                           batch_max_tokens: int = EMBEDDING_BATCH[1], dimension: int | None = None
                           ) -> tuple[int, int, int]:
        """For a dry run: the calls, texts and tokens `embed` would send for `texts`."""
        return self._embedder.estimate(model_id, texts, batch_size, batch_max_tokens, dimension)

    @property
    def returned_dimension(self) -> dict[str, int]:
        """Model id -> the size of the vectors it returned in this run."""
        return self._embedder.returned_dimension

    # ------------------------------------------------------------ helpers

    def limiter(self, model_id: str) -> ModelLimiter:
        """The limiter of a model in the running event loop (for tests and benchmarks)."""
        return self._transport.limiter(model_id)

    def _call_args(self, model: ModelConfig, json_mode: bool, max_tokens: int | None = None) -> dict[str, Any]:
        args = dict(model.call_args)
        if json_mode and self._supports(model, "response_format"):
            args.setdefault("response_format", {"type": "json_object"})
        if max_tokens is not None:  # a stage's own cap wins over the model's default
            args["max_tokens"] = max_tokens
        return args

    def marks_prompt_cache(self, model_id: str) -> bool:
        model = self._transport.model(model_id)
        return not speaks_openai(model) and marks_prompt_cache(model.model)

    def supports_json(self, model_id: str) -> bool:
        """Whether LiteLLM says the model takes `response_format` (structured JSON output)."""
        return self._supports(self._transport.model(model_id), "response_format")

    def _supports(self, model: ModelConfig, param: str) -> bool:
        """Asked once per model string: it is on the path of every JSON-mode call."""
        if model.model not in self._supported:
            self._supported[model.model] = set(OPENAI_PARAMS) if speaks_openai(model) else \
                supported_params(self._transport.litellm, model.model)
        return param in self._supported[model.model]

    @staticmethod
    def _cache_marker(model: ModelConfig) -> dict[str, Any]:
        """LiteLLM's cache-control marker on the first message, for the models that need one."""
        if speaks_openai(model):  # the marker is LiteLLM's; an OpenAI-compatible server caches prefixes itself
            return {}
        return {"cache_control_injection_points": ANTHROPIC_CACHE_POINTS} if marks_prompt_cache(model.model) else {}

    def close(self) -> None:
        self._transport.close()
        if self.cache is not None:
            self.cache.close()
