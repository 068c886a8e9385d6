"""Embeddings: vectors for texts, cached per text, sent in calls bounded by count and tokens, concurrently
within the model's limits; a call the provider refuses for its size is split, and the model is sent smaller
calls for the rest of the run."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from graphrag_lite.config import EmbedTextConfig, ModelConfig
from graphrag_lite.llm.cache import AnswerCache
from graphrag_lite.llm.calls import CALL_STEP, Answer, call_key, gather_all
from graphrag_lite.llm.errors import LLMCallError
from graphrag_lite.llm.failures import refuses_size
from graphrag_lite.llm.openai_http import EmbeddingReply, speaks_openai
from graphrag_lite.llm.providers import connection, plugged_embeddings
from graphrag_lite.llm.transport import LOG, BatchTooLarge, Transport
from graphrag_lite.tokens import count_tokens

EMBEDDING_BATCH = (EmbedTextConfig.model_fields["batch_size"].default,  # texts and tokens per embedding call
                   EmbedTextConfig.model_fields["batch_max_tokens"].default)


class Embedder:
    def __init__(self, transport: Transport, cache: AnswerCache | None) -> None:
        self._transport = transport
        self._cache = cache
        # model id -> the size of the vectors it returned in this run (its cached vectors may be a former model's)
        self.returned_dimension: dict[str, int] = {}
        self._caps: dict[str, int] = {}  # texts per call a model's provider accepted, after refusing more

    async def embed(self, model_id: str, texts: Sequence[str], *, stage: str, batch_size: int = EMBEDDING_BATCH[0],
                    batch_max_tokens: int = EMBEDDING_BATCH[1], dimension: int | None = None) -> list[list[float]]:
        """Vectors for `texts`, in order. Cached texts are not sent; the rest go in batches bounded by count
        and by tokens, concurrently within the model's limits. A cached vector of another dimension than
        `dimension` (or than the vectors the model returns now) was made by another model: it is replaced."""
        model = self._transport.model(model_id)
        CALL_STEP.set((stage, "embed"))
        keys, vectors = self._cached_vectors(model, texts, dimension)
        hits = [texts[i] for i, v in enumerate(vectors) if v is not None]
        if hits:  # free now; what they cost when first embedded is counted for "without the cache" figures
            tokens = sum(count_tokens(t) for t in hits)
            price = self._transport.price(model, tokens, 0)
            self._transport.record(stage, model_id, "embedding", Answer("", tokens, 0, price, 0), None, 0, ok=True)
        fresh = await self._embed_missing(model_id, model, texts, vectors, keys, stage, batch_size, batch_max_tokens)
        stale = [i for i, v in enumerate(vectors) if v is not None and fresh and len(v) != fresh]
        if stale:  # cached by a model of another dimension behind the same name
            for i in stale:
                vectors[i] = None
            await self._embed_missing(model_id, model, texts, vectors, keys, stage, batch_size, batch_max_tokens)
        return [v for v in vectors if v is not None]

    def estimate(self, model_id: str, texts: Sequence[str], batch_size: int = EMBEDDING_BATCH[0],
                 batch_max_tokens: int = EMBEDDING_BATCH[1], dimension: int | None = None) -> tuple[int, int, int]:
        """For a dry run: the calls, texts and tokens `embed` would send for `texts` (cached vectors of
        `dimension`, when it is known, are free)."""
        _, vectors = self._cached_vectors(self._transport.model(model_id), texts, dimension)
        missing = [t for t, v in zip(texts, vectors, strict=True) if v is None]
        batches = embedding_batches(missing, batch_size, batch_max_tokens)
        return len(batches), len(missing), sum(tokens for _, tokens in batches)

    def _cached_vectors(self, model: ModelConfig, texts: Sequence[str], dimension: int | None
                        ) -> tuple[list[str], list[list[float] | None]]:
        """Each text's cache key, and its cached vector (None when there is none, or when it has another
        dimension than `dimension`)."""
        args = dict(model.call_args)
        keys = [call_key("embedding", model, text, args) for text in texts]
        vectors = [self._cache.get(k) if self._cache is not None else None for k in keys]
        return keys, [v if v is not None and (dimension is None or len(v) == dimension) else None for v in vectors]

    async def _embed_missing(self, model_id: str, model: ModelConfig, texts: Sequence[str],
                             vectors: list[list[float] | None], keys: list[str], stage: str, batch_size: int,
                             batch_max_tokens: int) -> int | None:
        """Fill the missing vectors in place; returns the dimension of the new vectors (None: none sent)."""
        missing = [i for i, v in enumerate(vectors) if v is None]
        args = dict(model.call_args)
        dimensions: set[int] = set()

        async def run(batch: list[int], estimate: int) -> None:
            cap = self._caps.get(model_id, len(batch))
            if len(batch) > cap:  # the provider refused a batch this size before: send it in smaller ones
                await gather_all(run(part, 0) for part in parts(batch, cap))
                return
            items = [texts[missing[i]] for i in batch]
            try:
                returned = await self._embedding_call(model_id, model, items, args, stage, estimate)
            except BatchTooLarge:
                self._caps[model_id] = min(self._caps.get(model_id, len(batch)), len(batch) // 2)
                LOG.info("%s: model %s refused %d texts in one call; sending at most %d", stage, model_id,
                         len(batch), self._caps[model_id])
                await run(batch, 0)
                return
            answered = []
            for position, item in zip(batch, returned, strict=True):
                vector = list(item)
                vectors[missing[position]] = vector
                dimensions.add(len(vector))
                answered.append((keys[missing[position]], vector))
            if self._cache is not None:
                self._cache.put_many("embedding", answered)

        batches = embedding_batches([texts[i] for i in missing], batch_size, batch_max_tokens)
        await gather_all(run(batch, tokens) for batch, tokens in batches)
        if not dimensions:
            return None
        self.returned_dimension[model_id] = max(dimensions)
        return self.returned_dimension[model_id]

    async def _embedding_call(self, model_id: str, model: ModelConfig, items: list[str], args: dict[str, Any],
                              stage: str, estimate: int) -> list[Any]:
        """The vectors of one embedding call, recorded; raises BatchTooLarge when the provider refuses this
        many texts or tokens in one call (providers' limits differ: 2,048 texts and 300k tokens at OpenAI, 96
        texts at Cohere, 32 by default for a text-embeddings-inference server), so the caller can split."""
        started = time.perf_counter()

        async def call() -> Any:
            try:
                if speaks_openai(model):
                    return await self._transport.http.embed(model, items, args)
                if (direct := plugged_embeddings(model.model)) is not None:
                    return await direct(model.model, items)
                return await self._transport.litellm.aembedding(model=model.model, input=items, **connection(model),
                                                                **args)
            except Exception as err:
                if len(items) > 1 and refuses_size(err):
                    raise BatchTooLarge(str(err)) from None
                raise

        def counted() -> int:
            return estimate or sum(count_tokens(t) for t in items)

        try:
            response, retries = await self._transport.send(model_id, model, counted, call, stage, times_itself=False,
                                                           completion=0)
        except BatchTooLarge:
            self._transport.record_failed_attempt(stage, model_id, model, 0, billed=False)
            raise
        except LLMCallError:
            self._transport.record(stage, model_id, "embedding", Answer("", 0, 0, None, 0), started, 0, ok=False)
            raise
        if isinstance(response, EmbeddingReply):
            tokens = response.prompt_tokens or counted()
            cost, vectors = self._transport.price(model, tokens, 0), response.vectors
        else:  # LiteLLM's
            tokens = int(getattr(getattr(response, "usage", None), "prompt_tokens", 0) or counted())
            cost = self._transport.cost(response)
            vectors = [item["embedding"] if isinstance(item, dict) else item.embedding for item in response.data]
        self._transport.record(stage, model_id, "embedding", Answer("", tokens, 0, cost, retries), started, 0, ok=True)
        return vectors


def embedding_batches(texts: list[str], size: int, max_tokens: int) -> list[tuple[list[int], int]]:
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


def parts(batch: list[int], size: int) -> list[list[int]]:
    """`batch` in parts of at most `size`."""
    return [batch[start:start + size] for start in range(0, len(batch), size)]
