"""Provider faults, one kind at a time and all together: the run ends as a clean run would, with the same
tables (ids and values), honest exit codes and problems, and a cache that holds only valid answers."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from graphrag_lite.cli import app
from graphrag_lite.fake.provider import STATS
from tests.conftest import DATA, check_index, make_project

DULCE = DATA / "operation-dulce" / "dulce.txt"
NOVELLA = DATA / "operation-dulce" / "operation-dulce-full.md"
TABLES = ("documents", "text_units", "entities", "relationships", "communities", "community_reports", "covariates")
PATIENT = "max_retry_wait: 0.01\n    timeout: 1\n    max_retries: 30"  # faults retried quickly in tests


def build(root: Path, document: Path, chat: str) -> tuple[int, str]:
    make_project(root, [document], "extract_claims:\n  enabled: true\n", chat=chat)
    path = root / "settings.yaml"
    path.write_text(path.read_text().replace("max_retry_wait: 0.01", PATIENT))
    result = CliRunner().invoke(app, ["index", "--root", str(root)], catch_exceptions=False)
    return result.exit_code, result.output


def assert_same_tables(built: Path, reference: Path) -> None:
    for name in TABLES:
        a = pd.read_parquet(built / "output" / f"{name}.parquet")
        b = pd.read_parquet(reference / "output" / f"{name}.parquet")
        # the input file's date (each project copies the file), and what a report was written from, which
        # names the model (here with its faults)
        dated = [c for c in ("creation_date", "inputs_digest") if c in a]
        pd.testing.assert_frame_equal(a.drop(columns=dated), b.drop(columns=dated), obj=name)


def assert_cache_holds_only_valid_answers(root: Path) -> None:
    """Every cached answer passes its stage's parser again: a forced rebuild takes all of them from the
    cache (an invalid one would be dropped and asked again) and gives the same tables."""
    before = {name: pd.read_parquet(root / "output" / f"{name}.parquet") for name in TABLES}
    STATS.reset()
    result = CliRunner().invoke(app, ["index", "--root", str(root), "--force"], catch_exceptions=False)
    assert result.exit_code == 0 and STATS.completions == 0 and STATS.embeddings == 0
    for name, table in before.items():
        pd.testing.assert_frame_equal(pd.read_parquet(root / "output" / f"{name}.parquet"), table, obj=name)


@pytest.fixture(scope="module")
def clean_dulce(tmp_path_factory):
    root = tmp_path_factory.mktemp("clean")
    code, output = build(root, DULCE, "fake/default")
    assert code == 0, output
    return root


@pytest.mark.parametrize("fault", ["rate_limit=0.3", "rate_limit=0.3&retry_after=-1", "server_error=0.3",
                                   "timeout=0.2", "drop=0.3", "truncate=0.3", "malformed=0.3", "fenced=1"])
def test_each_fault_leaves_the_tables_of_a_clean_run(tmp_path, clean_dulce, fault):
    code, output = build(tmp_path, DULCE, f"fake/default?{fault}&seed=7")
    assert code == 0, output
    assert_same_tables(tmp_path, clean_dulce)
    assert_cache_holds_only_valid_answers(tmp_path)


def test_twenty_percent_faults_and_five_percent_malformed_replies(tmp_path):
    """The acceptance mix on the novella (23 text units, claims on); bench/fault_tolerance.py runs it on 150
    documents."""
    clean, faulty = tmp_path / "clean", tmp_path / "faulty"
    assert build(clean, NOVELLA, "fake/default")[0] == 0
    STATS.reset()
    code, output = build(faulty, NOVELLA, "fake/default?rate_limit=0.05&server_error=0.05&timeout=0.05&drop=0.05"
                                          "&malformed=0.05&seed=3")
    assert code == 0, output
    assert_same_tables(faulty, clean)
    status, report = check_index(faulty / "output", "--compare", str(clean / "output"))
    assert status == 0, report
    assert_cache_holds_only_valid_answers(faulty)
    shutil.rmtree(clean)
