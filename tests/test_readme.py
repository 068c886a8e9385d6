"""Every code block of the README runs (issue 14): the commands a user copies, the Python example, and each
YAML block loads where it belongs. The models are swapped for the offline fake (no key, no network); the
README's output samples (fenced blocks with no language) are checked to be output, not code.

Not run here: `make` lines (CI runs `make test`; `make demo` and `make experiment` write into the checkout)
and `bench/` lines (benchmarks read the shared corpora and take minutes; they print figures, not verdicts).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
import yaml

from graphrag_lite.config import config_from_data
from graphrag_lite.experiment.spec import expand_variants, load_spec
from tests.conftest import DATA, REPO, fake_models

README = (REPO / "README.md").read_text(encoding="utf-8")
FENCED = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
DULCE = DATA / "operation-dulce" / "dulce.txt"


def fenced(language: str) -> list[str]:
    return [body for lang, body in FENCED.findall(README) if lang == language]


def shell_lines() -> list[str]:
    """The commands of the README's indented blocks, comments dropped."""
    text = FENCED.sub("", README)
    lines = []
    for block in re.findall(r"(?:^|\n\n)((?: {4}\S.*\n?)+)", text):
        for line in block.splitlines():
            command = re.split(r"\s+#\s", line.strip(), maxsplit=1)[0].strip()
            if command:
                lines.append(command)
    return lines



def run_command(command: str, cli, where: Path) -> None:
    """One README command in `where`: my-project and my-docs are folders there."""
    words = shlex.split(command)
    if words[0] == "cp":
        for source in (where / "my-docs").glob("*.txt"):
            shutil.copy(source, where / "my-project" / "input")
        return
    args = [w.replace("my-project", str(where / "my-project")).replace("aliases.csv", str(where / "aliases.csv"))
            for w in words[1:]]
    if words[:2] == ["graphrag-lite", "aliases"] and "--root" not in args:
        args += ["--root", str(where / "my-project")]
    result = cli(*args)
    assert result.exit_code == 0, f"{command}\n{result.output}"
    if words[:2] == ["graphrag-lite", "init"]:  # the user's key would go in .env; the tests use the fake
        settings = where / "my-project" / "settings.yaml"
        settings.write_text(fake_models(settings.read_text(encoding="utf-8")), encoding="utf-8")


def test_every_readme_command_runs_in_order(tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my-docs").mkdir()
    shutil.copy(DULCE, tmp_path / "my-docs" / "dulce.txt")
    commands = [c for c in shell_lines() if c.split()[0] not in ("make", ".venv/bin/python", ".venv/bin/pip")]
    assert commands[0].startswith("graphrag-lite init") and len(commands) >= 12
    for command in commands:
        run_command(command, cli, tmp_path)
    assert (tmp_path / "my-project" / "output" / "graph.graphml").is_file()
    assert (tmp_path / "aliases.csv").is_file()


def test_the_python_example_runs(tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for command in ("graphrag-lite init my-project", "cp my-docs/*.txt my-project/input/",
                    "graphrag-lite index --root my-project"):
        (tmp_path / "my-docs").mkdir(exist_ok=True)
        shutil.copy(DULCE, tmp_path / "my-docs" / "dulce.txt")
        run_command(command, cli, tmp_path)
    [example] = fenced("python")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(example, "README.md", "exec"), {})
    # the fake's answer cites entities, no source: the example's loop over sources prints nothing, and fails not
    assert "[Data: Entities" in printed.getvalue()


@pytest.mark.parametrize("block", fenced("yaml"), ids=lambda b: b.split(":")[0])
def test_every_yaml_block_loads_where_it_belongs(block, tmp_path, monkeypatch):
    monkeypatch.setenv("GRAPHRAG_API_KEY", "sk-test")
    data = yaml.safe_load(block)
    if "variants" in data or "grid" in data:  # an experiment file, beside the repository's example
        (tmp_path / "experiments").mkdir()
        shutil.copy(REPO / "experiments" / "questions.jsonl", tmp_path / "experiments")
        shutil.copy(REPO / "settings.yaml", tmp_path)
        shutil.copytree(REPO / "input", tmp_path / "input")
        (tmp_path / "experiments" / "readme.yaml").write_text(block, encoding="utf-8")
        spec = load_spec(tmp_path / "experiments" / "readme.yaml")
        assert len(expand_variants(spec, tmp_path / "experiments" / "readme.yaml")) == 5
        return
    (tmp_path / "aliases.csv").write_text("alias,title,action\n", encoding="utf-8")
    config_from_data(data, tmp_path / "settings.yaml")  # every key known, every value valid


def test_the_other_fenced_blocks_are_output_samples():
    samples = fenced("")
    assert samples and all(line.startswith(("coverage:", "points:")) for s in samples for line in s.splitlines())


def test_the_serve_block_runs_against_a_served_index(tmp_path, cli):
    """The README's `serve` commands: each curl request, sent to the app `graphrag-lite serve` runs, answers;
    the MCP client configuration is valid JSON naming a command the CLI has."""
    from fastapi.testclient import TestClient

    from graphrag_lite.serve.app import create_app
    from graphrag_lite.serve.holder import IndexHolder
    from tests.conftest import make_project

    [block] = fenced("bash")
    root = make_project(tmp_path / "my-project", [DULCE])
    assert cli("index", "--root", str(root)).exit_code == 0
    requests = re.findall(r"curl -s localhost:8000(\S+) .*?-d '([^']*)'", block.replace("\\\n", " "), re.S)
    assert len(requests) == 2 and "graphrag-lite serve --root my-project" in block
    with TestClient(create_app(IndexHolder(root, None, []), watch=False), base_url="http://127.0.0.1") as client:
        for path, body in requests:
            response = client.post(path, json=json.loads(body))
            assert response.status_code == 200, response.text
    [config] = fenced("json")
    server = json.loads(config)["mcpServers"]["my-project"]
    assert server["command"].endswith("/bin/graphrag-lite") and cli(server["args"][0], "--help").exit_code == 0
