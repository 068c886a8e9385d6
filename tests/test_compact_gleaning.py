"""Compact gleaning (issue 16, point 3): a follow-up sends the first prompt unchanged and the entity names found
so far instead of the model's answers. It must find what history gleaning finds, send fewer tokens, and take
every reply style real models give to it, in both answer formats."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from graphrag_lite.cli import app
from graphrag_lite.config import CacheConfig, ExtractGraphConfig, GraphRagConfig, ModelConfig
from graphrag_lite.estimate import gleaning_estimate
from graphrag_lite.extraction.gleaning import (
    COMPACT_GRAPH,
    FOUND_NAMES,
    ExtractionRequest,
    UnitOutcome,
    extract_units,
    follow_up,
)
from graphrag_lite.extraction.replies import checked
from graphrag_lite.extraction.tuples import parse_graph_reply
from graphrag_lite.fake.script import scripted
from graphrag_lite.graph.merge import merge_graph
from graphrag_lite.llm.gateway import Gateway
from graphrag_lite.stages.extract_graph import build_result, extraction_request
from graphrag_lite.tokens import count_tokens
from tests.conftest import DATA, SAMPLE, make_project

REPLIES = DATA / "replies"
TEXT = (REPLIES / "INPUT.txt").read_text(encoding="utf-8")
DULCE = (DATA / "operation-dulce" / "dulce.txt").read_text(encoding="utf-8")
# the stages that make the entities and relationships tables, with no model after extraction
GRAPH_ONLY = "stages: [load_documents, chunk_text, extract_graph, merge_graph, join_descriptions, cluster_graph]\n"
FORMATS = ["tuples", "json"]

E, R = '("entity"<|>', '("relationship"<|>'
FIRST = {  # a clean first pass, so what is tested is the reply to the compact follow-up
    "tuples": f"{E}ALEX MERCER<|>PERSON<|>An agent of the Paranormal Military Squad)##{E}TAYLOR CRUZ<|>PERSON<|>An "
              f"agent who questions Mercer)##{R}TAYLOR CRUZ<|>ALEX MERCER<|>Cruz questions Mercer<|>7)<|COMPLETE|>",
    "json": json.dumps({"entities": [
        {"name": "ALEX MERCER", "type": "PERSON", "description": "An agent of the Paranormal Military Squad"},
        {"name": "TAYLOR CRUZ", "type": "PERSON", "description": "An agent who questions Mercer"}],
        "relationships": [{"source": "TAYLOR CRUZ", "target": "ALEX MERCER", "description": "Cruz questions Mercer",
                           "strength": 7}]}),
}
SAM = {"name": "SAM RIVERA", "type": "PERSON", "description": "Sam Rivera combed through the transmission logs"}
SAM_AND_ALEX = {"source": "SAM RIVERA", "target": "ALEX MERCER", "description": "Rivera counts on Mercer",
                "strength": 5}
SAM_TUPLES = (f"{E}SAM RIVERA<|>PERSON<|>Sam Rivera combed through the transmission logs)\n##\n"
              f"{R}SAM RIVERA<|>ALEX MERCER<|>Rivera counts on Mercer<|>5)")
REPEATS_JSON = {"entities": [
    {"name": "ALEX MERCER", "type": "PERSON", "description": "Alex Mercer scans the projectors in the briefing room"},
    {"name": "TAYLOR CRUZ", "type": "PERSON", "description": "An agent who questions Mercer"}, SAM],
    "relationships": [{"source": "TAYLOR CRUZ", "target": "ALEX MERCER", "description": "Cruz demands Mercer's "
                       "attention", "strength": 6}, SAM_AND_ALEX]}
CUT = {"content": f"{E}SAM RIVERA<|>PERSON<|>Sam Rivera combed through the logs)##{E}JORDAN HAY",
       "finish_reason": "length"}
CUT_JSON = {"content": '{"entities": [' + json.dumps(SAM) + ', {"name": "JORDAN HAY', "finish_reason": "length"}
SORRY = "I'm sorry, but I can't help with that request."
# (case, reply to the compact follow-up, names it adds, whether the gleaning is reported as failed)
CASES: dict[str, list[tuple[str, Any, set[str], bool]]] = {
    "tuples": [
        ("empty", "", set(), True),
        ("prose", "I found no more entities.", set(), False),
        ("only the marker", "<|COMPLETE|>", set(), False),
        ("fenced", f"```\n{SAM_TUPLES}\n<|COMPLETE|>\n```", {"SAM RIVERA"}, False),
        ("truncated", CUT, {"SAM RIVERA"}, True),
        ("refusal", SORRY, set(), False),
        ("repeats", f"{E}ALEX MERCER<|>PERSON<|>Alex Mercer scans the projectors in the briefing room)##{E}TAYLOR "
                    f"CRUZ<|>PERSON<|>An agent who questions Mercer)##{R}TAYLOR CRUZ<|>ALEX MERCER<|>Cruz demands "
                    f"Mercer's attention<|>6)##{SAM_TUPLES}<|COMPLETE|>", {"SAM RIVERA"}, False),
    ],
    "json": [
        ("empty", "", set(), True),
        ("prose", "I found no more entities.", set(), True),  # not the JSON asked for: reported, first pass kept
        ("nothing more", '{"entities": [], "relationships": []}', set(), False),
        ("fenced", "```json\n" + json.dumps({"entities": [SAM], "relationships": [SAM_AND_ALEX]}) + "\n```",
         {"SAM RIVERA"}, False),
        ("truncated", CUT_JSON, {"SAM RIVERA"}, True),
        ("refusal", SORRY, set(), True),
        ("repeats", json.dumps(REPEATS_JSON), {"SAM RIVERA"}, False),
    ],
}


def config(tmp_path: Path, answer_format: str, gleaning: str, max_gleanings: int = 1) -> GraphRagConfig:
    return GraphRagConfig(models={"default_chat_model": ModelConfig(model="fake/default?structured=1",
                                                                    max_retry_wait=0.01)},
                          cache=CacheConfig(base_dir=tmp_path / "cache"),
                          extract_graph=ExtractGraphConfig(format=answer_format, gleaning=gleaning,
                                                           max_gleanings=max_gleanings))


def extract(gateway: Gateway, request: ExtractionRequest, text: str, script: dict[str, Any] | None = None
            ) -> UnitOutcome:
    units = pd.DataFrame({"id": ["u1"], "text": [text], "human_readable_id": [0]})
    with scripted(script or {}):
        [outcome] = asyncio.run(extract_units(gateway, request, units))
    return outcome


def recorded(gateway: Gateway, monkeypatch: pytest.MonkeyPatch) -> list[list[Any]]:
    """Every call the extraction makes through `gateway`: its step, its messages and its answer's value (None
    when the call failed)."""
    calls: list[list[Any]] = []
    chat = gateway.chat

    async def spy(model_id: str, messages: list[dict[str, str]], **kwargs: Any) -> Any:
        call = [kwargs.get("step", ""), [dict(m) for m in messages], None]
        calls.append(call)
        result = await chat(model_id, messages, **kwargs)
        call[2] = copy.deepcopy(result.value)  # the first answer's records are extended by the gleanings
        return result

    monkeypatch.setattr(gateway, "chat", spy)
    return calls


def graph_tables(root: Path) -> dict[str, pd.DataFrame]:
    return {name: pd.read_parquet(root / "output" / f"{name}.parquet") for name in ("entities", "relationships")}


# (1) the same graph -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("answer_format", FORMATS)
def test_compact_and_history_gleaning_find_the_same_graph_on_the_sample(tmp_path, answer_format):
    tables, sent = {}, {}
    for gleaning in ("history", "compact"):
        # text units small enough for the fake's long answers to fit max_completion_tokens
        root = make_project(tmp_path / gleaning, SAMPLE, f"pipeline: graph.yaml\nchunking:\n  size: 600\n  overlap: "
                            f"50\nextract_graph:\n  gleaning: {gleaning}\n  format: {answer_format}\n  "
                            "max_gleanings: 2\n", chat="fake/default?structured=1")
        (root / "graph.yaml").write_text(GRAPH_ONLY, encoding="utf-8")
        result = CliRunner().invoke(app, ["index", "--root", str(root), "--quiet"], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        tables[gleaning] = graph_tables(root)
        stats = json.loads((root / "output" / "stats.json").read_text(encoding="utf-8"))
        sent[gleaning] = stats["stages"]["extract_graph"]["llm"]["prompt_tokens"]
    history, compact = tables["history"], tables["compact"]
    assert len(history["entities"]) > 100 and len(history["relationships"]) > 100
    assert sorted(compact["entities"]["id"]) == sorted(history["entities"]["id"])
    assert sorted(compact["entities"]["title"]) == sorted(history["entities"]["title"])
    assert sorted(compact["relationships"]["id"]) == sorted(history["relationships"]["id"])
    pairs = {name: sorted(zip(t["relationships"]["source"], t["relationships"]["target"], strict=True))
             for name, t in tables.items()}
    assert pairs["compact"] == pairs["history"]
    assert sent["compact"] < 0.7 * sent["history"]


# (2) what a compact follow-up sends ---------------------------------------------------------------------------


@pytest.mark.parametrize("answer_format", FORMATS)
def test_a_compact_follow_up_resends_the_first_prompt_and_lists_the_names_found(tmp_path, monkeypatch,
                                                                                answer_format):
    sent: dict[str, list[list[Any]]] = {}
    for gleaning in ("history", "compact"):
        cfg = config(tmp_path / gleaning, answer_format, gleaning, max_gleanings=2)
        gateway = Gateway(cfg)
        request = extraction_request(cfg.extract_graph, gateway)
        assert request.json_mode == (answer_format == "json") and request.compact == (gleaning == "compact")
        sent[gleaning] = recorded(gateway, monkeypatch)
        outcome = extract(gateway, request, DULCE[:4000])
        assert outcome.parsed is not None and not outcome.partial
    history, compact = sent["history"], sent["compact"]
    assert [step for step, _, _ in compact] == [step for step, _, _ in history] == ["extract", "glean", "check"]
    (_, first, answer), (_, glean, _), (_, check, _) = compact
    assert history[0][1] == first and len(first) == 1  # the first call is the same in both modes
    asked = {}
    for sent_after in (glean, check):
        # one user message (templates that want turns to alternate take it), no answer sent back
        assert [m["role"] for m in sent_after] == ["user"]
        prefix = first[0]["content"] + "\n\n"
        assert sent_after[0]["content"].startswith(prefix)  # byte for byte: a provider's cached prefix
        asked[id(sent_after)] = sent_after[0]["content"][len(prefix):]
    names = list(dict.fromkeys(e.name for e in answer.entities))
    assert len(names) >= 5
    assert asked[id(glean)].startswith(FOUND_NAMES.format(names="\n".join(names)))
    assert asked[id(glean)].rstrip().endswith("<|COMPLETE|>" if answer_format == "tuples" else "missed.")
    found_after = set(names) | {e.name for e in compact[1][2].entities}
    assert set(asked[id(check)].split("\n\n")[0].splitlines()[1:]) == found_after  # names so far, for the check
    assert "Answer Y if there are still" in asked[id(check)]

    def tokens(messages: list[dict[str, str]]) -> int:
        return sum(count_tokens(m["content"], "o200k_base") for m in messages)

    answered = tokens([history[1][1][1]])  # the first answer, which history sends back
    assert tokens(history[1][1]) - tokens(glean) > answered / 2
    assert tokens(check) < tokens(history[2][1])


def test_a_compact_follow_up_for_claude_keeps_the_first_prompt_a_message_of_its_own(tmp_path):
    """LiteLLM joins the two user messages into one Anthropic message whose first part carries the cache
    marker, so the follow-up reads the first prompt from Anthropic's cache."""
    cfg = config(tmp_path, "tuples", "compact")
    cfg.extract_graph.model_id = "claude"
    cfg.models["claude"] = cfg.models["default_chat_model"].model_copy(update={"model": "anthropic/claude-sonnet-4-5"})
    request = extraction_request(cfg.extract_graph, Gateway(cfg))
    assert request.separate_turns
    history = [{"role": "user", "content": "PROMPT"}, {"role": "assistant", "content": "ANSWER"}]
    asked = follow_up(request, history, parse_graph_reply('("entity"<|>ALEX<|>PERSON<|>a)'), "more?")
    assert asked == [history[0], {"role": "user", "content": FOUND_NAMES.format(names="ALEX") + "more?"}]


def test_the_dry_run_estimate_counts_compact_follow_ups_as_smaller():
    prompts, texts = [2000, 2300], [1200, 1500]
    none_cached = [(False, None)] * 2
    history = gleaning_estimate("extract_graph", "m", prompts, texts, none_cached, 2, 40)
    compact = gleaning_estimate("extract_graph", "m", prompts, texts, none_cached, 2, 80, compact=True)
    assert compact.calls == history.calls and compact.extra_calls == history.extra_calls
    assert compact.prompt_tokens == history.prompt_tokens
    assert sum(prompts) * 3 < compact.extra_prompt_tokens < history.extra_prompt_tokens
    none = gleaning_estimate("extract_graph", "m", prompts, texts, none_cached, 0, 80, compact=True)
    assert none.extra_prompt_tokens == 0


def test_a_dry_run_estimates_fewer_gleaning_tokens_for_compact(tmp_path, cli):
    estimates = {}
    for gleaning in ("history", "compact"):
        root = make_project(tmp_path / gleaning, [DATA / "operation-dulce" / "dulce.txt"],
                            f"extract_graph:\n  gleaning: {gleaning}\n")
        assert cli("index", "--root", root, "--dry-run").exit_code == 0
        estimates[gleaning] = json.loads((root / "output" / "dry_run.json").read_text(encoding="utf-8"))
    history, compact = (estimates[g]["extract_graph"] for g in ("history", "compact"))
    assert compact["prompt_tokens"] == history["prompt_tokens"] and compact["calls"] == history["calls"]
    assert 0 < compact["estimated_extra_prompt_tokens"] < 0.9 * history["estimated_extra_prompt_tokens"]


# (3) what models answer to it ---------------------------------------------------------------------------------


def compact_request(tmp_path: Path, answer_format: str) -> tuple[Gateway, ExtractionRequest]:
    cfg = config(tmp_path, answer_format, "compact")
    gateway = Gateway(cfg)
    return gateway, extraction_request(cfg.extract_graph, gateway)


def cached_answers(gateway: Gateway) -> list[str]:
    assert gateway.cache is not None
    rows = gateway.cache._db.execute("SELECT value FROM answers WHERE kind = 'chat'").fetchall()
    return [yaml.safe_load(row[0])["text"] for row in rows]


@pytest.mark.parametrize(("answer_format", "case", "reply", "added", "failed"),
                         [pytest.param(f, *case, id=f"{f}-{case[0]}") for f in FORMATS for case in CASES[f]])
def test_replies_to_a_compact_follow_up(tmp_path, monkeypatch, answer_format, case, reply, added, failed):
    gateway, request = compact_request(tmp_path, answer_format)
    calls = recorded(gateway, monkeypatch)
    outcome = extract(gateway, request, TEXT, {"extract_graph.extract": FIRST[answer_format],
                                               "extract_graph.glean": reply})
    assert [step for step, _, _ in calls] == ["extract", "glean"]
    assert [m["role"] for m in calls[1][1]] == ["user"]
    assert outcome.parsed is not None and outcome.error is None
    names = [e.name for e in outcome.parsed.entities]
    assert set(names) == {"ALEX MERCER", "TAYLOR CRUZ"} | added, case
    assert bool(outcome.partial) == failed, outcome.partial
    if failed:
        assert "gleaning 1 failed" in outcome.partial[0]
    merged = merge_graph(*(build_result([outcome], pd.DataFrame({"id": ["u1"], "text": [TEXT],
                                                                  "human_readable_id": [0]})).tables[t]
                           for t in ("raw_entities", "raw_relationships")))
    titles = merged.entities["title"].tolist()
    assert sorted(titles) == sorted(set(names))  # a repeated entity is one row, its descriptions merged
    pairs = [frozenset(p) for p in zip(merged.relationships["source"], merged.relationships["target"], strict=True)]
    assert len(pairs) == len(set(pairs)) and frozenset(("TAYLOR CRUZ", "ALEX MERCER")) in pairs
    for text in cached_answers(gateway):  # whatever was cached passes the stage's own check again
        checked(request.parse, TEXT, follow_up=True)(text)


def test_a_compact_follow_up_after_a_first_pass_without_entities_says_so(tmp_path, monkeypatch):
    gateway, request = compact_request(tmp_path, "tuples")
    calls = recorded(gateway, monkeypatch)
    outcome = extract(gateway, request, TEXT, {"extract_graph.extract": "<|COMPLETE|>",
                                               "extract_graph.glean": f"{SAM_TUPLES}<|COMPLETE|>"})
    assert calls[1][1][0]["content"].endswith("\n\n" + FOUND_NAMES.format(names="(none)") + COMPACT_GRAPH)
    assert outcome.parsed is not None and outcome.parsed.entities[0].name == "SAM RIVERA"


STYLES = {p.stem: yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted(REPLIES.glob("*.yaml"))}
GLEANINGS = [style for style, data in STYLES.items() if "extract_graph_glean" in data["replies"]]


@pytest.mark.parametrize("style", GLEANINGS)
def test_real_model_gleaning_replies_are_kept_after_a_compact_follow_up(tmp_path, style):
    """The gleaning replies real models gave (tests/data/replies/), now to a compact follow-up."""
    gateway, request = compact_request(tmp_path, "tuples")
    outcome = extract(gateway, request, TEXT, {"extract_graph.extract": FIRST["tuples"],
                                               "extract_graph.glean": STYLES[style]["replies"]["extract_graph_glean"]})
    expect = STYLES[style]["expect"]["extract_graph_glean"]
    assert outcome.parsed is not None, outcome.error
    names = {e.name for e in outcome.parsed.entities}
    assert {"ALEX MERCER", "TAYLOR CRUZ"} <= names
    if expect.get("usable", True):
        assert set(expect.get("entities", [])) <= names, f"{style}: kept {sorted(names)}"
        pairs = {frozenset((r.source, r.target)) for r in outcome.parsed.relationships}
        assert {frozenset(p) for p in expect.get("relationships", [])} <= pairs, f"{style}: kept {pairs}"


def test_a_compact_gleaning_that_names_no_new_entity_ends_the_unit(tmp_path, monkeypatch):
    """The next compact follow-up would be the same prompt and the same names, byte for byte: no check is
    asked and nothing is sent again (a history follow-up carries the new answer, so it goes on)."""
    only_a_relationship = f"{R}ALEX MERCER<|>TAYLOR CRUZ<|>Mercer answers Cruz<|>4)<|COMPLETE|>"
    steps = {}
    for gleaning in ("compact", "history"):
        cfg = config(tmp_path / gleaning, "tuples", gleaning, max_gleanings=3)
        gateway = Gateway(cfg)
        calls = recorded(gateway, monkeypatch)
        outcome = extract(gateway, extraction_request(cfg.extract_graph, gateway), TEXT,
                          {"extract_graph.extract": FIRST["tuples"], "extract_graph.glean": only_a_relationship,
                           "extract_graph.check": "Y"})
        assert outcome.parsed is not None and not outcome.partial
        assert len(outcome.parsed.relationships) >= 2  # the gleaning's relationship is kept
        steps[gleaning] = [step for step, _, _ in calls]
    assert steps["compact"] == ["extract", "glean"]
    assert steps["history"] == ["extract", "glean", "check", "glean", "check", "glean"]


def test_the_reply_ratio_sizes_estimated_answers_and_what_follow_ups_resend_but_not_a_cached_answer():
    """Claims estimate their answers at a quarter of entities' (REPLY_TO_INPUT_RATIO / 4): the history
    follow-ups resend those smaller answers, and a first answer the cache holds keeps its real size."""
    from graphrag_lite.estimate import REPLY_TO_INPUT_RATIO

    prompts, texts, answered = [1000, 1000], [800, 800], [(False, None), (False, 300)]  # unit 2: first answer cached
    full = gleaning_estimate("extract_claims", "m", prompts, texts, answered, 1, 40)
    quarter = gleaning_estimate("extract_claims", "m", prompts, texts, answered, 1, 40,
                                reply_ratio=REPLY_TO_INPUT_RATIO / 4)
    assert full.completion_tokens - quarter.completion_tokens == (400 - 100) + (200 - 50)  # unit 1 only
    assert full.extra_prompt_tokens - quarter.extra_prompt_tokens == 400 - 100  # unit 1's answer, resent once
    assert quarter.completion_tokens == 100 + 50 + 150  # unit 2's gleaning: half its real 300-token answer
