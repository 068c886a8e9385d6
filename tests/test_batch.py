"""Batch mode (`index --batch`): the index stages' calls as provider batch jobs, through the fake provider's
batch endpoint (graphrag_lite/fake/batch.py) and through LiteLLM's batch functions (scripted here)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pandas as pd
import pytest
from typer.testing import CliRunner

from graphrag_lite.cli import app
from graphrag_lite.config import BatchConfig, CacheConfig, GraphRagConfig, ModelConfig, OutputConfig
from graphrag_lite.fake import batch as fake_batch
from graphrag_lite.fake.options import FAKE_INPUT_PRICE, FAKE_OUTPUT_PRICE
from graphrag_lite.llm.batch_store import BATCH_FILE
from graphrag_lite.llm.calls import call_key
from graphrag_lite.llm.gateway import Gateway
from graphrag_lite.llm.prices import batch_unit_prices
from graphrag_lite.llm.providers import load_litellm, online_reason
from tests.conftest import DATA, make_project

DULCE = DATA / "operation-dulce" / "dulce.txt"
TABLES = ("documents", "text_units", "entities", "relationships", "communities", "community_reports")
# when a run happened, and a digest of what a report was written from, which names the model string (here it
# carries the fake's batch options): not what the run found
NOT_FOUND = ("creation_date", "period", "inputs_digest")
FAST_POLLS = "batch:\n  poll_interval: 0.2\n  window: 0.2\n"


@pytest.fixture(autouse=True)
def fake_batches(tmp_path, monkeypatch) -> Path:
    """Each test's own fake provider folder, so its batches and submissions are its own."""
    folder = tmp_path / "fake-batches"
    monkeypatch.setenv("GRAPHRAG_LITE_FAKE_BATCH_DIR", str(folder))
    return folder


def index(root: Path, *args: str):
    return CliRunner().invoke(app, ["index", "--root", str(root), *args], catch_exceptions=False)


def tables(root: Path) -> dict[str, pd.DataFrame]:
    found = {}
    for name in TABLES:
        table = pd.read_parquet(root / "output" / f"{name}.parquet")
        found[name] = table.drop(columns=[c for c in NOT_FOUND if c in table.columns])
    return found


def stats(root: Path) -> dict:
    return json.loads((root / "output" / "stats.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def online(tmp_path_factory) -> Path:
    """Operation Dulce indexed online: what every batch run must give."""
    root = make_project(tmp_path_factory.mktemp("online"), [DULCE], FAST_POLLS)
    assert index(root).exit_code == 0
    return root


def assert_same_index(root: Path, reference: Path) -> None:
    mine, theirs = tables(root), tables(reference)
    for name in TABLES:
        pd.testing.assert_frame_equal(mine[name], theirs[name], obj=name)


def wait_for_batch(root: Path, process: subprocess.Popen, seconds: float = 120) -> None:
    path = root / "output" / BATCH_FILE
    deadline = time.monotonic() + seconds
    while not (path.is_file() and json.loads(path.read_text(encoding="utf-8"))["batches"]):
        assert process.poll() is None and time.monotonic() < deadline, "no batch was sent"
        time.sleep(0.05)


def test_a_killed_batch_run_reattaches_and_gives_the_online_index(tmp_path, online, fake_batches):
    root = make_project(tmp_path / "batch", [DULCE], FAST_POLLS, chat="fake/default?batch_delay=2")
    env = {**os.environ, "GRAPHRAG_LITE_FAKE_BATCH_DIR": str(fake_batches)}
    with open(tmp_path / "first-run.txt", "w", encoding="utf-8") as log:
        first = subprocess.Popen([sys.executable, "-m", "graphrag_lite", "index", "--root", str(root), "--batch"],
                                 stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            wait_for_batch(root, first)
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait()
    sent_before = fake_batch.submissions()
    assert len(sent_before) == 1, (tmp_path / "first-run.txt").read_text(encoding="utf-8")
    held = set(sent_before[0]["custom_ids"])

    again = index(root, "--batch")
    assert again.exit_code == 0, again.output
    assert f"re-attached to batch {sent_before[0]['batch_id']}" in again.output
    later = fake_batch.submissions()[1:]
    assert later and not held & {c for batch in later for c in batch["custom_ids"]}  # none sent again
    run = stats(root)["batch"]
    assert run["extract_graph"]["reattached"] == 1 and sum(s.get("online", 0) for s in run.values()) == 0
    assert_same_index(root, online)
    assert json.loads((root / "output" / BATCH_FILE).read_text(encoding="utf-8"))["batches"] == []


@pytest.mark.parametrize("faults", ["batch_fail=0.3", "batch_invalid=0.3", "batch_status=expired",
                                    "batch_status=failed"])
def test_what_a_batch_does_not_answer_goes_online(tmp_path, online, faults):
    from graphrag_lite.fake.provider import STATS

    root = make_project(tmp_path, [DULCE], FAST_POLLS, chat=f"fake/default?batch_delay=0.1&{faults}")
    result = index(root, "--batch")
    assert result.exit_code == 0, result.output
    counts = stats(root)["batch"]
    batched, sent_online = (sum(s.get(k, 0) for s in counts.values()) for k in ("batched", "online"))
    assert f"{batched:,} calls answered by batch" in result.output and f"; {sent_online:,} chat call" in result.output
    if faults == "batch_invalid=0.3":  # every batch answered, some not usably: corrected online, as any answer
        assert batched > 0 and sent_online == 0 and STATS.completions > 0
    else:  # failed requests, or a batch that expired (half answered) or failed (none answered)
        assert sent_online > 0 and (batched == 0) == (faults == "batch_status=failed")
    assert_same_index(root, online)


def test_batch_calls_are_priced_at_the_batch_rate(tmp_path, online):
    root = make_project(tmp_path, [DULCE], FAST_POLLS, chat="fake/default?batch_delay=0")
    assert index(root, "--batch").exit_code == 0
    run, reference = stats(root), stats(online)
    for stage in ("extract_graph", "community_reports"):
        llm = run["stages"][stage]["llm"]
        assert run["batch"][stage]["batched"] == llm["calls"] and not run["batch"][stage].get("online")
        half = (llm["prompt_tokens"] * FAKE_INPUT_PRICE + llm["completion_tokens"] * FAKE_OUTPUT_PRICE) / 2
        assert llm["cost_usd"] == pytest.approx(half, abs=1e-6)
        assert llm["cost_usd"] == pytest.approx(reference["stages"][stage]["llm"]["cost_usd"] / 2, abs=1e-6)
    assert run["llm"]["cost_usd"] < reference["llm"]["cost_usd"] * 0.6


def test_the_dry_run_shows_the_batch_price(tmp_path):
    root = make_project(tmp_path, [DULCE])
    online_estimate = index(root, "--dry-run")
    batch_estimate = index(root, "--dry-run", "--batch")
    assert batch_estimate.exit_code == 0 and "Estimated cost at the batch price" in batch_estimate.output

    def total(output: str) -> float:
        return float(output.split("of the estimable stages: $")[1].split(",")[0])

    assert total(batch_estimate.output) == pytest.approx(total(online_estimate.output) / 2, abs=1e-4)
    from graphrag_lite.config import load_config
    from graphrag_lite.llm.prices import estimated_cost, model_price

    config = load_config(root)  # embeddings are never batched: their estimate keeps the online price
    litellm = load_litellm(config.models.values())
    assert estimated_cost(config, "default_embedding_model", 10_000, 0) == \
        model_price(litellm, "fake/embedding", 10_000, 0) > 0
    assert estimated_cost(config, "default_chat_model", 10_000, 0) == \
        pytest.approx(model_price(litellm, "fake/default", 10_000, 0) / 2)


def test_the_dry_run_says_which_calls_go_online_in_batch_mode_and_which_cost_is_unknown(tmp_path):
    root = make_project(tmp_path, [DULCE])
    local = index(root, "--dry-run", "--batch", "--set", "models.default_chat_model.model=ollama/llama3")
    assert local.exit_code == 0 and "(online)" in local.output
    assert "Online even with --batch, at the online price: extract_graph: a local server" in local.output
    assert "Estimated cost of the estimable stages: $" in local.output  # not "at the batch price": none is
    unpriced = index(root, "--dry-run", "--set", "models.default_chat_model.model=openai/no-such-model",
                     "--set", "models.default_chat_model.api_base=http://127.0.0.1:9/v1")
    assert unpriced.exit_code == 0
    assert "Cost unknown ('?'), the model is not in LiteLLM's price map: extract_graph" in unpriced.output
    assert "Estimated cost of the estimable stages: unknown" in unpriced.output
    estimates = json.loads((root / "output" / "dry_run.json").read_text(encoding="utf-8"))
    assert estimates["extract_graph"]["estimated_cost_usd"] is None
    assert estimates["extract_graph"]["priced_at"] == "online"


def test_a_budget_too_small_for_a_batch_stops_before_it_is_sent(tmp_path):
    root = make_project(tmp_path, [DULCE], FAST_POLLS + "budget:\n  max_cost_usd: 0.001\n",
                        chat="fake/default?batch_delay=0")
    result = index(root, "--batch")
    assert result.exit_code == 3 and "budget reached" in result.output
    assert re.search(r"the next batch \(\d+ calls\) would pass", " ".join(result.output.split()))  # not "the next call"
    assert fake_batch.submissions() == [] and stats(root)["status"] == "budget reached"


def test_models_without_a_batch_api_go_online():
    litellm = load_litellm([])
    assert online_reason(litellm, ModelConfig(model="ollama/llama3")).startswith("a local server")
    assert online_reason(litellm, ModelConfig(model="openai/qwen", api_base="http://localhost:8080/v1")) is not None
    assert "no batch API for provider anthropic" in online_reason(litellm, ModelConfig(model="anthropic/claude-3-5"))
    for model in (ModelConfig(model="openai/gpt-4o-mini"), ModelConfig(model="fake/default"),
                  ModelConfig(model="azure/my-deployment", api_base="https://x.openai.azure.com", api_version="v")):
        assert online_reason(litellm, model) is None


# ---------------------------------------------------------------- LiteLLM's batch functions, scripted


class ScriptedBatchAPI:
    """LiteLLM's four batch and file functions as OpenAI answers them: a batch in progress on the first
    poll and completed on the second, whose last request failed (in the error file)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []
        self.uploaded = b""
        self.polls = 0

    async def acreate_file(self, **kwargs):
        from litellm.types.llms.openai import OpenAIFileObject

        self.calls.append(("acreate_file", kwargs))
        self.uploaded = kwargs["file"][1]
        return OpenAIFileObject(id="file-in", bytes=len(self.uploaded), created_at=0, filename=kwargs["file"][0],
                                object="file", purpose="batch", status="uploaded")

    async def acreate_batch(self, **kwargs):
        self.calls.append(("acreate_batch", kwargs))
        return self._batch("validating")

    async def aretrieve_batch(self, **kwargs):
        self.calls.append(("aretrieve_batch", kwargs))
        self.polls += 1
        return self._batch("in_progress" if self.polls == 1 else "completed")

    async def afile_content(self, **kwargs):
        from litellm.types.llms.openai import HttpxBinaryResponseContent

        self.calls.append(("afile_content", kwargs))
        requests = [json.loads(line) for line in self.uploaded.decode().splitlines()]
        if kwargs["file_id"] == "file-err":
            lines = [{"id": "r-err", "custom_id": requests[-1]["custom_id"], "error": None,
                      "response": {"status_code": 500, "body": {"error": {"message": "server error"}}}}]
        else:
            lines = [{"id": f"r-{i}", "custom_id": r["custom_id"], "error": None, "response": {
                "status_code": 200, "body": {"choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": f"batch answer {i}"}}],
                    "usage": {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}}}}
                for i, r in enumerate(requests[:-1])]
        content = "".join(json.dumps(line) + "\n" for line in lines).encode()
        return HttpxBinaryResponseContent(httpx.Response(200, content=content))

    def _batch(self, status: str):
        from litellm.types.utils import LiteLLMBatch
        from openai.types.batch_request_counts import BatchRequestCounts

        done = status == "completed"
        return LiteLLMBatch(id="batch_1", object="batch", endpoint="/v1/chat/completions", completion_window="24h",
                            input_file_id="file-in", created_at=0, status=status,
                            output_file_id="file-out" if done else None, error_file_id="file-err" if done else None,
                            request_counts=BatchRequestCounts(completed=2 if done else 0, failed=int(done), total=3))


BATCHED_MODEL = ModelConfig(model="openai/gpt-4o-mini", api_key="sk-test-key", max_retry_wait=0.01)


def scripted_gateway(tmp_path, monkeypatch, api: ScriptedBatchAPI, online: list[dict]) -> Gateway:
    """A batch-mode gateway for BATCHED_MODEL whose LiteLLM batch functions are `api`'s and whose online
    calls (kept in `online`) get a mocked answer: no network."""
    import litellm

    for name in ("acreate_file", "acreate_batch", "aretrieve_batch", "afile_content"):
        monkeypatch.setattr(litellm, name, getattr(api, name))

    async def answered_online(**kwargs):
        online.append(kwargs)
        return litellm.ModelResponse(model="gpt-4o-mini", usage={"prompt_tokens": 10, "completion_tokens": 5,
                                                                  "total_tokens": 15},
                                     choices=[{"message": {"role": "assistant", "content": "online answer"},
                                               "finish_reason": "stop"}])

    monkeypatch.setattr(litellm, "acompletion", answered_online)
    config = GraphRagConfig(models={"m": BATCHED_MODEL}, cache=CacheConfig(base_dir=tmp_path / "cache"),
                            output=OutputConfig(base_dir=tmp_path / "output"),
                            batch=BatchConfig(window=0.05, poll_interval=0.05))
    return Gateway(config, batch=True)


def test_litellm_batch_functions_get_openai_requests_and_their_answers_are_used(tmp_path, monkeypatch):
    import litellm

    api = ScriptedBatchAPI()
    online: list[dict] = []
    gateway = scripted_gateway(tmp_path, monkeypatch, api, online)
    model = BATCHED_MODEL
    questions = [[{"role": "user", "content": f"question {i}"}] for i in range(3)]

    async def ask():
        return await asyncio.gather(*(gateway.chat("m", q, stage="community_reports", step="answer", max_tokens=500)
                                      for q in questions))

    results = asyncio.run(ask())
    gateway.close()
    assert [r.text for r in results] == ["batch answer 0", "batch answer 1", "online answer"]
    assert len(online) == 1 and online[0]["messages"] == questions[2]

    lines = [json.loads(line) for line in api.uploaded.decode().splitlines()]
    assert [line["custom_id"] for line in lines] == [call_key("chat", model, q, {"max_tokens": 500})
                                                     for q in questions]
    assert {(line["method"], line["url"]) for line in lines} == {("POST", "/v1/chat/completions")}
    assert [line["body"] for line in lines] == [{"model": "gpt-4o-mini", "messages": q, "max_tokens": 500}
                                                for q in questions]
    for name, kwargs in api.calls:  # the model's key and provider reach every function
        assert kwargs["custom_llm_provider"] == "openai" and kwargs["api_key"] == "sk-test-key", name
    created = dict(api.calls)["acreate_batch"]
    assert (created["completion_window"], created["endpoint"], created["input_file_id"]) == \
        ("24h", "/v1/chat/completions", "file-in")

    prompt_price, completion_price, _ = batch_unit_prices(litellm, "openai/gpt-4o-mini")
    assert (prompt_price, completion_price) == (7.5e-08, 3e-07)  # LiteLLM's batch prices, not a guess
    totals = gateway.ledger.totals()
    batch_cost = 2 * (1000 * prompt_price + 100 * completion_price)
    online_cost = sum(litellm.cost_per_token(model="gpt-4o-mini", prompt_tokens=10, completion_tokens=5))
    assert totals["calls"] == 3 and totals["cost_usd"] == pytest.approx(batch_cost + online_cost, abs=1e-6)
    assert json.loads((tmp_path / "output" / BATCH_FILE).read_text())["batches"] == []  # delivered: forgotten


def test_batch_mode_is_a_flag_of_index_runs_not_a_setting(tmp_path, cli):
    """In settings.yaml, batch mode would make queries, experiments and prompt tuning wait hours: an error
    that says to use the flag."""
    root = make_project(tmp_path / "p", [DULCE], "batch:\n  enabled: true\n")
    for command in (("index", "--root", root), ("query", "local", "Who leads the team?", "--root", root)):
        done = cli(*command)
        assert done.exit_code == 2 and "batch mode is chosen per run" in " ".join(done.output.split())
    assert Gateway(GraphRagConfig(models={}, batch=BatchConfig(enabled=True))).batcher is None  # only when asked


def test_batches_left_by_a_stopped_run_are_forgotten_once_a_run_without_batch_finishes(tmp_path, fake_batches):
    """The index finished online: no call needs the batches any more, so the run names them (to cancel at
    the provider) and forgets them, and later runs say nothing of them."""
    root = make_project(tmp_path / "p", [DULCE], FAST_POLLS, chat="fake/default?batch_delay=60")
    env = {**os.environ, "GRAPHRAG_LITE_FAKE_BATCH_DIR": str(fake_batches)}
    stopped = subprocess.Popen([sys.executable, "-m", "graphrag_lite", "index", "--root", str(root), "--batch"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, env=env)
    try:
        wait_for_batch(root, stopped)
    finally:
        stopped.send_signal(signal.SIGKILL)
        stopped.wait()
    batch_id = fake_batch.submissions()[0]["batch_id"]
    finished = index(root)
    assert finished.exit_code == 0, finished.output
    assert "an earlier `--batch` run left 1 batch" in finished.output  # said before the run
    assert f"({batch_id}); cancel them at the provider" in " ".join(finished.output.split())
    assert json.loads((root / "output" / BATCH_FILE).read_text(encoding="utf-8"))["batches"] == []
    assert "--batch" not in index(root).output


class FlakyBatchAPI(ScriptedBatchAPI):
    """A provider whose polls fail for a while (more times than a single request is retried) and whose
    error file holds a line of a shape no other provider sends (no response, the error as text)."""

    async def aretrieve_batch(self, **kwargs):
        if len([c for c in self.calls if c[0] == "aretrieve_batch"]) < 8:
            self.calls.append(("aretrieve_batch", kwargs))
            raise ConnectionError("the network is down")
        return await super().aretrieve_batch(**kwargs)

    async def afile_content(self, **kwargs):
        if kwargs["file_id"] != "file-err":
            return await super().afile_content(**kwargs)
        from litellm.types.llms.openai import HttpxBinaryResponseContent

        last = json.loads(self.uploaded.decode().splitlines()[-1])
        line = {"id": "r-err", "custom_id": last["custom_id"], "response": None, "error": "rate limited"}
        return HttpxBinaryResponseContent(httpx.Response(200, content=(json.dumps(line) + "\n").encode()))


def test_a_batch_is_polled_through_an_outage_and_an_unexpected_result_line_goes_online(tmp_path, monkeypatch):
    """Giving up on a batch after a few failed polls would pay for its calls twice (it runs on at the
    provider); a result line of an unknown shape must not leave its call waiting forever."""
    api = FlakyBatchAPI()
    gateway = scripted_gateway(tmp_path, monkeypatch, api, [])

    async def ask():
        calls = (gateway.chat("m", [{"role": "user", "content": f"question {i}"}], stage="community_reports",
                              step="answer") for i in range(3))
        return await asyncio.wait_for(asyncio.gather(*calls), timeout=60)

    results = asyncio.run(ask())
    gateway.close()
    assert [r.text for r in results] == ["batch answer 0", "batch answer 1", "online answer"]
    assert sum(name == "acreate_batch" for name, _ in api.calls) == 1  # polled on, not sent again


class FlakyUploadAPI(ScriptedBatchAPI):
    """A provider whose file upload fails twice (the network), then works."""

    async def acreate_file(self, **kwargs):
        if sum(name == "acreate_file" for name, _ in self.calls) < 2:
            self.calls.append(("acreate_file", kwargs))
            raise ConnectionError("the network is down")
        return await super().acreate_file(**kwargs)


def test_an_upload_that_fails_for_a_moment_is_sent_again_and_the_calls_stay_in_the_batch(tmp_path, monkeypatch):
    api = FlakyUploadAPI()
    online: list[dict] = []
    gateway = scripted_gateway(tmp_path, monkeypatch, api, online)

    async def ask():
        return await asyncio.gather(*(gateway.chat("m", [{"role": "user", "content": f"question {i}"}],
                                                   stage="community_reports", step="answer") for i in range(3)))

    results = asyncio.run(ask())
    gateway.close()
    assert [r.text for r in results] == ["batch answer 0", "batch answer 1", "online answer"]
    assert [name for name, _ in api.calls].count("acreate_batch") == 1 and len(online) == 1  # only the failed item


class CutOffResultsAPI(ScriptedBatchAPI):
    """The output file arrives cut off in the middle of its second line (a download that stopped)."""

    async def afile_content(self, **kwargs):
        from litellm.types.llms.openai import HttpxBinaryResponseContent

        whole = (await super().afile_content(**kwargs)).content
        if kwargs["file_id"] != "file-out":
            return HttpxBinaryResponseContent(httpx.Response(200, content=whole))
        first, second = whole.decode().splitlines()[:2]
        return HttpxBinaryResponseContent(httpx.Response(200, content=f"{first}\n{second[:40]}".encode()))


def test_a_cut_off_result_file_keeps_its_readable_answers(tmp_path, monkeypatch):
    """One unreadable line costs its own call a trip online, not every answer of a batch already paid for."""
    online: list[dict] = []
    gateway = scripted_gateway(tmp_path, monkeypatch, CutOffResultsAPI(), online)

    async def ask():
        return await asyncio.gather(*(gateway.chat("m", [{"role": "user", "content": f"question {i}"}],
                                                   stage="community_reports", step="answer") for i in range(3)))

    results = asyncio.run(ask())
    gateway.close()
    assert [r.text for r in results] == ["batch answer 0", "online answer", "online answer"]
    assert len(online) == 2
