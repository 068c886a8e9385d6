"""Tokens as the fake provider counts them (OpenAI's tokenizer, not the project's setting), and an answer cut
where a model stops at its max_tokens: shared by its paths (through LiteLLM, its batch endpoint, its HTTP
server), none of which needs LiteLLM for them."""

from __future__ import annotations

import functools
from typing import Any

from graphrag_lite.fake.options import PROVIDER_ENCODING
from graphrag_lite.tokens import count_tokens, get_encoding


def cut_at(text: str, finish: str, max_tokens: int | None) -> tuple[str, str, int]:
    """An answer cut where a real model stops at max_tokens (finish_reason "length"), and its tokens."""
    tokens = provider_tokens(text)
    if not max_tokens or tokens <= max_tokens:
        return text, finish, tokens
    encoding = get_encoding(PROVIDER_ENCODING)
    return encoding.decode(encoding.encode_ordinary(text)[:int(max_tokens)]), "length", int(max_tokens)


def provider_prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """A request's prompt tokens as the provider counts them, online or in a batch."""
    return sum(provider_tokens(str(m.get("content", ""))) for m in messages)


@functools.lru_cache(maxsize=4096)
def provider_tokens(text: str) -> int:
    """A message's tokens as the provider counts them: a gleaning resends the first prompt and answer, which
    a remote server would count on its side; here it would be the indexing process's CPU, twice."""
    return count_tokens(text, PROVIDER_ENCODING)
