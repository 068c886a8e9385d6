"""The model stages alone, from the golden tables, answered with the replies real models give (the styles of
tests/data/replies/, scripted by stage.step through the fake provider): what each stage keeps, drops, counts in its
problems and details, and how its tables look. Each test is named after the stage it runs.

tests/test_reply_styles.py tests the parsers and the extraction runner on these replies; here the whole stage runs
(prompt, gateway, correction, grounding, its table and its report), as in an index run.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from graphrag_lite.fake.script import Script, scripted
from graphrag_lite.pipeline.contract import StageResult
from tests.conftest import DATA
from tests.data.golden.regenerate import project_config
from tests.test_golden_stages import golden_inputs, golden_table, run_stage_alone

# the golden first text unit holds tests/data/replies/INPUT.txt, the text the replies were written for
FIRST_UNIT = {"base_text_units": golden_table("standard", "base_text_units").iloc[:1]}


def reply(style: str, key: str) -> Any:
    """A reply of a style file in tests/data/replies/ (text, or content with a finish reason)."""
    return yaml.safe_load((DATA / "replies" / f"{style}.yaml").read_text(encoding="utf-8"))["replies"][key]


def run_with_replies(tmp_path: Path, stage_name: str, replies: dict[str, Any], inputs: dict[str, pd.DataFrame],
                     settings: dict[str, Any] | None = None) -> tuple[StageResult, Script]:
    """The stage alone under the golden standard settings (and `settings`), the model answering `replies`."""
    config, _ = project_config(tmp_path / "standard", "standard", settings)
    with scripted(replies) as script:
        result = run_stage_alone(stage_name, config, inputs)
    return result, script


def pairs(relationships: pd.DataFrame) -> list[tuple[str, str]]:
    return list(zip(relationships["source"], relationships["target"], strict=True))


# ------------------------------------------------------------------------------------------------ extract_graph

NO_GLEANING = {"extract_graph.max_gleanings": 0, "extract_claims.max_gleanings": 0}


def test_extract_graph_keeps_the_complete_records_of_a_real_small_models_answer_cut_off_in_a_loop(tmp_path):
    """Qwen2.5-Coder-1.5B repeats the same relationships until max_tokens: the records before the cut are kept once
    each, the cut one is dropped and counted, and the unit is marked partly extracted (re-run to retry it)."""
    result, script = run_with_replies(tmp_path, "extract_graph", {"extract_graph": reply(
        "real_qwen25_coder_1_5b", "extract_graph")}, FIRST_UNIT, NO_GLEANING)
    entities, relationships = result.tables["raw_entities"], result.tables["raw_relationships"]
    assert sorted(entities["name"]) == ["AGENT MERCER", "JORDAN HAYES", "SAM RIVERA", "TAYLOR CRUZ"]
    assert sorted(pairs(relationships)) == [("AGENT MERCER", "JORDAN HAYES"), ("AGENT MERCER", "SAM RIVERA"),
                                            ("AGENT MERCER", "TAYLOR CRUZ"), ("JORDAN HAYES", "SAM RIVERA"),
                                            ("TAYLOR CRUZ", "SAM RIVERA")]
    assert (relationships["strength"] == 1.0).all()  # the model gave none: the default
    assert script.served == {"extract_graph": 2}  # the answer, and the one correction asked for
    assert not result.complete and result.details["partly_extracted_text_units"] == 1
    assert result.details["failed_text_units"] == 0
    [dropped] = result.details["dropped_records"]
    assert dropped.startswith("text unit 0: relationship cut off:")
    [problem] = result.problems
    assert problem.startswith("text unit 0: answer cut off, its 9 complete records kept")
    assert "raise extract_graph.max_completion_tokens (now 8000)" in problem


def test_extract_graph_drops_the_prompts_example_entities_as_ungrounded_and_lists_them(tmp_path):
    result, _ = run_with_replies(tmp_path, "extract_graph", {"extract_graph": reply(
        "copied_prompt_examples", "extract_graph")}, FIRST_UNIT, NO_GLEANING)
    assert sorted(result.tables["raw_entities"]["name"]) == ["ALEX MERCER", "TAYLOR CRUZ"]
    assert pairs(result.tables["raw_relationships"]) == [("TAYLOR CRUZ", "ALEX MERCER")]
    ungrounded = result.details["ungrounded_records"]
    assert len(ungrounded) == 5 and all(line.startswith("text unit 0: ") for line in ungrounded)
    assert {"ADA MENSAH", "HARBOR DYNAMICS", "LISBON PORT AUTHORITY"} <= {line.rsplit(": ", 1)[1] for line in
                                                                         ungrounded}
    assert result.complete and not result.problems  # a usable answer: nothing to retry
    assert "5 not in their text unit" in result.summary


def test_extract_graph_reads_no_record_inside_a_think_block(tmp_path):
    """The reasoning names BRIEFING ROOM (which the text has, so grounding would keep it) in record form, and
    decides against it: only the records after the block are kept."""
    result, _ = run_with_replies(tmp_path, "extract_graph", {"extract_graph": reply("think_blocks", "extract_graph")},
                                 FIRST_UNIT, NO_GLEANING)
    entities = result.tables["raw_entities"]
    assert sorted(entities["name"]) == ["ALEX MERCER", "PARANORMAL MILITARY SQUAD", "TAYLOR CRUZ"]
    assert not entities["description"].str.contains("think").any()
    assert result.tables["raw_relationships"]["strength"].tolist() == [7.0]
    assert result.complete and not result.details["dropped_records"]


def test_extract_graph_takes_a_refusal_that_ends_with_the_completion_marker_as_a_unit_without_entities(tmp_path):
    """As the code stands, a refusal followed by <|COMPLETE|> reads as a well-formed empty answer: no record, and
    neither a failure nor a problem (an empty answer is valid for a unit that names nothing)."""
    result, _ = run_with_replies(tmp_path, "extract_graph", {"extract_graph": reply("refusal", "extract_graph")},
                                 FIRST_UNIT, NO_GLEANING)
    assert result.tables["raw_entities"].empty and result.tables["raw_relationships"].empty
    assert result.complete and not result.problems and result.details["failed_text_units"] == 0
    assert result.summary.startswith("1 of 1 text units -> 0 entity and 0 relationship records")


# ----------------------------------------------------------------------------------------------- extract_claims


def test_extract_claims_drops_a_real_small_models_run_together_claims_and_marks_the_unit_for_a_retry(tmp_path):
    """Qwen2.5-Coder-1.5B runs its claims together with no record delimiter, echoing the input, until cut off: one
    record of 41 fields, which no position can rescue."""
    result, script = run_with_replies(tmp_path, "extract_claims", {"extract_claims": reply(
        "real_qwen25_coder_1_5b", "extract_claims")}, FIRST_UNIT, NO_GLEANING)
    assert result.tables["raw_claims"].empty
    assert script.served == {"extract_claims": 2}
    [dropped] = result.details["dropped_records"]
    assert dropped.startswith("text unit 0: claim with 41 of 8 fields: Sam Rivera<|>Jordan Hayes")
    assert not result.complete and result.details["partly_extracted_text_units"] == 1
    assert result.problems[0].startswith("text unit 0: answer cut off, its 0 complete records kept")


def test_extract_claims_keeps_a_claim_without_its_source_text_and_drops_one_without_dates(tmp_path):
    result, _ = run_with_replies(tmp_path, "extract_claims", {"extract_claims": reply(
        "missing_extra_fields", "extract_claims")}, FIRST_UNIT, NO_GLEANING)
    [claim] = result.tables["raw_claims"].to_dict("records")
    assert (claim["subject"], claim["object"], claim["type"]) == ("TAYLOR CRUZ", "ALEX MERCER", "QUESTIONING LOYALTY")
    assert (claim["status"], claim["start_date"], claim["end_date"], claim["source_text"]) == ("TRUE", "NONE",
                                                                                               "NONE", "")
    [dropped] = result.details["dropped_records"]
    assert dropped.startswith("text unit 0: claim with 6 of 8 fields: SAM RIVERA")
    assert result.complete and not result.problems


def test_extract_claims_counts_a_refusal_as_a_failed_unit(tmp_path):
    result, script = run_with_replies(tmp_path, "extract_claims", {"extract_claims": reply(
        "refusal", "extract_claims")}, FIRST_UNIT, NO_GLEANING)
    assert result.tables["raw_claims"].empty
    assert script.served == {"extract_claims": 2}
    assert (result.details["failed_text_units"], result.details["failed_share"]) == (1, 1.0)
    [problem] = result.problems
    assert problem.startswith("text unit 0: extraction failed: model 'default_chat_model' gave no usable answer")
    assert "no records in the required format" in problem and not result.complete


# --------------------------------------------------------------------------------------- summarize_descriptions


def summarized_rows(result: StageResult) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The stage's entity descriptions beside the golden ones (title, description, description_golden)."""
    golden = golden_table("standard", "summarized_entities")[["title", "description"]]
    both = result.tables["summarized_entities"][["title", "description"]].merge(golden, on="title",
                                                                                 suffixes=("", "_golden"))
    changed = both["description"] != both["description_golden"]
    return both[changed], both[~changed]


def test_summarize_descriptions_keeps_a_summary_without_its_preamble_and_asks_only_for_long_lists(tmp_path):
    text = reply("preamble_epilogue", "summarize_descriptions")
    result, script = run_with_replies(tmp_path, "summarize_descriptions", {"summarize_descriptions": text},
                                      golden_inputs("standard", "summarize_descriptions"))
    summary = text.split("\n\n", 1)[1].strip()  # after "Here is the comprehensive summary:"
    changed, kept = summarized_rows(result)
    assert set(changed["description"]) == {summary}  # one scripted answer for every call
    assert len(kept) and not kept["description"].str.contains("Here is").any()
    golden = golden_table("standard", "summarized_relationships")
    asked = result.details["summarized"]
    assert (asked, result.details["joined"], result.details["kept_verbatim"]) == (8, 6, 39)
    # the joined and single ones cost no call; the one scripted summary is about Alex Mercer, so the 5 subjects whose
    # own descriptions it leaves out are asked once to cover them (a soft check), then keep it
    assert script.served == {"summarize_descriptions": asked + 5}
    assert len(changed) + (result.tables["summarized_relationships"]["description"] != golden["description"]).sum() \
        == asked
    assert result.complete and not result.problems


def test_summarize_descriptions_falls_back_to_the_joined_descriptions_when_the_answer_is_empty(tmp_path):
    result, _ = run_with_replies(tmp_path, "summarize_descriptions", {"summarize_descriptions": reply(
        "empty_content", "summarize_descriptions")}, golden_inputs("standard", "summarize_descriptions"))
    merged = golden_table("standard", "merged_entities").set_index("title")["descriptions"]
    changed, _ = summarized_rows(result)
    for title, description in zip(changed["title"], changed["description"], strict=True):
        assert all(d.rstrip(".") in description for d in merged[title]), title  # nothing lost
    assert len(result.problems) == result.details["summarized"] == 8 and not result.complete
    assert all(p.startswith("summary of ") and "its descriptions were joined instead" in p and
               p.endswith("the summary is empty") for p in result.problems)
    assert (result.tables["summarized_entities"]["description"].str.len() > 0).all()


# -------------------------------------------------------------------------------------------- community_reports

GOLDEN_COMMUNITIES = len(golden_table("standard", "communities"))


@pytest.mark.parametrize(("style", "rating", "findings"), [
    ("markdown_fences", 6.5, 2),  # JSON in a ```json fence
    ("think_blocks", 7.0, 1),  # reasoning before the JSON
    ("numbers_as_strings", 8.0, 1),  # "rating": "8/10"
    ("invalid_json_syntax", 6.0, 2),  # single-quoted keys and strings
    ("missing_report_fields", 5.5, 0),  # no rating_explanation, no findings
])
def test_community_reports_reads_a_usable_report_in_each_style(tmp_path, style, rating, findings):
    result, script = run_with_replies(tmp_path, "community_reports", {"community_reports": reply(
        style, "community_reports")}, golden_inputs("standard", "community_reports"))
    reports = result.tables["community_reports"]
    assert len(reports) == GOLDEN_COMMUNITIES and (reports["status"] == "ok").all()
    assert script.served == {"community_reports": GOLDEN_COMMUNITIES}  # no correction was needed
    assert reports["rank"].tolist() == [rating] * GOLDEN_COMMUNITIES
    assert reports["findings"].map(len).tolist() == [findings] * GOLDEN_COMMUNITIES
    assert all(content.startswith(f"# {title}\n") for title, content in zip(reports["title"], reports["full_content"],
                                                                              strict=True))
    assert result.complete and not result.problems and result.details["failed_reports"] == 0


@pytest.mark.parametrize(("style", "reason"), [
    ("truncated_mid_record", "the JSON object is cut off before its end"),
    ("refusal", "the answer contains no JSON object"),
    ("empty_content", "the answer contains no JSON object"),
])
def test_community_reports_keeps_a_row_saying_why_for_a_report_that_failed(tmp_path, style, reason):
    result, script = run_with_replies(tmp_path, "community_reports", {"community_reports": reply(
        style, "community_reports")}, golden_inputs("standard", "community_reports"))
    reports = result.tables["community_reports"]
    assert reports["community"].tolist() == list(range(GOLDEN_COMMUNITIES))  # one row per community still
    assert reports["title"].tolist() == [f"Community {c} (report missing)" for c in reports["community"]]
    assert all(status.endswith(f"the last: {reason}") for status in reports["status"])
    assert all(math.isnan(rank) for rank in reports["rank"]) and (reports["summary"] == "").all()
    assert script.served == {"community_reports": 2 * GOLDEN_COMMUNITIES}  # each asked to correct itself once
    assert result.problems == [f"community {c}: report failed: {s}" for c, s in zip(reports["community"],
                                                                                    reports["status"], strict=True)]
    assert result.details["failed_reports"] == GOLDEN_COMMUNITIES and not result.complete


# --------------------------------------------------------------------------- merge_graph with confirm_with_model


def raw_graph_with_an_ambiguous_name() -> dict[str, pd.DataFrame]:
    """The golden raw graph and one more person, ELENA RIVERA: the rules can no longer tell whom RIVERA denotes."""
    inputs = golden_inputs("standard", "merge_graph")
    raw = inputs["raw_entities"]
    elena = pd.DataFrame([(raw["text_unit_id"].iloc[0], "ELENA RIVERA", "PERSON",
                           "Sam Rivera's older sister, a radio operator who left the Dulce base years ago")],
                         columns=raw.columns)
    inputs["raw_entities"] = pd.concat([raw, elena], ignore_index=True)
    return inputs


def confirm(tmp_path: Path, answer: str) -> tuple[StageResult, Script]:
    return run_with_replies(tmp_path, "merge_graph", {"merge_graph": answer}, raw_graph_with_an_ambiguous_name(),
                            {"entity_resolution.confirm_with_model": True})


def test_merge_graph_leaves_an_ambiguous_name_apart_when_the_model_is_not_asked(tmp_path):
    result, script = run_with_replies(tmp_path, "merge_graph", {}, raw_graph_with_an_ambiguous_name())
    [row] = result.tables["ambiguous_aliases"].to_dict("records")
    assert (row["title"], list(row["could_be"])) == ("RIVERA", ["ELENA RIVERA", "SAM RIVERA"])
    assert script.served == {} and "ambiguous_names_asked" not in result.details


def test_merge_graph_merges_the_name_a_model_picks_in_both_orders_of_the_candidates(tmp_path):
    result, script = confirm(tmp_path, "<think>RIVERA combed through the transmission logs, as Sam Rivera did."
                                       "</think>\nIt denotes Sam Rivera.")
    aliases = result.tables["entity_aliases"].set_index("alias")
    assert aliases.loc["RIVERA", "title"] == "SAM RIVERA"
    assert aliases.loc["RIVERA", "reason"] == "chosen by the model among several longer names"
    assert "RIVERA" not in set(result.tables["merged_entities"]["title"])
    assert result.tables["ambiguous_aliases"].empty
    assert script.served == {"merge_graph": 2}  # the candidates in one order, then in the other
    assert (result.details["ambiguous_names_asked"], result.details["merged_by_the_model"]) == (1, 1)
    assert result.complete and "the model placed 1 of 1 ambiguous names" in result.summary


@pytest.mark.parametrize(("answer", "changed_with_order", "problems"), [
    ("ANSWER: 1", ["RIVERA"], 0),  # by position: a different candidate in each order
    ("**ANSWER: 0** (the descriptions do not let me tell)", [], 0),  # none of them
    ("I'm sorry, but I can't help with that request.", [], 1),  # a refusal decides nothing: counted
])
def test_merge_graph_keeps_a_name_apart_unless_the_model_names_one_candidate(tmp_path, answer, changed_with_order,
                                                                            problems):
    result, _ = confirm(tmp_path, answer)
    assert result.tables["ambiguous_aliases"]["title"].tolist() == ["RIVERA"]
    assert "RIVERA" in set(result.tables["merged_entities"]["title"])
    assert result.details["merged_by_the_model"] == 0
    assert result.details["model_answer_changed_with_order_for"] == changed_with_order
    assert len(result.problems) == problems and result.complete == (not problems)
    if problems:
        assert result.problems[0].startswith("which name 'RIVERA' denotes: no usable answer, left apart")
