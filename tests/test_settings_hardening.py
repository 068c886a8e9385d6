"""Settings files a hostile tester wrote (issue 36, item 5): aliases that expand without end (a "billion
laughs"), nesting past any need, bytes that are not UTF-8 and keys given twice are refused with exit code 2 and
a short message naming the file and the line; a pipeline's own settings never hide an invalid value of the
user's. Each refusal is bounded by construction: a document is measured once per distinct node, never expanded."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from graphrag_lite.config import load_config
from graphrag_lite.config.loading import parse_override
from graphrag_lite.errors import ConfigError
from tests.conftest import write_settings


def billion_laughs(levels: int = 9, under: str = "chunking:\n  size:\n") -> str:
    """The classic: each anchor a list of ten aliases of the one before, 10**levels strings once expanded."""
    lines = ['    - &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"    - &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, levels)]
    return under + "\n".join(lines) + "\n"


def refused(root: Path, text: str | bytes, *, method: str | None = None) -> str:
    """The ConfigError message for settings `text` in project `root`."""
    write_settings(root)
    path = root / "settings.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    with pytest.raises(ConfigError) as raised:
        if method is None:
            load_config(root)
        else:
            from graphrag_lite.pipeline.settings import configure
            from graphrag_lite.stages import STAGES

            configure(STAGES, root, method=method)
    return str(raised.value)


def refused_by_the_cli(cli, root: Path, said: str) -> None:
    """`index` (the fast method: no key needed) and `query` both exit with 2 and say `said`, and no index is
    written."""
    (root / "input").mkdir(exist_ok=True)
    (root / "input" / "a.txt").write_text("Alice met Bob in Paris.\n", encoding="utf-8")
    for command in (["index", "--method", "fast"], ["query", "basic", "Who met Bob?", "--no-model"]):
        result = cli(*command, "--root", root)
        assert result.exit_code == 2 and said in result.output, (command, result.output)
        assert len(result.output) < 2000 and "Traceback" not in result.output
    assert not (root / "output").exists()


# F9: a billion laughs under a real key took 66 s and 1.96 GB and printed a 312 MB error


def test_a_billion_laughs_is_refused_at_once_naming_the_file_and_line(tmp_path, cli):
    message = refused(tmp_path, billion_laughs())
    assert message.startswith(f"{tmp_path / 'settings.yaml'}:7: `chunking.size[4]` holds more than 100,000 values "
                              "once its aliases (*name) are expanded"), message
    assert len(message) < 500
    refused_by_the_cli(cli, tmp_path, "holds more than 100,000 values once its aliases")


def test_aliases_are_expanded_up_to_the_budget_and_not_one_value_past_it(monkeypatch):
    from graphrag_lite.config import yaml_reading

    text = billion_laughs(2, under="")  # the list, &l0 (itself and 10 strings), &l1 (itself and 10 times &l0)
    monkeypatch.setattr(yaml_reading, "EXPANDED_VALUES_BUDGET", 1 + 11 + 111)
    assert yaml_reading.parse_yaml(text, "laughs.yaml")[1] == [["lol"] * 10] * 10
    monkeypatch.setattr(yaml_reading, "EXPANDED_VALUES_BUDGET", 1 + 11 + 111 - 1)
    with pytest.raises(ConfigError, match=r"^laughs.yaml:1: the document holds more than 122 values once its "):
        yaml_reading.parse_yaml(text, "laughs.yaml")


def test_a_microsoft_graphrag_file_with_anchors_aliases_and_merge_keys_still_reads(tmp_path):
    write_settings(tmp_path, "models:\n"
                             "  default_chat_model: &chat\n"
                             "    type: openai_chat\n"
                             "    model: gpt-4o-mini\n"
                             "    api_key: sk-test\n"
                             "    concurrent_requests: 7\n"
                             "  default_embedding_model:\n"
                             "    <<: *chat\n"
                             "    type: openai_embedding\n"  # a key of the merged mapping, written again: allowed
                             "    model: text-embedding-3-small\n"
                             "extract_graph:\n"
                             "  entity_types: &types [person, place]\n"
                             "extract_graph_nlp:\n"
                             "  text_analyzer:\n"
                             "    noun_phrase_extractor_type: regex_english\n"
                             "local_search:\n"
                             "  chat_model_id: default_chat_model\n")
    cfg = load_config(tmp_path)
    assert cfg.extract_graph.entity_types == ["person", "place"]
    chat, embedding = cfg.models["default_chat_model"], cfg.models["default_embedding_model"]
    assert embedding.model.endswith("text-embedding-3-small") and chat.model.endswith("gpt-4o-mini")
    assert embedding.api_key == chat.api_key and embedding.concurrency == chat.concurrency == 7


def test_an_alias_inside_the_value_it_names_is_refused(tmp_path):
    message = refused(tmp_path, "input:\n  metadata: &loop [a, *loop]\n")
    assert message.startswith(f"{tmp_path / 'settings.yaml'}:2: `input.metadata[1]` an alias (*name) refers to a "
                              "value that holds it"), message


def test_a_billion_laughs_in_a_set_value_or_an_experiment_file_is_refused(tmp_path):
    from graphrag_lite.experiment.spec import load_spec

    laughs = "[" + ", ".join(f"&l{i} [{', '.join([f'*l{i - 1}'] * 10) if i else 'lol'}]" for i in range(9)) + "]"
    with pytest.raises(ConfigError, match=r"^--set chunking.size:1: `\[5\]` holds more than 100,000 values"):
        parse_override(f"chunking.size={laughs}")
    (tmp_path / "experiment.yaml").write_text(billion_laughs(under="base:\n  chunking.size:\n"), encoding="utf-8")
    with pytest.raises(ConfigError, match=re.escape("experiment.yaml:7: `base.chunking.size[4]` holds more than")):
        load_spec(tmp_path / "experiment.yaml")


def test_an_error_quotes_a_huge_value_cut_short(tmp_path):
    """Within the budget, a list of 5,000 strings where a number belongs is quoted by its start only, and of a
    hundred problems the first twenty are listed."""
    message = refused(tmp_path, "chunking:\n  size: [" + ", ".join(["lol"] * 5_000) + "]\n")
    assert message.startswith("settings.yaml: chunking.size = ['lol', 'lol', 'lol', 'lol', ...]: Input should be a "
                              "valid integer"), message[:300]
    many = refused(tmp_path, "input:\n  files: [" + ", ".join(["{pattern: '('}"] * 100) + "]\n")
    assert len(many.splitlines()) == 21 and many.endswith("... and 80 more problems")


# F10: a deeply nested or non-UTF-8 settings.yaml exited with 1 and a bare RecursionError / UnicodeDecodeError


@pytest.mark.parametrize("nested", ["[" * 5000 + "]" * 5000, "{a: " * 5000 + "1" + "}" * 5000])
def test_a_deeply_nested_file_is_refused_naming_the_file_and_line(tmp_path, cli, nested):
    message = refused(tmp_path, "chunking:\n  size: " + nested + "\n")
    assert message == (f"{tmp_path / 'settings.yaml'}:2: the document nests lists or mappings more than 64 deep; a "
                       "settings file needs a handful of levels: check the brackets and the indentation")
    refused_by_the_cli(cli, tmp_path, "nests lists or mappings more than 64 deep")


def test_aliases_that_nest_deeper_than_the_text_are_refused(tmp_path):
    chain = "".join(f"  - &l{i} [*l{i - 1}]\n" for i in range(1, 100))
    message = refused(tmp_path, "input:\n  metadata:\n  - &l0 [x]\n" + chain)
    assert f"{tmp_path / 'settings.yaml'}:" in message and "nests lists or mappings more than 64 deep" in message


def test_a_file_that_is_not_utf8_is_refused_naming_the_file_and_line(tmp_path, cli):
    latin1 = "# réglages\nchunking:\n  size: 300  # taille\n  overlap: 30  # chevauchement à 10 %\n"
    message = refused(tmp_path, latin1.encode("latin-1"))
    assert message == (f"{tmp_path / 'settings.yaml'}:1: not UTF-8 text (byte 0xe9); save the file as UTF-8 (in most "
                       "editors: Save with Encoding, UTF-8)")
    refused_by_the_cli(cli, tmp_path, f"{tmp_path / 'settings.yaml'}:1: not UTF-8 text")


def test_a_dotenv_that_is_not_utf8_is_refused_naming_it(tmp_path):
    (tmp_path / ".env").write_bytes("KEY=sk-test\nNAME=café\n".encode("latin-1"))
    assert refused(tmp_path, "").startswith(f"{tmp_path / '.env'}:2: not UTF-8 text (byte 0xe9)")


# P2: duplicate keys were accepted silently (YAML keeps the last)


@pytest.mark.parametrize(("text", "said"), [
    ("chunking:\n  size: 300\n  overlap: 20\n  size: 400\n", ":4: `chunking.size` is given twice (lines 2 and 4)"),
    ("chunking:\n  size: 300\nbudget:\n  max_cost_usd: 1\nchunking:\n  overlap: 20\n",
     ":5: `chunking` is given twice (lines 1 and 5)"),
    ("input:\n  files:\n  - pattern: a\n    encoding: utf-8\n    'encoding': latin-1\n",
     ":5: `input.files[0].encoding` is given twice (lines 4 and 5)"),
])
def test_a_key_given_twice_is_refused_naming_the_key_the_file_and_both_lines(tmp_path, cli, text, said):
    message = refused(tmp_path, text)
    assert message == f"{tmp_path / 'settings.yaml'}{said}; YAML would keep only the last: remove one"
    refused_by_the_cli(cli, tmp_path, said)


def test_a_key_given_twice_in_a_set_value_is_refused():
    with pytest.raises(ConfigError, match=r"^--set input.files:1: `\[0\].pattern` is given twice"):
        parse_override("input.files=[{pattern: a, pattern: b}]")


# P2: under --method fast, invalid chunking.* values were replaced silently by the pipeline's own settings


def test_a_value_the_pipeline_replaces_is_still_checked(tmp_path, cli):
    message = refused(tmp_path, "chunking:\n  size: -5\n  overlap: lots\n", method="fast")
    assert message.splitlines() == [
        "settings.yaml: chunking.size = -5: Input should be greater than or equal to 1",
        "settings.yaml: chunking.overlap = 'lots': Input should be a valid integer, unable to parse string as an "
        "integer (expected int)",
        "(the pipeline's `settings:` replace these values in this run; they are checked all the same: correct them, "
        "or remove them from the file)"]
    refused_by_the_cli(cli, tmp_path, "settings.yaml: chunking.size = -5: Input should be greater than or equal to 1")


def test_a_model_the_pipeline_replaces_is_still_checked(tmp_path):
    message = refused(tmp_path, "embed_text:\n  model_id: default_embeding_model\n", method="fast")
    assert message.startswith("settings.yaml: embed_text.model_id = 'default_embeding_model' is not defined in "
                              "`models`"), message


def test_the_pipeline_may_still_make_values_fit_together_and_set_overrides_what_it_replaces(tmp_path):
    from graphrag_lite.pipeline.settings import configure
    from graphrag_lite.stages import STAGES

    # size 80 fits the fast method's overlap (30), not the file's (100): the values that run are checked together
    write_settings(tmp_path, "chunking:\n  size: 1200\n  overlap: 100\n")
    cfg, _ = configure(STAGES, tmp_path, overrides=["chunking.size=80"], method="fast")
    assert (cfg.chunking.size, cfg.chunking.overlap) == (80, 30)
    # an invalid value of the file that --set replaces is the user's choice, said on the command line
    write_settings(tmp_path, "chunking:\n  size: -5\n")
    cfg, _ = configure(STAGES, tmp_path, overrides=["chunking.size=300"], method="fast")
    assert cfg.chunking.size == 300


# the other files a user gives: a pipeline file, an experiment file, a question file


@pytest.mark.parametrize("text, said", [
    ("stages:\n  - load_documents\n" + "x: " + "[" * 5000 + "]" * 5000 + "\n", "more than 64 deep"),
    ("stages: [load_documents]\nstages: [chunk_text]\n", "is given twice"),
    (b"description: caf\xe9\nstages: [load_documents]\n", "not UTF-8"),
])
def test_a_hostile_pipeline_file_is_refused_naming_it(tmp_path, cli, text, said):
    write_settings(tmp_path)
    (tmp_path / "mine.yaml").write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    (tmp_path / "input").mkdir()
    (tmp_path / "input" / "a.txt").write_text("Alice met Bob in Paris.\n", encoding="utf-8")
    result = cli("index", "--method", "mine.yaml", "--root", tmp_path)
    assert result.exit_code == 2 and said in result.output and "mine.yaml" in result.output, result.output


def test_a_deeply_nested_question_file_is_refused_naming_it(tmp_path):
    from graphrag_lite.evaluation.questions import QuestionFileError, load_questions

    path = tmp_path / "questions.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(QuestionFileError, match="nested too deeply"):
        load_questions(path)
