"""`fake/...`: a LiteLLM custom provider that answers like a model, offline and deterministically.

It reads what the prompt asks for (GraphRAG-style graph or claim extraction, a gleaning follow-up, a
description summary, a community report, a global-search map step, or a plain answer) and computes a
well-formed answer from the text in the prompt. Options after `?` in the model string inject faults and
latency, so retries, caching and budgets can be tested end to end:

    fake/default?latency=0.2&jitter=0.2&rate_limit=0.3&retry_after=0.05&server_error=0.1&timeout=0.1
                &malformed=0.2&fenced=1&truncate=0.1&auth=1&seed=7
    fake/embedding?dim=128

Fractions are probabilities per request (drawn from a seeded generator); `timeout` sleeps past the
gateway's timeout. A follow-up that asks to correct an unusable answer is always answered well.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import itertools
import json
import math
import random
import re
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import httpx
import litellm
import numpy as np
from litellm import CustomLLM
from litellm.types.llms.openai import ChatCompletionUsageBlock
from litellm.types.utils import (
    EmbeddingResponse,
    GenericStreamingChunk,
    ModelResponse,
    PromptTokensDetailsWrapper,
    Usage,
)

from graphrag_lite.context_tables import parse_rows
from graphrag_lite.extraction.gleaning import FOUND_NAMES
from graphrag_lite.llm.gateway import CALL_STEP
from graphrag_lite.tokens import count_tokens, get_encoding
from graphrag_lite.words import STOPWORDS

TUPLE, RECORD, COMPLETE = "<|>", "##", "<|COMPLETE|>"
# the longest extraction answer the fake writes for one text unit, in tokens: a real model's answer to a
# 1,200-token unit is one or two thousand; past this, the fake's rule-found names would make it cut off at
# extract_graph.max_completion_tokens (8000) on dense text, which no real model would do
LONGEST_ANSWER = 6000
FAKE_INPUT_PRICE, FAKE_OUTPUT_PRICE = 0.15e-6, 0.60e-6  # USD per token
PROVIDER_ENCODING = "o200k_base"  # the provider's own tokenizer, as OpenAI's counts: not the project's setting
HONORIFICS = ("Mr", "Mrs", "Ms", "Dr", "Sir", "Lady", "Lord", "Captain", "Capt", "Colonel", "Agent", "Professor")
ORG_SUFFIXES = ("Corp", "Corporation", "Inc", "Ltd", "Company", "University", "Agency", "Office", "Council",
                "Committee", "Bank", "Institute", "Navy", "Army", "Society", "Group", "Foundation")
PHRASE = re.compile(r"\b[A-Z][\w'\u2019-]*(?:\s+(?:of|the|de|van|von|and)?\s*[A-Z][\w'\u2019-]*)*")


@dataclass
class FakeStats:
    """What the fake provider was asked, for tests and benchmarks."""

    completions: int = 0
    embeddings: int = 0
    streams: int = 0
    prompt_tokens: int = 0  # of every request received, answered or refused
    refused: int = 0  # 429 answers (rate limits and calls beyond the capacity)
    in_flight: int = 0
    peak_in_flight: int = 0
    started: list[float] = field(default_factory=list)
    first_messages: list[str] = field(default_factory=list)  # what each request began with (a prompt's text)

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]


STATS = FakeStats()


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
    # read by the fake's batch endpoint (fake_batch.py); online calls ignore them
    batch_delay: float = 0.0  # seconds from sending a batch to its answers
    batch_fail: float = 0.0  # share of a batch's requests that fail (its error file)
    batch_invalid: float = 0.0  # share of a batch's requests answered cut off at their length limit (unusable)
    batch_status: str = ""  # how every batch ends instead of completed: failed, expired or cancelled

    @staticmethod
    def parse(model: str) -> Options:
        name, _, query = model.partition("?")
        values: dict[str, Any] = {}
        for key, raw in parse_qsl(query):
            kind = Options.__dataclass_fields__[key].type  # KeyError names an unknown option
            values[key] = raw if kind == "str" else int(raw) if kind == "int" else float(raw)
        return Options(name=name, key=model, **values)


class FakeLLM(CustomLLM):
    def __init__(self) -> None:
        super().__init__()
        self._random: dict[str, random.Random] = {}
        self._prompts: dict[str, list[list[int]]] = {}  # per model string: token lists of prompts seen

    # ------------------------------------------------------------ LiteLLM entry points

    def completion(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return asyncio.run(self.acompletion(*args, **kwargs))

    async def acompletion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> ModelResponse:
        options = Options.parse(model)
        STATS.completions += 1
        prompt_tokens = provider_prompt_tokens(messages)
        STATS.prompt_tokens += prompt_tokens
        STATS.first_messages.append(str(messages[0].get("content", "")) if messages else "")
        STATS.started.append(time.monotonic())
        STATS.in_flight += 1
        STATS.peak_in_flight = max(STATS.peak_in_flight, STATS.in_flight)
        try:
            if options.capacity and STATS.in_flight > options.capacity:
                await asyncio.sleep(0.01)  # a refusal is quick, not instant
                raise _rate_limited(model, retry_after=None)
            if options.latency:
                await asyncio.sleep(options.latency * (1 + options.jitter * (2 * self._draw(options) - 1)))
            text, finish = self._reply(options, model, messages)
            if not _is_correction(messages):
                await self._inject_fault(options, model)
        finally:
            STATS.in_flight -= 1
        text, finish, completion_tokens = cut_at(text, finish, (kwargs.get("optional_params") or {}).get("max_tokens"))
        response: ModelResponse = kwargs.get("model_response") or ModelResponse()
        response.choices[0].message.content = text
        response.choices[0].finish_reason = finish  # type: ignore[assignment]
        cached = self._cached_prefix(options, messages) if options.prefix_cache else 0
        details = PromptTokensDetailsWrapper(cached_tokens=cached) if cached else None
        response.usage = Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,  # type: ignore[attr-defined]
                               total_tokens=prompt_tokens + completion_tokens, prompt_tokens_details=details)
        response.model = options.name
        return response

    def _cached_prefix(self, options: Options, messages: list) -> int:
        """What OpenAI's prompt cache would serve: the longest prefix shared with an earlier prompt, counted
        in blocks of 128 tokens, once it reaches 1,024 tokens (a prompt's static part must come first)."""
        tokens = get_encoding(PROVIDER_ENCODING).encode_ordinary("\n".join(str(m.get("content", "")) for m in messages))
        seen = self._prompts.setdefault(options.key, [])
        shared = max((next((i for i, (a, b) in enumerate(zip(tokens, old, strict=False)) if a != b),
                           min(len(tokens), len(old))) for old in seen), default=0)
        seen.append(tokens)
        return shared // 128 * 128 if shared >= 1024 else 0

    def _reply(self, options: Options, model: str, messages: list) -> tuple[str, str]:
        """A scripted reply for this stage if there is one, else the computed answer (damaged as asked)."""
        stage, step = CALL_STEP.get()
        scripted = current_script(options).next(stage, step)
        if scripted is not None:
            return scripted
        if _is_correction(messages):  # a follow-up asking to correct an unusable answer is answered well
            return answer(_without_corrections(messages)), "stop"
        return self._damage(options, answer(messages))

    async def astreaming(self, model: str, messages: list, *args: Any, **kwargs: Any  # type: ignore[override]
                         ) -> AsyncIterator[GenericStreamingChunk]:
        """The same answer as acompletion, a word at a time (`piece_latency` apart; every other stream
        falls silent for `stall` seconds after its first word)."""
        options = Options.parse(model)
        response = await self.acompletion(model, messages, *args, **kwargs)
        text = str(response.choices[0].message.content)
        words = re.findall(r"\S+\s*", text) or [""]
        usage = response.usage  # type: ignore[attr-defined]
        STATS.streams += 1
        for i, word in enumerate(words):
            last = i == len(words) - 1
            if i and options.piece_latency:
                await asyncio.sleep(options.piece_latency)
            if i == 1 and options.stall and STATS.streams % 2:
                await asyncio.sleep(options.stall)
            yield GenericStreamingChunk(
                text=word, is_finished=last, finish_reason=str(response.choices[0].finish_reason) if last else "",
                index=0, tool_use=None,
                usage=ChatCompletionUsageBlock(prompt_tokens=usage.prompt_tokens,
                                               completion_tokens=usage.completion_tokens,
                                               total_tokens=usage.total_tokens) if last else None)

    def embedding(self, *args: Any, **kwargs: Any) -> EmbeddingResponse:
        return asyncio.run(self.aembedding(*args, **kwargs))

    async def aembedding(self, model: str, input: list, model_response: EmbeddingResponse,
                         *args: Any, **kwargs: Any) -> EmbeddingResponse:
        options = Options.parse(model)
        STATS.embeddings += 1
        if options.latency:
            await asyncio.sleep(options.latency)
        await self._inject_fault(options, model)
        if options.max_batch and len(input) > options.max_batch:
            response = httpx.Response(422, request=httpx.Request("POST", "http://fake.invalid/v1/embeddings"))
            raise litellm.UnprocessableEntityError(f"batch size {len(input)} > maximum allowed batch size "
                                                   f"{options.max_batch}", model=model, llm_provider="fake",
                                                   response=response)
        model_response.data = [{"object": "embedding", "index": i, "embedding": embed_text(str(t), options.dim)}
                               for i, t in enumerate(input)]
        tokens = sum(count_tokens(str(t), PROVIDER_ENCODING) for t in input)
        model_response.usage = Usage(prompt_tokens=tokens, completion_tokens=0, total_tokens=tokens)
        model_response.model = options.name
        return model_response

    # ------------------------------------------------------------ faults

    def forget_draws(self) -> None:
        self._random.clear()
        self._prompts.clear()

    def _draw(self, options: Options) -> float:
        # one generator per model string, so faults of one configured model do not depend on other models
        generator = self._random.setdefault(options.key, random.Random(options.seed))
        return generator.random()

    async def _inject_fault(self, options: Options, model: str) -> None:
        if options.bad_request:
            raise litellm.BadRequestError("the model does not accept this request", llm_provider="fake", model=model)
        if options.auth and self._draw(options) < options.auth:
            raise litellm.AuthenticationError("invalid api key", llm_provider="fake", model=model)
        if options.rate_limit and self._draw(options) < options.rate_limit:
            raise _rate_limited(model, options.retry_after)
        if options.server_error and self._draw(options) < options.server_error:
            raise litellm.InternalServerError("fake server error", llm_provider="fake", model=model)
        if options.drop and self._draw(options) < options.drop:
            raise litellm.APIConnectionError("Connection error: the server closed the connection", llm_provider="fake",
                                             model=model)
        if options.timeout and self._draw(options) < options.timeout:
            await asyncio.sleep(3600)  # the gateway's timeout fires first

    def _damage(self, options: Options, text: str) -> tuple[str, str]:
        if options.malformed and self._draw(options) < options.malformed:
            return text[: len(text) // 3].replace("}", "").replace(COMPLETE, "") or "I cannot answer that.", "stop"
        if options.truncate and self._draw(options) < options.truncate:
            return text[: len(text) // 2], "length"
        if options.fenced and self._draw(options) < options.fenced and text.lstrip().startswith("{"):
            return f"Here is the answer you asked for:\n```json\n{text}\n```\nLet me know if you need more.", "stop"
        return text, "stop"


def _rate_limited(model: str, retry_after: float | None) -> Exception:
    STATS.refused += 1
    request = httpx.Request("POST", "http://fake.invalid/v1/chat/completions")
    headers = {"retry-after": str(retry_after)} if retry_after is not None and retry_after >= 0 else {}
    response = httpx.Response(429, headers=headers, request=request)
    return litellm.RateLimitError("rate limited", llm_provider="fake", model=model, response=response)


def cut_at(text: str, finish: str, max_tokens: int | None) -> tuple[str, str, int]:
    """An answer cut where a real model stops at max_tokens (finish_reason "length"), and its tokens."""
    tokens = _provider_tokens(text)
    if not max_tokens or tokens <= max_tokens:
        return text, finish, tokens
    encoding = get_encoding(PROVIDER_ENCODING)
    return encoding.decode(encoding.encode_ordinary(text)[:int(max_tokens)]), "length", int(max_tokens)


def _without_corrections(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as it was before the unusable answer and the request to correct it."""
    while _is_correction(messages):
        messages = messages[:-2]
    return messages


class Script:
    """Scripted replies by the stage (and step) the gateway names: a test says exactly what the model
    answers, in the styles real models answer, instead of what the fake computes.

        extract_graph.extract: [first reply, second reply]   # stage.step, or just the stage
        community_reports: "one reply for every call"
        summarize_descriptions: [{content: "...", finish_reason: length}]

    Replies of a key are given in order; the last one repeats (a model that answers the same way). Steps:
    extract, glean and check (extraction stages), answer (queries), embed. Calls with no script entry get
    the computed answer."""

    def __init__(self, replies: dict[str, Any] | None = None) -> None:
        self.replies = {k: v if isinstance(v, list) else [v] for k, v in (replies or {}).items()}
        self.served: dict[str, int] = {}

    def next(self, stage: str, step: str) -> tuple[str, str] | None:
        key = next((k for k in (f"{stage}.{step}", stage) if k in self.replies), None)
        if key is None:
            return None
        position = self.served.get(key, 0)
        self.served[key] = position + 1
        reply = self.replies[key][min(position, len(self.replies[key]) - 1)]
        if isinstance(reply, dict):
            return str(reply.get("content", "")), str(reply.get("finish_reason", "stop"))
        return str(reply), "stop"


SCRIPTS: dict[str, Script] = {"": Script()}  # by replies file; "" is the one `scripted` sets from Python


def current_script(options: Options) -> Script:
    if options.replies not in SCRIPTS:
        import yaml

        text = Path(options.replies).read_text(encoding="utf-8")
        SCRIPTS[options.replies] = Script(yaml.safe_load(text) or {})
    return SCRIPTS[options.replies]


@contextlib.contextmanager
def scripted(replies: dict[str, Any]) -> Iterator[Script]:
    """Answer with these replies (for models without a `replies=` file) while the block runs."""
    script = Script(replies)
    SCRIPTS[""] = script
    try:
        yield script
    finally:
        SCRIPTS[""] = Script()


def reset() -> None:
    """Forget what earlier calls did (statistics, fault generators, scripts): each test starts afresh."""
    STATS.reset()
    SCRIPTS.clear()
    SCRIPTS[""] = Script()
    for item in litellm.custom_provider_map:
        if item["provider"] == "fake" and isinstance(item["custom_handler"], FakeLLM):
            item["custom_handler"].forget_draws()


def supported_params(model: str) -> set[str]:
    """What the fake declares it takes (LiteLLM answers OpenAI's full list for any custom provider):
    structured JSON output only with `?structured=1`, so `extract_graph.format: auto` picks tuples for it
    unless a test asks otherwise."""
    params = {"temperature", "max_tokens", "stream"}
    return params | {"response_format"} if Options.parse(model).structured else params


def register_fake_provider(models: list[str] = ()) -> None:  # type: ignore[assignment]
    """Make `fake/...` model strings reach FakeLLM (idempotent), with a nominal price in LiteLLM's price
    map: a gpt-4o-mini-like $0.15 / $0.60 per million tokens, so cost budgets and estimates can be tested
    offline (and because a model missing from the map, or priced at zero, costs LiteLLM slow lookups and
    diagnostics on every call)."""
    if not any(item["provider"] == "fake" for item in litellm.custom_provider_map):
        litellm.custom_provider_map.append({"provider": "fake", "custom_handler": FakeLLM()})
        from litellm.utils import custom_llm_setup

        custom_llm_setup()
    price = {"input_cost_per_token": FAKE_INPUT_PRICE, "output_cost_per_token": FAKE_OUTPUT_PRICE,
             "litellm_provider": "fake", "cache_creation_input_token_cost": 0.0,
             "cache_read_input_token_cost": FAKE_INPUT_PRICE / 2}  # OpenAI's discount for cached prompt tokens
    litellm.register_model({model: {**price, "mode": "embedding" if "embed" in model else "chat"}
                            for model in models if model not in litellm.model_cost})


# ---------------------------------------------------------------- answers


def answer(messages: list[dict[str, Any]]) -> str:
    """Route on what the conversation asks for and compute the answer from the text it contains."""
    first = str(messages[0].get("content", ""))
    last = str(messages[-1].get("content", ""))
    prior = [str(m.get("content", "")) for m in messages[1:] if m.get("role") == "assistant"]
    for matches, respond in ROUTES:
        if matches(first, last):
            return respond(first, last, prior)
    return plain_answer(first, last)


def _is_correction(messages: list[dict[str, Any]]) -> bool:
    return len(messages) > 1 and "could not be used" in str(messages[-1].get("content", ""))


def _is_claims(first: str, last: str) -> bool:
    return "analyze claims" in first or "-Target activity-" in first


def _is_json_graph(first: str) -> bool:
    return '"entities"' in first and '"relationships"' in first


# -- extraction


def source_text(prompt: str) -> str:
    """The document text of an extraction prompt (after the last `Text:`, before `Output:`)."""
    start = prompt.rfind("Text:")
    text = prompt[start + 5:] if start >= 0 else prompt
    end = text.rfind("Output:")
    return (text[:end] if end >= 0 else text).strip()


def entity_types(prompt: str) -> list[str]:
    found = re.search(r"types?:\s*\[([^\]]*)\]", prompt)
    types = [t.strip().upper() for t in found.group(1).split(",")] if found else []
    return [t for t in types if t] or ["ORGANIZATION", "PERSON", "GEO", "EVENT"]


def sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


def find_entities(text: str, types: list[str]) -> dict[str, tuple[str, str]]:
    """Capitalised phrases -> (type, first sentence they appear in), in order of first appearance. A single
    word that only ever appears capitalised at the start of a sentence is not a name; a single word that is
    part of a person's name is that person's."""
    found: dict[str, tuple[str, str]] = {}
    mid_sentence = {m.group(1) for m in re.finditer(r"[a-z,;:]\s+([A-Z][\w'\u2019-]*)", text)}
    for sentence in sentences(text):
        for match in PHRASE.finditer(sentence):
            words = match.group(0).split()
            while words and words[0].lower() in STOPWORDS:
                words = words[1:]
            name = re.sub(r"['\u2019]s$", "", " ".join(words)).strip("'\u2019-")
            if len(name) < 3 or name.lower() in STOPWORDS or name.upper() in found or "'" in name:
                continue
            at_start = not sentence[: match.start()].strip(" \"'\u201c\u2018(")
            if at_start and " " not in name and name not in mid_sentence:
                continue
            before = sentence[: match.start()].rstrip(" .").split()
            found[name.upper()] = (_guess_type(name, before[-1] if before else "", types), sentence)
    people = {word for name, (kind, _) in found.items() if kind == "PERSON" and " " in name for word in name.split()}
    return {name: ("PERSON" if name in people and "PERSON" in types else kind, sentence)
            for name, (kind, sentence) in found.items()}


def _guess_type(name: str, previous: str, types: list[str]) -> str:
    def pick(kind: str) -> str:
        return kind if kind in types else types[0]

    if previous.strip(".") in HONORIFICS:
        return pick("PERSON")
    if name.split()[-1] in ORG_SUFFIXES:
        return pick("ORGANIZATION")
    if previous.lower() in ("in", "at", "to", "from", "near"):
        return pick("GEO")
    return pick("PERSON") if len(name.split()) == 2 else pick("ORGANIZATION")


def _records_for(names: list[str], found: dict[str, tuple[str, str]]) -> list[str]:
    records = [f'("entity"{TUPLE}{n}{TUPLE}{found[n][0]}{TUPLE}{n.title()} appears in the text: {_clip(found[n][1])})'
               for n in names]
    chosen = set(names)
    pairs: dict[tuple[str, str], list[str]] = {}
    for sentence in sentences(" ".join(s for _, s in found.values())):
        inside = [n for n in found if n.lower() in sentence.lower()]
        for i, a in enumerate(inside):
            for b in inside[i + 1:]:
                if a in chosen or b in chosen:
                    pairs.setdefault((a, b), []).append(sentence)
    # like a model, name the strongest few relationships of each entity, not every pair in the text, and stop
    # well before an answer a model would not write for one text unit (the weakest go first)
    ranked = sorted(pairs.items(), key=lambda item: -len(item[1]))[: 3 * len(names)]
    written = {pair: f'("relationship"{TUPLE}{pair[0]}{TUPLE}{pair[1]}{TUPLE}{pair[0].title()} and '
                     f'{pair[1].title()} are mentioned together: {_clip(where[0])}{TUPLE}{min(10, 2 + 2 * len(where))})'
               for pair, where in ranked}
    room = LONGEST_ANSWER * 4 - sum(len(r) for r in records)  # about 4 characters a token
    used = itertools.accumulate(len(r) for r in written.values())  # by the strongest ones up to each
    kept = {pair for pair, length in zip(written, used, strict=True) if length <= room}
    return records + [written[pair] for pair in pairs if pair in kept]


def graph_extraction(first: str, last: str, prior: list[str]) -> str:
    found = find_entities(source_text(first), entity_types(first))
    return _graph_answer(first, list(found)[: math.ceil(len(found) * 2 / 3)], found)  # leave some for gleaning


def _graph_answer(first: str, names: list[str], found: dict[str, tuple[str, str]]) -> str:
    records = _records_for(names, found)
    if not _is_json_graph(first):
        return RECORD.join(records) + COMPLETE
    entities, relationships = [], []
    for record in records:
        fields = record.strip("()").split(TUPLE)
        if fields[0] == '"entity"':
            entities.append({"name": fields[1], "type": fields[2], "description": fields[3]})
        else:
            relationships.append({"source": fields[1], "target": fields[2], "description": fields[3],
                                  "strength": float(fields[4])})
    return json.dumps({"entities": entities, "relationships": relationships})


def _emitted(last: str, prior: list[str]) -> Callable[[str], bool]:
    """Whether a name was extracted before: a compact follow-up lists the names in its last message, a
    history one shows the earlier answers."""
    before, _, after = FOUND_NAMES.partition("{names}")  # the compact follow-up's own wording, not a copy
    listed = re.search(re.escape(before) + "(.*?)" + re.escape(after), last, re.DOTALL)
    if listed:
        return set(listed.group(1).splitlines()).__contains__
    answers = " ".join(prior)
    # JSON answers are written by json.dumps, which escapes non-ASCII letters (a curly apostrophe in a name)
    return lambda name: any(form in answers for form in (f'"entity"{TUPLE}{name}{TUPLE}', f'"name": "{name}"',
                                                         f'"name": {json.dumps(name)}'))


def _missed(first: str, last: str, prior: list[str]) -> tuple[list[str], dict[str, tuple[str, str]]]:
    """The names found in the text that were not extracted before, and every name found."""
    found = find_entities(source_text(first), entity_types(first))
    emitted = _emitted(last, prior)
    return [n for n in found if not emitted(n)], found


def continue_extraction(first: str, last: str, prior: list[str]) -> str:
    return COMPLETE if _is_claims(first, last) else _graph_answer(first, *_missed(first, last, prior))


def loop_check(first: str, last: str, prior: list[str]) -> str:
    return "Y" if not _is_claims(first, last) and _missed(first, last, prior)[0] else "N"


def claim_extraction(first: str, last: str, prior: list[str]) -> str:
    found = find_entities(source_text(first), entity_types(first))
    claims = []
    for name, (_, sentence) in list(found.items())[:5]:
        claims.append(f"({name}{TUPLE}NONE{TUPLE}MENTION{TUPLE}TRUE{TUPLE}NONE{TUPLE}NONE{TUPLE}"
                      f"{name.title()} is reported in the text{TUPLE}{_clip(sentence)})")
    return RECORD.join(claims) + COMPLETE


# -- summaries, reports, map, answers


def summarize(first: str, last: str, prior: list[str]) -> str:
    """Like a model asked for a comprehensive summary within the prompt's word limit: every description is
    represented, by the start of its first sentence, repeats once (a cut at a fixed length would leave the
    last ones out, which no model asked for comprehensiveness does, and the summary parser asks again)."""
    part = first.split("Description List:")[-1]
    descriptions = [d.strip(' "[],') for d in re.split(r"\n|\",\s*\"", part) if d.strip(' "[],')]
    unique = list(dict.fromkeys(d for d in descriptions if not d.startswith("#") and len(d) > 3))
    limit = re.search(r"Limit the summary to (\d+) words", first)
    share = max(8, int(limit.group(1)) // max(len(unique), 1)) if limit else 60  # words per description
    firsts = [" ".join(_first_sentence(d).split()[:share]) for d in unique]
    text = " ".join(s if s.endswith((".", "!", "?", "\u2026")) else f"{s}." for s in firsts)
    return text or "No description."


def _first_sentence(text: str) -> str:
    found = re.match(r".+?[.!?\u2026](?=\s|$)", text.strip(), re.DOTALL)
    return (found.group(0) if found else text).strip()


def community_report(first: str, last: str, prior: list[str]) -> str:
    entities = parse_rows(first, "Entities")
    relationships = parse_rows(first, "Relationships")
    names = [row[1] for row in entities if len(row) > 1][:3] or ["the community"]
    findings = [{"summary": f"{row[1]} and {row[2]}",
                 "explanation": f"{row[3] if len(row) > 3 else ''} [Data: Relationships ({row[0]})]"}
                for row in relationships[:5] if len(row) > 2]
    findings += [{"summary": row[1], "explanation": f"{row[2] if len(row) > 2 else ''} [Data: Entities ({row[0]})]"}
                 for row in entities[:10] if len(row) > 1]
    report = {
        "title": " and ".join(names[:2]) + (" community" if len(names) > 2 else ""),
        "summary": f"This community centres on {', '.join(names)}, with {len(entities)} entities ("
                   f"{', '.join(row[1] for row in entities[:12] if len(row) > 1)}) and "
                   f"{len(relationships)} relationships.",
        "rating": min(10.0, round(1 + len(entities) / 2 + len(relationships) / 4, 1)),
        "rating_explanation": "Rated by the number of entities and relationships in the community.",
        "findings": findings or [{"summary": names[0], "explanation": "The community has little detail."}],
    }
    return json.dumps(report)


def _words(text: str) -> set[str]:
    """Content words, cut to 7 letters so that word forms match ("conflicting" answers "conflict")."""
    return {w[:7] for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOPWORDS and len(w) > 2}


def _question(first: str, last: str) -> str:
    return last if last != first else first.rsplit("Question:", 1)[-1]


def map_points(first: str, last: str, prior: list[str]) -> str:
    question = _words(_question(first, last))
    points = []
    rows = re.split(r"\n(?=\d+\|)", first)  # a report's content may span lines: a row starts with its id
    for line in rows[1:]:
        shared = question & _words(line)
        if shared and "|" in line:
            ident = line.split("|", 1)[0].strip()
            points.append({"description": f"About {', '.join(sorted(shared))}: {_clip(line, 200)} "
                                          f"[Data: Reports ({ident})]",
                           "score": min(100, 20 * len(shared))})
    points.sort(key=lambda p: -int(str(p["score"])))
    return json.dumps({"points": points[:5]})


def next_hop(first: str, last: str, prior: list[str]) -> str:
    """The far end of the first relationship that leaves the entities the question names (the bridge a
    model would follow next), or ENOUGH when there is none."""
    asked = _words(first.split("---Question---")[-1].split("---Information found so far---")[0])
    searched = first.split("---Already searched (do not repeat)---")[-1].split("---")[0].splitlines()
    for row in parse_rows(first, "Relationships"):
        ends = row[1:3] if len(row) > 2 else []
        named = [e for e in ends if _words(e) and _words(e) <= asked]
        others = [e for e in ends if e not in named and e not in searched]
        if named and others:
            return others[0]
    return "ENOUGH"


def rate_relevance(first: str, last: str, prior: list[str]) -> str:
    question = _words(first.split("---Question---")[1].split("---Report---")[0])
    shared = question & _words(first.split("---Report---")[-1])
    return json.dumps({"reason": f"shares {len(shared)} words with the question", "rating": min(5, len(shared))})


def plain_answer(first: str, last: str, prior: list[str] | None = None) -> str:
    """An answer from the lines of the context that share the most words with the question, citing the
    records they come from as `[Data: Section (id)]`."""
    question = _words(_question(first, last))
    section = ""
    scored: list[tuple[int, int, str]] = []
    for position, line in enumerate(first.splitlines()):
        header = re.fullmatch(r"-{3,}\s*([A-Za-z]+)[\w ]*-{3,}", line.strip())
        if header:
            name = header.group(1).capitalize()
            section = name if name in ("Reports", "Entities", "Relationships", "Claims", "Sources") else ""
            continue
        overlap = len(question & _words(line))
        if not overlap or len(line) < 20:
            continue
        ident = line.split("|", 1)[0].strip()
        cite = f" [Data: {section} ({ident})]" if ident.isdigit() and section else ""
        body = line.split("|", 1)[-1] if cite else line
        if len(body) > 300:  # quote the sentence that matches best, not the start of a long passage
            body = max(sentences(body), key=lambda s: len(question & _words(s)))
        scored.append((overlap, -position, _clip(body, 300) + cite))
    best = [text for _, _, text in sorted(scored, reverse=True)[:3]]
    if not best:
        return "I do not know: the provided data does not answer this question."
    return "Based on the data: " + " ".join(best)


def _clip(text: str, limit: int = 160) -> str:
    text = " ".join(text.replace(TUPLE, " ").replace(RECORD, " ").split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def judgment(first: str, last: str, prior: list[str]) -> str:
    """A judge that looks only at content, never at position: the answer with more distinct content words
    wins every criterion but directness, which the shorter answer wins; equal counts tie."""
    criteria = re.findall(r"^- ([\w -]+):", first.split("---Criteria---")[1].split("---")[0], re.M)
    answers = [first.split("---Answer 1---")[1].split("---Answer 2---")[0], first.split("---Answer 2---")[1]]
    sizes = [len(_words(a)) for a in answers]
    verdict = {}
    for name in criteria:
        wanted = min(sizes) if name == "directness" else max(sizes)
        winner: int | str = "tie" if sizes[0] == sizes[1] else sizes.index(wanted) + 1
        verdict[name] = {"winner": winner, "reason": f"distinct words: {sizes[0]} against {sizes[1]}"}
    return json.dumps(verdict)


def domain_answer(first: str, last: str, prior: list[str]) -> str:
    """The two most frequent content words of the passages, as a phrase."""
    counts = Counter(w for w in re.findall(r"[a-z]{4,}", first.split("-Task-")[0].lower()) if w not in STOPWORDS)
    top = [w for w, _ in counts.most_common(2)] or ["general"]
    return f"texts about {' and '.join(top)}"


def types_answer(first: str, last: str, prior: list[str]) -> str:
    return json.dumps(["person", "organization", "geo", "event"])


def alias_choice(first: str, last: str, prior: list[str]) -> str:
    """The candidate whose description shares most words with the short name's; 0 when none shares any."""
    described = first.split("What the text says about it:")[1].split("-Candidates-")[0]
    listing = first.split("-Candidates-")[1]
    candidates = re.findall(r"^(\d+)\. [^:]*: (.*)$", listing, re.M)
    shared = [(len(_words(described) & _words(text)), int(number)) for number, text in candidates]
    best = max(shared, default=(0, 0))
    tied = [n for overlap, n in shared if overlap == best[0]]
    return f"ANSWER: {best[1] if best[0] and len(tied) == 1 else 0}"


# what a prompt of each kind says, and the function that answers it (the first match answers)
ROUTES: list[tuple[Callable[[str, str], bool], Callable[[str, str, list[str]], str]]] = [
    (lambda first, last: "---Answer 2---" in first and "---Criteria---" in first, judgment),
    (lambda first, last: "-Candidates-" in first and "Which candidate does the short name denote" in first,
     alias_choice),
    (lambda first, last: "what domain or subject are these documents about" in first, domain_answer),
    (lambda first, last: "Which kinds of named things should it hold?" in first, types_answer),
    (lambda first, last: "Answer Y if there are still" in last or "Answer Y or N" in last, loop_check),
    (lambda first, last: "were missed in the last extraction" in last, continue_extraction),
    (_is_claims, claim_extraction),
    (lambda first, last: ('("entity"' in first and "relationship" in first) or _is_json_graph(first),
     graph_extraction),
    (lambda first, last: "comprehensive summary" in first, summarize),
    (lambda first, last: '"rating"' in first and "---Question---" in first, rate_relevance),
    (lambda first, last: "---Information found so far---" in first, next_hop),
    (lambda first, last: "community" in first.lower() and '"findings"' in first, community_report),
    (lambda first, last: '"points"' in first, map_points),
]


# ---------------------------------------------------------------- embeddings


def embed_text(text: str, dim: int) -> list[float]:
    """A deterministic vector that keeps lexical similarity: hashed words and character trigrams. The fake
    stands in for a remote server, whose work should cost the indexing process as little as it can: the
    trigrams are counted as integer codes with numpy, and each distinct feature is hashed once per process
    (a word and the trigram that spells the same text share a hash, as one feature)."""
    lowered = text.lower()
    words = Counter(re.findall(r"\w+", lowered))
    trigrams, trigram_counts = _trigram_codes(lowered)
    votes = _VOTES.get(dim)
    if votes is None:
        votes = _VOTES[dim] = _Votes(dim)
    signed = np.fromiter(itertools.chain(map(votes.__getitem__, words), map(votes.__getitem__, trigrams.tolist())),
                         dtype=np.int64, count=len(words) + len(trigrams))
    counts = np.concatenate([np.fromiter(words.values(), dtype=np.float64, count=len(words)), trigram_counts])
    # counts are whole numbers, so these sums are exact in any order: the vector is the one that adding a
    # feature at a time gives
    vector = np.bincount(np.abs(signed) - 1, weights=np.sign(signed) * counts, minlength=dim)
    norm = math.sqrt(float(np.dot(vector, vector))) or 1.0
    return (vector / norm).tolist()


def _trigram_codes(lowered: str) -> tuple[np.ndarray, np.ndarray]:
    """The distinct character trigrams of `lowered` as integers (three 21-bit code points), and their counts."""
    if len(lowered) < 3:
        return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.float64)
    points = np.frombuffer(lowered.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).astype(np.uint64)
    codes = (points[:-2] << np.uint64(42)) | (points[1:-1] << np.uint64(21)) | points[2:]
    distinct, counts = np.unique(codes, return_counts=True)
    return distinct, counts.astype(np.float64)


class _Votes(dict[Any, int]):
    """Each feature's bucket and sign for one dimension, as one signed number (the sign times bucket + 1), hashed
    on first sight and remembered: a word by its text, a trigram by its code."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def __missing__(self, feature: str | int) -> int:
        if len(self) >= 1 << 19:  # a bound on the memory (about 50 MB), as a long-running fake server needs
            self.clear()
        text = feature if isinstance(feature, str) else \
            chr(feature >> 42) + chr((feature >> 21) & 0x1FFFFF) + chr(feature & 0x1FFFFF)
        self[feature] = _feature_vote(text, self.dim)
        return self[feature]


_VOTES: dict[int, _Votes] = {}


def provider_prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """A request's prompt tokens as the provider counts them, online or in a batch."""
    return sum(_provider_tokens(str(m.get("content", ""))) for m in messages)


@functools.lru_cache(maxsize=4096)
def _provider_tokens(text: str) -> int:
    """A message's tokens as the provider counts them: a gleaning resends the first prompt and answer, which
    a remote server would count on its side; here it would be the indexing process's CPU, twice."""
    return count_tokens(text, PROVIDER_ENCODING)


def _feature_vote(feature: str, dim: int) -> int:
    digest = hashlib.blake2b(feature.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    bucket = int.from_bytes(digest[:4], "little") % dim
    return bucket + 1 if digest[4] & 1 else -(bucket + 1)
