import asyncio
from collections import Counter

from graphrag_lite.config import CacheConfig, GraphRagConfig, ModelConfig, SummarizeDescriptionsConfig
from graphrag_lite.fake.provider import STATS
from graphrag_lite.graph.summaries import JOINED, SUMMARIZED, joined_if_short, pack, summarize_all
from graphrag_lite.llm.gateway import Gateway
from graphrag_lite.prompts import load_prompt

TEMPLATE = load_prompt(None, "summarize_descriptions.txt")


def gateway(tmp_path):
    cfg = GraphRagConfig(models={"default_chat_model": ModelConfig(model="fake/default")},
                         cache=CacheConfig(base_dir=tmp_path))
    return Gateway(cfg)


ALWAYS = SummarizeDescriptionsConfig(join_max_tokens=0)  # Microsoft GraphRAG: every list of several is summarized


def test_single_descriptions_are_kept_verbatim_without_a_call(tmp_path):
    STATS.reset()
    problems = []
    out = asyncio.run(summarize_all(gateway(tmp_path), ALWAYS, TEMPLATE,
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
    cfg = SummarizeDescriptionsConfig(max_input_tokens=400, join_max_tokens=0)
    out = asyncio.run(summarize_all(gateway(tmp_path), cfg, TEMPLATE, ["ALICE"], [descriptions], [], lambda: None))
    assert STATS.completions > 2  # batches first, then the summaries of the batches
    assert out[0]


def test_descriptions_that_one_of_them_says_entirely_need_no_call(tmp_path):
    STATS.reset()
    out = asyncio.run(summarize_all(gateway(tmp_path), SummarizeDescriptionsConfig(), TEMPLATE, ["TECH SHOW"],
                                    [["Hello and welcome to Behind the Tech.", "Hello, welcome to Behind the Tech!"]],
                                    [], lambda: None))
    assert out == ["Hello and welcome to Behind the Tech."] and STATS.completions == 0


def test_few_short_descriptions_are_joined_without_a_call_and_long_or_many_are_summarized(tmp_path):
    STATS.reset()
    cfg = SummarizeDescriptionsConfig(join_max_tokens=60, join_max_descriptions=3)
    short = ["A pilot", "Flies for Acme Airlines.", "Lives in Lisbon!"]
    many = ["A pilot.", "Flies for Acme.", "Lives in Lisbon.", "Owns a boat."]
    long = ["A pilot who " + "flies far " * 30 + ".", "Works for Acme Airlines since 1990."]
    tally: Counter[str] = Counter()
    out = asyncio.run(summarize_all(gateway(tmp_path), cfg, TEMPLATE, ["ANA", "BOB", "CAL"], [short, many, long],
                                    [], lambda: None, tally))
    # joined in their order, each a sentence, nothing dropped
    assert out[0] == "A pilot. Flies for Acme Airlines. Lives in Lisbon!"
    assert STATS.completions == 2 and tally == {SUMMARIZED: 2, JOINED: 1}


def test_the_join_limits_count_tokens_and_descriptions_inclusively():
    cfg = SummarizeDescriptionsConfig(join_max_tokens=6, join_max_descriptions=2)
    assert joined_if_short(["Red.", "Blue."], cfg) == "Red. Blue."  # 4 tokens
    assert joined_if_short(["Red.", "Blue.", "Green."], cfg) is None  # three descriptions
    assert joined_if_short(["Red and green.", "Blue or yellow."], cfg) is None  # 8 tokens
    assert joined_if_short(["Red.", "Blue."], SummarizeDescriptionsConfig(join_max_tokens=0)) is None


def test_joining_short_descriptions_saves_calls_and_keeps_every_id(tmp_path, cli):
    """The sample indexed with the default join limits and with every list summarized (Microsoft GraphRAG):
    fewer summary calls, the same entities, relationships and communities, and each joined description holds
    every description it was made from."""
    import json

    import pandas as pd

    from tests.conftest import SAMPLE, make_project

    runs = {}
    for name, settings in (("joined", ""), ("always", "summarize_descriptions:\n  join_max_tokens: 0\n")):
        root = make_project(tmp_path / name, SAMPLE, "chunking:\n  size: 600\n" + settings)
        assert cli("index", "--root", root).exit_code == 0
        stats = json.loads((root / "output" / "stats.json").read_text(encoding="utf-8"))
        runs[name] = (root / "output", stats["stages"]["summarize_descriptions"])
    (joined, stage), (always, always_stage) = runs["joined"], runs["always"]
    assert stage["details"]["joined"] > 0 and always_stage["details"]["joined"] == 0
    assert stage["llm"]["calls"] < always_stage["llm"]["calls"]
    for table, columns in (("entities", ["id", "title"]), ("relationships", ["id", "source", "target"]),
                           ("communities", ["id", "entity_ids"])):
        left, right = (pd.read_parquet(out / f"{table}.parquet").sort_values("id")[columns].astype(str)
                       for out in (joined, always))
        pd.testing.assert_frame_equal(left.reset_index(drop=True), right.reset_index(drop=True), obj=table)
    kept_whole = 0
    for merged_table, final_table, key in (("merged_entities", "entities", ["title"]),
                                           ("merged_relationships", "relationships", ["source", "target"])):
        merged = pd.read_parquet(joined / f"{merged_table}.parquet").set_index(key)["descriptions"]
        final = pd.read_parquet(joined / f"{final_table}.parquet").set_index(key)["description"]
        kept_whole += sum(len(merged[k]) > 1 and all(d.rstrip(".") in final[k] for d in merged[k])
                          for k in merged.index)
    assert kept_whole >= stage["details"]["joined"]


def test_summaries_in_the_styles_real_models_answer(tmp_path):
    """Scripted replies, not the fake's: an empty answer and then a cut-off one are asked again and the
    complete one kept (a preamble line dropped); a model that never answers usably leaves the descriptions
    joined, nothing lost, the failure listed and nothing cached."""
    from graphrag_lite.fake.script import scripted

    descriptions = ["A pilot for Acme.", "She flew the first mail route to Lisbon."]
    problems: list[str] = []
    with scripted({"summarize_descriptions": ["", {"content": "A pilot for Acme who flew", "finish_reason": "length"},
                                              "Here is the summary:\nA pilot for Acme who flew the first mail route "
                                              "to Lisbon."]}):
        [kept] = asyncio.run(summarize_all(gateway(tmp_path / "a"), ALWAYS, TEMPLATE, ["ANA"], [descriptions],
                                           problems, lambda: None))
    assert kept == "A pilot for Acme who flew the first mail route to Lisbon." and problems == []
    STATS.reset()
    with scripted({"summarize_descriptions": "I'm sorry, I can't help with"}):
        failing = gateway(tmp_path / "b")
        [fallback] = asyncio.run(summarize_all(failing, ALWAYS, TEMPLATE, ["ANA"], [descriptions], problems,
                                               lambda: None))
    assert fallback == "A pilot for Acme. She flew the first mail route to Lisbon."
    assert len(problems) == 1 and "summary of ANA failed, its descriptions were joined instead" in problems[0]
    assert failing.ledger.totals()["failures"] == 1 and STATS.completions >= 2
    STATS.reset()  # nothing of the failure was cached: asked again, the model is called again
    [again] = asyncio.run(summarize_all(failing, ALWAYS, TEMPLATE, ["ANA"], [descriptions], [], lambda: None))
    assert STATS.completions == 1 and "Lisbon" in again


def test_the_longest_list_is_summarized_first_and_its_correction_goes_before_shorter_lists(tmp_path):
    """The longest lists of descriptions are asked first, and when the longest one's answer is cut off, its
    corrective follow-up takes the next free slot, before the shorter lists still waiting. In order of asking,
    the follow-up would wait behind every list, and with many slots need a round of its own at the end. One
    slot: with two, which of two calls in flight reaches the model first depends on the machine's load."""
    from graphrag_lite.fake.script import scripted

    STATS.reset()
    cfg = GraphRagConfig(models={"default_chat_model": ModelConfig(model="fake/default?latency=0.01", concurrency=1)},
                         cache=CacheConfig(base_dir=tmp_path))
    lists = {"DAN": ["Bakes bread.", "Sells cakes."],
             "BOB": ["A pilot who " + "flies far and wide, " * 20 + "for Acme.", "Lives in Lisbon."],
             "ANA": ["Sails boats on the river.", "Lives in Porto."],
             "CAL": ["Writes novels about the sea.", "Lives in Madrid.", "Teaches writing."]}
    covering_all = ("Bakes bread, sells cakes; pilot flies for Acme; sails boats; writes novels, teaches; lives in "
                    "Porto, Lisbon, Madrid.")
    with scripted({"summarize_descriptions": [{"content": "A pilot who flies", "finish_reason": "length"},
                                              covering_all]}):
        out = asyncio.run(summarize_all(Gateway(cfg, use_cache=False), ALWAYS, TEMPLATE, list(lists),
                                        list(lists.values()), [], lambda: None))
    asked = [next(name for name in lists if name in prompt) for prompt in STATS.first_messages]
    # by the length of their descriptions; BOB's correction goes out as soon as the slot is free (CAL already
    # had it), before the shorter ANA and DAN
    assert asked == ["BOB", "CAL", "BOB", "ANA", "DAN"]
    assert out == [covering_all] * 4
