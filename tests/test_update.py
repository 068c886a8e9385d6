"""Re-indexing a changed folder (issue 15, first part): the documents added, changed, deleted and renamed since
the last run are told before any model call."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from graphrag_lite.documents.changes import document_changes
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


# ---------------------------------------------------------------- update: add, change, rename, delete, resume

UNRELATED = sorted((Path(__file__).resolve().parent / "data" / "unrelated-documents").glob("*.txt"))
FINAL_TABLES = ("documents", "text_units", "entities", "relationships", "covariates", "communities",
                "community_reports")


def final_tables(output: Path, drop: tuple[str, ...] = ()) -> dict[str, pd.DataFrame]:
    """GraphRAG's tables, rows by id, lists as lists (Parquet gives arrays), `drop` columns left out."""
    tables = {}
    for name in FINAL_TABLES:
        frame = pd.read_parquet(output / f"{name}.parquet")
        frame = frame.drop(columns=[c for c in drop if c in frame]).sort_values("id").reset_index(drop=True)
        tables[name] = frame.map(lambda v: v.tolist() if hasattr(v, "tolist") and not isinstance(v, str) else v)
    return tables


def assert_same_tables(left: dict[str, pd.DataFrame], right: dict[str, pd.DataFrame], names=FINAL_TABLES) -> None:
    for name in names:
        pd.testing.assert_frame_equal(left[name], right[name], obj=name)


def assert_same_as_a_rebuild(root: Path, rebuilt: Path, cli) -> None:
    """The project's input indexed from scratch (no cache) gives the same documents, text units, entities,
    relationships and claims, ids and values, as the updated index (row numbers aside: an update keeps them)."""
    import shutil

    shutil.copytree(root / "input", rebuilt / "input", copy_function=shutil.copy2)  # the files' dates too
    shutil.copy(root / "settings.yaml", rebuilt / "settings.yaml")
    assert cli("index", "--root", rebuilt, "--no-cache").exit_code == 0
    assert_same_tables(final_tables(root / "output", ("human_readable_id",)),
                       final_tables(rebuilt / "output", ("human_readable_id",)), FINAL_TABLES[:5])


def update_stats(root: Path) -> dict:
    return json.loads((root / "output" / "stats.json").read_text(encoding="utf-8"))


def indexed(tmp_path: Path, cli, documents: list[Path], name: str = "p") -> Path:
    from tests.conftest import make_project

    root = make_project(tmp_path / name, documents, "extract_claims:\n  enabled: true\n")
    assert cli("index", "--root", root).exit_code == 0
    return root


def test_add_then_delete_gives_back_the_same_index_and_an_update_equals_a_rebuild(tmp_path: Path, cli):
    import shutil

    from tests.conftest import check_index

    root = indexed(tmp_path, cli, UNRELATED[:3])
    original = final_tables(root / "output")
    shutil.copy2(UNRELATED[3], root / "input" / UNRELATED[3].name)
    added = cli("update", "--root", root)
    assert added.exit_code == 0, added.output
    assert f"Documents since the last run: 1 added ({UNRELATED[3].name})" in added.output
    record = update_stats(root)["update"]
    assert record["documents"] == {"added": 1, "changed": 0, "deleted": 0, "renamed": 0}
    assert record["reports"]["reports_kept"] > 0 and record["text_units"]["removed_text_units"] == 0
    assert check_index(root / "output")[0] == 0

    assert_same_as_a_rebuild(root, tmp_path / "rebuilt", cli)  # the same four documents indexed from scratch

    (root / "input" / UNRELATED[3].name).unlink()
    deleted = cli("update", "--root", root)
    assert deleted.exit_code == 0 and f"1 deleted ({UNRELATED[3].name})" in deleted.output
    assert_same_tables(final_tables(root / "output"), original)  # kept reports byte for byte, numbers included
    assert update_stats(root)["update"]["llm"]["calls_sent"] == 0  # all of it was known


def test_a_changed_document_is_extracted_again_and_nothing_else(tmp_path: Path, cli):
    root = indexed(tmp_path, cli, UNRELATED[:3])
    before = pd.read_parquet(root / "output" / "text_units.parquet")
    changed = root / "input" / UNRELATED[1].name
    changed.write_text(changed.read_text(encoding="utf-8") + "\nThe Harbour Board met Captain Ellis Varne in "
                       "Port Sedley to discuss the lamp.\n", encoding="utf-8")
    result = cli("update", "--root", root)
    assert result.exit_code == 0 and f"1 changed ({UNRELATED[1].name})" in result.output
    stats = update_stats(root)
    after = pd.read_parquet(root / "output" / "text_units.parquet")
    new_units = set(after["id"]) - set(before["id"])
    assert stats["update"]["text_units"]["new_text_units"] == len(new_units) > 0
    extract = stats["stages"]["extract_graph"]["llm"]
    assert 0 < extract["calls"] - extract["cache_hits"] <= 2 * len(new_units)  # a call (and a gleaning) per new unit
    gone = before[~before["id"].isin(set(after["id"]))]
    assert len(gone) >= 1  # the old version's units are gone
    unchanged = after[after["id"].isin(set(before["id"]))].merge(before, on="id")
    assert (unchanged["human_readable_id_x"] == unchanged["human_readable_id_y"]).all()  # and the others keep theirs
    entities = pd.read_parquet(root / "output" / "entities.parquet")
    assert "ELLIS VARNE" in set(entities["title"]) or "CAPTAIN ELLIS VARNE" in set(entities["title"])


def test_a_renamed_document_costs_no_model_call(tmp_path: Path, cli):
    root = indexed(tmp_path, cli, UNRELATED[:3])
    before = final_tables(root / "output")
    (root / "input" / UNRELATED[0].name).rename(root / "input" / "renamed.txt")
    result = cli("update", "--root", root)
    assert result.exit_code == 0 and f"1 renamed ({UNRELATED[0].name} -> renamed.txt)" in result.output
    stats = update_stats(root)
    assert stats["update"]["llm"]["calls_sent"] == 0 and stats["update"]["llm"]["cache_hits"] == 0
    assert stats["update"]["reports"] == {"reports_written": 0, "reports_kept": len(before["community_reports"])}
    after = final_tables(root / "output")
    assert "renamed.txt" in set(after["documents"]["title"])
    assert_same_tables(before, after, FINAL_TABLES[1:])  # only the document's title changed


def test_an_interrupted_update_resumes_and_ends_as_an_uninterrupted_one(tmp_path: Path, cli, monkeypatch):
    import shutil

    from graphrag_lite.pipeline.contract import Stage
    from graphrag_lite.stages import STAGES

    reference = indexed(tmp_path, cli, UNRELATED[:3], "reference")
    root = tmp_path / "p"
    shutil.copytree(reference, root)
    for project in (reference, root):
        shutil.copy2(UNRELATED[4], project / "input" / UNRELATED[4].name)
    assert cli("update", "--root", reference).exit_code == 0

    reports = STAGES["community_reports"]

    def interrupted(ctx):
        raise KeyboardInterrupt

    monkeypatch.setitem(STAGES, "community_reports", Stage(**{**reports.__dict__, "run": interrupted}))
    assert cli("update", "--root", root).exit_code != 0
    assert update_stats(root)["status"] == "interrupted"
    monkeypatch.setitem(STAGES, "community_reports", reports)
    resumed = cli("update", "--root", root)
    assert resumed.exit_code == 0
    stats = update_stats(root)
    assert stats["stages"]["extract_graph"]["status"] == "unchanged, reused"
    assert stats["stages"]["community_reports"]["details"]["reports_kept"] > 0
    assert_same_tables(final_tables(root / "output"), final_tables(reference / "output"))
    resumed, whole = stats["update"], update_stats(reference)["update"]
    assert resumed["runs"] == 2 and resumed["llm"]["calls_sent"] == whole["llm"]["calls_sent"] > 0
    assert resumed["reports"] == whole["reports"] and resumed["documents"] == whole["documents"]


def test_update_needs_an_index_and_lists_changes_in_a_dry_run(tmp_path: Path, cli):
    from tests.conftest import make_project

    root = make_project(tmp_path / "p", UNRELATED[:2])
    missing = cli("update", "--root", root)
    assert missing.exit_code == 2 and "graphrag-lite index --root" in missing.output
    assert cli("index", "--root", root).exit_code == 0
    (root / "input" / UNRELATED[0].name).unlink()
    estimated = cli("update", "--root", root, "--dry-run")
    assert estimated.exit_code == 0 and f"1 deleted ({UNRELATED[0].name})" in estimated.output
    assert (root / "input" / UNRELATED[1].name).exists() and pd.read_parquet(
        root / "output" / "documents.parquet").shape[0] == 2  # the dry run changed nothing


def test_an_update_estimates_only_what_the_cache_does_not_hold_and_keeps_the_index_method(tmp_path: Path, cli):
    import shutil

    root = indexed(tmp_path, cli, UNRELATED[:3])
    shutil.copy2(UNRELATED[3], root / "input" / UNRELATED[3].name)
    assert cli("update", "--root", root, "--dry-run").exit_code == 0
    estimate = json.loads((root / "output" / "dry_run.json").read_text(encoding="utf-8"))
    units = pd.read_parquet(root / "output" / "base_text_units.parquet")
    assert estimate["extract_graph"]["calls"] == 1 and estimate["extract_claims"]["calls"] == 1
    assert f"{len(units)} more text units answered from the cache" in estimate["extract_graph"]["note"]

    fast = sample_project(tmp_path / "fast")
    assert cli("index", "--root", fast, "--method", "fast").exit_code == 0
    (fast / "input" / "note.txt").write_text("Sir W. Batten and Mr. Pepys went to the Navy Office. " * 5,
                                             encoding="utf-8")
    updated = cli("update", "--root", fast)
    assert updated.exit_code == 0 and "Updating with pipeline fast" in updated.output  # no model, no key needed
    other = cli("index", "--root", fast, "--dry-run")
    assert "was built with the fast method; this run uses standard" in other.output


def test_a_resumed_update_says_what_it_still_has_to_finish_and_an_empty_input_keeps_the_index(tmp_path: Path, cli,
                                                                                             monkeypatch):
    from graphrag_lite.pipeline.contract import Stage
    from graphrag_lite.stages import STAGES

    root = indexed(tmp_path, cli, UNRELATED[:3])
    (root / "input" / UNRELATED[0].name).unlink()
    reports = STAGES["community_reports"]

    def interrupted(ctx):
        raise KeyboardInterrupt

    monkeypatch.setitem(STAGES, "community_reports", Stage(**{**reports.__dict__, "run": interrupted}))
    assert cli("update", "--root", root).exit_code == 130
    monkeypatch.setitem(STAGES, "community_reports", reports)
    resumed = cli("update", "--root", root)
    assert resumed.exit_code == 0
    assert f"Resuming the last run (interrupted), which found: 0 added, 0 changed, 1 deleted ({UNRELATED[0].name})" \
        in resumed.output

    for path in (root / "input").iterdir():
        path.unlink()
    emptied = cli("update", "--root", root)
    assert emptied.exit_code == 2 and "is left as it was" in emptied.output
    assert len(pd.read_parquet(root / "output" / "documents.parquet")) == 2


def test_after_edits_renames_and_additions_an_update_equals_a_rebuild(tmp_path: Path, cli):
    import shutil

    root = indexed(tmp_path, cli, UNRELATED[:3])
    (root / "input" / UNRELATED[0].name).rename(root / "input" / "zz-renamed.txt")  # now sorts last
    edited = root / "input" / UNRELATED[2].name
    edited.write_text("A note first. " + edited.read_text(encoding="utf-8"), encoding="utf-8")
    shutil.copy2(UNRELATED[4], root / "input" / "aa-first.txt")  # now sorts first
    assert cli("update", "--root", root).exit_code == 0
    assert_same_as_a_rebuild(root, tmp_path / "rebuilt", cli)


def test_after_an_edit_every_kept_report_cites_rows_that_exist_and_say_the_same(tmp_path: Path, cli):
    from collections import Counter

    from graphrag_lite.query.citations import cited_ids

    root = indexed(tmp_path, cli, UNRELATED[:3])
    before = final_tables(root / "output")
    edited = root / "input" / UNRELATED[0].name  # its claims get new ids: its text units do
    edited.write_text(edited.read_text(encoding="utf-8") + "\nThe archive closed in winter.\n", encoding="utf-8")
    assert cli("update", "--root", root).exit_code == 0
    after = final_tables(root / "output")
    assert update_stats(root)["update"]["reports"]["reports_kept"] > 0
    rows = {"Entities": ("entities", ["title", "description"]), "Relationships": ("relationships", ["source",
            "target", "description"]), "Claims": ("covariates", ["subject_id", "object_id", "type", "description"])}
    kept = after["community_reports"].merge(before["community_reports"], on=["id", "full_content"])
    cited: Counter = Counter()
    for content in kept["full_content"]:
        for kind, numbers in cited_ids(content).items():
            if kind not in rows:
                continue
            table, columns = rows[kind]
            old = before[table].set_index("human_readable_id")[columns]
            new = after[table].set_index("human_readable_id")[columns]
            for number in numbers:
                cited[kind] += 1
                assert number in new.index, f"{kind} ({number}) is gone"
                assert new.loc[number].tolist() == old.loc[number].tolist()  # the same row it cited
    assert cited["Entities"] > 0 and cited["Relationships"] > 0  # (the fake's reports cite no claims)
    facts = ["subject_id", "object_id", "type", "status", "description"]
    renumbered = before["covariates"].merge(after["covariates"], on=facts)
    assert len(renumbered) == len(before["covariates"])  # the appended sentence has no claim; the rest are kept
    assert (renumbered["id_x"] != renumbered["id_y"]).any()  # the edited document's claims have new ids,
    assert (renumbered["human_readable_id_x"] == renumbered["human_readable_id_y"]).all()  # and their numbers


def test_an_update_runs_a_custom_pipeline_again_and_a_settings_change_is_not_an_update(tmp_path: Path, cli):
    import shutil

    from tests.conftest import REPO, make_project

    root = make_project(tmp_path / "p", UNRELATED[:2])
    shutil.copy(REPO / "pipelines" / "standard.yaml", root / "mine.yaml")
    assert cli("index", "--root", root, "--method", root / "mine.yaml").exit_code == 0
    shutil.copy2(UNRELATED[2], root / "input" / UNRELATED[2].name)
    updated = cli("update", "--root", root)
    assert updated.exit_code == 0 and "Updating with pipeline mine" in updated.output
    assert update_stats(root)["update"]["documents"]["added"] == 1
    again = cli("update", "--root", root, "--set", "community_reports.max_length=1700")
    assert again.exit_code == 0 and "0 added, 0 changed, 0 deleted, 0 renamed" in again.output
    assert "update" not in update_stats(root)  # the documents did not change: not an update


def test_reports_of_an_older_index_are_written_again_and_the_run_says_why(tmp_path: Path, cli):
    import shutil

    root = indexed(tmp_path, cli, UNRELATED[:2])
    from tests.conftest import as_index_before_commits

    reports = pd.read_parquet(root / "output" / "community_reports.parquet").drop(columns=["inputs_digest"])
    as_index_before_commits(root / "output", {"community_reports": reports})  # as written before 0.2
    shutil.copy2(UNRELATED[2], root / "input" / UNRELATED[2].name)
    updated = cli("update", "--root", root)
    assert updated.exit_code == 0 and "none kept: the last run's reports do not say what they were written from" \
        in updated.output
    assert update_stats(root)["update"]["reports"]["reports_kept"] == 0


def test_a_copy_of_an_indexed_file_is_the_duplicate_and_an_edited_row_with_an_id_is_changed(tmp_path: Path, cli):
    import shutil

    root = sample_project(tmp_path / "p")
    (root / "input" / "rows.csv").write_text("id,text\nd1,Sir W. Pen went to Deptford by water.\n"
                                             "d2,Mr. Creed dined with my Lord at Whitehall.\n", encoding="utf-8")
    (root / "settings.yaml").write_text("input:\n  id_column: id\n", encoding="utf-8")
    assert cli("index", "--root", root, "--method", "fast").exit_code == 0
    diary = next(p for p in (root / "input").glob("*.txt"))
    shutil.copy2(diary, root / "input" / ("a-copy-" + diary.name))  # sorts before the original
    (root / "input" / "rows.csv").write_text("id,text\nd1,Sir W. Pen went to Woolwich by water.\n"
                                             "d2,Mr. Creed dined with my Lord at Whitehall.\n", encoding="utf-8")
    updated = cli("update", "--root", root)
    assert updated.exit_code == 0, updated.output
    assert "0 added, 1 changed (rows.csv row 1), 0 deleted, 0 renamed" in " ".join(updated.output.split())
    assert f"a-copy-{diary.name}: duplicate of {diary.name}" in " ".join(updated.output.split())
    titles = set(pd.read_parquet(root / "output" / "documents.parquet")["title"])
    assert diary.name in titles and f"a-copy-{diary.name}" not in titles


def test_an_update_with_nothing_changed_does_not_read_the_documents_again(tmp_path: Path, cli, monkeypatch):
    from graphrag_lite import api
    from graphrag_lite.stages import load_documents

    root = sample_project(tmp_path / "p")
    assert cli("index", "--root", root, "--method", "fast").exit_code == 0
    reads = []
    original = load_documents.read_documents
    for reader in (api, load_documents):  # the listing of changes, and the stage
        monkeypatch.setattr(reader, "read_documents", lambda *a, **k: reads.append(1) or original(*a, **k))
    unchanged = cli("update", "--root", root)
    assert unchanged.exit_code == 0 and "0 added, 0 changed, 0 deleted, 0 renamed" in unchanged.output
    assert reads == []
    (root / "input" / "note.txt").write_text("Mr. Pepys went to Deptford by water. " * 5, encoding="utf-8")
    assert "1 added (note.txt)" in cli("update", "--root", root).output and len(reads) == 2  # listing, stage


def test_a_dry_run_never_calls_a_model_stage_free_when_it_will_call(tmp_path: Path, cli):
    root = indexed(tmp_path, cli, UNRELATED[:2])
    estimated = cli("index", "--root", root, "--dry-run", "--set", "summarize_descriptions.max_length=100")
    assert estimated.exit_code == 0
    notes = json.loads((root / "output" / "dry_run.json").read_text(encoding="utf-8"))
    assert notes["extract_graph"]["note"].startswith("unchanged")
    assert notes["summarize_descriptions"]["note"] == "will call the model: not estimable before it runs"
    assert "Not estimable before they run" in estimated.output


def test_an_update_reads_each_input_file_once(tmp_path: Path, cli, monkeypatch):
    """Listing the changes before any model call, digesting the input to decide whether load_documents runs,
    and the stage itself share one read of each file (documents/file_reads.py)."""
    root = sample_project(tmp_path / "p")
    assert cli("index", "--root", root, "--method", "fast").exit_code == 0
    (root / "input" / "note.txt").write_text("Mr. Pepys went to Deptford by water. " * 5, encoding="utf-8")
    reads: list[str] = []
    original = Path.read_bytes

    def counted(self: Path) -> bytes:
        if (root / "input") in self.parents:
            reads.append(self.name)
        return original(self)

    monkeypatch.setattr(Path, "read_bytes", counted)
    updated = cli("update", "--root", root)
    assert updated.exit_code == 0 and "1 added (note.txt)" in updated.output
    files = sorted(p.name for p in (root / "input").iterdir())
    assert sorted(reads) == files  # each once (the code before read each 5 times: 3 digests, 2 parses)


def test_the_api_updates_an_index_with_the_method_it_was_built_with(tmp_path: Path, cli):
    """One index policy for every caller (api.py): an update from Python keeps a fast index fast, as
    `graphrag-lite update` does, and a build with another method says what it re-runs."""
    from graphrag_lite import build_index
    from graphrag_lite.api import plan_index

    root = sample_project(tmp_path / "p")
    assert cli("index", "--root", root, "--method", "fast").exit_code == 0
    (root / "input" / "note.txt").write_text("Mr. Pepys went to Deptford by water. " * 5, encoding="utf-8")
    summary = build_index(root, update=True)
    assert summary.status == "completed" and "extract_graph_nlp" in summary.stages
    stats = json.loads((root / "output" / "stats.json").read_text(encoding="utf-8"))
    assert stats["pipeline"] == "fast" and stats["update"]["documents"]["added"] == 1
    plan = plan_index(root, method="standard")  # planned only: the notes the CLI and build_index's console show
    assert plan.pipeline.name == "standard"
    assert "was built with the fast method; this run uses standard" in plan.notes[0]


def test_a_same_size_edit_with_its_old_modification_time_is_read_again(tmp_path: Path):
    """`cp -p`, `rsync -a` or `touch -r` give an edited file its old size and modification time: what one
    command read of it is not served to the next (each starts afresh), nor within a command (the change time,
    which no tool sets, is part of what says a file is the one read)."""
    import os

    from graphrag_lite import build_index
    from graphrag_lite.documents import file_reads

    root = sample_project(tmp_path / "p")
    note = root / "input" / "note.txt"
    note.write_text("Mr. Pepys went to Paris by water.", encoding="utf-8")
    before = file_reads.file_digest(note)
    status = note.stat()
    note.write_text("Mr. Pepys went to Milan by water.", encoding="utf-8")  # the same size
    os.utime(note, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert note.stat().st_size == status.st_size and note.stat().st_mtime_ns == status.st_mtime_ns
    assert file_reads.file_digest(note) != before
    build_index(root, method="fast")
    note.write_text("Mr. Pepys went to Turin by water.", encoding="utf-8")
    os.utime(note, ns=(status.st_atime_ns, status.st_mtime_ns))
    build_index(root, method="fast")  # in the same process
    texts = pd.read_parquet(root / "output" / "documents.parquet")["text"]
    assert any("Turin" in text for text in texts) and not any("Milan" in text for text in texts)
