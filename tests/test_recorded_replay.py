"""A real model's answers, replayed through the answer cache (as nano-graphrag tests with its recorded replies).

tests/data/recorded/answers.jsonl holds the chat answers of one small index run with a real local model
(Qwen2.5-Coder-1.5B-Instruct; tests/data/recorded/README.md says how, when and with what). Loaded into a fresh
project's answer cache, the same run with the same settings (tests/data/recorded/settings.yaml: the model string,
api_base and call arguments are part of every cache key) must be served entirely from the cache. The model's server
is not running during the tests, so an answer the cache lacks would fail the run at once with a connection error.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from rich.console import Console

from graphrag_lite.errors import GraphragLiteError
from graphrag_lite.pipeline.runner import RunSummary, run_pipeline
from graphrag_lite.pipeline.settings import configure
from graphrag_lite.stages import STAGES
from tests.conftest import check_index
from tests.data.recorded.record import ANSWERS, RECORDED, load_answers, make_project

RECORDED_ANSWERS = [json.loads(line) for line in ANSWERS.read_text(encoding="utf-8").splitlines()]


def replay(root: Path, overrides: dict[str, object] | None = None,
           answers: list[dict[str, Any]] = RECORDED_ANSWERS) -> RunSummary:
    """Index the recorded corpus in a new project at `root` whose answer cache holds the recorded `answers`."""
    config, pipeline = configure(STAGES, make_project(root), overrides=overrides or {})
    load_answers(config.cache.base_dir, answers)
    return run_pipeline(config, pipeline, Console(quiet=True))


@pytest.fixture(scope="module")
def replayed(tmp_path_factory) -> Path:
    """The output folder of the replayed run (settings exactly as recorded)."""
    root = tmp_path_factory.mktemp("recorded") / "project"
    assert replay(root).status == "completed"
    return root / "output"


def table(output: Path, name: str) -> pd.DataFrame:
    return pd.read_parquet(output / f"{name}.parquet")


def test_every_chat_call_is_answered_from_the_recorded_answers(replayed):
    stats = json.loads((replayed / "stats.json").read_text(encoding="utf-8"))
    chat = {name: stage["llm"] for name, stage in stats["stages"].items() if "llm" in stage and name != "embed_text"}
    assert set(chat) == {stage for stage in (a["stage"] for a in RECORDED_ANSWERS)}
    for name, llm in chat.items():
        assert llm["cache_hits"] == llm["calls"], f"stage {name}: {llm['calls'] - llm['cache_hits']} calls missed"
        assert (llm["prompt_tokens"], llm["completion_tokens"], llm["failures"]) == (0, 0, 0), name  # nothing sent
    assert sum(llm["calls"] for llm in chat.values()) == len(RECORDED_ANSWERS)  # each answer used, once
    # the embeddings come from the offline fake model (fake/embedding), not from the cache: the run's only misses
    embedded = stats["stages"]["embed_text"]["llm"]
    assert stats["llm"]["cache_hits"] == stats["llm"]["calls"] - embedded["calls"]


def test_the_replayed_index_passes_the_index_checker(replayed):
    code, report = check_index(replayed)
    assert code == 0, report


def test_what_the_real_models_answers_made(replayed):
    """Facts of the recorded run, each a behaviour of the stages on a small model's real answers."""
    stats = json.loads((replayed / "stats.json").read_text(encoding="utf-8"))["stages"]
    # extract_graph: JSON answers (the server takes response_format); names upper-cased; the prompt's example
    # entities (HARBOR DYNAMICS, LISBON, and a misspelt HARBOUR DYNAMICS) and an invented ALICE MERCER are dropped
    # as not in their text unit, with the relationships that reach them
    extraction = stats["extract_graph"]["details"]
    assert extraction["format"] == "json" and extraction["failed_text_units"] == 0
    ungrounded = {line.rsplit(": ", 1)[1] for line in extraction["ungrounded_records"] if " entity " in line}
    assert ungrounded == {"HARBOR DYNAMICS", "LISBON", "ALICE MERCER", "HARBOUR DYNAMICS"}
    assert len(extraction["ungrounded_records"]) == 7
    raw = table(replayed, "raw_entities")
    assert sorted(raw["name"]) == ["AGENT ALEX MERCER", "DULCE", "JORDAN HAYES", "PARANORMAL MILITARY SQUAD",
                                   "SAM RIVERA", "SAM RIVERA", "TAYLOR CRUZ"]
    # grounding checks names, not descriptions: the example's facts stay in the description of a real name
    entities = table(replayed, "entities").set_index("title")
    assert "chief engineer of Harbor Dynamics" in entities.loc["AGENT ALEX MERCER", "description"]
    # merge_graph and summarize_descriptions: SAM RIVERA, found in both units, is the one name with two
    # descriptions, joined with no call (short); nothing merged as an alias (no ALEX MERCER beside AGENT ALEX MERCER)
    assert entities.loc["SAM RIVERA", "frequency"] == 2 and table(replayed, "entity_aliases").empty
    assert stats["summarize_descriptions"]["details"]["joined"] == 1 and "llm" not in stats["summarize_descriptions"]
    relationships = table(replayed, "relationships")
    assert sorted(zip(relationships["source"], relationships["target"], relationships["weight"], strict=True)) == [
        ("JORDAN HAYES", "AGENT ALEX MERCER", 8.0), ("SAM RIVERA", "AGENT ALEX MERCER", 7.0),
        ("TAYLOR CRUZ", "AGENT ALEX MERCER", 9.0)]
    # cluster_graph and community_reports: the four agents, and the two names with no relationship grouped loose;
    # both reports usable at the model's first answer, the first titled after the example's company too
    reports = table(replayed, "community_reports")
    assert reports["title"].tolist() == ["Community Analysis: Paranormal Military Squad and Harbor Dynamics",
                                         "DULCE Community"]
    assert reports["size"].tolist() == [4, 2] and (reports["status"] == "ok").all()
    assert reports["rank"].tolist() == [7.0, 7.0] and reports["findings"].map(len).tolist() == [2, 2]


def nothing_listens_at(api_base: str) -> bool:
    host, port = api_base.split("//")[1].split("/")[0].split(":")
    with socket.socket() as probe:
        return probe.connect_ex((host, int(port))) != 0


def test_an_answer_the_cache_lacks_fails_the_run_at_once_with_a_connection_error(tmp_path):
    """Without the last recorded answer (a community report) the run asks the model's server for it, which is
    not running: the run stops in community_reports, the model declared unreachable."""
    settings = yaml.safe_load((RECORDED / "settings.yaml").read_text(encoding="utf-8"))
    api_base = settings["models"]["default_chat_model"]["api_base"]
    if not nothing_listens_at(api_base):
        pytest.skip(f"a server is listening at {api_base}: it would answer the missing call")
    root = tmp_path / "project"
    # waits between retries are not part of the cache key: short ones end the test sooner
    with pytest.raises(GraphragLiteError, match=r"cannot be reached \(.*Connection error"):
        replay(root, {"models.default_chat_model.max_retry_wait": 0.01}, RECORDED_ANSWERS[:-1])
    stats = json.loads((root / "output" / "stats.json").read_text(encoding="utf-8"))
    assert stats["status"] == "failed" and stats["stages"]["community_reports"]["status"] == "failed"
    assert stats["stages"]["extract_graph"]["llm"]["cache_hits"] == 2
