import os
import subprocess
import sys

import pytest

from tests.conftest import REPO


def test_init_writes_a_project_and_refuses_to_overwrite(tmp_path, cli):
    root = tmp_path / "new"
    result = cli("init", root)
    assert result.exit_code == 0, result.output
    assert (root / "settings.yaml").is_file() and (root / ".env").is_file() and (root / "input").is_dir()
    assert (root / "prompts" / "README.md").is_file()
    assert "GRAPHRAG_API_KEY=" in (root / ".env").read_text()
    again = cli("init", root)
    assert again.exit_code == 2 and "--force" in again.output  # a usage error, not an unexpected one
    assert cli("init", root, "--force").exit_code == 0
    on_a_file = cli("init", root / "settings.yaml")
    assert on_a_file.exit_code == 2 and "is a file, not a folder" in on_a_file.output
    assert f"graphrag-lite init {root}" in on_a_file.output.replace("\n", "")


def test_index_from_the_cli_and_resume(project, cli):
    result = cli("index", "--root", project)
    assert result.exit_code == 0, result.output
    done = next(line for line in result.output.splitlines() if line.startswith("Done in "))
    assert "chunk_text" in result.output and "documents 2" in done and "base_text_units" not in done
    again = cli("index", "--root", project, "--set", "chunking.size=80")
    assert "load_documents: unchanged" in again.output and "✓ chunk_text" in again.output


def test_config_errors_are_one_line_with_exit_code_2(project, cli):
    result = cli("index", "--root", project, "--set", "chunking.sise=3")
    assert result.exit_code == 2
    assert "unknown key 'chunking.sise'" in result.output and "Traceback" not in result.output
    verbose = cli("index", "--root", project, "--set", "chunking.sise=3", "--verbose")
    assert "Traceback" in verbose.output


def test_missing_project_is_explained(tmp_path, cli):
    result = cli("index", "--root", tmp_path)
    assert result.exit_code == 2 and "graphrag-lite init" in result.output


def test_unknown_method_is_explained(project, cli):
    """A wrong pipeline name is a configuration error (exit code 2), with the closest name."""
    result = cli("index", "--root", project, "--method", "fats")
    assert result.exit_code == 2 and "did you mean 'fast'" in result.output


@pytest.mark.parametrize("command", [[], ["init"], ["index"], ["query"], ["show"], ["export", "graphml"]])
def test_every_command_has_help(cli, command):
    result = cli(*command, "--help")
    assert result.exit_code == 0 and "Usage" in result.output
    if command == ["index"]:
        for option in ("--root", "--config", "--method", "--set", "--force", "--from", "--verbose"):
            assert option in result.output


def test_module_entry_point_runs_from_any_folder(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-m", "graphrag_lite", "--help"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "index" in result.stdout


def test_a_negative_community_level_is_refused_before_anything_runs(tmp_path, cli):
    result = cli("query", "global", "What happened?", "--root", tmp_path, "--community-level", "-1")
    assert result.exit_code == 2 and "--community-level" in result.output
