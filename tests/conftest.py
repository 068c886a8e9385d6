"""Shared fixtures: small projects on disk, and the CLI run in-process."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphrag_lite.cli import app

REPO = Path(__file__).resolve().parent.parent


def write_settings(root: Path, text: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    path = root / "settings.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def fresh_fake_provider():
    """Faults drawn by the fake depend on the calls before: every test starts from the same state."""
    from graphrag_lite.fake import provider as fake
    from graphrag_lite.tokens import DEFAULT_ENCODING, count_with

    fake.reset()
    count_with(DEFAULT_ENCODING)  # a test's project may count with another encoding


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project with two small text documents and default settings."""
    root = tmp_path / "project"
    (root / "input").mkdir(parents=True)
    (root / "input" / "a.txt").write_text("Alice met Bob in Paris. " * 40, encoding="utf-8")
    (root / "input" / "b.md").write_text("# Notes\n\nCarol works at Acme Corp in Berlin. " * 30, encoding="utf-8")
    # the runner's tests need no model: a pipeline of the model-free stages
    (root / "chunks.yaml").write_text("stages: [load_documents, chunk_text]\n", encoding="utf-8")
    write_settings(root, "pipeline: chunks.yaml\nchunking:\n  size: 100\n  overlap: 10\n")
    return root


@pytest.fixture
def cli():
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)

    return invoke


DATA = Path(__file__).resolve().parent / "data"
FAKE_MODELS = ("models:\n  default_chat_model:\n    model: {chat}\n    max_retry_wait: 0.01\n"
               "  default_embedding_model:\n    model: fake/embedding\n")


SAMPLE = sorted((REPO / "input").glob("*.txt"))  # the bundled sample: a diary full of names


def add_inputs(root: Path, documents: list[Path]) -> Path:
    """Copies of `documents` in the project's input folder."""
    (root / "input").mkdir(parents=True, exist_ok=True)
    for document in documents:
        (root / "input" / document.name).write_bytes(document.read_bytes())
    return root


def make_project(root: Path, documents: list[Path], settings: str = "", chat: str = "fake/default") -> Path:
    """A project folder with copies of `documents` and settings that use the fake model."""
    add_inputs(root, documents)
    write_settings(root, FAKE_MODELS.format(chat=chat) + settings)
    return root


def fake_models(settings: str) -> str:
    """init's settings with its OpenAI models swapped for the fake provider (no key, no network)."""
    return settings.replace("model: openai/gpt-4o-mini", "model: fake/default").replace(
        "model: openai/text-embedding-3-small", "model: fake/embedding")


def sample_project(root: Path) -> Path:
    """The bundled sample with default settings, for the fast method (no model)."""
    add_inputs(root, SAMPLE)
    write_settings(root, "")
    return root


def check_index(output: Path, *extra: str) -> tuple[int, str]:
    """Run the team's shared index checker (../shared/tools/check_index.py) when it is there."""
    import subprocess
    import sys

    checker = REPO.parent / "shared" / "tools" / "check_index.py"
    if not checker.is_file():
        pytest.skip("../shared/tools/check_index.py is not beside this checkout")
    done = subprocess.run([sys.executable, str(checker), str(output), *extra], capture_output=True, text=True,
                          timeout=120)
    return done.returncode, done.stdout


def as_index_before_commits(output: Path, edits: dict | None = None) -> None:
    """Turn a built index into the layout versions before versioned commits wrote (top-level tables,
    pipeline_state.json naming their digests, no index.json and no tables/), with `edits` (table name ->
    DataFrame) written over its tables as such a version would have written them."""
    import json
    import shutil

    from graphrag_lite.storage import file_digest

    (output / "index.json").unlink()
    shutil.rmtree(output / "tables")  # the top-level tables are links to the same files: they stay
    state = json.loads((output / "pipeline_state.json").read_text(encoding="utf-8"))
    for name, table in (edits or {}).items():
        table.to_parquet(output / f"{name}.parquet", index=False)
        for entry in state.values():
            if name in entry["outputs"]:
                entry["outputs"][name] = file_digest(output / f"{name}.parquet")
    (output / "pipeline_state.json").write_text(json.dumps(state), encoding="utf-8")
