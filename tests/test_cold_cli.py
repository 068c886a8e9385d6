"""A cold CLI process imports LiteLLM only when it calls a model, and LanceDB only when it searches a LanceDB
table (issue 17): each query runs in a new process whose loaded modules are recorded when it exits. How long
that takes is bench/cold_query.py's business; these tests check what is imported and that the answers hold."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench import cold_query
from graphrag_lite.cli import app
from graphrag_lite.query.engine import EVIDENCE_HEADER
from tests.conftest import SAMPLE, make_project

PROBE = cold_query.PROBE  # the CLI run as its entry point, the modules it loaded written at exit
QUESTION = "Who went to Woolwich with Sir W. Pen?"


@pytest.fixture(scope="module")
def pepys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled sample, indexed with the fast method; its settings name the fake chat and embedding models."""
    root = make_project(tmp_path_factory.mktemp("cold"), SAMPLE)
    result = CliRunner().invoke(app, ["index", "--root", str(root), "--method", "fast"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return root


def run_cold(tmp_path: Path, *args: str) -> tuple[str, set[str]]:
    """`graphrag-lite ARGS` in a new Python process: its output, and the top-level packages it imported."""
    record = tmp_path / "modules.json"
    env = dict(os.environ)
    if "TIKTOKEN_CACHE_DIR" in env:  # a relative folder must still be found from the process's own folder
        env["TIKTOKEN_CACHE_DIR"] = str(Path(env["TIKTOKEN_CACHE_DIR"]).resolve())
    done = subprocess.run([sys.executable, "-c", PROBE, str(record), *args], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    modules = json.loads(record.read_text(encoding="utf-8"))
    return done.stdout, {name.split(".")[0] for name in modules}


@pytest.mark.parametrize("args", [["--help"], ["query", "--help"]])
def test_help_imports_no_model_database_or_table_library(tmp_path, args):
    output, imported = run_cold(tmp_path, *args)
    assert "Usage" in output
    assert not {"litellm", "lancedb", "pandas", "pyarrow"} & imported


@pytest.mark.parametrize(("method", "expected"), [("local", "SIR W PEN"), ("basic", "Woolwich"),
                                                  ("global", "Reports:")])
def test_a_no_model_query_answers_with_evidence_without_litellm(pepys, tmp_path, method, expected):
    output, imported = run_cold(tmp_path, "query", method, "--no-model", QUESTION, "--root", str(pepys))
    assert output.startswith(EVIDENCE_HEADER) and "[Data:" in output and expected in output
    assert not {"litellm", "igraph", "matplotlib"} & imported  # the walk is numpy: no graph library to load


def test_a_no_model_query_embeds_its_question_without_litellm(tmp_path_factory, tmp_path):
    """An index with vectors: the question is embedded (fake/embedding, a plug-in that embeds on its own), never
    asked before (--no-cache), and LiteLLM is still not imported (issue 37: 2.3 s of a cold query)."""
    root = make_project(tmp_path_factory.mktemp("vectors"), SAMPLE)
    result = CliRunner().invoke(app, ["index", "--root", str(root), "--method", "fast", "--set",
                                      "embed_text.model_id=default_embedding_model"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert json.loads((root / "output" / "embeddings_manifest.json").read_text())["vectors"]
    output, imported = run_cold(tmp_path, "query", "local", "--no-model", QUESTION, "--root", str(root), "--no-cache")
    assert output.startswith(EVIDENCE_HEADER) and "SIR W PEN" in output
    assert "lancedb" in imported and "litellm" not in imported


def test_a_local_query_with_the_fake_model_imports_litellm_and_answers(pepys, tmp_path):
    output, imported = run_cold(tmp_path, "query", "local", QUESTION, "--root", str(pepys), "--no-cache")
    assert output.startswith("Based on the data") and "[Data: " in output
    assert {"litellm", "lancedb"} <= imported


def test_a_global_query_with_the_fake_model_searches_no_lancedb_table(pepys, tmp_path):
    """Map-reduce over the community reports reads Parquet tables only, so LanceDB is never imported (the
    searches above rank by LanceDB's full-text indexes: they need it)."""
    output, imported = run_cold(tmp_path, "query", "global", "What happened at the theatre?", "--root", str(pepys),
                                "--no-cache")
    assert output.startswith("Based on the data") and "[Data: Reports" in output
    assert "litellm" in imported and "lancedb" not in imported


def test_a_large_library_is_imported_without_collections_and_the_collector_is_left_as_it_was(tmp_path,
                                                                                           monkeypatch):
    """import_large pauses the cyclic collector while the module runs (the passes an import triggers walk
    every object it made and free nothing), and gives the collector back as it found it."""
    import gc

    from graphrag_lite.large_imports import import_large

    for name in ("probe_collecting", "probe_disabled"):
        (tmp_path / f"{name}.py").write_text("import gc\nCOLLECTING = gc.isenabled()\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert gc.isenabled()
    assert import_large("probe_collecting").COLLECTING is False
    assert gc.isenabled()
    gc.disable()  # a program that turned collections off itself keeps them off
    try:
        assert import_large("probe_disabled").COLLECTING is False
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert import_large("probe_collecting") is sys.modules["probe_collecting"]  # imported once
    for name in ("probe_collecting", "probe_disabled"):
        monkeypatch.delitem(sys.modules, name)


GATEWAY_PROBE = """
import gc, sys
from graphrag_lite.config import GraphRagConfig, ModelConfig
from graphrag_lite.pipeline.model_access import ModelAccess
collections = []
gc.callbacks.append(lambda phase, info: collections.append(info["generation"]) if phase == "start" else None)
access = ModelAccess(GraphRagConfig(models={"default_chat_model": ModelConfig(model="fake/default")}),
                     use_cache=False, spare_collector=True)
collections.clear()  # from here
access.gateway()
print(len(collections), "litellm" in sys.modules, gc.get_freeze_count() > 100_000)
"""


def test_a_run_makes_its_gateway_and_freezes_litellm_before_any_collection_walks_it():
    """In a fresh process (LiteLLM not imported yet): making the run's gateway imports LiteLLM and freezes its
    objects with no collection in between (one would walk them all: full passes during the import, or a
    young one over all of them right after it)."""
    done = subprocess.run([sys.executable, "-c", GATEWAY_PROBE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "True", "True"]
