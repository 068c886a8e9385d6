"""Every packaged prompt puts its static instructions and examples first and the per-call data last, so the
prompts of one stage share their longest possible prefix, which providers' prompt caches serve at a discount
(OpenAI and Anthropic from 1,024 tokens, DeepSeek from 64)."""

import re
from pathlib import Path

import pytest

PROMPTS = sorted((Path(__file__).resolve().parent.parent / "prompts").glob("*.txt"))
# placeholders filled differently in each call of a run; the others (entity types, delimiters, lengths) are
# the same for every call
PER_CALL = {"input_text", "description_list", "entity_name", "context_data", "question", "report", "report_data",
            "searched", "name", "type", "description", "candidates", "answer_1", "answer_2"}


@pytest.mark.parametrize("path", PROMPTS, ids=[p.name for p in PROMPTS])
def test_static_text_comes_before_the_data_of_each_call(path: Path):
    text = path.read_text(encoding="utf-8")
    placeholders = [m for m in re.finditer(r"\{(\w+)\}", text) if m.group(1) in PER_CALL]
    assert placeholders, f"{path.name} has no per-call placeholder: add it to PER_CALL or to this test"
    first = placeholders[0].start()
    after = re.sub(r"\{\w+\}", "", text[first:])  # static text that follows the first per-call data
    assert first / (first + len(after)) >= 0.85, f"{path.name}: move the instructions before the data"


def test_every_placeholder_of_the_packaged_prompts_is_known():
    """A new prompt or placeholder must be classed as per-call or static here, so the order test covers it."""
    static = {"entity_types", "tuple_delimiter", "record_delimiter", "completion_delimiter", "max_length",
              "max_report_length", "response_type", "entity_specs", "claim_description", "criteria"}
    found = {m for path in PROMPTS for m in re.findall(r"\{(\w+)\}", path.read_text(encoding="utf-8"))}
    assert found <= PER_CALL | static, found - PER_CALL - static
