"""The LLM gateway, end to end through LiteLLM and the fake provider (no network)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from pydantic import BaseModel

from graphrag_lite.answer_parsing import ParseError, json_parser
from graphrag_lite.config import BudgetConfig, CacheConfig, GraphRagConfig, ModelConfig
from graphrag_lite.fake.embedding import embed_text as fake_vector
from graphrag_lite.fake.provider import STATS
from graphrag_lite.llm.errors import LLMCallError, LLMConfigurationError
from graphrag_lite.llm.gateway import Gateway
from graphrag_lite.llm.ledger import BudgetExceeded


class Report(BaseModel):
    title: str
    rating: float


REPORT_PROMPT = ('Write a community report as JSON with "title", "summary", "rating", "rating_explanation" and '
                 '"findings".\n-----Entities-----\nid|entity|description\n1|ACME|a company\n2|BOB|a person\n')


def make_gateway(tmp_path: Path, model: str = "fake/default", use_cache: bool = True, budget=None,
                 **model_args) -> Gateway:
    model_args.setdefault("max_retry_wait", 0.02)
    cfg = GraphRagConfig(models={"m": ModelConfig(model=model, **model_args)},
                         cache=CacheConfig(base_dir=tmp_path / "cache"), budget=budget or BudgetConfig())
    return Gateway(cfg, use_cache=use_cache)


def ask(gateway: Gateway, prompts: list[str], step: str = "answer", **kwargs):
    async def run():
        return await asyncio.gather(*(gateway.chat("m", [{"role": "user", "content": p}], stage="test", step=step,
                                                   **kwargs) for p in prompts))
    return asyncio.run(run())


@pytest.fixture(autouse=True)
def fresh_stats():
    STATS.reset()


def test_concurrency_bound_is_held(tmp_path):
    gateway = make_gateway(tmp_path, "fake/default?latency=0.05", concurrency=3)
    ask(gateway, [f"question {i}" for i in range(20)])
    assert STATS.completions == 20
    assert STATS.peak_in_flight == 3


def test_requests_per_minute_bound_is_held(tmp_path, monkeypatch):
    from graphrag_lite.llm.limits import ModelLimiter

    # stamped where the limiter lets a call go: stamps taken at the fake also carry the client's own delays
    # (LiteLLM's set-up, a busy machine), which can bunch calls up after the limiter spaced them out
    admitted: list[float] = []
    admit = ModelLimiter.admit

    async def stamped(self, estimated_tokens):
        level = await admit(self, estimated_tokens)
        admitted.append(time.monotonic())
        return level

    monkeypatch.setattr(ModelLimiter, "admit", stamped)
    gateway = make_gateway(tmp_path, requests_per_minute=1200)  # 20 a second, bursts of 20
    started = time.monotonic()
    ask(gateway, [f"question {i}" for i in range(50)])
    elapsed = time.monotonic() - started
    assert elapsed >= (50 - 20) / 20 * 0.95 and len(admitted) == 50
    stamps = sorted(admitted)
    for i, t in enumerate(stamps):  # any half second holds at most a burst plus half a second's rate
        assert sum(1 for s in stamps[i:] if s < t + 0.5) <= 20 + 10 + 1


def test_tokens_per_minute_bound_is_held(tmp_path):
    gateway = make_gateway(tmp_path, tokens_per_minute=12000)  # 200 tokens a second
    prompt = "word " * 100  # about 100 tokens each
    started = time.monotonic()
    ask(gateway, [prompt + str(i) for i in range(8)])
    used = gateway.ledger.totals()["prompt_tokens"] + gateway.ledger.totals()["completion_tokens"]
    assert used > 800
    assert time.monotonic() - started >= (used - 200) / 200 * 0.8


def test_rate_limits_and_server_errors_are_retried(tmp_path):
    gateway = make_gateway(tmp_path, "fake/default?rate_limit=0.4&server_error=0.2&seed=11", use_cache=False)
    results = ask(gateway, [f"question {i}" for i in range(15)])
    assert len(results) == 15
    totals = gateway.ledger.totals()
    assert totals["retries"] > 0 and totals["failures"] == 0
    assert STATS.completions == 15 + totals["retries"]


def test_retry_after_is_honoured(tmp_path):
    gateway = make_gateway(tmp_path, "fake/default?rate_limit=0.5&retry_after=0.3&seed=1", use_cache=False,
                           max_retry_wait=0.001, concurrency=1)
    started = time.monotonic()
    for prompt in ("one", "two", "three", "four"):  # one at a time, so the waits add up
        ask(gateway, [prompt])
    retries = gateway.ledger.totals()["retries"]
    assert retries > 0
    assert time.monotonic() - started >= 0.3 * retries


def test_timeouts_are_retried(tmp_path):
    gateway = make_gateway(tmp_path, "fake/default?timeout=0.5&seed=2", use_cache=False, timeout=0.2)
    ask(gateway, ["a", "b", "c", "d"])
    assert gateway.ledger.totals()["retries"] > 0


def test_persistent_rate_limits_lower_concurrency(tmp_path):
    gateway = make_gateway(tmp_path, "fake/default?rate_limit=0.6&latency=0.01&seed=4", use_cache=False,
                           concurrency=16, max_retries=40)

    async def run():
        await asyncio.gather(*(gateway.chat("m", [{"role": "user", "content": f"q{i}"}], stage="t", step="answer")
                               for i in range(40)))
        return gateway.limiter("m").concurrency

    concurrency = asyncio.run(run())
    assert concurrency.lowest <= 8  # halved (at most once a second) instead of hammering at 16


def test_retries_run_out_into_a_counted_failure(tmp_path):
    gateway = make_gateway(tmp_path, "fake/default?server_error=1", use_cache=False, max_retries=2)
    with pytest.raises(LLMCallError, match="failed 3 times"):
        ask(gateway, ["q"])
    assert STATS.completions == 3
    assert gateway.ledger.totals()["failures"] == 1


def test_auth_errors_are_not_retried_and_never_show_the_key(tmp_path):
    gateway = make_gateway(tmp_path, "fake/default?auth=1", api_key="sk-very-secret")
    with pytest.raises(LLMConfigurationError) as err:
        ask(gateway, ["q"])
    assert STATS.completions == 1
    assert "authentication failed" in str(err.value) and "sk-very-secret" not in str(err.value)


def test_malformed_answer_is_corrected_and_only_the_valid_one_cached(tmp_path):
    gateway = make_gateway(tmp_path, "fake/default?malformed=1")
    [result] = ask(gateway, [REPORT_PROMPT], "report", parse=json_parser(Report))
    assert isinstance(result.value, Report)
    assert STATS.completions == 2  # the malformed answer, then the corrected one
    assert gateway.ledger.totals()["parse_retries"] == 1
    assert gateway.cache is not None and len(gateway.cache) == 1
    again = make_gateway(tmp_path, "fake/default?malformed=1")
    [cached] = ask(again, [REPORT_PROMPT], "report", parse=json_parser(Report))
    assert cached.cached and cached.value == result.value and STATS.completions == 2


def test_fenced_json_is_parsed(tmp_path):
    gateway = make_gateway(tmp_path, "fake/default?fenced=1")
    [result] = ask(gateway, [REPORT_PROMPT], "report", parse=json_parser(Report))
    assert "```" in result.text and result.value.title
    assert gateway.ledger.totals()["parse_retries"] == 0


def test_an_answer_that_never_parses_is_never_cached(tmp_path):
    def reject(text: str) -> str:
        raise ParseError("not what was asked")

    gateway = make_gateway(tmp_path, max_parse_retries=2)
    # the same problem twice: a model that answers the same way is not asked a third time
    with pytest.raises(LLMCallError, match="no usable answer in 2 tries"):
        ask(gateway, ["q"], parse=reject)
    assert gateway.cache is not None and len(gateway.cache) == 0
    assert gateway.ledger.totals()["failures"] == 1


def test_second_identical_run_is_served_from_cache(tmp_path):
    prompts = [f"question {i}" for i in range(12)]
    ask(make_gateway(tmp_path), prompts)
    assert STATS.completions == 12
    STATS.reset()
    second = make_gateway(tmp_path)
    results = ask(second, prompts)
    assert STATS.completions == 0
    assert all(r.cached for r in results) and second.ledger.totals()["cache_hits"] == 12


def test_cache_off_sends_every_call(tmp_path):
    ask(make_gateway(tmp_path), ["q"])
    ask(make_gateway(tmp_path, use_cache=False), ["q"])
    assert STATS.completions == 2


def test_cache_key_ignores_the_key_but_not_the_endpoint_and_stores_no_secret(tmp_path):
    ask(make_gateway(tmp_path, api_key="sk-secret-one", api_base="http://a.invalid"), ["q"])
    ask(make_gateway(tmp_path, api_key="sk-secret-two", api_base="http://a.invalid"), ["q"])
    assert STATS.completions == 1  # another key, same server: the same answer
    ask(make_gateway(tmp_path, api_key="sk-secret-two", api_base="http://b.invalid"), ["q"])
    assert STATS.completions == 2  # another server may serve another model under the same name
    data = b"".join(p.read_bytes() for p in (tmp_path / "cache").iterdir())
    assert b"sk-secret" not in data and b"invalid" not in data


def test_budget_stops_and_a_rerun_continues_from_the_cache(tmp_path):
    prompts = [f"question number {i}" for i in range(10)]
    tight = make_gateway(tmp_path, budget=BudgetConfig(max_tokens=60), concurrency=1)

    async def run(gateway):
        done = []
        for p in prompts:
            done.append(await gateway.chat("m", [{"role": "user", "content": p}], stage="t", step="answer"))
        return done

    with pytest.raises(BudgetExceeded, match=r"budget\.max_tokens"):
        asyncio.run(run(tight))
    finished = STATS.completions
    assert 0 < finished < 10
    STATS.reset()
    rerun = make_gateway(tmp_path)
    asyncio.run(run(rerun))
    assert STATS.completions == 10 - finished
    assert rerun.ledger.totals()["cache_hits"] == finished


def test_embeddings_batch_by_count_and_tokens_and_cache_per_text(tmp_path):
    gateway = make_gateway(tmp_path, "fake/embedding?dim=32")
    texts = [f"text number {i}" for i in range(10)] + ["long " * 300]
    vectors = asyncio.run(gateway.embed("m", texts, stage="embed", batch_size=4, batch_max_tokens=100))
    assert len(vectors) == 11 and all(len(v) == 32 for v in vectors)
    assert STATS.embeddings == 4  # 4 + 4 + 2 by count, the long text alone by tokens
    STATS.reset()
    again = asyncio.run(gateway.embed("m", [*texts, "one new text"], stage="embed"))
    assert again[:11] == vectors and STATS.embeddings == 1


def test_fake_embeddings_keep_lexical_similarity(tmp_path):
    gateway = make_gateway(tmp_path, "fake/embedding")
    a, b, c = asyncio.run(gateway.embed("m", ["the navy office in london", "london navy office",
                                              "a recipe for apple pie"], stage="e"))

    def cosine(x, y):
        return sum(i * j for i, j in zip(x, y, strict=True))

    assert cosine(a, b) > cosine(a, c) + 0.3


def one_feature_at_a_time(text: str, dim: int) -> list[float]:
    """The fake's vector by its definition: every word and character trigram, counted, each adding its sign to
    its bucket, then normalized."""
    import hashlib
    import math
    import re
    from collections import Counter

    lowered = text.lower()
    features = re.findall(r"\w+", lowered) + [lowered[i:i + 3] for i in range(max(0, len(lowered) - 2))]
    vector = [0.0] * dim
    for feature, count in Counter(features).items():
        digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
        vector[int.from_bytes(digest[:4], "little") % dim] += (1.0 if digest[4] & 1 else -1.0) * count
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


@pytest.mark.parametrize("text", ["", "a", "ab", "abc", "The the THE the", "Pepys went to the Navy Office.\n" * 40,
                                  "Zoë's café — 東京 🚀🚀 naïve\tcoöperate", "x" * 5000])
def test_the_fake_vector_is_its_definition_counted_with_numpy(text):
    for dim in (8, 1536):
        assert fake_vector(text, dim) == one_feature_at_a_time(text, dim)

def test_a_model_that_cannot_be_reached_fails_fast_with_the_fix(tmp_path):
    # a closed port on this machine: connections are refused at once, nothing leaves the machine
    gateway = make_gateway(tmp_path, "openai/gpt-4o-mini", api_base="http://127.0.0.1:9/v1", api_key="sk-unused",
                           max_retries=10, timeout=5)
    started = time.monotonic()
    with pytest.raises(LLMConfigurationError, match="cannot be reached") as err:
        ask(gateway, ["q"])
    assert "api_base" in str(err.value) and "sk-unused" not in str(err.value)
    assert time.monotonic() - started < 30


def test_streaming_yields_pieces_then_serves_the_cache(tmp_path):
    gateway = make_gateway(tmp_path, "fake/default")
    messages = [{"role": "system", "content": "-----Sources-----\nid|text\n1|Pepys went to the Navy Office today.\n"},
                {"role": "user", "content": "Where did Pepys go?"}]

    async def collect(g):
        return [piece async for piece in g.stream("m", messages, stage="query")]

    pieces = asyncio.run(collect(gateway))
    assert len(pieces) > 3 and "Navy Office" in "".join(pieces)
    assert gateway.ledger.totals()["completion_tokens"] > 0
    STATS.reset()
    again = asyncio.run(collect(make_gateway(tmp_path, "fake/default")))
    assert "".join(again) == "".join(pieces) and STATS.completions == 0


def test_prompt_tokens_the_provider_served_from_its_cache_are_counted_and_priced_at_its_rate(tmp_path):
    from graphrag_lite.fake.options import FAKE_INPUT_PRICE, FAKE_OUTPUT_PRICE
    from graphrag_lite.pipeline.display import describe_llm_totals

    instructions = "Extract every entity of the text below. " * 300  # the static part: well over 1,024 tokens
    prompts = [f"{instructions}\n-Text-\nThe ferry left Ostra at {hour} o'clock." for hour in range(3)]
    gateway = make_gateway(tmp_path, "fake/default?prefix_cache=1", use_cache=False, concurrency=1)
    for prompt in prompts:  # one after another: a provider caches what it has seen
        ask(gateway, [prompt])
    first, *later = gateway.ledger.records
    assert first.provider_cached_tokens == 0  # nothing was cached before the first call
    assert all(r.provider_cached_tokens >= 1024 and r.provider_cached_tokens % 128 == 0 for r in later)
    for record in later:  # the cached tokens at half the prompt price (the fake's, like OpenAI's discount)
        uncached = record.prompt_tokens - record.provider_cached_tokens
        expected = (uncached * FAKE_INPUT_PRICE + record.provider_cached_tokens * FAKE_INPUT_PRICE / 2
                    + record.completion_tokens * FAKE_OUTPUT_PRICE)
        assert record.cost_usd == pytest.approx(expected, rel=1e-6)
        assert record.cost_usd < record.prompt_tokens * FAKE_INPUT_PRICE + record.completion_tokens * FAKE_OUTPUT_PRICE
    totals = gateway.ledger.totals()
    assert totals["provider_cached_prompt_tokens"] == sum(r.provider_cached_tokens for r in later)
    assert "from the provider's prompt cache" in describe_llm_totals(totals)


def test_cached_prompt_tokens_are_read_from_every_usage_shape_providers_send():
    from types import SimpleNamespace

    from litellm.types.utils import PromptTokensDetailsWrapper, Usage

    from graphrag_lite.llm.gateway import provider_cached_tokens

    openai = Usage(prompt_tokens=2000, completion_tokens=5, total_tokens=2005,
                   prompt_tokens_details=PromptTokensDetailsWrapper(cached_tokens=1536))
    anthropic = SimpleNamespace(prompt_tokens=2000, prompt_tokens_details=None, cache_read_input_tokens=1024)
    no_details = Usage(prompt_tokens=300, completion_tokens=5, total_tokens=305)  # a local server, a short prompt
    empty_details = SimpleNamespace(prompt_tokens_details=SimpleNamespace(cached_tokens=None))
    assert [provider_cached_tokens(u) for u in (openai, anthropic, no_details, empty_details, None)] == \
        [1536, 1024, 0, 0, 0]


def test_claude_calls_mark_the_first_message_for_anthropic_prompt_caching_and_others_do_not(tmp_path, monkeypatch):
    """The request LiteLLM builds for Anthropic carries cache_control on the first message of a call whose
    first message will be sent again (an extraction with gleanings); the cache reads in the reply are counted
    and priced."""
    import httpx
    from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

    from graphrag_lite.llm.providers import marks_prompt_cache

    sent = []

    async def post(self, url, data=None, json=None, **kwargs):
        sent.append(json if json is not None else __import__("json").loads(data))
        reply = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                 "content": [{"type": "text", "text": "Done."}], "stop_reason": "end_turn", "stop_sequence": None,
                 "usage": {"input_tokens": 200, "output_tokens": 3, "cache_read_input_tokens": 1800,
                           "cache_creation_input_tokens": 0}}
        return httpx.Response(200, json=reply, request=httpx.Request("POST", url))

    monkeypatch.setattr(AsyncHTTPHandler, "post", post)
    cfg = GraphRagConfig(models={"default_chat_model": ModelConfig(model="anthropic/claude-sonnet-4-5",
                                                                   api_key="sk-ant-test")},
                         cache=CacheConfig(base_dir=tmp_path))
    gateway = Gateway(cfg)
    messages = [{"role": "user", "content": "Extract the entities. " * 40}, {"role": "user", "content": "More?"}]
    assert asyncio.run(gateway.chat("default_chat_model", messages, stage="extract_graph", step="answer",
                                    resent_prefix=True)).value == "Done."
    blocks = [block for message in sent[0]["messages"] for block in message["content"]]
    assert blocks[0]["cache_control"] == {"type": "ephemeral"} and "cache_control" not in blocks[-1]
    # a call nothing follows up is not marked: writing Anthropic's cache costs 1.25x the input price
    asyncio.run(gateway.chat("default_chat_model", [{"role": "user", "content": "Report."}], stage="reports",
                             step="answer"))
    assert "cache_control" not in json.dumps(sent[1])
    record = gateway.ledger.records[0]
    assert record.provider_cached_tokens == 1800
    assert record.cost_usd == pytest.approx(200 * 3e-6 + 1800 * 0.3e-6 + 3 * 15e-6)  # cache reads at a tenth
    assert not marks_prompt_cache("openai/gpt-4o-mini") and not marks_prompt_cache("ollama/llama3")
    assert marks_prompt_cache("bedrock/us.anthropic.claude-sonnet-4-20250514-v1:0")


def test_an_embedding_batch_the_provider_refuses_as_too_large_is_halved_for_the_rest_of_the_run(tmp_path):
    # a text-embeddings-inference server takes 32 texts a call by default; this one takes 5
    gateway = make_gateway(tmp_path, "fake/embedding?dim=8&max_batch=5")
    texts = [f"text number {i}" for i in range(40)]
    vectors = asyncio.run(gateway.embed("m", texts, stage="embed", batch_size=20))
    assert vectors == [fake_vector(t, 8) for t in texts]  # every text, in order, none twice or lost
    refused_at_20 = 2  # both batches of 20 sent at once, refused; then halves of 10 until 5 is accepted
    assert STATS.embeddings <= refused_at_20 + 2 * 2 + 40 // 5
    totals = gateway.ledger.totals()
    assert totals["failed_attempts"] == STATS.embeddings - 40 // 5  # every refusal counted, none billed
    from graphrag_lite.pipeline.display import describe_llm_totals

    assert f"{totals['failed_attempts']} attempts refused or failed" in describe_llm_totals(totals)  # on the terminal
    STATS.reset()
    more = [f"another text {i}" for i in range(20)]
    asyncio.run(gateway.embed("m", more, stage="embed", batch_size=20))
    assert STATS.embeddings == 4  # the size learnt: no refused call this time


def test_an_embedding_refusal_that_is_not_about_size_is_not_split(tmp_path):
    gateway = make_gateway(tmp_path, "fake/embedding?bad_request=1", max_retries=0)
    with pytest.raises(LLMCallError):
        asyncio.run(gateway.embed("m", [f"text {i}" for i in range(8)], stage="embed", batch_size=8))
    assert STATS.embeddings == 1


@pytest.mark.parametrize(("status", "message", "size"), [
    (400, "Requested 350000 tokens, max 300000 tokens per request", True),  # OpenAI, tokens per call
    (400, "'$.input' is invalid. Please check the API reference", True),  # OpenAI, more than 2,048 texts
    (413, "Payload Too Large", True),  # a proxy or text-embeddings-inference
    (422, "batch size 64 > maximum allowed batch size 32", True),  # text-embeddings-inference
    (500, "input is too large to process. increase the physical batch size", True),  # llama.cpp server
    (400, "Unsupported parameter: 'dimensions'", False),
    (500, "internal error", False),
    (500, "upstream request timeout exceeded", False),  # not about size: no batch is halved for it
    (401, "Incorrect API key provided: too many attempts", False),
])
def test_size_refusals_are_told_from_other_failures_in_providers_own_words(status, message, size):
    """What the embedding path splits on, in the words real providers answer with (not the fake's)."""
    import httpx
    import litellm

    from graphrag_lite.llm.failures import refuses_size

    response = httpx.Response(status, request=httpx.Request("POST", "http://provider.invalid/v1/embeddings"))
    error = litellm.APIError(status_code=status, message=message, llm_provider="openai", model="m",
                             request=response.request)
    assert refuses_size(error) is size


def test_pacer_spaces_starts_once_latency_is_known():
    from graphrag_lite.llm.limits import StartPacer

    async def starts(pacer, n):
        stamps = []
        for _ in range(n):
            await pacer.wait(concurrency=10)
            stamps.append(time.monotonic())
        return stamps

    pacer = StartPacer()
    unpaced = asyncio.run(starts(pacer, 5))
    assert unpaced[-1] - unpaced[0] < 0.005  # nothing known yet: no waiting
    pacer.observe(0.2)
    paced = asyncio.run(starts(pacer, 5))
    spacing = StartPacer.HEADROOM * 0.2 / 10
    assert paced[-1] - paced[0] >= 4 * spacing * 0.9  # started at most 1/spacing a second


def test_the_pacer_spaces_starts_by_the_clients_own_work_per_answer_at_most_by_latency():
    """The spacing is the loop's CPU time between answers (enough to end lockstep waves without a long ramp
    at each stage's start), never more than 0.7 x latency / concurrency, nor less than that CPU time."""
    from graphrag_lite.llm.limits import StartPacer

    def busy(seconds: float) -> None:
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            pass

    pacer = StartPacer()
    pacer.observe(0.2)
    assert pacer.spacing(10) == pytest.approx(StartPacer.HEADROOM * 0.2 / 10)  # no work measured yet
    for _ in range(7):
        busy(0.002)
        pacer.observe(0.2)
    assert 0.0019 <= pacer.spacing(10) < 0.006
    busy(0.5)  # one long gap (the work between two stages) does not move the median
    pacer.observe(0.2)
    assert pacer.spacing(10) < 0.006
    for _ in range(20):
        busy(0.03)
        pacer.observe(0.2)
    assert pacer.spacing(10) == pytest.approx(StartPacer.HEADROOM * 0.2 / 10)  # capped by the latency


def test_a_free_slot_goes_to_the_waiting_call_of_highest_priority_and_a_cancelled_one_takes_none():
    from graphrag_lite.llm.limits import AdaptiveConcurrency

    async def scenario() -> list[str]:
        slots = AdaptiveConcurrency(1)
        order: list[str] = []
        await slots.acquire()

        async def call(name: str, priority: int) -> None:
            await slots.acquire(priority)
            order.append(name)
            await asyncio.sleep(0.001)
            slots.release()

        waiting = [asyncio.create_task(call(n, p)) for n, p in (("low", 0), ("high", 2), ("middle", 1), ("gone", 5))]
        await asyncio.sleep(0.001)
        waiting[3].cancel()
        slots.release()
        await asyncio.gather(*waiting, return_exceptions=True)
        await asyncio.wait_for(slots.acquire(), 1)  # a cancelled waiter keeps no slot
        assert slots.in_flight == 1
        return order

    assert asyncio.run(scenario()) == ["high", "middle", "low"]


def test_the_embedding_estimate_counts_a_cached_vector_of_another_dimension_as_sent(tmp_path):
    """The dry run's estimate reads the cache as `embed` does: a vector of another dimension than the index's
    (a model swapped behind the same name) is embedded again, so it is not free."""
    gateway = make_gateway(tmp_path, "fake/embedding")
    texts = ["alpha text", "beta text"]
    vectors = asyncio.run(gateway.embed("m", texts, stage="test"))
    size = len(vectors[0])
    assert gateway.embedding_estimate("m", texts)[1] == 0  # both cached
    assert gateway.embedding_estimate("m", texts, dimension=size)[1] == 0
    calls, sent, tokens = gateway.embedding_estimate("m", texts, dimension=size + 1)
    assert (calls, sent) == (1, 2) and tokens > 0

    def sent_calls() -> int:
        totals = gateway.ledger.totals()
        return totals["calls"] - totals["cache_hits"]

    before = sent_calls()
    again = asyncio.run(gateway.embed("m", texts, stage="test", dimension=size + 1))  # what a run would do
    assert len(again) == 2 and sent_calls() - before == calls


def test_a_slot_taken_for_a_call_never_sent_is_given_back_without_counting_as_an_answer():
    from graphrag_lite.llm.limits import AdaptiveConcurrency, ModelLimiter

    async def scenario() -> None:
        slots = AdaptiveConcurrency(1)
        await slots.acquire()
        waiter = asyncio.create_task(slots.acquire())
        await asyncio.sleep(0)
        slots.release()  # the slot goes to the waiter, which is cancelled before it resumes
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        assert slots.in_flight == 0
        limiter = ModelLimiter(2, requests_per_minute=1, tokens_per_minute=None)
        limiter.concurrency.limit = 1  # as after a 429
        await limiter.admit(0)  # takes the one request of the minute
        limiter.done(0, None, False, level=1)
        admitted = asyncio.create_task(limiter.admit(0))  # waits for the next minute's request
        await asyncio.sleep(0.01)
        admitted.cancel()
        await asyncio.gather(admitted, return_exceptions=True)
        answers = limiter.concurrency._recent  # what the limit learns from: the answered call only
        assert limiter.concurrency.in_flight == 0 and len(answers) == 1 and limiter.concurrency._successes == 0

    asyncio.run(scenario())


def test_a_call_cancelled_in_flight_frees_its_slot_without_counting_as_an_answer(tmp_path):
    """A call cancelled while it waits on the model (a sibling failed, Ctrl-C) was not answered: its slot is
    given back, and it counts neither as a success that could raise the limit nor as a refusal."""
    config = GraphRagConfig(models={"m": ModelConfig(model="fake/default?latency=5", concurrency=4)},
                            cache=CacheConfig(base_dir=tmp_path))
    gateway = Gateway(config, use_cache=False)

    async def scenario():
        task = asyncio.create_task(gateway.chat("m", [{"role": "user", "content": "Say hello."}], stage="t",
                                                step="answer"))
        await asyncio.sleep(0.3)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return gateway.limiter("m").concurrency

    slots = asyncio.run(scenario())
    assert slots.in_flight == 0 and slots.peak == 1
    assert slots._successes == 0 and not slots._recent


def test_a_stage_s_running_spend_is_what_its_totals_say():
    """The progress bar's figures are kept as calls are recorded (summing every record twice a second made a
    stage of 100,000 calls quadratic); they must say what the totals of the same records say: failed attempts
    count their tokens but are not calls, cache hits are calls that cost nothing."""
    from graphrag_lite.llm.ledger import CallRecord, Ledger

    def record(stage: str, kind: str = "chat", cache_hit: bool = False, cost: float | None = 0.5) -> CallRecord:
        return CallRecord(stage, "m", kind, prompt_tokens=100, completion_tokens=20, cost_usd=cost, latency_s=0.1,
                          cache_hit=cache_hit, retries=0, parse_retries=0, ok=kind != "failed_attempt")

    ledger = Ledger()
    for one in (record("a"), record("a", cache_hit=True), record("a", kind="failed_attempt"), record("a", cost=None),
                record("b", kind="embedding")):
        ledger.add(one)
    for stage in ("a", "b"):
        totals = ledger.totals(stage)
        assert ledger.running(stage) == {key: totals[key] for key in ("calls", "prompt_tokens", "completion_tokens",
                                                                      "cost_usd")}
    assert ledger.running("a")["calls"] == 3 and ledger.running("c") is None


def test_the_fake_keeps_a_bounded_record_of_prompts():
    """A benchmark's run of 10^5 calls must not keep every prompt in memory: the fake keeps the first ones
    (all a test asks about) and counts the rest."""
    from graphrag_lite.fake.faults import KEPT_FIRST_MESSAGES, FakeStats

    stats = FakeStats()
    for number in range(KEPT_FIRST_MESSAGES + 3):
        stats.asked(f"prompt {number}")
    assert len(stats.first_messages) == KEPT_FIRST_MESSAGES
    assert stats.first_messages[:2] == ["prompt 0", "prompt 1"]
    assert stats.first_messages_not_kept == 3
