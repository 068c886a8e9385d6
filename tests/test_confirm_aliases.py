"""entity_resolution.confirm_with_model: the chat model decides the names the rules left apart as ambiguous,
tested with the replies real models give (a number, a labelled number, prose naming a candidate, think blocks,
fences, refusals, empty and cut-off answers) and end to end from the CLI with a scripted model."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from graphrag_lite.answer_parsing import ParseError
from graphrag_lite.graph.confirm import Question, choice_parser
from tests.conftest import check_index, write_settings

QUESTION = Question("NORTHWIND", "ORGANIZATION", "Shipped timber from Oslo.",
                    [("NORTHWIND BANK", "A bank in Bergen."), ("NORTHWIND LOGISTICS", "Ships timber from Oslo.")])


@pytest.mark.parametrize(("reply", "expected"), [
    ("ANSWER: 2", "NORTHWIND LOGISTICS"),
    ("2", "NORTHWIND LOGISTICS"),
    ("**ANSWER: 1**", "NORTHWIND BANK"),
    ("<think>Candidate 1 is a bank, candidate 2 ships timber. So 2.</think>\nANSWER: 2", "NORTHWIND LOGISTICS"),
    ("```\nANSWER: 0\n```", None),
    ("Answer: 2 (Northwind Logistics ships timber from Oslo, as the short name's description says.)",
     "NORTHWIND LOGISTICS"),
    ("It denotes Northwind Logistics.", "NORTHWIND LOGISTICS"),
    ("None of them.", None),
    ("The descriptions do not let me tell.", None),
])
def test_replies_that_name_one_candidate_or_none_are_understood(reply, expected):
    assert choice_parser(QUESTION)(reply) == expected


@pytest.mark.parametrize("reply", [
    "", "ANSWER:", "ANSWER: 3", "Candidate 1 is a bank and candidate 2 ships timber; it is probably the second.",
    "It could be Northwind Bank or Northwind Logistics.", "I'm sorry, but I can't help with that request.",
    "<think>Candidate 1 is a bank, candidate 2 ships", "Maybe 1, maybe 2.", "1.5",
])
def test_replies_that_do_not_pick_one_candidate_are_rejected(reply):
    with pytest.raises(ParseError, match="one number from 0 to 2"):
        choice_parser(QUESTION)(reply)


EXTRACTION = "\n##\n".join([
    '("entity"<|>NORTHWIND LOGISTICS<|>ORGANIZATION<|>A shipping company in Oslo that moves timber)',
    '("entity"<|>NORTHWIND BANK<|>ORGANIZATION<|>A bank in Bergen that lends money to farmers)',
    '("entity"<|>NORTHWIND<|>ORGANIZATION<|>It shipped timber from Oslo again)',
    '("entity"<|>SHERLOCK HOLMES<|>PERSON<|>A detective in London)',
    '("entity"<|>MYCROFT HOLMES<|>PERSON<|>His brother, who works for the government)',
    '("entity"<|>HOLMES<|>PERSON<|>Someone called Holmes)',
    '("relationship"<|>NORTHWIND<|>NORTHWIND LOGISTICS<|>Same firm<|>5)',
    '("relationship"<|>NORTHWIND<|>NORTHWIND BANK<|>Mentioned together<|>1)',
    '("relationship"<|>HOLMES<|>SHERLOCK HOLMES<|>Mentioned together<|>1)',
    '("relationship"<|>HOLMES<|>MYCROFT HOLMES<|>Mentioned together<|>1)',
]) + "\n<|COMPLETE|>"


def project(tmp_path, merge_replies):
    root = tmp_path / "p"
    (root / "input").mkdir(parents=True)
    (root / "input" / "a.txt").write_text(
        "Northwind Logistics ships timber from Oslo. Northwind Bank lends money to farmers in Bergen. Northwind "
        "shipped timber from Oslo again. Sherlock Holmes is a detective in London; Mycroft Holmes, his brother, "
        "works for the government. Holmes was there.\n", encoding="utf-8")
    (root / "replies.yaml").write_text(yaml.safe_dump({"extract_graph": EXTRACTION, "merge_graph": merge_replies}),
                                       encoding="utf-8")
    (root / "graph.yaml").write_text("stages: [load_documents, chunk_text, extract_graph, merge_graph]\n",
                                     encoding="utf-8")
    write_settings(root, "pipeline: graph.yaml\nmodels:\n  default_chat_model:\n    model: fake/default?replies="
                   f"{root / 'replies.yaml'}\n    max_retry_wait: 0.01\nextract_graph:\n  max_gleanings: 0\n"
                   "entity_resolution:\n  confirm_with_model: true\n")
    return root


def test_the_model_places_an_ambiguous_name_and_a_useless_reply_leaves_one_apart_counted(tmp_path, cli):
    # one reply for every question, whatever the order: it names a candidate of HOLMES and none of NORTHWIND's
    root = project(tmp_path, "It denotes Sherlock Holmes, the detective.")
    result = cli("index", "--root", root)
    assert result.exit_code == 4, result.output  # a question without a usable answer fails the run, counted
    assert "the model placed 1 of 2 ambiguous names" in result.output
    merged = pd.read_parquet(root / "output" / "merged_entities.parquet")
    assert "HOLMES" not in set(merged["title"]) and "NORTHWIND" in set(merged["title"])
    aliases = pd.read_parquet(root / "output" / "entity_aliases.parquet").set_index("alias")
    assert aliases.loc["HOLMES", "title"] == "SHERLOCK HOLMES"
    assert aliases.loc["HOLMES", "reason"] == "chosen by the model among several longer names"
    stats = yaml.safe_load((root / "output" / "stats.json").read_text(encoding="utf-8"))
    problems = stats["stages"]["merge_graph"]["problems"]
    assert len(problems) == 1 and "which name 'NORTHWIND' denotes: no usable answer" in problems[0]


def test_a_declined_name_stays_apart_and_nothing_is_asked_when_the_setting_is_off(tmp_path, cli):
    root = project(tmp_path, "ANSWER: 0")
    assert cli("index", "--root", root).exit_code == 0
    merged = pd.read_parquet(root / "output" / "merged_entities.parquet")
    assert {"NORTHWIND", "HOLMES"} <= set(merged["title"])
    ambiguous = pd.read_parquet(root / "output" / "ambiguous_aliases.parquet")
    assert set(ambiguous["title"]) == {"NORTHWIND", "HOLMES"}
    settings = (root / "settings.yaml").read_text(encoding="utf-8").replace("confirm_with_model: true",
                                                                           "confirm_with_model: false")
    write_settings(root, settings)
    rerun = cli("index", "--root", root)
    assert rerun.exit_code == 0 and "the model placed" not in rerun.output


def test_the_fake_model_picks_by_description_in_a_full_standard_index(tmp_path, cli):
    root = project(tmp_path, "unused")
    (root / "replies.yaml").write_text(yaml.safe_dump({"extract_graph": EXTRACTION}), encoding="utf-8")
    settings = (root / "settings.yaml").read_text(encoding="utf-8").replace("pipeline: graph.yaml\n", "")
    embedding = "models:\n  default_embedding_model:\n    model: fake/embedding\n"
    write_settings(root, settings.replace("models:\n", embedding))
    result = cli("index", "--root", root)
    assert result.exit_code == 0, result.output
    aliases = pd.read_parquet(root / "output" / "entity_aliases.parquet").set_index("alias")
    assert aliases.loc["NORTHWIND", "title"] == "NORTHWIND LOGISTICS"  # "shipped timber from Oslo"
    code, report = check_index(root / "output")
    assert code == 0, report


def test_a_model_that_answers_by_position_merges_nothing(tmp_path, cli):
    # a small model's habit: "1" whatever the candidates; asked in both orders, its answers disagree
    root = project(tmp_path, "ANSWER: 1")
    result = cli("index", "--root", root)
    assert result.exit_code == 0, result.output
    assert "the model placed 0 of 2 ambiguous names (2 left apart: its answer changed with the candidates' order)" \
        in result.output
    assert {"NORTHWIND", "HOLMES"} <= set(pd.read_parquet(root / "output" / "merged_entities.parquet")["title"])
