"""What real models and providers do, and what a run does about it: no crash, no silent damage, no stale
cache, honest exit codes and costs. Each test reproduces one observed defect (issue 10), with the model's
replies scripted by stage through the fake provider, or the provider's faults injected by it."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from graphrag_lite.cli import app
from graphrag_lite.config import BudgetConfig, CacheConfig, GraphRagConfig, ModelConfig
from graphrag_lite.extraction.gleaning import ExtractionRequest, extract_units
from graphrag_lite.extraction.tuples import parse_graph_reply
from graphrag_lite.fake.provider import STATS
from graphrag_lite.fake.script import scripted
from graphrag_lite.llm.calls import call_key
from graphrag_lite.llm.errors import LLMCallError, LLMConfigurationError
from graphrag_lite.llm.gateway import Gateway
from graphrag_lite.llm.ledger import BudgetExceeded
from tests.conftest import DATA, make_project

DULCE = DATA / "operation-dulce" / "dulce.txt"
TEXT = (DATA / "replies" / "INPUT.txt").read_text(encoding="utf-8")
E, R = '("entity"<|>', '("relationship"<|>'
GOOD = (f"{E}ALEX MERCER<|>PERSON<|>An agent)##{E}TAYLOR CRUZ<|>PERSON<|>An agent)##"
        f"{R}TAYLOR CRUZ<|>ALEX MERCER<|>Cruz questions Mercer<|>7)<|COMPLETE|>")


@pytest.fixture(autouse=True)
def fresh_stats():
    STATS.reset()


def index(root: Path, *args: str):
    return CliRunner().invoke(app, ["index", "--root", str(root), *args], catch_exceptions=False)


def stats(root: Path) -> dict:
    return json.loads((root / "output" / "stats.json").read_text())


def make_gateway(tmp_path: Path, model: str = "fake/default", budget: BudgetConfig | None = None,
                 **args) -> Gateway:
    args.setdefault("max_retry_wait", 0.01)
    config = GraphRagConfig(models={"m": ModelConfig(model=model, **args)},
                            cache=CacheConfig(base_dir=tmp_path / "cache"), budget=budget or BudgetConfig())
    return Gateway(config)


def extract_one(g: Gateway, script: dict, gleanings: int = 1, text: str = TEXT):
    request = ExtractionRequest(stage="extract_graph", model_id="m", template="Extract.\nText: {input_text}\nOutput:",
                                parse=parse_graph_reply, continue_prompt="MANY entities were missed in the last "
                                "extraction. Add them below using the same format:\n", max_gleanings=gleanings)
    units = pd.DataFrame({"id": ["u"], "text": [text], "human_readable_id": [0]})
    with scripted(script):
        [outcome] = asyncio.run(extract_units(g, request, units))
    return outcome


def cached_texts(g: Gateway) -> list[str]:
    assert g.cache is not None
    return [json.loads(v)["text"] for (v,) in g.cache._db.execute("SELECT value FROM answers WHERE kind='chat'")]


# 1 -------------------------------------------------------------------------------------------------------------


def test_a_unit_with_no_names_does_not_abort_the_index(tmp_path):
    root = make_project(tmp_path, [DULCE])
    (root / "input" / "quiet.txt").write_text("nothing here is capitalised, only plain words about the weather.\n" * 5)
    result = index(root)
    assert result.exit_code == 0, result.output
    assert stats(root)["stages"]["extract_graph"]["details"]["failed_text_units"] == 0


@pytest.mark.parametrize("reply", ["<|COMPLETE|>", "  <|COMPLETE|>\n", "```\n<|COMPLETE|>\n```"])
def test_a_reply_with_only_the_completion_marker_is_a_valid_empty_answer(tmp_path, reply):
    outcome = extract_one(make_gateway(tmp_path), {"extract_graph": reply}, gleanings=0)
    assert outcome.parsed is not None and outcome.parsed.records == 0 and outcome.error is None


@pytest.mark.parametrize("reply", ["", "   ", "I'm sorry, but I can't help with that request.",
                                   "| Name | Kind |\n|---|---|\n", '{"answer": "no entities"}',
                                   "ALEX MERCER | PERSON | an agent"])
def test_an_unusable_first_reply_is_a_counted_failure_and_never_cached(tmp_path, reply):
    g = make_gateway(tmp_path)
    outcome = extract_one(g, {"extract_graph": reply})
    assert outcome.parsed is None and outcome.error
    assert cached_texts(g) == []
    assert STATS.completions == 2  # asked once more; the same answer again ends it (not a third time)


# 2 -------------------------------------------------------------------------------------------------------------


def test_a_cut_off_reply_is_asked_again_and_the_complete_answer_is_the_one_cached(tmp_path):
    cut = GOOD[: GOOD.index("Cruz questions") + 6]
    g = make_gateway(tmp_path)
    outcome = extract_one(g, {"extract_graph.extract": [cut, GOOD]}, gleanings=0)
    assert outcome.parsed is not None and len(outcome.parsed.relationships) == 1 and not outcome.partial
    assert cached_texts(g) == [GOOD]


def test_a_reply_cut_off_every_time_keeps_its_complete_records_and_is_reported(tmp_path):
    cut = {"content": GOOD[: GOOD.index("Cruz questions") + 6], "finish_reason": "length"}
    g = make_gateway(tmp_path)
    outcome = extract_one(g, {"extract_graph.extract": cut}, gleanings=0)
    assert outcome.parsed is not None and {e.name for e in outcome.parsed.entities} == {"ALEX MERCER", "TAYLOR CRUZ"}
    assert outcome.parsed.relationships == [] and "cut off" in outcome.partial[0]
    assert cached_texts(g) == []


def test_max_completion_tokens_cuts_a_rambling_model_and_the_cut_is_a_truncation(tmp_path):
    root = make_project(tmp_path, [DULCE], "extract_graph:\n  max_completion_tokens: 60\n  max_gleanings: 0\n")
    result = index(root)
    assert result.exit_code == 4, result.output
    details = stats(root)["stages"]["extract_graph"]["details"]
    assert details["partly_extracted_text_units"] > 0 and "cut off" in result.output
    assert len(pd.read_parquet(root / "output" / "raw_entities.parquet")) > 0  # the complete records stay


def test_force_after_a_damaged_run_asks_again_for_what_was_not_cached(tmp_path):
    root = make_project(tmp_path, [DULCE], "extract_graph:\n  max_gleanings: 0\n",
                        chat="fake/default?malformed=1&seed=1")
    settings = (root / "settings.yaml").read_text()
    (root / "settings.yaml").write_text(settings.replace("max_retry_wait: 0.01", "max_retry_wait: 0.01\n"
                                                                                  "    max_parse_retries: 0"))
    assert index(root).exit_code == 4  # every answer malformed, none corrected: failures, nothing cached
    (root / "settings.yaml").write_text(settings)  # same model string, corrections allowed
    STATS.reset()
    assert index(root, "--force").exit_code == 0
    assert STATS.completions > 0 and stats(root)["stages"]["extract_graph"]["details"]["failed_text_units"] == 0


def test_a_json_list_is_read_record_by_record_not_as_an_empty_graph(tmp_path):
    from graphrag_lite.extraction.tuples import parse_graph_json

    parsed = parse_graph_json('[{"name": "ALEX MERCER", "type": "PERSON", "description": "An agent"}, '
                              '{"source": "TAYLOR CRUZ", "target": "ALEX MERCER", "description": "x", "strength": 5}]')
    assert [e.name for e in parsed.entities] == ["ALEX MERCER"] and len(parsed.relationships) == 1


# 3 -------------------------------------------------------------------------------------------------------------


def test_an_unknown_provider_stops_the_run_at_once_with_the_fix(tmp_path):
    root = make_project(tmp_path, [DULCE], chat="notaprovider/x")
    result = index(root)
    assert result.exit_code == 2 and "provider" in result.output and "openai/gpt-4o-mini" in result.output


def test_a_model_that_fails_every_first_call_the_same_way_stops_the_run(tmp_path):
    root = make_project(tmp_path, [DULCE], chat="fake/default?bad_request=1")
    result = index(root)
    assert result.exit_code == 2, result.output
    assert "failed its first 3 calls with the same error" in result.output
    assert STATS.completions <= 5  # not one doomed call per text unit and gleaning


def test_failed_items_end_the_run_with_exit_code_4_and_the_tables_written(tmp_path):
    root = make_project(tmp_path, [DULCE], chat="fake/default?server_error=0.5&seed=3")
    (root / "settings.yaml").write_text((root / "settings.yaml").read_text().replace(
        "max_retry_wait: 0.01", "max_retry_wait: 0.01\n    max_retries: 1"))
    result = index(root)
    assert result.exit_code == 4 and "finished with failures" in result.output
    assert (root / "output" / "community_reports.parquet").is_file()


def test_more_than_the_allowed_share_of_failed_units_stops_after_extraction(tmp_path):
    root = make_project(tmp_path, [DULCE], "extract_graph:\n  max_failed_share: 0.2\n")
    with scripted({"extract_graph": "I'm sorry, I cannot help with that."}):
        result = index(root)
    assert result.exit_code == 4 and "100% of the text units failed" in result.output
    assert "Most common problem" in result.output
    run = stats(root)
    assert run["status"] == "stopped: too many failures" and "merge_graph" not in run["stages"]
    assert run["stages"]["extract_graph"]["details"]["failed_share"] == 1.0


# 4 -------------------------------------------------------------------------------------------------------------


def test_embeddings_are_cached_per_endpoint_and_checked_for_their_dimension(tmp_path):
    def embed(model, base, dimension=None):
        g = make_gateway(tmp_path, model, api_base=base)
        return asyncio.run(g.embed("m", ["the navy office"], stage="e", dimension=dimension))[0]

    assert len(embed("fake/embedding?dim=128", "http://a.invalid")) == 128
    assert len(embed("fake/embedding?dim=256", "http://b.invalid")) == 256  # another server: not the cached one
    STATS.reset()
    assert len(embed("fake/embedding?dim=128", "http://a.invalid")) == 128 and STATS.embeddings == 0
    # the same name and server now serve 64 dimensions: a cached vector of another size is not used
    g = make_gateway(tmp_path, "fake/embedding?dim=64", api_base="http://a.invalid")
    key = call_key("embedding", g.models["m"], "the navy office", {})
    assert g.cache is not None
    g.cache.put(key, "embedding", [0.0] * 128)
    assert len(asyncio.run(g.embed("m", ["the navy office"], stage="e", dimension=64))[0]) == 64


# 5 -------------------------------------------------------------------------------------------------------------


def test_the_budget_is_not_overshot_by_calls_waiting_for_a_slot(tmp_path):
    cap = 0.002
    g = make_gateway(tmp_path, "fake/default?latency=0.05", budget=BudgetConfig(max_cost_usd=cap), concurrency=25)

    async def run():
        prompts = [f"question {i} " + "word " * 400 for i in range(300)]
        results = await asyncio.gather(*(g.chat("m", [{"role": "user", "content": p}], stage="t", step="answer")
                                         for p in prompts), return_exceptions=True)
        return [r for r in results if isinstance(r, BudgetExceeded)]

    stopped = asyncio.run(run())
    assert stopped and g.ledger.totals()["cost_usd"] <= cap * 1.1


def test_budget_scope_index_counts_the_spending_of_earlier_runs(tmp_path):
    root = make_project(tmp_path, [DULCE], "budget:\n  scope: index\n")
    assert index(root).exit_code == 0
    spent = json.loads((root / "output" / "llm_spend.json").read_text())["cost_usd"]
    assert spent > 0
    (root / "settings.yaml").write_text((root / "settings.yaml").read_text().replace(
        "scope: index", f"scope: index\n  max_cost_usd: {spent * 1.01}"))
    result = index(root, "--force", "--no-cache")
    assert result.exit_code == 3 and "earlier runs of this index" in result.output


# 6 -------------------------------------------------------------------------------------------------------------


def run_calls(g: Gateway, n: int):
    """n calls at once; returns the model's concurrency control (the limiter lives in the event loop)."""
    async def run():
        await asyncio.gather(*(g.chat("m", [{"role": "user", "content": f"q{i}"}], stage="t", step="answer")
                               for i in range(n)))
        return g.limiter("m").concurrency

    return asyncio.run(run())


def test_concurrency_converges_to_what_the_provider_serves(tmp_path):
    g = make_gateway(tmp_path, "fake/default?capacity=5&latency=0.05", concurrency=20, max_retries=50)
    limit = run_calls(g, 200).limit
    assert 5 <= limit <= 7  # learned: the provider serves 5 at once


def test_random_rate_limits_do_not_collapse_concurrency(tmp_path):
    g = make_gateway(tmp_path, "fake/default?rate_limit=0.1&retry_after=0.01&latency=0.05&seed=5", concurrency=20,
                     max_retries=50)
    concurrency = run_calls(g, 300)
    assert concurrency.limit >= 15 and STATS.peak_in_flight >= 18


# 7 -------------------------------------------------------------------------------------------------------------


def test_a_second_run_on_the_same_output_folder_is_refused_with_the_holder_named(tmp_path):
    root = make_project(tmp_path, [DULCE])
    (root / "output").mkdir()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from graphrag_lite.storage import OutputLock; "
        f"lock = OutputLock(Path({str(root / 'output')!r})); lock.acquire(); print('held', flush=True); "
        "time.sleep(30)")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        result = index(root)
        assert result.exit_code == 5 and f"pid {holder.pid}" in result.output
    finally:
        holder.kill()
        holder.wait()
    assert index(root).exit_code == 0  # the lock goes with its process


def test_a_run_stopped_by_sigterm_ends_as_interrupted_and_the_next_run_resumes(tmp_path):
    """Deterministic on a loaded machine: the fake answers one extraction call, and every later call waits
    while the hold file exists, so the run is surely inside extract_graph, calls in flight, when SIGTERM comes
    (with latency alone, a slow poll could let the stage finish first)."""
    import signal

    hold = tmp_path / "hold"
    hold.touch()
    root = make_project(tmp_path, [DULCE], chat=f"fake/default?hold={hold}&hold_after=1")
    log = root / "output" / "logs" / "index.log"
    with open(tmp_path / "run.txt", "w", encoding="utf-8") as out:
        run = subprocess.Popen([sys.executable, "-m", "graphrag_lite", "index", "--root", str(root)], stdout=out,
                               stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 120
            while not (log.is_file() and "extract_graph: started" in log.read_text(encoding="utf-8")):
                assert run.poll() is None and time.monotonic() < deadline, (tmp_path / "run.txt").read_text()
                time.sleep(0.05)
            while chat_answers(root) == 0:  # the one call answered; the others wait on the hold file
                assert run.poll() is None and time.monotonic() < deadline, (tmp_path / "run.txt").read_text()
                time.sleep(0.05)
            run.send_signal(signal.SIGTERM)
            assert run.wait(timeout=60) == 130
        finally:  # a failed assertion must not leave the run waiting on its hold file for ever
            if run.poll() is None:
                run.kill()
                run.wait()
    hold.unlink()
    printed = (tmp_path / "run.txt").read_text(encoding="utf-8")
    assert "interrupted" in printed and "Traceback" not in printed
    stopped = json.loads((root / "output" / "stats.json").read_text(encoding="utf-8"))
    assert stopped["status"] == "interrupted"
    # the stage it stopped in is listed with the calls it made: the stages add up to the run's totals
    extraction = stopped["stages"]["extract_graph"]
    assert extraction["status"] == "interrupted" and extraction["llm"]["calls"] >= 1
    assert sum(s.get("llm", {}).get("calls", 0) for s in stopped["stages"].values()) == stopped["llm"]["calls"]
    assert f"extract_graph (interrupted): LLM: {extraction['llm']['calls']} call" in printed
    assert index(root).exit_code == 0


def test_a_stage_that_fails_after_model_calls_is_listed_with_what_they_cost(tmp_path, monkeypatch):
    from graphrag_lite.stages import STAGES

    root = make_project(tmp_path, [DULCE])
    reports = STAGES["community_reports"]

    def failing(context):  # e.g. the disk fills up once the reports are written
        reports.run(context)
        raise OSError(28, "No space left on device")

    monkeypatch.setitem(STAGES, "community_reports", dataclasses.replace(reports, run=failing))
    result = index(root)
    assert result.exit_code == 1 and "No space left on device" in result.output
    run = stats(root)
    failed = run["stages"]["community_reports"]
    assert run["status"] == failed["status"] == "failed" and failed["llm"]["calls"] >= 1
    assert sum(s.get("llm", {}).get("calls", 0) for s in run["stages"].values()) == run["llm"]["calls"]
    assert "community_reports (failed): LLM:" in result.output

def chat_answers(root: Path) -> int:
    """The chat answers in the project's answer cache so far (0 before it exists)."""
    import sqlite3

    path = next(root.rglob("llm_cache.sqlite"), None)
    if path is None:
        return 0
    with contextlib.closing(sqlite3.connect(path, timeout=5)) as db:
        try:
            return int(db.execute("SELECT COUNT(*) FROM answers WHERE kind = 'chat'").fetchone()[0])
        except sqlite3.OperationalError:  # the table is not made yet
            return 0


# 8 -------------------------------------------------------------------------------------------------------------


def test_a_missing_lancedb_table_is_named_with_the_command_that_rebuilds_it(tmp_path):
    import shutil

    root = make_project(tmp_path, [DULCE], "local_search:\n  chat_model_id: null\n")
    assert index(root).exit_code == 0
    shutil.rmtree(root / "output" / "lancedb")
    result = CliRunner().invoke(app, ["query", "local", "Who is Alex Mercer?", "--root", str(root)])
    # the commit pinned the LanceDB tables' files: gone, the index is damaged (exit 6), not served
    assert result.exit_code == 6 and "entity_description" in result.output and "graphrag-lite index" in result.output
    assert index(root).exit_code == 0  # the rebuild it names works
    result = CliRunner().invoke(app, ["query", "local", "Who is Alex Mercer?", "--root", str(root)])
    assert result.exit_code == 0


def test_a_read_only_output_folder_is_fine_when_there_is_nothing_to_do(tmp_path, monkeypatch):
    from graphrag_lite.storage import OutputLock

    root = make_project(tmp_path, [DULCE])
    assert index(root).exit_code == 0

    def refuse(self):
        raise PermissionError(13, "Permission denied", str(self.path))

    monkeypatch.setattr(OutputLock, "acquire", refuse)  # tests run as root, who may write anywhere
    result = index(root)
    assert result.exit_code == 0 and "skipped" in result.output
    result = index(root, "--force")
    assert result.exit_code == 2 and "cannot write to the output folder" in result.output
    assert "Permission denied" in result.output and "Traceback" not in result.output


# 9 -------------------------------------------------------------------------------------------------------------


def test_every_attempt_the_provider_read_is_counted(tmp_path):
    g = make_gateway(tmp_path, "fake/default?server_error=0.3&seed=11", max_retries=20)
    run_calls(g, 40)
    totals = g.ledger.totals()
    assert totals["failed_attempts"] > 0 and totals["calls"] == 40
    assert abs(totals["prompt_tokens"] - STATS.prompt_tokens) <= 0.1 * STATS.prompt_tokens + 4 * STATS.completions


# 10, 11 ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("glean", ["##", "", "No more entities were found.", "<|COMPLETE|>"])
def test_an_empty_or_prose_gleaning_keeps_the_first_pass(tmp_path, glean):
    outcome = extract_one(make_gateway(tmp_path), {"extract_graph.extract": GOOD, "extract_graph.glean": glean})
    assert outcome.parsed is not None and len(outcome.parsed.entities) == 2 and len(outcome.parsed.relationships) == 1


def test_a_failed_gleaning_keeps_the_first_pass_and_is_counted(tmp_path):
    outcome = extract_one(make_gateway(tmp_path), {"extract_graph.extract": GOOD,
                                                    "extract_graph.glean": {"content": f"{E}SAM RIV",
                                                                            "finish_reason": "length"}})
    assert outcome.parsed is not None and len(outcome.parsed.entities) == 2
    assert "gleaning 1 failed" in outcome.partial[0]


def test_an_echo_of_the_input_is_recognised_and_not_asked_a_third_time(tmp_path):
    g = make_gateway(tmp_path)
    outcome = extract_one(g, {"extract_graph": TEXT})
    assert outcome.parsed is None and "repeats the input text" in str(outcome.error)
    assert STATS.completions == 2


# 12, 13, 14 -----------------------------------------------------------------------------------------------------


def test_names_from_the_prompts_example_are_dropped_with_their_relationships(tmp_path):
    reply = (f"{E}ADA MENSAH<|>PERSON<|>Chief engineer)##{E}ALEX MERCER<|>PERSON<|>An agent)##"
             f"{R}ADA MENSAH<|>ALEX MERCER<|>Colleagues<|>5)<|COMPLETE|>")
    outcome = extract_one(make_gateway(tmp_path), {"extract_graph": reply}, gleanings=0)
    assert outcome.parsed is not None and [e.name for e in outcome.parsed.entities] == ["ALEX MERCER"]
    assert outcome.parsed.relationships == [] and len(outcome.grounding.ungrounded) == 2


def test_markup_a_strength_in_a_table_cell_and_an_odd_completion_marker(tmp_path):
    reply = (f"{E}ALEX MERCER<|>PERSON<|>An agent<br><br>of the squad)<br><br>"
             f"{R}ALEX MERCER<|>TAYLOR CRUZ<|>Cruz questions Mercer | 9 |)\n## COMPLETE|")
    outcome = extract_one(make_gateway(tmp_path), {"extract_graph": reply}, gleanings=0)
    assert outcome.parsed is not None and outcome.parsed.complete
    assert outcome.parsed.entities[0].description == "An agent of the squad"
    [relationship] = outcome.parsed.relationships
    assert relationship.strength == 9.0 and relationship.description == "Cruz questions Mercer"


def test_relationship_ends_never_emitted_as_entities_become_entities_when_in_the_text(tmp_path):
    reply = (f"{R}TAYLOR CRUZ<|>ALEX MERCER<|>Cruz questions Mercer<|>7)##"
             f"{R}SAM RIVERA<|>NOBODY KNOWN<|>Invented<|>3)<|COMPLETE|>")
    outcome = extract_one(make_gateway(tmp_path), {"extract_graph": reply}, gleanings=0)
    assert outcome.parsed is not None
    assert {e.name: e.type for e in outcome.parsed.entities} == {"TAYLOR CRUZ": "", "ALEX MERCER": ""}
    assert outcome.grounding.created == ["TAYLOR CRUZ", "ALEX MERCER"] and len(outcome.parsed.relationships) == 1


def test_an_entity_typed_elsewhere_keeps_that_type_after_merging(tmp_path):
    from graphrag_lite.graph.merge import merge_graph

    raw = pd.DataFrame([("u1", "ALEX MERCER", "", "from a relationship"), ("u2", "ALEX MERCER", "PERSON", "agent")],
                       columns=["text_unit_id", "name", "type", "description"])
    rels = pd.DataFrame(columns=["text_unit_id", "source", "target", "description", "strength"])
    assert merge_graph(raw, rels).entities["type"].tolist() == ["PERSON"]


# 15, 16 ---------------------------------------------------------------------------------------------------------


def test_a_streamed_answer_may_take_longer_than_the_timeout_while_pieces_keep_coming(tmp_path):
    g = make_gateway(tmp_path, "fake/default?piece_latency=0.02", stream=True, timeout=0.3)
    result = asyncio.run(g.chat("m", [{"role": "user", "content": "-----Sources-----\nid|text\n1|" + "Pepys went to "
                                       "the Navy Office with Sir W. Pen and Mr. Gauden by water. " * 4 +
                                       "\nWhere did Pepys go?"}], stage="t", step="answer"))
    assert len(result.text.split()) * 0.02 > 0.3 and g.ledger.totals()["retries"] == 0


def test_a_stream_that_falls_silent_is_abandoned_and_retried(tmp_path):
    g = make_gateway(tmp_path, "fake/default?stall=2", stream=True, timeout=0.3)
    started = time.monotonic()
    result = asyncio.run(g.chat("m", [{"role": "user", "content": "Where did Pepys go today with Sir W. Pen?"}],
                                stage="t", step="answer"))
    assert result.text and g.ledger.totals()["retries"] == 1 and time.monotonic() - started < 2


def test_format_auto_uses_json_for_models_with_structured_output(tmp_path):
    plain = make_project(tmp_path / "plain", [DULCE])
    assert index(plain).exit_code == 0 and "format: tuples" in index(plain, "--force").output
    structured = make_project(tmp_path / "structured", [DULCE], chat="fake/default?structured=1")
    result = index(structured)
    assert result.exit_code == 0 and "format: json" in result.output
    tuple_prompt = tmp_path / "my_prompt.txt"
    tuple_prompt.write_text("Records as (\"entity\"{tuple_delimiter}NAME...)\nText: {input_text}\nOutput:")
    custom = make_project(tmp_path / "custom", [DULCE], f"extract_graph:\n  prompt: {tuple_prompt}\n",
                          chat="fake/default?structured=1")
    assert "format: tuples" in index(custom).output  # a project's own prompt decides


def test_a_configuration_error_beats_a_failing_call(tmp_path):
    g = make_gateway(tmp_path, "fake/default?auth=1")
    with pytest.raises(LLMConfigurationError):
        asyncio.run(g.chat("m", [{"role": "user", "content": "q"}], stage="t", step="answer"))
    with pytest.raises(LLMCallError):
        asyncio.run(make_gateway(tmp_path, "fake/default?server_error=1", max_retries=1).chat(
            "m", [{"role": "user", "content": "q"}], stage="t", step="answer"))


def test_content_filter_refusals_do_not_stop_the_run(tmp_path):
    import litellm

    g = make_gateway(tmp_path)
    filtered = litellm.BadRequestError("The response was filtered due to the prompt triggering Azure OpenAI's "
                                       "content management policy", llm_provider="azure", model="x")
    for _ in range(5):  # each is one text unit's problem, not the model's
        g._transport._stop_if_always_failing("m", g.models["m"], filtered)
    refused = litellm.BadRequestError("unknown parameter: frequency_penaltyy", llm_provider="openai", model="x")
    with pytest.raises(LLMConfigurationError, match="same error"):
        for _ in range(3):
            g._transport._stop_if_always_failing("m", g.models["m"], refused)


@pytest.mark.parametrize(("reply", "more"), [("N", False), ("Y", True), ("**Y**", True), ("Yes.", True),
                                             ("<think>Anything missed? No.</think>\nN", False), ("`N`", False),
                                             ("Answer: N", False), ("The answer is Y.", True), ("```\nN\n```", False),
                                             ("No more entities need to be added.", False),
                                             ("All entities seem to be extracted.\n\nN", False),
                                             ("Y - some relationships were missed", True)])
def test_the_check_for_more_records_reads_how_models_answer_it(reply, more):
    from graphrag_lite.extraction.replies import yes_or_no

    assert yes_or_no(reply) is more


@pytest.mark.parametrize("reply", ["", "I believe all entities were extracted.", "Nothing to add here, maybe yes",
                                   "Yesterday's meeting was mentioned.", "I can't answer yes or no for sure."])
def test_a_check_answer_with_no_y_or_n_is_asked_again_not_guessed(reply):
    from graphrag_lite.answer_parsing import ParseError
    from graphrag_lite.extraction.replies import yes_or_no

    with pytest.raises(ParseError, match="single letter"):
        yes_or_no(reply)


def test_a_rerun_with_the_same_budget_goes_on_from_the_cache(tmp_path):
    root = make_project(tmp_path, [DULCE], "budget:\n  max_cost_usd: 0.01\n")
    first = index(root)
    assert first.exit_code == 3
    spent = stats(root)["llm"]["cost_usd"]
    assert spent <= 0.01 * 1.1 and "budget reached" in stats(root)["error"]
    STATS.reset()
    second = index(root)
    assert second.exit_code in (0, 3) and STATS.completions > 0  # progress, not "$0 spent and in flight"
    assert stats(root)["llm"]["cache_hits"] > 0


def test_a_model_that_cannot_work_stops_without_tracebacks_or_warnings(tmp_path):
    root = make_project(tmp_path, [DULCE], chat="fake/default?bad_request=1")
    done = subprocess.run([sys.executable, "-m", "graphrag_lite", "index", "--root", str(root)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 2 and "failed its first 3 calls with the same error" in done.stderr
    assert "Traceback" not in done.stderr and "never awaited" not in done.stderr
    run = stats(root)
    assert run["status"] == "failed" and "same error" in run["error"]
    # refused requests are not billed (their prompt tokens are counted); what the run spent is the text units'
    # vectors, asked for after chunking, and stats.json says so
    early = run["stages"].get("embed_text")  # when the early call ended before the run stopped
    assert early is None or (early["status"].startswith("early work only") and early["llm"]["failures"] == 0)
    assert run["llm"]["cost_usd"] == (early["llm"]["cost_usd"] if early else 0)
    assert run["llm"]["failed_attempts"] > 0 and run["llm"]["prompt_tokens"] > 0


def test_an_unknown_provider_is_refused_before_any_call(tmp_path):
    root = make_project(tmp_path, [DULCE], chat="notaprovider/x")
    done = subprocess.run([sys.executable, "-m", "graphrag_lite", "index", "--root", str(root)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 2 and "provider/name" in done.stderr and "Traceback" not in done.stderr


def test_a_run_with_nothing_to_do_writes_nothing(tmp_path):
    from graphrag_lite.storage import LOCK_FILE

    root = make_project(tmp_path, [DULCE])
    assert index(root).exit_code == 0
    (root / "output" / LOCK_FILE).unlink()
    before = {p.name: p.stat().st_mtime_ns for p in (root / "output").iterdir() if p.is_file()}
    assert index(root).exit_code == 0
    after = {p.name: p.stat().st_mtime_ns for p in (root / "output").iterdir() if p.is_file()}
    assert after == before


def test_an_answer_cache_that_cannot_be_opened_says_what_to_do(tmp_path, monkeypatch):
    import sqlite3

    def refuse(*args, **kwargs):
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(sqlite3, "connect", refuse)
    with pytest.raises(Exception, match=r"cannot open the answer cache .* --no-cache"):
        make_gateway(tmp_path)


def test_a_summary_cut_at_a_full_stop_is_caught_by_what_it_leaves_out(tmp_path):
    from graphrag_lite.config import SummarizeDescriptionsConfig
    from graphrag_lite.graph.summaries import summarize

    descriptions = ["Alex Mercer is an agent of the Paranormal Military Squad.",
                    "Alex Mercer doubts the protocols but complies with Taylor Cruz.",
                    "Alex Mercer descends into Dulce base with the team."]
    # the prompt lists the descriptions sorted; a reply cut after its first sentence covers only the first
    cut = "Alex Mercer descends into Dulce base with the team."
    whole = ("Alex Mercer descends into Dulce base with the team. He doubts the protocols but complies with "
             "Taylor Cruz, as an agent of the Paranormal Military Squad.")
    template = "Summarize the descriptions of {entity_name}.\nDescription List: {description_list}\nOutput:"

    def run(script):
        g = make_gateway(tmp_path / str(len(script)))
        with scripted(script):
            return asyncio.run(summarize(g, SummarizeDescriptionsConfig(model_id="m"), template, "ALEX MERCER",
                                         descriptions)), g

    summary, g = run({"summarize_descriptions": [cut, whole]})
    assert summary == whole and cached_texts(g) == [whole] and STATS.completions == 2
    STATS.reset()
    summary, g = run({"summarize_descriptions": [cut], "unused": []})  # a model that always leaves one out
    assert summary == cut and cached_texts(g) == [cut] and STATS.completions == 2  # asked once more, then kept


def test_a_failed_gleaning_keeps_the_first_pass_in_the_index_and_counts_the_unit(tmp_path):
    """End to end: every unit's gleaning is cut off at max_tokens each time it is asked (retries included);
    the first pass's entities are still in entities.parquet, each unit is counted as partly extracted, the
    run says so and exits 4 so that a re-run asks again."""
    root = make_project(tmp_path / "p", [DATA / "replies" / "INPUT.txt"], "extract_graph:\n  max_gleanings: 1\n")
    with scripted({"extract_graph.extract": GOOD,
                   "extract_graph.glean": {"content": f"{E}SAM RIVERA<|>PERS", "finish_reason": "length"}}):
        result = index(root)
    assert result.exit_code == 4, result.output
    titles = set(pd.read_parquet(root / "output" / "entities.parquet")["title"])
    assert {"ALEX MERCER", "TAYLOR CRUZ"} <= titles and "SAM RIVERA" not in titles
    pairs = pd.read_parquet(root / "output" / "relationships.parquet")[["source", "target"]].values.tolist()
    assert sorted(pairs[0]) == ["ALEX MERCER", "TAYLOR CRUZ"]
    details = stats(root)["stages"]["extract_graph"]["details"]
    units = details["text_units"]
    assert details["partly_extracted_text_units"] == units >= 1 and details["failed_text_units"] == 0
    problems = stats(root)["stages"]["extract_graph"]["problems"]
    assert sum("gleaning 1 failed, the records found before it are kept" in p for p in problems) == units
    assert "partly extracted" in result.output
