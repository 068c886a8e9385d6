"""A GraphRAG user's first hour (issue 14): what `init` writes works as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from graphrag_lite.fake import provider as fake
from graphrag_lite.project import prompt_settings
from tests.conftest import DATA, REPO, SAMPLE, add_inputs, fake_models, sample_project


def test_init_wires_every_prompt_it_copies_and_an_edited_copy_is_the_prompt_used(tmp_path: Path, cli):
    root = tmp_path / "project"
    assert cli("init", root).exit_code == 0
    settings = (root / "settings.yaml").read_text(encoding="utf-8")
    copied = {p.name for p in (root / "prompts").glob("*.txt")}
    assert copied == set(prompt_settings().values())  # every prompt setting has its copy, and no copy is idle
    for name in copied:
        assert f": prompts/{name}  #" in settings, name
    (root / "settings.yaml").write_text(fake_models(settings), encoding="utf-8")
    add_inputs(root, sorted((DATA / "unrelated-documents").glob("*.txt"))[:2])
    assert cli("index", "--root", root).exit_code == 0
    prompt = root / "prompts" / "community_report.txt"
    prompt.write_text(prompt.read_text(encoding="utf-8") + "\nWrite in a calm voice (edited).\n", encoding="utf-8")
    fake.STATS.reset()
    rerun = cli("index", "--root", root)
    assert rerun.exit_code == 0, rerun.output
    assert "= extract_graph: unchanged" in rerun.output and "= summarize_descriptions: unchanged" in rerun.output
    assert "✓ community_reports" in rerun.output
    assert any("Write in a calm voice (edited)." in m for m in fake.STATS.first_messages), rerun.output


def test_settings_that_cannot_work_are_refused_before_any_stage_runs(tmp_path: Path, cli):
    root = tmp_path / "p"
    (root / "input").mkdir(parents=True)
    (root / "input" / "a.txt").write_text("Alice met Bob in Paris. " * 50, encoding="utf-8")
    (root / "settings.yaml").write_text("chunking:\n  size: 100\n  overlap: 100\n", encoding="utf-8")
    result = cli("index", "--root", root)  # (the fast method would set its own overlap, 30)
    assert result.exit_code == 2 and "settings.yaml: chunking: overlap (100) must be smaller than size (100)" \
        in result.output
    assert not (root / "output").exists()  # found before loading a document
    for setting, message in (("input.file_pattern=*.txt", "input.file_pattern = '*.txt': '*.txt' is not a valid "
                                                          "regular expression"),
                             ("input.encoding=klingon", "'klingon' is not a known text encoding"),
                             ("chunking.overlap=1500", "--set: chunking: overlap (1500) must be smaller"),
                             ("chunking.sise=3", "--set: unknown key 'chunking.sise'; did you mean 'chunking.size'?")):
        result = cli("index", "--root", root, "--method", "fast", "--set", setting)
        assert result.exit_code == 2 and message in result.output, result.output
        assert not (root / "output").exists()


def test_every_command_that_needs_an_index_says_how_to_build_it_for_this_folder(tmp_path: Path, cli):
    root = tmp_path / "no index yet"
    root.mkdir()
    (root / "settings.yaml").write_text("", encoding="utf-8")
    hint = f"graphrag-lite index --root '{root}'"
    for command in (["show"], ["aliases"], ["export", "graphml"], ["export", "neo4j"], ["query", "basic", "Who?"],
                    ["query", "local", "Who?"], ["query", "global", "Who?"]):
        result = cli(*command, "--root", root)
        assert result.exit_code == 2 and hint in result.output, (command, result.output)


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a network connection fails the test."""
    import socket

    def refuse(*args, **kwargs):
        raise AssertionError(f"a network connection was attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("GRAPHRAG_API_KEY", raising=False)


def test_a_fresh_project_with_no_key_is_told_its_choices_and_answers_with_no_model(tmp_path: Path, cli, no_network):
    root = tmp_path / "fresh"
    created = cli("init", root)
    assert "with no key:   graphrag-lite index --root" in created.output and "--method fast" in created.output
    assert "add --no-model" in created.output
    add_inputs(root, SAMPLE)
    standard = cli("index", "--root", root)  # init's key is a placeholder: refused before any stage runs
    assert standard.exit_code == 2 and "the API key is the placeholder '<your-api-key>'" in standard.output
    assert "--method fast" in standard.output and not (root / "output" / "input_documents.parquet").exists()
    estimated = cli("index", "--root", root, "--dry-run")  # a dry run calls no model: no key needed
    assert estimated.exit_code == 0 and "extract_graph" in estimated.output, estimated.output
    fast = cli("index", "--root", root, "--method", "fast")
    assert fast.exit_code == 0  # its next step is one that works with the placeholder key
    next_step = f"Next: graphrag-lite query local \"<your question>\" --root {root} --no-model"
    assert fast.output.splitlines()[-1] == next_step
    asked = cli("query", "local", "Who went to Woolwich with Sir W. Pen?", "--root", root)
    assert asked.exit_code == 2 and "placeholder" in asked.output and "--no-model" in asked.output
    for method in ("local", "global", "basic"):
        answered = cli("query", method, "Who went to Woolwich with Sir W. Pen?", "--root", root, "--no-model")
        assert answered.exit_code == 0 and answered.output.startswith("Retrieved evidence"), answered.output


def test_key_problems_are_found_before_any_call():
    from pydantic import SecretStr

    from graphrag_lite.config import ModelConfig
    from graphrag_lite.llm.providers import key_problem

    assert key_problem(ModelConfig(model="openai/gpt-4o-mini", api_key=SecretStr("<your-api-key>"))) == \
        "the API key is the placeholder '<your-api-key>'"
    assert key_problem(ModelConfig(model="openai/gpt-4o-mini", api_key=SecretStr(" "))) == "the API key is empty"
    assert key_problem(ModelConfig(model="openai/gpt-4o-mini", api_key=SecretStr("sk-live-123"))) is None
    assert key_problem(ModelConfig(model="fake/default")) is None
    # a local server needs no real key
    assert key_problem(ModelConfig(model="openai/qwen", api_base="http://127.0.0.1:8090/v1",
                                   api_key=SecretStr("none"))) is None
    assert key_problem(ModelConfig(model="openai/qwen", api_base="http://127.0.0.1:8090/v1")) is None


GRAPHRAG_FILES = DATA / "graphrag-settings"


def graphrag_project(tmp_path: Path, version: str, fake: bool = False) -> Path:
    """A project folder as GraphRAG's `init` leaves it: its settings.yaml, .env, input/ and prompts/ (ours,
    under GraphRAG's file names); `fake`: its models pointed at the offline provider."""
    root = tmp_path / version
    (root / "input").mkdir(parents=True)
    settings = (GRAPHRAG_FILES / f"{version}.yaml").read_text(encoding="utf-8")
    if fake:
        settings = settings.replace("model_provider: openai", "model_provider: fake").replace(
            "model: gpt-4.1", "model: default").replace("model: gpt-4-turbo-preview", "model: default").replace(
            "model: text-embedding-3-large", "model: embedding").replace("model: text-embedding-3-small",
                                                                         "model: embedding")
    (root / "settings.yaml").write_text(settings, encoding="utf-8")
    (root / ".env").write_text("GRAPHRAG_API_KEY=sk-from-graphrag\n", encoding="utf-8")
    (root / "prompts").mkdir()
    for ours, theirs in {**{f: f for f in set(prompt_settings().values())},
                         "community_report.txt": "community_report_graph.txt"}.items():
        (root / "prompts" / theirs).write_bytes((REPO / "prompts" / ours).read_bytes())
    return root


@pytest.mark.parametrize("version", ["v3", "v2"])
def test_graphrag_settings_files_load_with_every_key_mapped_or_noted_once(tmp_path: Path, version: str, monkeypatch):
    from graphrag_lite.config import load_config

    monkeypatch.delenv("GRAPHRAG_API_KEY", raising=False)  # the environment wins over .env, as in GraphRAG
    root = graphrag_project(tmp_path, version)
    config = load_config(root)
    chat, embedding = ("default_completion_model", "openai/gpt-4.1") if version == "v3" else \
        ("default_chat_model", "openai/gpt-4-turbo-preview")
    assert config.models[chat].model == embedding and config.models[chat].api_key.get_secret_value() == \
        "sk-from-graphrag"
    for section in (config.extract_graph, config.summarize_descriptions, config.community_reports):
        assert section.model_id == chat
    assert (config.local_search.chat_model_id, config.global_search.chat_model_id) == (chat, chat)
    assert config.embed_text.model_id == config.local_search.embedding_model_id == "default_embedding_model"
    assert (config.input.base_dir, config.output.base_dir, config.cache.base_dir) == (
        root / "input", root / "output", root / "cache")
    assert config.community_reports.prompt == root / "prompts" / "community_report_graph.txt"
    notes = config.compat_notes
    assert len(notes) == len(set(notes)) and {n.split(":")[0] for n in notes} >= {
        "reporting", "snapshots", "drift_search", "global_search.knowledge_prompt", "community_reports.text_prompt"}


def test_graphrag_embed_text_names_choose_our_vector_tables_and_the_others_are_noted():
    from graphrag_lite.compat import translate

    data, notes = translate({"models": {"default_chat_model": {"type": "openai_chat", "model": "gpt-4.1"}},
                             "embed_text": {"names": ["entity_description", "relationship_description",
                                                      "community.full_content"]}})
    assert data["embed_text"]["names"] == ["entity_description", "community_full_content"]  # 1.x: with a dot
    assert [n for n in notes if n.startswith("embed_text.names")] == [
        "embed_text.names: relationship_description ignored (the tables here are entity_description, "
        "text_unit_text, community_full_content; vectors go to entity_description, community_full_content)"]


def test_a_key_graphrag_does_not_have_either_is_still_an_error_and_blob_storage_is_refused(tmp_path: Path):
    from graphrag_lite.config import load_config
    from graphrag_lite.errors import ConfigError

    root = graphrag_project(tmp_path, "v3")
    settings = root / "settings.yaml"
    text = settings.read_text(encoding="utf-8")
    settings.write_text(text.replace("max_cluster_size: 10", "max_cluster_sise: 10"), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"unknown key 'cluster_graph\.max_cluster_sise'; did you mean "
                                          r"'cluster_graph\.max_cluster_size'"):
        load_config(root)
    settings.write_text(text.replace("type: file # [file, blob, cosmosdb]\n  base_dir: \"output\"",
                                     "type: blob\n  base_dir: \"output\""), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"output_storage\.type: blob storage is not supported"):
        load_config(root)


def test_a_graphrag_project_indexes_and_answers_as_it_is(tmp_path: Path, cli):
    root = graphrag_project(tmp_path, "v3", fake=True)
    (root / "input" / "dulce.txt").write_bytes((DATA / "operation-dulce" / "dulce.txt").read_bytes())
    built = cli("index", "--root", root)
    assert built.exit_code == 0, built.output
    assert "a Microsoft GraphRAG settings file, read as graphrag-lite settings" in built.output
    dry = cli("index", "--root", root, "--dry-run")  # nothing to run: the notes are still given, once
    assert dry.exit_code == 0 and dry.output.count("a Microsoft GraphRAG settings file") == 1, dry.output
    asked = cli("query", "local", "Who is Agent Alex Mercer?", "--root", root)
    assert asked.exit_code == 0 and "MERCER" in asked.output.upper()
    assert "keys are ignored or read otherwise here (`graphrag-lite index` lists them as it starts)" in asked.output
    assert "drift_search" not in asked.output  # the list itself is for index runs, not every question


def test_graphrag_command_lines_are_read_as_graphrag_lite_ones():
    from graphrag_lite.cli.graphrag_style import graphrag_style
    from graphrag_lite.errors import ConfigError

    assert graphrag_style(["query", "Who?", "--root", "p", "--method", "local"]) == ["query", "local", "Who?",
                                                                                      "--root", "p"]
    assert graphrag_style(["query", "-m", "basic", "Who?"]) == ["query", "basic", "Who?"]
    assert graphrag_style(["query", "What themes?", "--dynamic-community-selection"]) == [
        "query", "global", "What themes?", "--set", "global_search.dynamic_community_selection=true"]
    assert graphrag_style(["update", "--root", "p", "--method", "fast-update"]) == ["update", "--root", "p",
                                                                                   "--method", "fast"]
    assert graphrag_style(["query", "local", "Who?"]) == ["query", "local", "Who?"]  # graphrag-lite's own
    assert graphrag_style(["query", "--help"]) == ["query", "--help"]
    with pytest.raises(ConfigError, match="query --method drift: not a search method here"):
        graphrag_style(["query", "Who?", "--method", "drift"])
    with pytest.raises(ConfigError, match="query locl: not a search method; did you mean `graphrag-lite query local`"):
        graphrag_style(["query", "locl", "--root", "p", "--no-model"])  # not asked as a question by global search
    assert graphrag_style(["query", "locl", "--method", "global"]) == ["query", "global", "locl"]
    assert graphrag_style(["query", "Who is Pepys?"]) == ["query", "global", "Who is Pepys?"]
    for question in ("goal", "vocal", "total", "logical", "music"):  # one-word questions, not typos
        assert graphrag_style(["query", question]) == ["query", "global", question]
    with pytest.raises(ConfigError, match="did you mean `graphrag-lite query global`"):
        graphrag_style(["query", "Globl"])


def test_graphrag_commands_work_from_init_to_query_with_data_elsewhere(tmp_path: Path, cli, no_network):
    from graphrag_lite.cli.graphrag_style import graphrag_style

    root = tmp_path / "project"
    assert cli("init", "--root", root).exit_code == 0 and (root / "settings.yaml").is_file()
    add_inputs(root, SAMPLE)
    assert cli(*graphrag_style(["update", "--root", str(root)])).exit_code == 2  # no index yet to update
    assert cli(*graphrag_style(["index", "--root", str(root), "--method", "fast"])).exit_code == 0
    assert cli(*graphrag_style(["update", "--root", str(root), "--method", "fast-update"])).exit_code == 0
    (root / "output").rename(tmp_path / "moved")  # the index, its LanceDB folder inside it
    asked = cli(*graphrag_style(["query", "Who went to Woolwich with Sir W. Pen?", "--root", str(root),
                                 "--method", "local", "--data", str(tmp_path / "moved"), "--no-model"]))
    assert asked.exit_code == 0 and asked.output.startswith("Retrieved evidence"), asked.output


def test_an_index_run_keeps_a_log_of_every_stage_problem_and_retry_and_ends_with_what_to_do(tmp_path: Path, cli):
    root = tmp_path / "p"
    (root / "input").mkdir(parents=True)
    (root / "input" / "dulce.txt").write_bytes((DATA / "operation-dulce" / "dulce.txt").read_bytes())
    (root / "settings.yaml").write_text(
        "models:\n  default_chat_model:\n    model: fake/default?server_error=0.3&seed=3\n    max_retry_wait: 0.01\n"
        "  default_embedding_model:\n    model: fake/embedding\n", encoding="utf-8")
    built = cli("index", "--root", root)
    assert built.exit_code == 0, built.output
    end = built.output.splitlines()[-3:]
    assert end[0].startswith("Done in ") and "documents 1, text_units 5, entities" in end[0]
    assert "intermediate" not in end[0] and "raw_entities" not in end[0]  # GraphRAG's tables only
    assert end[-1] == f"Next: graphrag-lite query local \"<your question>\" --root {root}"
    log = (root / "output" / "logs" / "index.log").read_text(encoding="utf-8")
    assert re.search(r"^\d{4}-\d\d-\d\d [\d:,]+ INFO graphrag_lite: run of pipeline standard", log, re.M)
    for stage in ("load_documents", "extract_graph", "community_reports", "embed_text"):
        assert f"graphrag_lite: {stage}: ran in" in log
    assert "graphrag_lite.llm: extract_graph: model default_chat_model attempt 1 failed" in log
    quiet = cli("index", "--root", root, "--force", "--quiet")
    assert quiet.exit_code == 0 and quiet.output == ""


def test_every_stage_that_takes_time_shows_progress_model_or_not(tmp_path: Path, cli, monkeypatch):
    import contextlib

    from graphrag_lite.pipeline.contract import StageContext
    from graphrag_lite.pipeline.display import spend_text as _spend

    seen: dict[str, list[int]] = {}
    original = StageContext.bar

    @contextlib.contextmanager
    def recording(self, total, what):
        counts = seen.setdefault(f"{self.stage_name}: {what}", [total, 0])
        with original(self, total, what) as advance:
            def counted():
                counts[1] += 1
                advance()
            yield counted

    monkeypatch.setattr(StageContext, "bar", recording)
    root = sample_project(tmp_path / "p")
    assert cli("index", "--root", root, "--method", "fast").exit_code == 0
    for bar in ("load_documents: files", "extract_graph_nlp: text units", "embed_text: LanceDB tables",
                "community_reports_extractive: text units read, then reports"):
        total, done = seen[bar]
        assert total and done == total, (bar, seen[bar])
    assert _spend({"calls": 12, "prompt_tokens": 1000, "completion_tokens": 234, "cost_usd": 0.0123}) == \
        "12 calls, 1,234 tokens, $0.0123"


def test_global_search_says_dynamic_selection_kept_nothing_rather_than_no_communities(tmp_path: Path, cli):
    root = tmp_path / "p"
    (root / "input").mkdir(parents=True)
    (root / "input" / "dulce.txt").write_bytes((DATA / "operation-dulce" / "dulce.txt").read_bytes())
    (root / "replies.yaml").write_text('query_global_rate: \'{"rating": 0, "reason": "unrelated"}\'\n',
                                       encoding="utf-8")
    (root / "settings.yaml").write_text(
        f"models:\n  default_chat_model:\n    model: fake/default?replies={root / 'replies.yaml'}\n"
        "    max_retry_wait: 0.01\n  default_embedding_model:\n    model: fake/embedding\n", encoding="utf-8")
    assert cli("index", "--root", root).exit_code == 0
    asked = cli("query", "global", "What are the themes?", "--root", root, "--set",
                "global_search.dynamic_community_selection=true")
    assert asked.exit_code == 0
    assert "reports below global_search.dynamic_threshold" in asked.output and "no communities" not in asked.output


def test_graphrag_habits_data_relative_to_the_shell_and_community_level_for_basic(tmp_path: Path, cli, monkeypatch):
    """A new user's `--root msproj --data msproj/output` looked in msproj/msproj/output, and `--method basic
    --community-level 2` (GraphRAG's scripts pass the same flags to every method) was "No such option"."""
    from graphrag_lite.cli.graphrag_style import graphrag_style

    root = sample_project(tmp_path / "msproj")
    assert cli("index", "--root", root, "--method", "fast").exit_code == 0
    monkeypatch.chdir(tmp_path)
    for method in ("local", "basic"):
        asked = cli(*graphrag_style(["query", "Who went to Woolwich with Sir W. Pen?", "--root", "msproj",
                                     "--method", method, "--data", "msproj/output", "--community-level", "2",
                                     "--no-model"]))
        assert asked.exit_code == 0 and "Retrieved evidence" in asked.output, asked.output
