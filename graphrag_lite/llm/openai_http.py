"""Calls straight to an OpenAI-compatible server (vLLM, llama.cpp, LM Studio, a proxy, OpenAI's own API) over
HTTP, without LiteLLM: a call costs a few hundred microseconds of CPU here against LiteLLM's tens of
milliseconds, which decides the wall time of a run against a fast self-hosted server. Streamed answers are
read whole, not piece by piece: the stream's only use here is its time-out on silence (the socket's read
time-out), and its events are decoded in one JSON document. Errors come back as exceptions that
llm.failures reads like LiteLLM's: an HTTP status, the server's message, its Retry-After.

    client = OpenAIHTTP()
    reply = await client.chat(model, messages, {"max_tokens": 500}, stream=True)
    vectors = await client.embed(model, ["a text"], {})
    client.close()
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from graphrag_lite.config import ModelConfig
from graphrag_lite.large_imports import import_large

if TYPE_CHECKING:
    import aiohttp

# providers whose LiteLLM model strings name an OpenAI-compatible server (at the model's api_base)
OPENAI_COMPATIBLE = frozenset({"openai", "hosted_vllm", "lm_studio", "llamafile"})
OPENAI_BASE = "https://api.openai.com/v1"
KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "hosted_vllm": "HOSTED_VLLM_API_KEY", "lm_studio": "LM_STUDIO_API_KEY",
                 "llamafile": "LLAMAFILE_API_KEY"}  # where LiteLLM finds a key that settings.yaml does not give
_CONTEXT_REFUSAL = re.compile(r"context[ _](?:length|size|window)|maximum context|too many tokens in the prompt",
                              re.IGNORECASE)
# LiteLLM's own arguments, which a server must not be sent
_NOT_SENT = frozenset({"num_retries", "timeout", "drop_params", "cache_control_injection_points", "extra_headers",
                       "extra_body", "api_key", "api_base", "api_version"})


class ServerRefused(Exception):
    """The server answered with an HTTP error: its status, its message and its headers (Retry-After)."""

    def __init__(self, status: int, message: str, headers: dict[str, str]) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status_code = status
        self.headers = headers


class ContextWindowExceededError(ServerRefused):
    """The prompt is longer than the model's context (named as LiteLLM names it: llm.failures reads the name)."""


@dataclass(frozen=True)
class ChatReply:
    text: str
    finish_reason: str | None
    usage: dict[str, Any]  # the server's usage object ({} when it sent none)
    first_piece_s: float | None = None  # streamed: seconds from sending to the stream's first bytes


@dataclass(frozen=True)
class EmbeddingReply:
    vectors: list[list[float]]
    prompt_tokens: int | None


def speaks_openai(model: ModelConfig) -> bool:
    """Whether calls to `model` go straight to an OpenAI-compatible server: `client: openai`, or `client: auto` for a
    model string of an OpenAI-compatible provider with an api_base (a hosted API without one keeps LiteLLM,
    which knows each model's parameter quirks)."""
    if model.client != "auto":
        return model.client == "openai"
    return model.model.partition("/")[0] in OPENAI_COMPATIBLE and bool(model.api_base) and "/" in model.model


def api_key(model: ModelConfig) -> str:
    """The model's key, else its provider's variable in the environment, as LiteLLM reads it ("": none)."""
    if model.api_key is not None:
        return model.api_key.get_secret_value().strip()
    return os.environ.get(KEY_VARIABLES.get(model.model.partition("/")[0], ""), "").strip()


def served_name(model: ModelConfig) -> str:
    """The model name the server is asked for: the model string without its provider."""
    provider, slash, name = model.model.partition("/")
    return name if slash and provider in OPENAI_COMPATIBLE else model.model


class OpenAIHTTP:
    """One connection pool per event loop (a pool belongs to the loop it was made in)."""

    def __init__(self) -> None:
        self._sessions: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = {}

    async def chat(self, model: ModelConfig, messages: list[dict[str, str]], args: dict[str, Any], stream: bool
                   ) -> ChatReply:
        """One chat completion. Streamed, the call is abandoned (TimeoutError) after `model.timeout` seconds
        without a byte; not streamed, after `model.timeout` seconds in all (the caller's time-out)."""
        body = {**_sent(args), "model": served_name(model), "messages": messages}
        if stream:
            body.update(stream=True, stream_options={"include_usage": True})
        sent = time.monotonic()
        raw, first_bytes = await self._post(model, "chat/completions", body, args, silence=stream)
        return _streamed_reply(raw, first_bytes - sent) if stream else _reply(_decoded(raw))

    async def embed(self, model: ModelConfig, texts: list[str], args: dict[str, Any]) -> EmbeddingReply:
        body = {**_sent(args), "model": served_name(model), "input": texts}
        data = _decoded((await self._post(model, "embeddings", body, args, silence=False))[0])
        rows = sorted(data.get("data") or [], key=lambda row: row.get("index", 0))
        if len(rows) != len(texts):
            raise ServerRefused(502, f"the server returned {len(rows)} vectors for {len(texts)} texts", {})
        usage = data.get("usage") or {}
        return EmbeddingReply([row["embedding"] for row in rows], usage.get("prompt_tokens"))

    async def _post(self, model: ModelConfig, path: str, body: dict[str, Any], args: dict[str, Any],
                    silence: bool) -> tuple[bytes, float]:
        """The answer's bytes, and when its first bytes came (time.monotonic). With `silence`, the call is
        abandoned after `model.timeout` seconds without a byte; else the caller times it."""
        aiohttp = _aiohttp()
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=model.timeout, sock_read=model.timeout) \
            if silence else aiohttp.ClientTimeout(total=None)
        headers = {"Content-Type": "application/json", **(args.get("extra_headers") or {})}
        if key := api_key(model):
            headers["Authorization"] = f"Bearer {key}"
        body.update(args.get("extra_body") or {})
        url = f"{(model.api_base or OPENAI_BASE).rstrip('/')}/{path}"
        session = await self._session()
        try:
            async with session.post(url, data=json.dumps(body), headers=headers, timeout=timeout) as response:
                first = await response.content.readany()
                first_bytes = time.monotonic()
                raw = first + await response.content.read()
                if response.status >= 400:
                    raise refusal(response.status, raw, dict(response.headers))
                return raw, first_bytes
        except aiohttp.ClientConnectorError as err:  # never connected: llm.failures counts these apart
            raise ConnectionError(f"Connection error: {err}") from err
        except TimeoutError:  # the socket's read time-out: a stream fell silent
            raise TimeoutError(f"no answer from {url} within {model.timeout:g} s") from None
        except aiohttp.ClientError as err:  # dropped or broken after connecting
            raise ConnectionResetError(f"the server broke off the answer: {type(err).__name__}: {err}") from None

    async def _session(self) -> aiohttp.ClientSession:
        aiohttp = _aiohttp()
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None:
            for ended in [ended for ended in self._sessions if ended.is_closed()]:  # a query's asyncio.run
                await self._sessions.pop(ended).close()  # its sockets: the closed loop is not touched
            # no limit of its own (the model's concurrency is the limiter's); proxies from the environment
            session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), trust_env=True,
                                            cookie_jar=aiohttp.DummyCookieJar())
            self._sessions[loop] = session
        return session

    def close(self) -> None:
        """Close every pool, from outside a running loop (a pool whose loop has ended is closed on a loop of
        its own)."""
        for loop, session in list(self._sessions.items()):
            closing = loop if not loop.is_closed() else asyncio.new_event_loop()
            try:
                closing.run_until_complete(session.close())
            except RuntimeError:  # called inside a running loop: the pool is left to the garbage collector
                pass
            finally:
                if closing is not loop:
                    closing.close()
        self._sessions.clear()


@functools.cache
def _aiohttp() -> Any:
    """aiohttp, imported on the first call (a fifth of a second: commands without model calls never pay it),
    then only returned: this is on every call's path."""
    return import_large("aiohttp")


def _sent(args: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in args.items() if key not in _NOT_SENT}


def refusal(status: int, raw: bytes, headers: dict[str, str]) -> ServerRefused:
    """The exception for an HTTP error answer, with the server's own message (OpenAI's {"error": {"message"}},
    or the text it sent)."""
    text = raw.decode("utf-8", "replace")
    try:
        found = json.loads(text)
        error = found.get("error", found) if isinstance(found, dict) else found
        message = str(error.get("message") or error) if isinstance(error, dict) else str(error)
    except ValueError:
        message = text
    message = " ".join(message.split())[:400] or "(no message)"
    kind = ContextWindowExceededError if status == 400 and _CONTEXT_REFUSAL.search(message) else ServerRefused
    return kind(status, message, headers)


def _decoded(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except ValueError:
        raise ServerRefused(502, f"the server's answer is not JSON: {raw[:200]!r}", {}) from None
    if not isinstance(data, dict):
        raise ServerRefused(502, f"the server's answer is not a JSON object: {raw[:200]!r}", {})
    return data


def _reply(data: dict[str, Any]) -> ChatReply:
    choices = data.get("choices") or []
    if not choices:
        raise ServerRefused(502, f"the server's answer has no choices: {str(data)[:200]}", {})
    message = choices[0].get("message") or {}
    return ChatReply(message.get("content") or "", choices[0].get("finish_reason"), data.get("usage") or {})


def _streamed_reply(raw: bytes, first_piece_s: float) -> ChatReply:
    """A stream's events (`data: {...}` lines) decoded as one JSON array, their pieces joined."""
    events = [line[5:].strip() for line in raw.split(b"\n") if line.startswith(b"data:")]
    events = [event for event in events if event and event != b"[DONE]"]
    try:
        chunks = json.loads(b"[" + b",".join(events) + b"]")
    except ValueError:
        raise ServerRefused(502, f"the server's stream holds an event that is not JSON: {raw[:200]!r}", {}) from None
    pieces: list[str] = []
    finish: str | None = None
    usage: dict[str, Any] = {}
    for chunk in chunks:
        if not isinstance(chunk, dict):  # an event of another protocol: the stream cannot be trusted
            raise ServerRefused(502, f"the server's stream holds an event that is not an object: {chunk!r:.200}", {})
        if "error" in chunk:  # an error sent in the stream after its status line said 200
            raise _stream_error(chunk["error"])
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or []:
            pieces.append((choice.get("delta") or {}).get("content") or "")
            finish = choice.get("finish_reason") or finish
    if not chunks:
        raise ServerRefused(502, "the server's stream held no event", {})
    return ChatReply("".join(pieces), finish, usage, first_piece_s)


def _stream_error(error: Any) -> ServerRefused:
    """An error event: its code as the status when it is an HTTP status, else 500 (retried)."""
    code = str(error.get("code") if isinstance(error, dict) else "")
    status = int(code) if code.isdigit() and 400 <= int(code) < 600 else 500
    return refusal(status, json.dumps({"error": error}).encode(), {})
