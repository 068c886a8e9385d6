"""Batch mode (`index --batch`): the index stages' model calls as provider batch jobs, at the batch price.

The gateway hands the first attempt of each chat call to `Batcher.answer` (corrections, asked after an
answer the stage could not use, go online). Calls for a model that come together (every text unit of a
stage, every report of a level) are collected until none has come for `batch.window` seconds, written as
one JSONL file of OpenAI-style requests, uploaded and submitted with LiteLLM's file and batch functions, and
polled until the provider is done. Every answer is then checked by the stage's parser like an online one;
what a batch did not answer (a failed request, a batch that failed, expired or was cancelled) goes online.

A request's custom_id is its call's cache key, and OUTPUT/llm_batches.json keeps each batch sent, with the
custom_ids it holds, until its answers are delivered: a run that was stopped re-attaches to it instead of
sending its calls again. Answers are priced at LiteLLM's batch prices where its price map has them, else at
half the online price (the usual batch discount).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
import weakref
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from graphrag_lite.config import GraphRagConfig, ModelConfig
from graphrag_lite.llm.batch_store import BATCH_FILE, BatchStore
from graphrag_lite.llm.calls import Answer, message_tokens
from graphrag_lite.llm.failures import describe, http_status, is_connection_failure, retryable
from graphrag_lite.llm.ledger import Ledger
from graphrag_lite.llm.prices import batch_price, batch_unit_prices, longest_answer, priced
from graphrag_lite.llm.providers import BatchFunctions, batch_functions, connection, key_problem, online_reason, plugged
from graphrag_lite.tokens import count_tokens
from graphrag_lite.words import counted

T = TypeVar("T")
LOG = logging.getLogger("graphrag_lite.batch")  # the run's log file; `index --batch` shows it on the terminal
ENDPOINT = "/v1/chat/completions"
DONE = frozenset({"completed", "failed", "expired", "cancelled"})
MAX_FILE_BYTES = 190 * 2**20  # OpenAI and Azure take batch input files of 200 MB at most
FIRST_POLL = 1.0  # seconds; each wait is half as long again as the last, up to batch.poll_interval
SHOWN_EVERY = 600.0  # seconds between two poll lines of a batch whose progress did not change
BATCH_WINDOW_S = 24 * 3600.0  # the completion window every batch is sent with
ATTEMPTS = 5  # of a poll or a download that fails (the network, a 5xx) before the batch's calls go online


class BatchItemFailed(Exception):
    """A batch did not answer a call: the call goes online."""


@dataclass
class _Request:
    custom_id: str
    line: str  # the JSONL line sent
    messages: list[dict[str, str]]
    max_tokens: int | None
    stage: str
    waiting: list[asyncio.Future[Answer]] = field(default_factory=list)  # a call each (the same call twice)

    def prompt_tokens(self) -> int:
        """As the gateway counts a prompt before sending it."""
        return sum(message_tokens(m["content"]) for m in self.messages)


@dataclass
class _Collection:
    """The calls for one model collected in one event loop and not sent yet."""

    requests: dict[str, _Request] = field(default_factory=dict)
    last: float = 0.0  # when the latest came (the event loop's clock)


@dataclass
class _LoopWork:
    """The batcher's work in one event loop (each stage runs its own): calls collected per model id, and the
    batches followed, by batch id, with the calls waiting for each."""

    collecting: dict[str, _Collection] = field(default_factory=dict)
    following: dict[str, dict[str, _Request]] = field(default_factory=dict)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)


class Batcher:
    """Collects the first attempts of chat calls into provider batches and hands each call its answer."""

    def __init__(self, config: GraphRagConfig, ledger: Ledger, litellm: Any) -> None:
        self.settings = config.batch
        self.store = BatchStore(config.output.base_dir / BATCH_FILE)
        self.counts: dict[str, Counter[str]] = defaultdict(Counter)  # per stage: batched, online, sent, reattached
        self._ledger = ledger
        self._litellm = litellm
        self._online: dict[str, str | None] = {}  # per model string: why its calls go online (None: by batch)
        self._args: dict[tuple[str, str], dict[str, Any]] = {}  # the provider's arguments per model and call
        self._work: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopWork] = weakref.WeakKeyDictionary()

    async def answer(self, model_id: str, model: ModelConfig, messages: list[dict[str, str]], args: dict[str, Any],
                     key: str, call: tuple[str, str]) -> Answer | None:
        """The answer to a call's first attempt from a batch; None when the call goes online instead (its
        model takes no batch, or its batch did not answer it)."""
        answer = None
        if self._online_reason(model) is None:
            with contextlib.suppress(BatchItemFailed):
                answer = await self._collect(model_id, model, messages, args, key, call)
        self.counts[call[0]]["online" if answer is None else "batched"] += 1
        return answer

    # ------------------------------------------------------------ collecting and sending

    def _collect(self, model_id: str, model: ModelConfig, messages: list[dict[str, str]], args: dict[str, Any],
                 key: str, call: tuple[str, str]) -> asyncio.Future[Answer]:
        """The call's request, in the collection of its model that goes out next; `call`: its stage and step."""
        loop = asyncio.get_running_loop()
        work = self._work.setdefault(loop, _LoopWork())
        collection = work.collecting.get(model_id)
        if collection is None:
            collection = work.collecting[model_id] = _Collection()
            _start(work, self._send_when_quiet(work, model_id, model, collection))
        request = collection.requests.get(key)
        if request is None:
            line: dict[str, Any] = {"custom_id": key, "method": "POST", "url": ENDPOINT,
                                    "body": {**self._body(model, args), "messages": messages}}
            if plugged(model.model) is not None:  # a plug-in is told each call's stage and step (Provider)
                line["call"] = {"stage": call[0], "step": call[1]}
            request = collection.requests[key] = _Request(key, json.dumps(line, ensure_ascii=False), messages,
                                                          args.get("max_tokens"), call[0])
        future: asyncio.Future[Answer] = loop.create_future()
        request.waiting.append(future)
        collection.last = loop.time()
        return future

    async def _send_when_quiet(self, work: _LoopWork, model_id: str, model: ModelConfig, collection: _Collection
                               ) -> None:
        loop = asyncio.get_running_loop()
        while (wait := collection.last + self.settings.window - loop.time()) > 0:
            await asyncio.sleep(wait)
        del work.collecting[model_id]  # calls that come from now on make the next batch
        requests = list(collection.requests.values())
        try:
            await self._dispatch(work, model, requests)
        except Exception as err:  # the budget (BudgetExceeded), or a bug: the calls raise it
            _settle(requests, err)

    async def _dispatch(self, work: _LoopWork, model: ModelConfig, requests: list[_Request]) -> None:
        """Re-attach the calls that a batch of an earlier run holds (not delivered yet); send the others."""
        left = {r.custom_id: r for r in requests}
        for entry in self.store.entries():
            if entry["model"] == model.model and entry["endpoint"] == _endpoint(model):
                held = {custom_id: left.pop(custom_id) for custom_id in entry["custom_ids"] if custom_id in left}
                if held:
                    LOG.info("%s: %s re-attached to batch %s, sent %s ago by an earlier run", entry["stage"],
                             counted(len(held), "call"), entry["id"], _duration(time.time() - entry["sent"]))
                    self.counts[entry["stage"]]["reattached"] += 1
                    self._follow(work, model, entry, held, None)
        for chunk in _chunks(list(left.values()), self.settings.max_requests):
            if self._online_reason(model) is not None:  # its batch API refused an earlier chunk
                _settle(chunk, BatchItemFailed(str(self._online[model.model])))
                continue
            await self._send(work, model, chunk)

    async def _send(self, work: _LoopWork, model: ModelConfig, requests: list[_Request]) -> None:
        reservation = await self._reserve(model, requests)
        try:
            entry = await self._submit(model, requests)
        except Exception as err:  # these calls go online; after a refusal (not an outage), all of the model's
            if reservation is not None:
                self._ledger.release(reservation)
            reason = f"its batch API {'failed' if retryable(err) else 'refused a batch'} ({describe(err, model)})"
            if not retryable(err):
                self._online[model.model] = reason
            LOG.warning("batch mode: model %s: %s; %s go online", model.model, reason,
                        "these calls" if retryable(err) else "its calls for the rest of this run")
            _settle(requests, BatchItemFailed(reason))
            return
        self._follow(work, model, entry, {r.custom_id: r for r in requests}, reservation)

    async def _submit(self, model: ModelConfig, requests: list[_Request]) -> dict[str, Any]:
        """Upload the requests, start their batch, and keep it in the batch file before anything else."""
        functions, provider, connection = self._api(model)
        content = "".join(r.line + "\n" for r in requests).encode("utf-8")
        upload = await self._persist(lambda: functions.acreate_file(  # a file sent twice is only a stray file
            file=("graphrag-lite-batch.jsonl", content, "application/jsonl"), purpose="batch",
            custom_llm_provider=provider, **connection), when=retryable)
        batch = await self._persist(lambda: functions.acreate_batch(  # retried only when surely not created
            completion_window="24h", endpoint=ENDPOINT, input_file_id=upload.id, custom_llm_provider=provider,
            model=model.model, **connection), when=_not_created)
        stage = requests[0].stage
        entry = {"id": batch.id, "model": model.model, "endpoint": _endpoint(model), "provider": provider,
                 "stage": stage, "sent": time.time(), "custom_ids": [r.custom_id for r in requests]}
        self.store.add(entry)
        self.counts[stage]["sent"] += 1
        LOG.info("%s: %s sent to %s as batch %s, at the batch price; the provider answers within 24 hours",
                 stage, counted(len(requests), "call"), model.model, batch.id)
        return entry

    async def _reserve(self, model: ModelConfig, requests: list[_Request]) -> tuple[float, int] | None:
        """Count a batch against the budget before it is sent at its worst case, as the gateway counts an
        online call (each answer as long as its max_tokens, else the price map's longest answer, else its
        prompt); None when there is no budget."""
        if self._ledger.max_cost_usd is None and self._ledger.max_tokens is None:
            return None
        prompts = [r.prompt_tokens() for r in requests]
        prompt = sum(prompts)
        completion = sum(longest_answer(model.model, r.max_tokens) or p for p, r in zip(prompts, requests, strict=True))
        cost = batch_price(self._litellm, model.model, prompt, completion) or 0.0
        while (reservation := self._ledger.reserve(cost, prompt + completion,
                                                   f"the next batch ({counted(len(requests), 'call')})")) is None:
            await asyncio.sleep(1.0)  # other batches in flight may leave room once answered
        return reservation

    # ------------------------------------------------------------ following a batch to its answers

    def _follow(self, work: _LoopWork, model: ModelConfig, entry: dict[str, Any], requests: dict[str, _Request],
                reservation: tuple[float, int] | None) -> None:
        if entry["id"] in work.following:  # already followed in this event loop: these calls wait for it too
            followed = work.following[entry["id"]]
            for custom_id, request in requests.items():
                if custom_id in followed:  # the same call again: both callers wait for the one answer
                    followed[custom_id].waiting.extend(request.waiting)
                else:
                    followed[custom_id] = request
            return
        work.following[entry["id"]] = requests
        _start(work, self._until_done(work, model, entry, reservation))

    async def _until_done(self, work: _LoopWork, model: ModelConfig, entry: dict[str, Any],
                          reservation: tuple[float, int] | None) -> None:
        batch: Any = None
        lines: dict[str, dict[str, Any]] = {}
        try:
            batch = await self._poll(model, entry)
            lines = await self._results(model, entry, batch)
        except Exception as err:  # the provider could not be asked: the calls go online
            LOG.warning("batch %s (%s): %s; its calls go online", entry["id"], entry["stage"], describe(err, model))
        finally:  # a cancelled run keeps the batch in the file: the next run re-attaches to it
            if reservation is not None:
                self._ledger.release(reservation)
        requests = work.following.pop(entry["id"])
        try:
            self._deliver(model, entry, requests, lines, getattr(batch, "status", "unknown"))
        finally:  # a result it could not read must not leave a call waiting: what is left goes online
            _settle(list(requests.values()), BatchItemFailed(f"batch {entry['id']}: its result could not be read"))
        self.store.remove(entry["id"])

    async def _poll(self, model: ModelConfig, entry: dict[str, Any]) -> Any:
        """The batch once it is done, polled less and less often (its progress shown as it changes)."""
        functions, provider, connection = self._api(model)
        wait = min(FIRST_POLL, self.settings.poll_interval)
        shown: list[Any] = [None, 0.0]  # the progress last shown, and when
        while True:
            batch = await self._persist(lambda: functions.aretrieve_batch(
                batch_id=entry["id"], custom_llm_provider=provider, **connection), patient=True)
            _show(entry, batch, shown)
            if batch.status in DONE:
                return batch
            await asyncio.sleep(wait)
            wait = min(wait * 1.5, self.settings.poll_interval)

    async def _results(self, model: ModelConfig, entry: dict[str, Any], batch: Any) -> dict[str, dict[str, Any]]:
        """The result line of each custom_id the batch answered or failed (an expired or cancelled batch
        answered some)."""
        functions, provider, connection = self._api(model)
        lines: dict[str, dict[str, Any]] = {}

        async def download(file_id: str) -> bytes:
            content = await functions.afile_content(file_id=file_id, custom_llm_provider=provider, model=model.model,
                                                    **connection)
            return bytes(content.content)

        for file_id in (getattr(batch, "error_file_id", None), getattr(batch, "output_file_id", None)):
            if file_id:
                found, unreadable = _by_custom_id(await self._persist(functools.partial(download, file_id),
                                                                      patient=True))  # results already paid for
                if unreadable:
                    LOG.warning("batch %s (%s): %d result lines could not be read; their calls go online",
                                entry["id"], entry["stage"], unreadable)
                lines.update(found)
        return lines

    async def _persist(self, ask: Callable[[], Awaitable[T]], patient: bool = False,
                       when: Callable[[Exception], bool] = lambda err: True) -> T:
        """`ask()`, again after a failure (a dropped connection, a 5xx) that `when` allows, ATTEMPTS times at
        most; `patient` (a poll of a batch already paid for): for as long as the provider's batch window,
        since giving up would pay for its calls twice, online and in the batch."""
        deadline = time.monotonic() + BATCH_WINDOW_S
        attempt = 0
        while True:
            try:
                return await ask()
            except Exception as err:
                attempt += 1
                if not when(err) or (attempt >= ATTEMPTS and not (patient and time.monotonic() < deadline)):
                    raise
                LOG.info("batch API: %s; asking again", type(err).__name__)
                await asyncio.sleep(min(2.0 ** min(attempt, 10), self.settings.poll_interval))

    def _deliver(self, model: ModelConfig, entry: dict[str, Any], requests: dict[str, _Request],
                 lines: dict[str, dict[str, Any]], status: str) -> None:
        prices = batch_unit_prices(self._litellm, model.model)
        problems: Counter[str] = Counter()
        for request in requests.values():
            outcome = item_answer(lines.get(request.custom_id), request, prices)
            if isinstance(outcome, str):
                problems[outcome] += 1
            _settle([request], BatchItemFailed(outcome) if isinstance(outcome, str) else outcome)
        online = sum(problems.values())
        why = "; ".join(f"{n} x {problem}" for problem, n in problems.most_common(3))
        (LOG.warning if online else LOG.info)("batch %s (%s) %s: %s%s", entry["id"], entry["stage"], status,
                                              counted(len(requests) - online, "answer"),
                                              f"; online instead: {counted(online, 'call')} ({why})" if online else "")

    # ------------------------------------------------------------ the provider

    def _online_reason(self, model: ModelConfig) -> str | None:
        if model.model not in self._online:
            # without a usable key, the online path stops the run with the fix
            reason = online_reason(self._litellm, model) or ("no usable API key" if key_problem(model) else None)
            self._online[model.model] = reason
            if reason is not None:
                LOG.warning("batch mode: model %s: %s; its calls go online", model.model, reason)
        return self._online[model.model]

    def _api(self, model: ModelConfig) -> tuple[BatchFunctions, str, dict[str, Any]]:
        """The batch functions for the model (a plug-in provider's own, else LiteLLM's), its provider, and its
        key, endpoint and API version."""
        functions, provider = batch_functions(self._litellm, model)
        reached = {k: v for k, v in connection(model).items() if k in ("api_key", "api_base", "api_version")}
        return functions, provider, reached

    def _body(self, model: ModelConfig, args: dict[str, Any]) -> dict[str, Any]:
        """A request's body but its messages: the model's name at its provider, and the call's arguments as
        LiteLLM maps them for the provider online (max_completion_tokens for OpenAI's reasoning models,
        unsupported ones dropped). Remembered per model and arguments: a stage's calls share them."""
        memo = (model.model, json.dumps(args, sort_keys=True, default=str))
        if memo not in self._args:
            name, provider = self._litellm.get_llm_provider(model.model, api_base=model.api_base)[:2]
            try:
                from litellm.utils import get_optional_params

                mapped = dict(get_optional_params(model=name, custom_llm_provider=provider, drop_params=True, **args))
            except Exception:  # a provider LiteLLM cannot map offline: the arguments as configured
                mapped = dict(args)
            mapped.pop("stream", None)
            extra = mapped.pop("extra_body", None) or {}
            self._args[memo] = {"model": name, **mapped, **extra}
        return self._args[memo]


# ---------------------------------------------------------------- results


def item_answer(line: dict[str, Any] | None, request: _Request, prices: tuple[float, float, float] | None
                ) -> Answer | str:
    """A request's answer from its result line, priced at the batch rate; or why there is none."""
    if line is None:
        return "no result in the batch's files"
    response = _mapping(line.get("response"))
    body = _mapping(response.get("body"))
    if response.get("status_code") != 200 or not body.get("choices"):
        error = line.get("error") or body.get("error") or {}
        if not isinstance(error, dict):  # some providers give the error as text
            return str(error)[:200]
        return str(error.get("code") or error.get("message") or f"status {response.get('status_code')}")[:200]
    choice = body["choices"][0]
    text = (choice.get("message") or {}).get("content") or ""
    usage = body.get("usage") or {}
    prompt = int(usage.get("prompt_tokens") or request.prompt_tokens())
    completion = int(usage.get("completion_tokens") or count_tokens(text))
    cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    return Answer(text, prompt, completion, priced(prices, prompt, completion, cached), 0,
                   choice.get("finish_reason"), cached)


def _not_created(err: Exception) -> bool:
    """A failed batch creation that surely created nothing: no connection was made, or the provider said
    to wait (429). After a time-out or a 5xx the batch may exist: sending it again could pay twice."""
    return is_connection_failure(err) or http_status(err) == 429


def _mapping(value: Any) -> dict[str, Any]:
    """`value` when it is a JSON object; empty otherwise (null, or a provider's error as text)."""
    return value if isinstance(value, dict) else {}


def _by_custom_id(content: bytes) -> tuple[dict[str, dict[str, Any]], int]:
    """The result lines by custom_id, and how many lines could not be read (one bad line, e.g. a file cut off,
    costs its own call a trip online, not every call of the batch)."""
    found: dict[str, dict[str, Any]] = {}
    unreadable = 0
    for text in content.decode("utf-8", errors="replace").splitlines():
        if not text.strip():
            continue
        try:
            line = json.loads(text)
        except json.JSONDecodeError:
            line = None
        if isinstance(line, dict) and "custom_id" in line:
            found[line["custom_id"]] = line
        else:
            unreadable += 1
    return found, unreadable


def _settle(requests: list[_Request], outcome: Answer | BaseException) -> None:
    """Give every call still waiting for these requests its answer, or the exception it raises."""
    for request in requests:
        for future in request.waiting:
            if future.done():  # its caller was cancelled
                continue
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)


def _chunks(requests: list[_Request], size: int) -> Iterator[list[_Request]]:
    """Batches of at most `size` requests and MAX_FILE_BYTES of JSONL."""
    chunk: list[_Request] = []
    volume = 0
    for request in requests:
        if chunk and (len(chunk) >= size or volume + len(request.line) + 1 > MAX_FILE_BYTES):
            yield chunk
            chunk, volume = [], 0
        chunk.append(request)
        volume += len(request.line) + 1
    if chunk:
        yield chunk


def _start(work: _LoopWork, coroutine: Coroutine[Any, Any, None]) -> None:
    """A task of the batcher's, kept referenced until it ends (the event loop keeps only weak references)."""
    task = asyncio.get_running_loop().create_task(coroutine)
    work.tasks.add(task)
    task.add_done_callback(work.tasks.discard)


def _show(entry: dict[str, Any], batch: Any, shown: list[Any]) -> None:
    """A poll's line (in the log file, and on the terminal with --batch) when the batch's progress changed
    since the last line, or SHOWN_EVERY seconds after it: a real batch takes hours."""
    counts = getattr(batch, "request_counts", None)
    done, failed = getattr(counts, "completed", 0) or 0, getattr(counts, "failed", 0) or 0
    total = getattr(counts, "total", 0) or len(entry["custom_ids"])
    progress = (batch.status, done, failed)
    if progress == shown[0] and time.monotonic() - shown[1] < SHOWN_EVERY:
        return
    shown[:] = [progress, time.monotonic()]
    LOG.info("batch %s (%s): %s, %d/%d done%s, %s", entry["id"], entry["stage"], batch.status, done, total,
             f", {failed} failed" if failed else "", _duration(time.time() - entry["sent"]))


def _endpoint(model: ModelConfig) -> str:
    return f"{model.api_base or ''}|{model.api_version or ''}"


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


