"""`graphrag-lite prompt-tune` (issue 14, point 7): parsers tried on the replies real models give, the
settings edit that keeps comments, and the command end to end on the fake model and on scripted replies."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from graphrag_lite.answer_parsing import ParseError
from graphrag_lite.prompt_tune import domain_parser, entity_types_parser, example_parser, set_setting
from tests.conftest import SAMPLE, make_project


@pytest.mark.parametrize(("reply", "domain"), [
    ("seventeenth-century English diary", "seventeenth-century English diary"),
    ('"Maritime shipping and port logistics"', "Maritime shipping and port logistics"),
    ("Domain: clinical trials of cardiac drugs.", "clinical trials of cardiac drugs"),
    ("**The domain is: municipal budget reports**", "municipal budget reports"),
    ("<think>They read like a diary.</think>\nA London diary of the 1660s", "A London diary of the 1660s"),
])
def test_domain_replies_are_read(reply, domain):
    assert domain_parser(reply) == domain


@pytest.mark.parametrize("reply", ["", "   ", "<think>hmm", "These documents are about " + "many things " * 15])
def test_domain_replies_that_name_none_are_refused(reply):
    with pytest.raises(ParseError, match="one short phrase"):
        domain_parser(reply)


@pytest.mark.parametrize(("reply", "types"), [
    ('["person", "organization", "ship"]', ["person", "organization", "ship"]),
    ('```json\n["Person", "Place", "Event", "Person"]\n```', ["person", "place", "event"]),
    ('Here are the types: ["person", "vessel", "port"] — these cover most names.', ["person", "vessel", "port"]),
    ('<think>["x"] no</think>["person", "law firm", "court case"]', ["person", "law firm", "court case"]),
])
def test_entity_type_replies_are_read(reply, types):
    assert entity_types_parser(reply) == types


@pytest.mark.parametrize("reply", ["person, organization, ship", '["person"]', '{"types": "person"}', "",
                                   '["' + '", "'.join(f"type{i}" for i in range(15)) + '"]', '["person", 3]'])
def test_entity_type_replies_that_are_no_list_of_a_few_are_refused(reply):
    with pytest.raises(ParseError):
        entity_types_parser(reply)


def test_an_example_keeps_only_what_its_text_names():
    text = "Samuel Pepys walked to Whitehall with Sir W. Pen."
    reply = ('("entity"<|>SAMUEL PEPYS<|>PERSON<|>The diarist)\n##\n("entity"<|>WHITEHALL<|>GEO<|>A palace)\n##\n'
             '("entity"<|>ADA MENSAH<|>PERSON<|>Copied from the prompt\'s example)\n##\n'
             '("relationship"<|>SAMUEL PEPYS<|>WHITEHALL<|>Walked there<|>5)\n##\n'
             '("relationship"<|>ADA MENSAH<|>WHITEHALL<|>Invented<|>3)\n<|COMPLETE|>')
    parsed = example_parser(text, ["person", "geo"])(reply)
    assert [e.name for e in parsed.entities] == ["SAMUEL PEPYS", "WHITEHALL"] and len(parsed.relationships) == 1
    with pytest.raises(ParseError, match="at least two entities"):
        example_parser(text, ["person", "geo"])("I cannot extract entities from this text.")


def test_an_example_from_a_small_model_is_cleaned_before_it_teaches():
    # Qwen2.5-Coder-1.5B on Operation Dulce, verbatim in its shape: a person listed again as an organization,
    # with a stray number, and each relationship in both directions
    text = "For Alex Mercer, the link with Sam Rivera was now poised; for Taylor Cruz, the initiative pulsed."
    reply = ('("entity"<|>ALEX MERCER<|>PERSON<|>Alex Mercer is a main character)\n##\n'
             '("entity"<|>SAM RIVERA<|>PERSON<|>Sam Rivera is a character)\n##\n'
             '("entity"<|>TAYLOR CRUZ<|>PERSON<|>Taylor Cruz is a character)\n##\n'
             '("entity"<|>TAYLOR CRUZ<|>ORGANIZATION<|>Operation: Dulce is the organization of Taylor Cruz 6)\n##\n'
             '("entity"<|>OPERATION<|>MISSION<|>Not one of the types)\n##\n'
             '("relationship"<|>ALEX MERCER<|>SAM RIVERA<|>Linked through the operation<|>8)\n##\n'
             '("relationship"<|>SAM RIVERA<|>ALEX MERCER<|>Linked through the operation<|>8)\n<|COMPLETE|>')
    parsed = example_parser(text, ["person", "organization", "place"])(reply)
    assert [(e.name, e.type) for e in parsed.entities] == [("ALEX MERCER", "PERSON"), ("SAM RIVERA", "PERSON"),
                                                            ("TAYLOR CRUZ", "PERSON")]
    assert [(r.source, r.target) for r in parsed.relationships] == [("ALEX MERCER", "SAM RIVERA")]


def test_an_example_text_starts_at_a_sentence():
    from graphrag_lite.prompt_tune import _from_a_sentence_start

    assert _from_a_sentence_start(", their footsteps synchronized. For Alex Mercer, the link held.") == \
        "For Alex Mercer, the link held."
    assert _from_a_sentence_start("Alex walked. Sam ran.") == "Alex walked. Sam ran."


def test_a_setting_is_changed_in_its_line_and_comments_stay():
    text = ("# my settings\nextract_graph:\n  model_id: default_chat_model  # the model\n"
            "  # prompt:  # prompt file\n  max_gleanings: 1\n\nchunking:\n  size: 300\n")
    edited = set_setting(text, "extract_graph", "prompt", "prompts/extract_graph.txt")
    edited = set_setting(edited, "extract_graph", "entity_types", '["person", "ship"]')
    edited = set_setting(edited, "community_reports", "prompt", "prompts/community_report.txt")
    assert "# my settings" in edited and "  model_id: default_chat_model  # the model" in edited
    assert "  prompt: prompts/extract_graph.txt  # prompt file" in edited  # a changed line keeps its comment
    data = yaml.safe_load(edited)
    assert data["extract_graph"] == {"model_id": "default_chat_model", "prompt": "prompts/extract_graph.txt",
                                     "entity_types": ["person", "ship"], "max_gleanings": 1}
    assert data["chunking"] == {"size": 300} and data["community_reports"] == {"prompt": "prompts/community_report.txt"}


def pepys_project(tmp_path: Path, chat: str = "fake/default") -> Path:
    # the fake's answers for 1,200-token units of this diary outgrow max_completion_tokens: 300, as the demo
    return make_project(tmp_path, SAMPLE, "chunking:\n  size: 300\n  overlap: 30\n",
                        chat=chat)


def test_prompt_tune_writes_wired_prompts_that_the_next_index_uses(tmp_path: Path, cli):
    root = pepys_project(tmp_path)
    (root / "prompts").mkdir()
    (root / "prompts" / "summarize_descriptions.txt").write_text("My own summary prompt: {description_list}",
                                                                  encoding="utf-8")
    tuned = cli("prompt-tune", "--root", root, "--limit", "6")
    assert tuned.exit_code == 0, tuned.output
    assert "entity types: person, organization, geo, event" in tuned.output and "worked examples: 2" in tuned.output
    prompt = (root / "prompts" / "extract_graph.txt").read_text(encoding="utf-8")
    assert prompt.startswith("The documents are about texts about") and "-Examples-" in prompt
    assert "Harbor Dynamics" not in prompt and "{input_text}" in prompt and "{entity_types}" in prompt
    settings = yaml.safe_load((root / "settings.yaml").read_text(encoding="utf-8"))
    assert settings["extract_graph"]["prompt"] == "prompts/extract_graph.txt"
    assert settings["extract_graph"]["entity_types"] == ["person", "organization", "geo", "event"]
    assert settings["community_reports"]["prompt"] == "prompts/community_report.txt"
    assert not (root / "output" / "entities.parquet").exists()  # tuning builds no index
    kept = root / "prompts" / "summarize_descriptions.before-tune.txt"  # the user's own edit is not lost
    assert kept.read_text(encoding="utf-8") == "My own summary prompt: {description_list}"
    assert cli("index", "--root", root).exit_code == 0


def test_a_model_that_never_names_types_stops_the_tuning_and_nothing_is_written(tmp_path: Path, cli):
    root = pepys_project(tmp_path)
    (root / "replies.yaml").write_text(yaml.safe_dump({"prompt_tune.domain": "A London diary",
                                                       "prompt_tune.entity types": "I'm sorry, I can't help."}),
                                       encoding="utf-8")
    settings = (root / "settings.yaml").read_text(encoding="utf-8")
    scripted = settings.replace("model: fake/default", f"model: fake/default?replies={root / 'replies.yaml'}")
    (root / "settings.yaml").write_text(scripted, encoding="utf-8")
    result = cli("prompt-tune", "--root", root)
    assert result.exit_code == 4 and "the model's answer for the entity types could not be used" in result.output
    assert not (root / "prompts").exists() and (root / "settings.yaml").read_text(encoding="utf-8") == scripted


def test_sample_units_that_give_no_usable_example_are_counted_and_the_packaged_example_stays(tmp_path: Path, cli):
    root = pepys_project(tmp_path)
    (root / "replies.yaml").write_text(yaml.safe_dump({"prompt_tune.domain": "A London diary",
                                                       "prompt_tune.entity types": '["person", "place"]',
                                                       "prompt_tune.example": ""}), encoding="utf-8")
    settings = (root / "settings.yaml").read_text(encoding="utf-8")
    (root / "settings.yaml").write_text(settings.replace("model: fake/default",
                                                         f"model: fake/default?replies={root / 'replies.yaml'}"),
                                        encoding="utf-8")
    result = cli("prompt-tune", "--root", root, "--examples", "1")
    assert result.exit_code == 0, result.output
    assert "worked examples: 0 (2 sample units gave no usable example" in result.output
    assert "Harbor Dynamics" in (root / "prompts" / "extract_graph.txt").read_text(encoding="utf-8")
