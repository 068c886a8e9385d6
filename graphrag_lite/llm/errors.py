"""How a model call fails, as the callers see it: one call failed after its retries (counted, the run goes
on), or no call can succeed as configured (the run stops with the fix)."""

from __future__ import annotations

from typing import Any

from graphrag_lite.errors import GraphragLiteError


class LLMCallError(GraphragLiteError):
    """One call failed after its retries; the caller counts it and goes on. `partial` holds what could be
    used of an answer that was cut off (complete records before the cut), or None."""

    def __init__(self, message: str, partial: Any = None) -> None:
        super().__init__(message)
        self.partial = partial


class LLMConfigurationError(GraphragLiteError):
    """A call can never succeed as configured (authentication, unknown model, context window)."""

    exit_code = 2
