"""The options of a `fake/...` model string, after `?`: faults, latency, scripted replies and batch behaviour.

    fake/default?latency=0.2&jitter=0.2&rate_limit=0.3&retry_after=0.05&server_error=0.1&timeout=0.1
                &malformed=0.2&fenced=1&truncate=0.1&auth=1&seed=7
    fake/embedding?dim=128

Fractions are probabilities per request (drawn from a seeded generator); `timeout` sleeps past the
gateway's timeout. An unknown option is an error naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

FAKE_INPUT_PRICE, FAKE_OUTPUT_PRICE = 0.15e-6, 0.60e-6  # USD per token
PROVIDER_ENCODING = "o200k_base"  # the provider's own tokenizer, as OpenAI's counts: not the project's setting


@dataclass(frozen=True)
class Options:
    name: str
    key: str  # the whole model string
    latency: float = 0.0
    jitter: float = 0.0  # latency varies uniformly by this fraction either way (the mean stays `latency`)
    rate_limit: float = 0.0
    retry_after: float = 0.05  # negative: a 429 without a Retry-After header
    server_error: float = 0.0
    timeout: float = 0.0
    drop: float = 0.0  # the connection drops before an answer
    malformed: float = 0.0
    fenced: float = 0.0
    truncate: float = 0.0
    auth: float = 0.0
    bad_request: int = 0  # 1: every call is refused as a bad request (400), which no retry fixes
    dim: int = 128
    max_batch: int = 0  # embeddings: a call with more texts is refused (422), as by a text-embeddings-inference server
    seed: int = 0
    structured: int = 0  # 1: declares structured (JSON) output support
    piece_latency: float = 0.0  # seconds between the pieces of a streamed answer
    stall: float = 0.0  # every other streamed answer falls silent this long after its first piece
    capacity: int = 0  # calls served at once; more in flight are refused with 429 (0: no limit)
    replies: str = ""  # a YAML file of scripted replies (see Script)
    prefix_cache: int = 0  # 1: a provider prompt cache (OpenAI's rule): usage reports the cached prompt tokens
    # read by the fake's batch endpoint (batch.py); online calls ignore them
    batch_delay: float = 0.0  # seconds from sending a batch to its answers
    batch_fail: float = 0.0  # share of a batch's requests that fail (its error file)
    batch_invalid: float = 0.0  # share of a batch's requests answered cut off at their length limit (unusable)
    batch_status: str = ""  # how every batch ends instead of completed: failed, expired or cancelled
    hold: str = ""  # a file: while it exists, every call after the first `hold_after` waits (a stalled provider)
    hold_after: int = 0

    @staticmethod
    def parse(model: str) -> Options:
        name, _, query = model.partition("?")
        values: dict[str, Any] = {}
        for key, raw in parse_qsl(query):
            kind = Options.__dataclass_fields__[key].type  # KeyError names an unknown option
            values[key] = raw if kind == "str" else int(raw) if kind == "int" else float(raw)
        return Options(name=name, key=model, **values)
