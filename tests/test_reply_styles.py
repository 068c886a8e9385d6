"""Every model stage against the reply styles real models produce (tests/data/replies/, sources in SOURCES.md).

Each style file holds replies a real model gave (written in its style) for some stages, and what a tolerant
parser must keep. The replies reach the stage through the fake provider's scripted replies, routed by the
stage the gateway names, so each test goes through the same gateway, parser, correction and cache as a run:
- usable replies keep every expected record;
- unusable ones end in a counted failure (never an exception, never an empty success);
- nothing invalid is cached: every cached answer passes the stage's parser again.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from graphrag_lite.answer_parsing import json_parser
from graphrag_lite.config import CacheConfig, GraphRagConfig, ModelConfig
from graphrag_lite.extraction.gleaning import (
    CONTINUE_CLAIMS,
    CONTINUE_GRAPH,
    ExtractionRequest,
    UnitOutcome,
    extract_units,
)
from graphrag_lite.extraction.replies import checked
from graphrag_lite.extraction.tuples import parse_claims_reply, parse_graph_json, parse_graph_reply
from graphrag_lite.fake.script import scripted
from graphrag_lite.graph.summaries import summary_parser
from graphrag_lite.llm.errors import LLMCallError
from graphrag_lite.llm.gateway import Gateway
from graphrag_lite.query.global_search import MapAnswer, parse_rating
from graphrag_lite.tables import Report

REPLIES = Path(__file__).parent / "data" / "replies"
TEXT = (REPLIES / "INPUT.txt").read_text(encoding="utf-8")
STYLES = {p.stem: yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted(REPLIES.glob("*.yaml"))}
CASES = [(style, key) for style, data in STYLES.items() for key in data["replies"]]
PROMPT = "Extract entities and relationships from the text.\nText: {input_text}\nOutput:"


def gateway(tmp_path: Path, structured: bool = False) -> Gateway:
    model = "fake/default?structured=1" if structured else "fake/default"
    config = GraphRagConfig(models={"m": ModelConfig(model=model, max_retry_wait=0.01)},
                            cache=CacheConfig(base_dir=tmp_path / "cache"))
    return Gateway(config)


def extract(tmp_path: Path, key: str, reply: str) -> tuple[UnitOutcome, Gateway, ExtractionRequest]:
    """One text unit through the extraction runner, the model answering `reply` where `key` says."""
    claims = key == "extract_claims"
    json_mode = key.startswith("extract_graph_json")
    request = ExtractionRequest(stage="extract_claims" if claims else "extract_graph", model_id="m", template=PROMPT,
                                parse=parse_claims_reply if claims else parse_graph_json if json_mode else
                                parse_graph_reply, continue_prompt=CONTINUE_CLAIMS if claims else CONTINUE_GRAPH,
                                max_gleanings=1 if key == "extract_graph_glean" else 0, json_mode=json_mode)
    step = "glean" if key == "extract_graph_glean" else "extract"
    script = {f"{request.stage}.{step}": reply}
    if step == "glean":  # a clean first pass, so the gleaning reply is what is tested
        script[f"{request.stage}.extract"] = ('("entity"<|>ALEX MERCER<|>PERSON<|>An agent of the Paranormal '
                                             'Military Squad)<|COMPLETE|>')
    g = gateway(tmp_path, structured=json_mode)
    units = pd.DataFrame({"id": ["u1"], "text": [TEXT], "human_readable_id": [0]})
    with scripted(script):
        [outcome] = asyncio.run(extract_units(g, request, units))
    return outcome, g, request


def cached_answers(g: Gateway) -> list[str]:
    assert g.cache is not None
    rows = g.cache._db.execute("SELECT value FROM answers WHERE kind = 'chat'").fetchall()
    return [yaml.safe_load(row[0])["text"] for row in rows]


def pairs(outcome: UnitOutcome) -> set[frozenset[str]]:
    assert outcome.parsed is not None
    return {frozenset((r.source, r.target)) for r in outcome.parsed.relationships}


@pytest.mark.parametrize(("style", "key"), [c for c in CASES if c[1].startswith("extract_")])
def test_extraction_keeps_what_can_be_used_and_counts_the_rest(tmp_path, style, key):
    expect: dict[str, Any] = STYLES[style]["expect"][key]
    outcome, g, request = extract(tmp_path, key, STYLES[style]["replies"][key])
    usable = expect.get("usable", True) and bool(expect.get("entities") or expect.get("relationships")
                                                 or expect.get("claims"))
    if not usable:
        records = outcome.parsed.records if outcome.parsed is not None else 0
        failed = outcome.parsed is None or outcome.partial
        if key == "extract_graph_glean":  # nothing more to add: the first pass is kept, nothing is invented
            assert outcome.parsed is not None and {e.name for e in outcome.parsed.entities} == {"ALEX MERCER"}
        else:
            assert failed or records == 0, f"{style}: an unusable reply produced {records} records"
    else:
        assert outcome.parsed is not None, f"{style}: {outcome.error}"
        names = {e.name for e in outcome.parsed.entities} | {c.subject for c in outcome.parsed.claims}
        assert set(expect.get("entities", [])) <= names, f"{style}: kept {sorted(names)}"
        wanted = {frozenset(p) for p in expect.get("relationships", [])}
        assert wanted <= pairs(outcome), f"{style}: kept {pairs(outcome)}"
        for subject, _ in expect.get("claims", []):
            assert subject in names
    for text in cached_answers(g):  # whatever was cached passes the stage's own check again
        checked(request.parse, TEXT, follow_up=key == "extract_graph_glean")(text)


def answer_with(tmp_path: Path, stage: str, reply: str, parse: Any) -> tuple[Any, Gateway]:
    g = gateway(tmp_path, structured=True)
    with scripted({stage: reply}):
        try:
            result = asyncio.run(g.chat("m", [{"role": "user", "content": "Answer in JSON."}], stage=stage,
                                        step="answer", parse=parse, json_mode=True))
            return result.value, g
        except LLMCallError:
            return None, g


STAGES = {"community_reports": json_parser(Report), "global_map": json_parser(MapAnswer),
          "global_rate": parse_rating, "summarize_descriptions": summary_parser}


@pytest.mark.parametrize(("style", "key"), [c for c in CASES if c[1] in STAGES])
def test_reports_summaries_map_and_rating_replies(tmp_path, style, key):
    expect = STYLES[style]["expect"].get(key, {})
    value, g = answer_with(tmp_path, key, STYLES[style]["replies"][key], STAGES[key])
    if expect.get("usable", True):
        assert value is not None, f"{style}: a usable {key} reply was rejected"
        if "rating" in expect:
            assert float(value.rating) == pytest.approx(float(expect["rating"]))
        if "points" in expect:
            assert len(value.points) == expect["points"]
        if key == "summarize_descriptions":
            assert "<think>" not in value and "COMPLETE" not in value and value.strip()
    else:
        assert value is None, f"{style}: an unusable {key} reply was accepted: {value}"
    for text in cached_answers(g):
        STAGES[key](text)


@pytest.mark.parametrize(("reply", "shown"), [
    ("<think>The reports say the squad is briefed.</think>\nThe squad is briefed [Data: Reports (0)].",
     "The squad is briefed [Data: Reports (0)]."),
    ("Reasoning without an opening tag.</think>The answer.", "The answer."),
])
def test_a_final_answer_is_shown_without_the_reasoning_block(tmp_path, reply, shown):
    from graphrag_lite.query.engine import answer_text

    value, _ = answer_with(tmp_path, "query_global_reduce", reply, answer_text)
    assert value == shown


def test_an_empty_final_answer_is_asked_again_not_shown(tmp_path):
    from graphrag_lite.query.engine import answer_text

    value, g = answer_with(tmp_path, "query_global_reduce", "", answer_text)
    assert value is None and cached_answers(g) == []
