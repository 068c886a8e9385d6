"""The fake model's embeddings, made without LiteLLM (the plug-in's `embeddings`): a question embedded by a
query, or a whole index's texts, cost no LiteLLM import (seconds) and no LiteLLM call (milliseconds). Faults
come back as an OpenAI-compatible server's do (llm.openai_http): an HTTP status and its message."""

from __future__ import annotations

import asyncio

from graphrag_lite.fake.embedding import embed_text
from graphrag_lite.fake.faults import STATS, fault
from graphrag_lite.fake.options import PROVIDER_ENCODING, Options
from graphrag_lite.llm.openai_http import EmbeddingReply, ServerRefused
from graphrag_lite.tokens import count_tokens


async def embeddings(model: str, texts: list[str]) -> EmbeddingReply:
    """Vectors for `texts` as `model` (fake/embedding?dim=...&latency=...&max_batch=...) gives them."""
    options = Options.parse(model)
    STATS.embeddings += 1
    if options.latency:
        await asyncio.sleep(options.latency)
    found = fault(options)
    if found is not None and found.status == -1:
        await asyncio.sleep(3600)  # the gateway's timeout fires first
    if found is not None and found.status == 0:
        raise ConnectionError(found.message)
    if found is not None:
        retry = {"retry-after": str(found.retry_after)} if found.retry_after is not None else {}
        raise ServerRefused(found.status, found.message, retry)
    if options.max_batch and len(texts) > options.max_batch:  # as a text-embeddings-inference server refuses
        raise ServerRefused(422, f"batch size {len(texts)} > maximum allowed batch size {options.max_batch}", {})
    tokens = sum(count_tokens(str(text), PROVIDER_ENCODING) for text in texts)
    return EmbeddingReply([embed_text(str(text), options.dim) for text in texts], tokens)
