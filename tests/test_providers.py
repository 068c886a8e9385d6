"""Providers LiteLLM does not know plug in through one seam (llm/providers.py: the Provider protocol, found by
the entry-point group graphrag_lite.providers), and the offline fake model is one of them: it answers each
call by the stage and step the gateway names, whatever the prompt says."""

from __future__ import annotations

import asyncio
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

from graphrag_lite.config import CacheConfig, GraphRagConfig, ModelConfig
from graphrag_lite.llm import providers
from graphrag_lite.llm.errors import LLMCallError, LLMConfigurationError
from graphrag_lite.llm.gateway import Gateway


def gateway(tmp_path: Path, model: str = "fake/default") -> Gateway:
    cfg = GraphRagConfig(models={"m": ModelConfig(model=model, max_retry_wait=0.01, max_retries=1)},
                         cache=CacheConfig(base_dir=tmp_path / "cache"))
    return Gateway(cfg, use_cache=False)  # the cache keys on the messages: each call here is asked


def ask(g: Gateway, prompt: str, stage: str, step: str) -> str:
    return asyncio.run(g.chat("m", [{"role": "user", "content": prompt}], stage=stage, step=step)).text


def test_the_fake_model_is_a_plug_in_found_by_its_entry_point():
    fake = providers.plugged("fake/default?latency=0.1")
    assert fake is not None and not fake.needs_key("fake/default") and fake.batch_api() is not None
    assert providers.plugged("openai/gpt-4o-mini") is None and providers.plugged("gpt-4o") is None
    assert providers.key_problem(ModelConfig(model="fake/default")) is None  # keyless, with no fake/ rule in llm/


def test_a_provider_of_ones_own_plugs_in_through_the_same_seam(monkeypatch):
    class Echo:  # what a third party would ship under the entry-point group, as `echo = pkg.module:PROVIDER`
        def __init__(self) -> None:
            self.registered: list[str] = []

        def register(self, litellm: Any, models: list[str]) -> None:
            self.registered += models

        def needs_key(self, model: str) -> bool:
            return True

        def supported_params(self, model: str) -> set[str]:
            return {"response_format"}

        def batch_api(self) -> Any:
            return None

    echo = Echo()
    point = EntryPoint(name="echo", value="tests.test_providers:Echo", group=providers.ENTRY_POINT_GROUP)
    monkeypatch.setattr(point.__class__, "load", lambda self: echo)
    monkeypatch.setattr(providers, "_entry_points", lambda: {"echo": point})
    providers.plug_in.cache_clear()
    try:
        assert providers.plugged("echo/small") is echo
        litellm = providers.load_litellm([ModelConfig(model="echo/small"), ModelConfig(model="openai/gpt-4o-mini")])
        assert echo.registered == ["echo/small"]
        assert providers.supported_params(litellm, "echo/small") == {"response_format"}
        assert providers.key_problem(ModelConfig(model="echo/small")) is not None  # no key: said before any call
        assert providers.online_reason(litellm, ModelConfig(model="echo/small")) == "its provider has no batch API"
        assert not providers.marks_prompt_cache("echo/small")
    finally:
        providers.plug_in.cache_clear()


EDITED_EXTRACTION = """Find what is named in this passage and how the named things relate.
Types: [PERSON, ORGANIZATION, GEO]
Passage:
Text: Agent Alex Mercer met Taylor Cruz at the Dulce base in New Mexico. Alex Mercer trusted Taylor Cruz.
Output:"""


def test_the_fake_answers_an_edited_prompt_by_the_calls_step_not_its_wording(tmp_path):
    g = gateway(tmp_path)
    graph = ask(g, EDITED_EXTRACTION, "extract_graph", "extract")
    assert '("entity"<|>AGENT ALEX MERCER<|>' in graph and '("relationship"' in graph  # an extraction, in tuples
    assert ask(g, EDITED_EXTRACTION, "extract_claims", "glean") == "<|COMPLETE|>"
    answer = ask(g, EDITED_EXTRACTION, "query_local", "answer")
    assert "entity" not in answer and "Alex Mercer" in answer  # the same text, asked another kind of question


def test_a_call_the_fake_has_no_answer_for_fails_loudly(tmp_path):
    g = gateway(tmp_path)
    with pytest.raises((LLMCallError, LLMConfigurationError), match="no answer for a call of stage 'x', step 'y'"):
        ask(g, "Say something.", "x", "y")


def test_a_prompt_without_the_sections_the_fake_reads_fails_loudly(tmp_path):
    g = gateway(tmp_path)
    with pytest.raises((LLMCallError, LLMConfigurationError), match="cannot read the prompt of a call of stage"):
        ask(g, "Judge the two answers, please.", "judge", "judge")  # an edited judge prompt, no ---Criteria---
