"""Re-indexing a changed folder (issue 15, first part): the documents added, changed, deleted and renamed since
the last run are told before any model call."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from graphrag_lite.stages.load_documents import document_changes
from tests.conftest import sample_project


def table(*rows: tuple[str, str]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["id", "title"])


def test_changes_are_known_by_content_and_by_path():
    before = table(("h1", "a.txt"), ("h2", "b.txt"), ("h3", "c.txt"), ("h4", "d.txt"))
    after = table(("h1", "a.txt"), ("h2x", "b.txt"), ("h4", "moved/d.txt"), ("h5", "e.txt"))
    assert document_changes(before, after) == {"added": ["e.txt"], "changed": ["b.txt"], "deleted": ["c.txt"],
                                               "renamed": ["d.txt -> moved/d.txt"]}
    assert document_changes(None, after) == {}


def test_a_re_run_says_what_changed_in_the_folder_before_any_model_stage(tmp_path: Path, cli):
    root = sample_project(tmp_path / "p")
    assert cli("index", "--root", root, "--method", "fast").exit_code == 0
    (root / "input" / "note.txt").write_text("Sir W. Batten and Mr. Pepys went to the Navy Office. " * 5,
                                             encoding="utf-8")
    estimated = cli("index", "--root", root, "--method", "fast", "--dry-run")
    assert "since the last run: 1 added (note.txt), 0 changed, 0 deleted, 0 renamed" in estimated.output
    rerun = cli("index", "--root", root, "--method", "fast")
    assert "since the last run: 1 added (note.txt)" in rerun.output
    stats = json.loads((root / "output" / "stats.json").read_text(encoding="utf-8"))
    assert stats["stages"]["load_documents"]["details"]["documents_since_last_run"]["added"] == ["note.txt"]


def test_deleting_a_document_removes_exactly_what_only_it_supported(tmp_path: Path, cli):
    from tests.conftest import DATA, make_project

    documents = sorted((DATA / "unrelated-documents").glob("*.txt"))[:3]
    root = make_project(tmp_path, documents, "extract_claims:\n  enabled: true\n")
    assert cli("index", "--root", root).exit_code == 0
    output = root / "output"
    units = pd.read_parquet(output / "text_units.parquet")
    docs = pd.read_parquet(output / "documents.parquet")
    gone = set(docs.loc[docs["title"] == documents[0].name, "id"])
    gone_units = set(units.loc[units["document_id"].isin(gone), "id"])

    def only_from_gone(table: str) -> set[str]:
        rows = pd.read_parquet(output / f"{table}.parquet")
        return {str(t) for t, ids in zip(rows["title"], rows["text_unit_ids"], strict=True)
                if set(ids) <= gone_units}

    def kept_titles(table: str) -> set[str]:
        return set(pd.read_parquet(output / f"{table}.parquet")["title"].astype(str))

    doomed, before = only_from_gone("entities"), kept_titles("entities")
    claims_before = pd.read_parquet(output / "covariates.parquet")
    assert doomed and before - doomed
    (root / "input" / documents[0].name).unlink()
    rerun = cli("index", "--root", root)
    assert rerun.exit_code == 0 and f"1 deleted ({documents[0].name})" in rerun.output
    assert kept_titles("entities") == before - doomed  # every entity only it supported is gone, no other
    relationships = pd.read_parquet(output / "relationships.parquet")
    assert not any(set(ids) <= gone_units for ids in relationships["text_unit_ids"])
    claims = pd.read_parquet(output / "covariates.parquet")
    assert not set(claims["text_unit_id"]) & gone_units
    assert set(claims["text_unit_id"]) == set(claims_before["text_unit_id"]) - gone_units
