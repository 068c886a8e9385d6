import asyncio

from graphrag_lite.config import CacheConfig, GraphRagConfig, ModelConfig, SummarizeDescriptionsConfig
from graphrag_lite.llm.fake import STATS
from graphrag_lite.llm.gateway import Gateway
from graphrag_lite.prompts import load_prompt
from graphrag_lite.stages.summarize_descriptions import pack, summarize_all

TEMPLATE = load_prompt(None, "summarize_descriptions.txt")


def gateway(tmp_path):
    cfg = GraphRagConfig(models={"default_chat_model": ModelConfig(model="fake/default")},
                         cache=CacheConfig(base_dir=tmp_path))
    return Gateway(cfg)


def test_single_descriptions_are_kept_verbatim_without_a_call(tmp_path):
    STATS.reset()
    problems = []
    out = asyncio.run(summarize_all(gateway(tmp_path), SummarizeDescriptionsConfig(), TEMPLATE,
                                    ["ALICE", "BOB"], [["An engineer."], ["A pilot.", "Flies for Acme."]],
                                    problems, lambda: None))
    assert out[0] == "An engineer."
    assert "A pilot." in out[1] and "Flies for Acme." in out[1]
    assert STATS.completions == 1 and problems == []


def test_pack_respects_the_budget():
    batches = pack(["word " * 40] * 5, budget=100)
    assert [len(b) for b in batches] == [2, 2, 1]


def test_long_description_lists_are_folded(tmp_path):
    STATS.reset()
    places = ["Lisbon", "Madrid", "Paris", "Berlin", "Vienna", "Prague", "Warsaw", "Dublin", "Oslo", "Athens",
              "Rome", "Bern"]
    descriptions = [f"Fact about {place}: " + "detail " * 60 for place in places]  # each says something new
    cfg = SummarizeDescriptionsConfig(max_input_tokens=400)
    out = asyncio.run(summarize_all(gateway(tmp_path), cfg, TEMPLATE, ["ALICE"], [descriptions], [], lambda: None))
    assert STATS.completions > 2  # batches first, then the summaries of the batches
    assert out[0]


def test_descriptions_that_one_of_them_says_entirely_need_no_call(tmp_path):
    STATS.reset()
    out = asyncio.run(summarize_all(gateway(tmp_path), SummarizeDescriptionsConfig(), TEMPLATE, ["TECH SHOW"],
                                    [["Hello and welcome to Behind the Tech.", "Hello, welcome to Behind the Tech!"]],
                                    [], lambda: None))
    assert out == ["Hello and welcome to Behind the Tech."] and STATS.completions == 0
