"""Re-indexing a changed folder (issue 15, first part): the documents added, changed, deleted and renamed since
the last run are told before any model call."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from graphrag_lite.stages.load_documents import document_changes
from tests.conftest import REPO


def table(*rows: tuple[str, str]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["id", "title"])


def test_changes_are_known_by_content_and_by_path():
    before = table(("h1", "a.txt"), ("h2", "b.txt"), ("h3", "c.txt"), ("h4", "d.txt"))
    after = table(("h1", "a.txt"), ("h2x", "b.txt"), ("h4", "moved/d.txt"), ("h5", "e.txt"))
    assert document_changes(before, after) == {"added": ["e.txt"], "changed": ["b.txt"], "deleted": ["c.txt"],
                                               "renamed": ["d.txt -> moved/d.txt"]}
    assert document_changes(None, after) == {}


def test_a_re_run_says_what_changed_in_the_folder_before_any_model_stage(tmp_path: Path, cli):
    root = tmp_path / "p"
    (root / "input").mkdir(parents=True)
    for document in (REPO / "input").glob("*.txt"):
        (root / "input" / document.name).write_bytes(document.read_bytes())
    (root / "settings.yaml").write_text("", encoding="utf-8")
    assert cli("index", "--root", root, "--method", "fast").exit_code == 0
    (root / "input" / "note.txt").write_text("Sir W. Batten and Mr. Pepys went to the Navy Office. " * 5,
                                             encoding="utf-8")
    estimated = cli("index", "--root", root, "--method", "fast", "--dry-run")
    assert "since the last run: 1 added (note.txt), 0 changed, 0 deleted, 0 renamed" in estimated.output
    rerun = cli("index", "--root", root, "--method", "fast")
    assert "since the last run: 1 added (note.txt)" in rerun.output
    stats = json.loads((root / "output" / "stats.json").read_text(encoding="utf-8"))
    assert stats["stages"]["load_documents"]["details"]["documents_since_last_run"]["added"] == ["note.txt"]
