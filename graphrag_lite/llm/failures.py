"""What a provider's error means: retry it, stop the run with the fix, or count the call as failed. LiteLLM
maps providers' errors to OpenAI's exception types and HTTP statuses; these functions read both, and the
causes an error was raised from, since LiteLLM wraps some connection failures in other types."""

from __future__ import annotations

import asyncio
import re

from graphrag_lite.config import ModelConfig

RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 529}


_SIZE_REFUSAL = re.compile(r"too (?:large|long|many)|batch size|maximum|max\b.{0,40}\b(?:tokens|inputs|texts|entries|"
                           r"items|batch)|exceed|context length|\$\.input", re.IGNORECASE)


# a server error says more than "exceeded" (a time-out does) before a batch is halved for the rest of the run
_SERVER_SIZE_REFUSAL = re.compile(r"too (?:large|long|many)|batch size", re.IGNORECASE)


def refuses_size(err: Exception) -> bool:
    """A provider's refusal of a request's size (HTTP 400, 413 or 422, or a local server's 500, saying so),
    as opposed to a failure that splitting the request would not fix."""
    status = http_status(err)
    if status == 413 or type(err).__name__ == "ContextWindowExceededError":
        return True
    if status == 500:
        return bool(_SERVER_SIZE_REFUSAL.search(str(err)))
    return status in (400, 422) and bool(_SIZE_REFUSAL.search(str(err)))


def http_status(err: Exception) -> int | None:
    """The HTTP status of a provider's error (None when it has none: a connection failure, a time-out)."""
    code = getattr(err, "status_code", None)
    return int(code) if isinstance(code, int) else None


def retryable(err: Exception) -> bool:
    if isinstance(err, (asyncio.TimeoutError, TimeoutError, ConnectionError)):
        return True
    name = type(err).__name__
    if name in ("Timeout", "APIConnectionError", "RateLimitError", "InternalServerError",
                "ServiceUnavailableError", "BadGatewayError"):
        return True
    return http_status(err) in RETRYABLE_STATUS


def fatal_reason(err: Exception, model_id: str, model: ModelConfig) -> str | None:
    name = type(err).__name__
    where = f"model '{model_id}' ({model.model})"
    if name == "ContextWindowExceededError":
        return (f"{where}: the prompt is larger than the model's context window; lower chunking.size or the "
                "stage's max input tokens, or use a model with a larger context")
    if name in ("AuthenticationError", "PermissionDeniedError") or http_status(err) in (401, 403):
        return (f"{where}: authentication failed; check api_key for this model in settings.yaml "
                "(or the variable it reads from .env / the environment)")
    if "LLM Provider NOT provided" in str(err):
        return (f"{where}: LiteLLM does not know this model's provider; write `model` as provider/name "
                "(openai/gpt-4o-mini, azure/<deployment>, ollama/llama3, anthropic/...). A plug-in provider "
                "(such as the offline fake model) is found through the entry-point group graphrag_lite.providers: "
                "if it is missing, install the package again (pip install -e . in a checkout)")
    if name == "NotFoundError" or http_status(err) == 404:
        return f"{where}: the provider does not know this model or deployment; check `model` and `api_base`"
    return None


def timed_out(err: Exception) -> bool:
    return isinstance(err, (asyncio.TimeoutError, TimeoutError)) or type(err).__name__ == "Timeout"


def refused_content(err: Exception) -> bool:
    """The provider refused this text (a content filter), not every request."""
    text = str(err).lower()
    return any(marker in text for marker in ("content_filter", "content management policy", "safety", "blocked"))


def reached_provider(err: Exception) -> bool:
    """Whether a failed attempt was read by the provider (an HTTP answer or a time-out), as opposed to one
    that never connected."""
    if is_connection_failure(err):
        return False
    return http_status(err) is not None or timed_out(err) or type(err).__name__ in (
        "RateLimitError", "InternalServerError", "ServiceUnavailableError", "BadGatewayError", "BadRequestError")


def is_connection_failure(err: BaseException) -> bool:
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


def retry_after(err: Exception) -> float | None:
    response = getattr(err, "response", None)
    headers = getattr(response, "headers", None) or getattr(err, "litellm_response_headers", None) or \
        getattr(err, "headers", None)
    if not headers:
        return None
    value = headers.get("retry-after") or headers.get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def describe(err: Exception, model: ModelConfig) -> str:
    """One line about an error, with the API key scrubbed from whatever the provider echoed back."""
    text = f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"
    if model.api_key is not None:
        secret = model.api_key.get_secret_value()
        if secret:
            text = text.replace(secret, "***")
    return text[:500]
