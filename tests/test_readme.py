"""Every code block of the README and of the documentation site's pages (docs/*.md) runs (issues 14 and 35): the
commands a user copies, in order, in a fresh folder per page; the Python examples; each YAML block loads where
it belongs; each JSON block is what it says. The models are swapped for the offline fake (no key, no
network); output samples (fenced blocks with no language) are checked to be output, not code.

A page's shell blocks (```sh or ```bash) run line by line, in order:
- `graphrag-lite ...` runs in-process; `serve` starts the app it runs (in a test client), and the page's `curl`
  requests after it go to that app; `mcp` is checked to exist (it would wait on stdin);
- `cp` copies; `make`, `pip`, `python3 -m venv` and `bench/` lines are not run (CI runs `make test`; the
  benchmarks read the shared corpora and take minutes) but must name a Makefile target, a package extra, a
  benchmark script that exist.
A page whose commands do not start with `graphrag-lite init` starts from a copy of one index built once (the
README's project: Operation Dulce, indexed with the fake model).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import shlex
import shutil
import tomllib
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from graphrag_lite.cli import app
from graphrag_lite.cli.graphrag_style import graphrag_style
from graphrag_lite.config import config_from_data
from graphrag_lite.experiment.spec import expand_variants, load_spec
from tests.conftest import DATA, REPO, fake_models

README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
FENCED = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
SHELL = ("sh", "bash")
DULCE = DATA / "operation-dulce" / "dulce.txt"
MAKEFILE = (REPO / "Makefile").read_text(encoding="utf-8")
EXTRAS = set(tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"])


def name(page: Path) -> str:
    return str(page.relative_to(REPO))


def fenced(page: Path, *languages: str) -> list[str]:
    return [body for lang, body in FENCED.findall(page.read_text(encoding="utf-8")) if lang in languages]


def shell_lines(page: Path) -> list[str]:
    """The commands of a page's shell blocks, in order: continuation lines joined, comments dropped, `a && b`
    as two commands."""
    lines = []
    for block in fenced(page, *SHELL):
        for line in block.replace("\\\n", " ").splitlines():
            command = re.split(r"(?:^|\s+)#\s", line.strip(), maxsplit=1)[0].strip()
            lines += [part.strip() for part in command.split(" && ") if part.strip()]
    return lines


def graphrag_commands(page: Path) -> list[str]:
    return [c for c in shell_lines(page) if c.startswith("graphrag-lite ")]


def init_project(where: Path) -> None:
    """The folder a page's commands start in: my-docs holds the user's documents."""
    (where / "my-docs").mkdir()
    shutil.copy(DULCE, where / "my-docs" / "dulce.txt")


@pytest.fixture(scope="session")
def built_project(tmp_path_factory) -> Path:
    """The README's project, indexed once (standard method, fake model), for pages that start from an index."""
    root = tmp_path_factory.mktemp("built") / "my-project"
    runner = CliRunner()
    assert runner.invoke(app, ["init", str(root)]).exit_code == 0
    settings = root / "settings.yaml"
    settings.write_text(fake_models(settings.read_text(encoding="utf-8")), encoding="utf-8")
    shutil.copy(DULCE, root / "input")
    result = runner.invoke(app, ["index", "--root", str(root), "--quiet"])
    assert result.exit_code == 0, result.output
    return root


def not_run(command: str) -> bool:
    """A line that is checked, not run: it must name what exists."""
    words = shlex.split(command)
    if words[0] == "make":
        assert all(re.search(rf"^{re.escape(t)}:", MAKEFILE, re.M) for t in words[1:]), command
    elif words[0] in ("pip", ".venv/bin/pip"):
        for extra in re.findall(r"\[(\w+)\]", command):
            assert extra in EXTRAS, command
    elif words[0] == ".venv/bin/python":
        assert words[1].startswith("bench/") and (REPO / words[1]).is_file(), command
    elif words[:3] != ["python3", "-m", "venv"]:
        return False
    return True


def run_page(page: Path, where: Path, cli, stack: contextlib.ExitStack) -> list[str]:
    """Run `page`'s commands in order in `where`; the graphrag-lite commands run."""
    client = None
    ran = []
    for command in shell_lines(page):
        if not_run(command):
            continue
        ran.append(command)
        words = shlex.split(command)
        if words[0] == "cp":
            source, target = words[1:]
            for path in where.glob(source):
                shutil.copy(path, where / target)
            continue
        if words[0] == "curl":
            assert client is not None, f"{name(page)}: `{command}` before `graphrag-lite serve`"
            path = re.match(r"localhost:8000(\S+)", words[2]).group(1)
            body = words[words.index("-d") + 1] if "-d" in words else None
            response = client.post(path, json=json.loads(body)) if body else client.get(path)
            assert response.status_code == 200, f"{command}\n{response.text}"
            continue
        assert words[0] == "graphrag-lite", f"{name(page)}: a command this test cannot run: {command}"
        args = words[1:]
        root = Path(args[args.index("--root") + 1] if "--root" in args else ".")
        if args[0] == "serve":
            from fastapi.testclient import TestClient

            from graphrag_lite.serve.app import create_app
            from graphrag_lite.serve.holder import IndexHolder

            holder = IndexHolder(root.resolve(), None, [])
            client = stack.enter_context(TestClient(create_app(holder, watch=False), base_url="http://127.0.0.1"))
        elif args[0] == "mcp":  # it serves stdin: that it exists and takes the same --root
            result = cli("mcp", "--help")
            assert result.exit_code == 0 and "--root" in result.output
        else:  # as the installed command reads them (GraphRAG's command lines too)
            result = cli(*graphrag_style(args))
            assert result.exit_code == 0, f"{name(page)}: {command}\n{result.output}"
        if args[0] == "init":  # the user's key would go in .env; the tests use the fake
            settings = Path(args[-1]) / "settings.yaml"
            settings.write_text(fake_models(settings.read_text(encoding="utf-8")), encoding="utf-8")
        if args[:2] == ["export", "graphml"]:
            assert (root / "output" / "graph.graphml").is_file()
        if args[:2] == ["export", "neo4j"]:
            assert (root / "output" / "neo4j" / "import.cypher").is_file()
        if "--csv" in args:
            assert Path(args[args.index("--csv") + 1]).is_file()
    return ran


PAGES_WITH_COMMANDS = [p for p in PAGES if shell_lines(p)]


@pytest.mark.parametrize("page", PAGES_WITH_COMMANDS, ids=name)
def test_every_command_of_a_page_runs_in_order(page, tmp_path, cli, monkeypatch, built_project):
    monkeypatch.chdir(tmp_path)
    init_project(tmp_path)
    commands = graphrag_commands(page)
    if commands and not commands[0].startswith("graphrag-lite init"):
        shutil.copytree(built_project, tmp_path / "my-project")
    with contextlib.ExitStack() as stack:
        ran = run_page(page, tmp_path, cli, stack)
    assert len(ran) == len([c for c in shell_lines(page) if not not_run(c)])


def test_the_readme_tour_is_a_newcomers_first_hour():
    """The README keeps a project's first commands, in order, from init to serving it."""
    commands = [c for c in shell_lines(README) if not not_run(c)]
    assert commands[0].startswith("graphrag-lite init") and len(commands) >= 12
    for step in ("index", "show", "query local", "query global", "query basic", "serve", "mcp"):
        assert any(c.startswith(f"graphrag-lite {step} ") for c in commands), step
    assert {"make demo", "make test"} <= set(shell_lines(README))
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250


PYTHON = [(page, i) for page in PAGES for i, _ in enumerate(fenced(page, "python"))]


@pytest.mark.parametrize(("page", "number"), PYTHON, ids=[f"{name(p)}-{i}" for p, i in PYTHON])
def test_the_python_examples_run(page, number, tmp_path, monkeypatch, built_project):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(built_project, tmp_path / "my-project")
    example = fenced(page, "python")[number]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(example, name(page), "exec"), {})
    # the fake's answer cites entities, no source: a loop over sources prints nothing, and fails not
    assert "[Data: Entities" in printed.getvalue()


YAML = [(page, block) for page in PAGES for block in fenced(page, "yaml")]


@pytest.mark.parametrize(("page", "block"), YAML, ids=[f"{name(p)}-{b.split(':')[0]}" for p, b in YAML])
def test_every_yaml_block_loads_where_it_belongs(page, block, tmp_path, monkeypatch):
    monkeypatch.setenv("GRAPHRAG_API_KEY", "sk-test")
    data = yaml.safe_load(block)
    if "variants" in data or "grid" in data:  # an experiment file, beside the repository's example
        (tmp_path / "experiments").mkdir()
        shutil.copy(REPO / "experiments" / "questions.jsonl", tmp_path / "experiments")
        shutil.copy(REPO / "settings.yaml", tmp_path)
        shutil.copytree(REPO / "input", tmp_path / "input")
        (tmp_path / "experiments" / "docs.yaml").write_text(block, encoding="utf-8")
        spec = load_spec(tmp_path / "experiments" / "docs.yaml")
        expected = math.prod(len(v) for v in data.get("grid", {}).values()) + len(data.get("variants", {}))
        assert len(expand_variants(spec, tmp_path / "experiments" / "docs.yaml")) == expected
        return
    (tmp_path / "aliases.csv").write_text("alias,title,action\n", encoding="utf-8")
    config_from_data(data, tmp_path / "settings.yaml")  # every key known, every value valid


JSON = [(page, block) for page in PAGES for block in fenced(page, "json")]


@pytest.mark.parametrize(("page", "block"), JSON, ids=[f"{name(p)}-{i}" for i, (p, _) in enumerate(JSON)])
def test_the_json_blocks_are_what_they_say(page, block, cli):
    """The MCP client configuration is valid JSON naming a command the CLI has."""
    data = json.loads(block)
    for server in data.get("mcpServers", {}).values():
        assert server["command"].endswith("/bin/graphrag-lite") and server["args"][:2] == ["mcp", "--root"]
        assert cli(server["args"][0], "--help").exit_code == 0


SAMPLES = [(page, block) for page in PAGES for block in fenced(page, "", "text")]


@pytest.mark.parametrize(("page", "block"), SAMPLES, ids=[f"{name(p)}-{i}" for i, (p, _) in enumerate(SAMPLES)])
def test_the_other_fenced_blocks_are_output_samples(page, block, cli, built_project):
    """Output, not a command left out of the run; global search's coverage lines are what --explain prints."""
    lines = block.splitlines()
    assert lines and not any(re.match(r"(\$ )?(graphrag-lite|pip|make|curl|python|cd|cp) ", line) for line in lines)
    if lines[0].startswith("coverage:"):
        question = "What are the main communities and who are the key entities in each?"
        result = cli("query", "global", question, "--root", built_project, "--explain")
        assert result.exit_code == 0 and question in page.read_text(encoding="utf-8")
        printed = [" ".join(line.split()) for line in result.output.splitlines()]
        assert all(line in printed for line in lines), result.output


def test_every_kind_of_block_is_checked_somewhere():
    """The README and the pages keep each kind of example the tests above check."""
    assert fenced(README, "python") and fenced(README, "yaml")
    assert any(c.startswith("curl ") for p in PAGES for c in shell_lines(p))  # a serve block with requests
    assert any("mcpServers" in block for _, block in JSON)
    assert any(block.startswith("coverage:") for _, block in SAMPLES)
    assert any("variants" in yaml.safe_load(block) for _, block in YAML)  # an experiment file
    assert len(PAGES_WITH_COMMANDS) > 5


def test_make_demo_installs_only_the_core_and_shows_its_progress(tmp_path):
    """A new user waited 3.5 minutes with no output: `make demo` installed the test extras, quietly."""
    import subprocess

    planned = subprocess.run(["make", "-n", "demo", f"VENV={tmp_path / 'venv'}"], cwd=REPO, capture_output=True,
                             text=True, check=True).stdout
    install = next(line for line in planned.splitlines() if "pip install -e" in line)
    assert "[test]" not in install and "--quiet" not in install and "Collecting" in install
    assert "Installing graphrag-lite" in planned.split(install)[0]
