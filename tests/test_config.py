import re
from pathlib import Path

import pytest

from graphrag_lite.config import GraphRagConfig, load_config, render_settings_yaml
from graphrag_lite.errors import ConfigError
from graphrag_lite.project import init_project
from graphrag_lite.sample_settings import sample_settings_yaml
from tests.conftest import REPO, write_settings


def refusal(root, text: str) -> str:
    """The ConfigError message for settings `text` (they must be refused when they load)."""
    write_settings(root, text)
    with pytest.raises(ConfigError) as err:
        load_config(root)
    return str(err.value)

def test_defaults_match_graphrag():
    cfg = GraphRagConfig()
    assert (cfg.chunking.size, cfg.chunking.overlap, cfg.chunking.encoding_model) == (1200, 100, "o200k_base")
    assert cfg.extract_graph.entity_types == ["organization", "person", "geo", "event"]
    assert cfg.extract_graph.max_gleanings == 1
    assert cfg.cluster_graph.max_cluster_size == 10
    assert cfg.community_reports.max_input_length == 8000
    assert cfg.local_search.max_context_tokens == 12000


def test_env_substitution_from_environment_and_dotenv(tmp_path, monkeypatch):
    monkeypatch.setenv("GL_TEST_MODEL", "openai/gpt-4o")
    monkeypatch.delenv("GL_TEST_KEY", raising=False)
    write_settings(tmp_path, "models:\n  default_chat_model:\n    model: ${GL_TEST_MODEL}\n"
                             "    api_key: ${GL_TEST_KEY}\n")
    (tmp_path / ".env").write_text("GL_TEST_KEY=sk-from-dotenv\nGL_TEST_MODEL=ignored-env-wins\n")
    cfg = load_config(tmp_path)
    assert cfg.models["default_chat_model"].model == "openai/gpt-4o"
    assert cfg.models["default_chat_model"].api_key.get_secret_value() == "sk-from-dotenv"
    assert "sk-from-dotenv" not in repr(cfg)  # secrets stay masked


def test_missing_variable_names_variable_and_line(tmp_path, monkeypatch):
    monkeypatch.delenv("GL_NOT_SET", raising=False)
    message = refusal(tmp_path, "# a comment with ${GL_NOT_SET} is ignored\nchunking:\n  size: 300\n"
                               "models:\n  m:\n    model: x  # trailing ${GL_NOT_SET} too\n"
                               "    api_key: ${GL_NOT_SET}\n")
    assert "GL_NOT_SET" in message
    assert "settings.yaml:7" in message


@pytest.mark.parametrize("reference", ["${GL_TEST_KEY", "${}", "${GL TEST KEY}"])
def test_a_malformed_variable_reference_is_refused_not_used_as_it_is(tmp_path, reference):
    message = refusal(tmp_path, f"models:\n  m:\n    model: x\n    api_key: {reference}\n")
    assert "settings.yaml:4" in message and "is not a complete ${NAME} reference" in message


def test_dollar_escape_is_literal(tmp_path):
    write_settings(tmp_path, 'input:\n  file_pattern: ".*\\\\.txt$$"\n')
    assert load_config(tmp_path).input.file_pattern == r".*\.txt$"
    write_settings(tmp_path, 'input:\n  file_pattern: ".*$${x}\\\\.txt$"\n')  # $${ is a literal ${
    assert load_config(tmp_path).input.file_pattern == r".*${x}\.txt$"


@pytest.mark.parametrize(("text", "bad", "suggestion"), [
    ("chunking:\n  sise: 300\n", "chunking.sise", "chunking.size"),
    ("chunkng:\n  size: 300\n", "chunkng", "chunking"),
    ("models:\n  default_chat_model:\n    model: x\n    concurency: 3\n",
     "models.default_chat_model.concurency", "models.default_chat_model.concurrency"),
])
def test_unknown_key_names_key_and_suggests(tmp_path, text, bad, suggestion):
    message = refusal(tmp_path, text)
    assert f"unknown key '{bad}'" in message
    assert f"did you mean '{suggestion}'" in message


def test_wrong_type_names_key_value_and_expected_type(tmp_path):
    message = refusal(tmp_path, "chunking:\n  size: lots\n")
    assert "chunking.size" in message and "'lots'" in message and "expected int" in message


def test_a_number_out_of_range_names_the_range_not_the_type_it_already_has(tmp_path):
    message = refusal(tmp_path, "chunking:\n  size: 0\n")
    assert "chunking.size = 0" in message and "greater than or equal to 1" in message and "expected" not in message


@pytest.mark.parametrize(("text", "key"), [("embed_text:\n  batch_size: true\n", "embed_text.batch_size"),
                                           ("local_search:\n  text_unit_prop: false\n", "local_search.text_unit_prop")])
def test_true_or_false_where_a_number_belongs_is_refused_not_read_as_1_or_0(tmp_path, text, key):
    message = refusal(tmp_path, text)
    assert key in message and "expected a number" in message


def test_true_and_false_are_still_taken_where_they_belong(tmp_path):
    write_settings(tmp_path, "chunking:\n  prepend_metadata: true\nmodels:\n  default_chat_model:\n"
                             "    model: fake/default\n    stream: false\n")
    config = load_config(tmp_path)
    assert config.chunking.prepend_metadata is True and config.models["default_chat_model"].stream is False


def test_an_unknown_token_encoding_is_refused_when_the_settings_load(tmp_path):
    message = refusal(tmp_path, "chunking:\n  encoding_model: foo_base\n")
    assert "settings.yaml" in message and "chunking.encoding_model" in message and "foo_base" in message
    assert "cl100k_base" in message and "o200k_base" in message


def test_overrides_parse_values_and_reach_nested_keys(tmp_path):
    write_settings(tmp_path, "chunking:\n  size: 300\n")
    cfg = load_config(tmp_path, overrides=["chunking.size=500", "chunking.prepend_metadata=true",
                                           "extract_graph.entity_types=[person, ship]",
                                           "models.default_chat_model.concurrency=4"])
    assert cfg.chunking.size == 500 and cfg.chunking.prepend_metadata is True
    assert cfg.extract_graph.entity_types == ["person", "ship"]
    assert cfg.models["default_chat_model"].concurrency == 4


def test_override_with_typo_is_reported(tmp_path):
    write_settings(tmp_path, "")
    with pytest.raises(ConfigError, match=r"did you mean 'chunking\.overlap'"):
        load_config(tmp_path, overrides=["chunking.overlapp=5"])
    with pytest.raises(ConfigError, match=r"expected section\.key=value"):
        load_config(tmp_path, overrides=["chunking.size"])


def test_relative_paths_resolve_against_config_folder(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    write_settings(root, "input:\n  base_dir: docs\noutput:\n  base_dir: ../out\n"
                         "extract_graph:\n  prompt: prompts/x.txt\n")
    monkeypatch.chdir(tmp_path)
    cfg = load_config(Path("proj"))
    assert cfg.input.base_dir == (root / "docs").resolve()
    assert cfg.output.base_dir == (tmp_path / "out").resolve()
    assert cfg.extract_graph.prompt == (root / "prompts" / "x.txt").resolve()
    assert cfg.cache.base_dir == (root / "cache").resolve()


def test_unknown_model_reference(tmp_path):
    assert "did you mean 'default_chat_model'" in refusal(tmp_path, "extract_graph:\n  model_id: default_chat_modl\n")


def test_missing_settings_file_says_what_to_do(tmp_path):
    with pytest.raises(ConfigError, match="graphrag-lite init"):
        load_config(tmp_path)


def test_repository_settings_are_generated_from_the_model():
    assert (REPO / "settings.yaml").read_text(encoding="utf-8") == sample_settings_yaml(), \
        "settings.yaml is stale: run `make settings`"
    cfg = load_config(REPO)
    assert cfg.input.base_dir == REPO / "input"


def test_rendered_defaults_round_trip(tmp_path):
    write_settings(tmp_path, render_settings_yaml(GraphRagConfig()))
    cfg = load_config(tmp_path)
    defaults = GraphRagConfig()
    for section in ("chunking", "extract_graph", "cluster_graph", "community_reports", "local_search"):
        assert getattr(cfg, section) == getattr(defaults, section)


def test_init_project_loads_with_its_env(tmp_path, monkeypatch):
    monkeypatch.delenv("GRAPHRAG_API_KEY", raising=False)
    init_project(tmp_path)
    cfg = load_config(tmp_path)
    assert cfg.models["default_chat_model"].api_key.get_secret_value() == "<your-api-key>"


@pytest.mark.parametrize(("text", "said"), [("a: [1, 2\n", "not valid YAML: while parsing a flow sequence"),
                                            ("- 1\n- 2\n", "expected a mapping")])
def test_a_settings_or_experiment_file_that_is_not_a_yaml_mapping_is_named_with_what_is_wrong(tmp_path, text, said):
    from graphrag_lite.experiment.spec import load_spec

    (tmp_path / "settings.yaml").write_text(text)
    (tmp_path / "experiment.yaml").write_text(text)
    with pytest.raises(ConfigError, match=f"^{re.escape(str(tmp_path / 'settings.yaml'))}: {said}"):
        load_config(tmp_path)
    with pytest.raises(ConfigError, match=f"^{re.escape(str(tmp_path / 'experiment.yaml'))}: {said}") as raised:
        load_spec(tmp_path / "experiment.yaml")
    if said == "expected a mapping":  # each file says what its mapping holds
        assert "(project, base, variants, grid, questions, ...)" in str(raised.value)
