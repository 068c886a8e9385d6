"""An index that is whole or refused (issue 36, F4-F8, P1, P6): an interrupted run leaves the previous commit
current and says so; a damaged file is reported with its path and the repair, never served; `index` repairs
what is damaged (run records, tables, LanceDB tables); `graphrag-lite check` verifies without changing."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from graphrag_lite.cli import app
from graphrag_lite.fake.provider import STATS
from graphrag_lite.stages import STAGES
from tests.conftest import DATA, make_project

UNRELATED = sorted((DATA / "unrelated-documents").glob("*.txt"))
QUESTION = ("query", "local", "Whom did Dr. Elena Vargas hire in Ollantaytambo?", "--json", "--no-model")


def run(root: Path, *args: str):
    return CliRunner().invoke(app, [*map(str, args), "--root", str(root)])


def answer(root: Path) -> dict:
    result = run(root, *QUESTION)
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    return {key: found[key] for key in ("answer", "context")}


def commit(root: Path) -> dict:
    return json.loads((root / "output" / "index.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    root = make_project(tmp_path_factory.mktemp("built") / "p", UNRELATED[:3])
    assert run(root, "index").exit_code == 0
    return root


@pytest.fixture
def project(built: Path, tmp_path: Path) -> Path:
    """A copy of the built project (its answer cache too: a repair calls no model)."""
    root = tmp_path / "p"
    shutil.copytree(built, root, symlinks=True)
    return root


def version_file(root: Path, table: str) -> Path:
    return root / "output" / "tables" / f"{table}.{commit(root)['tables'][table]}.parquet"


def flip_bit(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x10
    path.write_bytes(bytes(data))


# F7 -------------------------------------------------------------------------------------------------------------


def test_a_flipped_bit_in_a_table_is_refused_with_its_file_and_repaired_by_index(project: Path):
    before = answer(project)
    damaged = version_file(project, "text_units")
    flip_bit(damaged, damaged.stat().st_size // 2)
    refused = run(project, *QUESTION)
    assert refused.exit_code == 6, refused.output
    assert "text_units" in refused.output and "graphrag-lite index" in refused.output
    checked = run(project, "check", "--json")
    assert checked.exit_code == 6 and json.loads(checked.stdout)["damaged"]
    STATS.reset()
    assert run(project, "index").exit_code == 0
    assert STATS.completions == 0  # rebuilt from what is intact and from the answer cache
    assert answer(project) == before
    assert run(project, "check").exit_code == 0


# F8 -------------------------------------------------------------------------------------------------------------


def test_an_interrupted_update_leaves_the_previous_commit_served_and_said(project: Path, monkeypatch):
    before, first = answer(project), commit(project)
    shutil.copy2(UNRELATED[3], project / "input" / UNRELATED[3].name)
    reports = STAGES["community_reports"]

    def killed(ctx):  # the run stops where the tester's kill -9 found the two-version index
        raise KeyboardInterrupt

    monkeypatch.setitem(STAGES, "community_reports", type(reports)(**{**reports.__dict__, "run": killed}))
    assert run(project, "update").exit_code == 130
    result = run(project, *QUESTION)
    assert result.exit_code == 0
    served = json.loads(result.stdout)
    assert served["index"]["tables"] == first["tables"] and served["index"]["commit"] == first["number"]
    assert "did not finish" in served["index"]["pending_run"] and "did not finish" in result.stderr
    assert {k: served[k] for k in ("answer", "context")} == before
    monkeypatch.setitem(STAGES, "community_reports", reports)
    assert run(project, "update").exit_code == 0
    assert commit(project)["number"] == first["number"] + 1
    assert json.loads(run(project, *QUESTION).stdout)["index"]["pending_run"] is None


def test_a_server_started_after_an_interrupted_update_serves_the_previous_commit_and_says_so(project: Path,
                                                                                             monkeypatch):
    from fastapi.testclient import TestClient

    from graphrag_lite.serve.app import create_app
    from graphrag_lite.serve.holder import IndexHolder

    first = commit(project)
    shutil.copy2(UNRELATED[3], project / "input" / UNRELATED[3].name)
    reports = STAGES["community_reports"]
    monkeypatch.setitem(STAGES, "community_reports", type(reports)(**{**reports.__dict__, "run": _interrupted}))
    assert run(project, "update").exit_code == 130
    with TestClient(create_app(IndexHolder(project, None, []), watch=False), base_url="http://127.0.0.1") as client:
        health = client.get("/health").json()
        assert health["commit"] == first["number"] and "did not finish" in health["pending_run"]
        stats = client.get("/stats").json()["index"]
        assert stats["rows"]["documents"] == first["rows"]["documents"]  # not the update's documents


def test_a_first_run_that_did_not_finish_is_refused_with_what_to_run(tmp_path: Path, monkeypatch):
    root = make_project(tmp_path / "p", UNRELATED[:2])
    cluster = STAGES["cluster_graph"]
    monkeypatch.setitem(STAGES, "cluster_graph", type(cluster)(**{**cluster.__dict__, "run": _interrupted}))
    assert run(root, "index").exit_code == 130
    refused = run(root, *QUESTION)
    assert refused.exit_code == 2 and "did not finish" in refused.output and "graphrag-lite index" in refused.output


def _interrupted(ctx):
    raise KeyboardInterrupt


# F4 -------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("record", ["stats.json", "pipeline_state.json", "embeddings_manifest.json"])
def test_a_damaged_run_record_neither_stops_queries_nor_index(project: Path, record: str):
    before = answer(project)
    (project / "output" / record).write_bytes(b"\xff\xfe{ not json")
    assert answer(project) == before  # the commit is what is served: these records only describe runs
    checked = run(project, "check")
    assert record in checked.output
    STATS.reset()
    rebuilt = run(project, "index", "--force")
    assert rebuilt.exit_code == 0, rebuilt.output
    assert STATS.completions == 0
    json.loads((project / "output" / record).read_text(encoding="utf-8"))  # written anew
    assert answer(project) == before


# F5 -------------------------------------------------------------------------------------------------------------


def _lance(root: Path, table: str) -> Path:
    return root / "output" / "lancedb" / f"{table}.lance"


@pytest.mark.parametrize("damage", ["data file missing", "garbage manifest", "full-text index wiped"])
def test_a_damaged_lancedb_table_is_refused_then_rebuilt_by_index(project: Path, damage: str):
    before = answer(project)
    folder = _lance(project, "text_unit_text")
    if damage == "data file missing":
        next((folder / "data").glob("*.lance")).unlink()
    elif damage == "garbage manifest":
        for manifest in (folder / "_versions").glob("*.manifest"):
            manifest.write_bytes(b"garbage")
    else:
        shutil.rmtree(folder / "_indices")
    refused = run(project, *QUESTION)
    assert refused.exit_code == 6 and "text_unit_text" in refused.output, refused.output
    assert run(project, "check").exit_code == 6
    STATS.reset()
    repaired = run(project, "index")  # no --force: the damage alone makes embed_text run again
    assert repaired.exit_code == 0 and "rebuilt" in repaired.output, repaired.output
    assert STATS.embeddings == 0  # vectors from the answer cache
    assert answer(project) == before
    assert run(project, "check").exit_code == 0


# F6 -------------------------------------------------------------------------------------------------------------


def test_a_truncated_previous_table_is_taken_as_absent_for_numbering(project: Path):
    entities = version_file(project, "entities")
    entities.write_bytes(entities.read_bytes()[:100])  # truncated: no Parquet footer
    (project / "output" / "entities.parquet").unlink()  # the link beside tables/: the same file
    forced = run(project, "index", "--force")
    assert forced.exit_code == 0, forced.output
    stats = json.loads((project / "output" / "stats.json").read_text())
    notes = [p for s in stats["stages"].values() for p in s.get("problems", [])]
    assert any("previous version of table 'entities'" in p and "numbered afresh" in p for p in notes)
    assert run(project, "check").exit_code == 0


def test_a_previous_table_of_another_schema_is_taken_as_absent(project: Path):
    from graphrag_lite.storage import OutputStore

    state_path = project / "output" / "pipeline_state.json"
    state = json.loads(state_path.read_text())
    store = OutputStore(project / "output", {})
    digest = store.write("relationships", pd.DataFrame({"id": ["x"], "other": [1]}))  # not a relationships table
    state["cluster_graph"]["outputs"]["relationships"] = digest
    state_path.write_text(json.dumps(state))
    forced = run(project, "index", "--force")
    assert forced.exit_code == 0, forced.output
    stats = (project / "output" / "stats.json").read_text()
    assert "previous version of table 'relationships'" in stats and "numbered afresh" in stats


# P1 -------------------------------------------------------------------------------------------------------------


def test_a_full_disk_names_the_file_and_says_what_to_do(project: Path, monkeypatch):
    import errno

    shutil.copy2(UNRELATED[3], project / "input" / UNRELATED[3].name)
    real = pd.DataFrame.to_parquet

    def full(self, path, *args, **kwargs):
        if "community_reports" in str(path) or ".community_reports." in str(path):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, path, *args, **kwargs)

    monkeypatch.setattr(pd.DataFrame, "to_parquet", full)
    failed = run(project, "update")
    assert failed.exit_code == 2, failed.output
    assert "No space left" in failed.output and "output" in failed.output and "free" in failed.output
    stats = json.loads((project / "output" / "stats.json").read_text())
    assert stats["status"] == "failed" and "No space left" in stats["error"]
    log = (project / "output" / "logs" / "index.log").read_text()
    assert stats["error"] in log  # the terminal, stats.json and the log say the same
    monkeypatch.setattr(pd.DataFrame, "to_parquet", real)
    assert run(project, "update").exit_code == 0


# P6 -------------------------------------------------------------------------------------------------------------


def test_the_lock_file_never_holds_a_command_line_secret(tmp_path: Path, monkeypatch):
    from graphrag_lite.errors import OutputLocked
    from graphrag_lite.storage import OutputLock

    secret = "sk-very-secret-key-123456"
    monkeypatch.setattr(sys, "argv", ["graphrag-lite", "index", "--set",
                                      f"models.default_chat_model.api_key={secret}"])
    held = OutputLock(tmp_path)
    held.acquire()
    try:
        assert secret not in held.path.read_text() and "graphrag-lite index" in held.path.read_text()
        with pytest.raises(OutputLocked) as refused:
            OutputLock(tmp_path).acquire()
        assert secret not in str(refused.value)
    finally:
        held.release()


def test_lancedb_moves_with_output_base_dir(tmp_path: Path):
    root = make_project(tmp_path / "p", UNRELATED[:2], "output:\n  base_dir: elsewhere/index\n")
    assert run(root, "index").exit_code == 0
    assert (root / "elsewhere" / "index" / "lancedb" / "text_unit_text.lance").is_dir()
    assert not (root / "output").exists()


def test_old_versions_are_deleted_when_a_commit_succeeds_keeping_the_last_n(project: Path):
    versions = []
    for number, document in enumerate(UNRELATED[3:5]):
        shutil.copy2(document, project / "input" / document.name)
        assert run(project, "update", "--set", "output.keep_versions=2").exit_code == 0
        versions.append(commit(project))
        assert versions[-1]["number"] == number + 2
    kept = {f"{name}.{digest}.parquet" for c in versions for name, digest in c["tables"].items()}
    assert {p.name for p in (project / "output" / "tables").glob("*.parquet")} == kept
    assert versions[-1]["kept"] == [{"number": 2, "tables": versions[0]["tables"]}]


def test_check_says_intact_and_reads_an_index_from_before_commits(project: Path):
    intact = run(project, "check")
    assert intact.exit_code == 0 and "intact" in intact.output and "commit 1" in intact.output
    from tests.conftest import as_index_before_commits

    as_index_before_commits(project / "output")
    legacy = run(project, "check", "--json")
    assert legacy.exit_code == 0 and json.loads(legacy.stdout)["commit"] is None
    assert answer(project)  # served as it is; the next run commits it
    assert run(project, "index").exit_code == 0 and commit(project)["number"] == 1


# what a new user's trial found -------------------------------------------------------------------------------


def test_an_interrupted_runs_lancedb_version_is_brought_up_to_date_not_rebuilt(project: Path):
    """An interrupted run that wrote a LanceDB version: the re-run diffs it, and the committed version's files
    stay for the readers of the commit meanwhile (a rebuild deleted them)."""
    import lancedb

    table = lancedb.connect(str(project / "output" / "lancedb")).open_table("entity_description")
    rows = table.search().limit(1).to_arrow()
    table.add(rows.set_column(0, "id", [["an-interrupted-run-s-row"]]))  # the new version an update left
    pinned = commit(project)["lancedb"]["tables"]["entity_description"]
    rerun = run(project, "index")
    assert rerun.exit_code == 0 and "rebuilt" not in rerun.output, rerun.output
    folder = _lance(project, "entity_description")
    assert all((folder / f).is_file() for f in pinned["required"])
    assert run(project, "check").exit_code == 0


def test_a_run_killed_after_its_commit_is_not_resumed_and_its_stale_links_are_replaced(project: Path):
    stats_path = project / "output" / "stats.json"
    stats = json.loads(stats_path.read_text())
    stats_path.write_text(json.dumps({**stats, "status": "running"}))  # killed after index.json, before this
    (project / "output" / "text_units.parquet").unlink()
    shutil.copy(version_file(project, "entities"), project / "output" / "text_units.parquet")  # stale, not linked
    rerun = run(project, "update")
    assert rerun.exit_code == 0 and "Resuming" not in rerun.output, rerun.output
    assert (project / "output" / "text_units.parquet").samefile(version_file(project, "text_units"))
    assert json.loads(run(project, *QUESTION).stdout)["index"]["pending_run"] is None


def test_a_deleted_commit_record_is_damage_not_an_older_index(project: Path):
    (project / "output" / "index.json").unlink()
    refused = run(project, *QUESTION)
    assert refused.exit_code == 6 and "index.json" in refused.output and "missing" in refused.output
    assert run(project, "check").exit_code == 6
    assert run(project, "index").exit_code == 0 and run(project, "check").exit_code == 0


def test_a_run_is_told_from_the_committed_one_by_its_id_not_its_start_to_the_second():
    from graphrag_lite.pipeline.records import same_run

    committed = {"started": "2026-11-29T06:00:00+00:00", "run_id": "a"}
    assert not same_run(committed, {"started": "2026-11-29T06:00:00+00:00", "run_id": "b"})  # a fast index, then
    assert same_run(committed, {"started": "2026-11-29T06:00:00+00:00", "run_id": "a"})  # its update, one second
    assert same_run({"started": "x"}, {"started": "x"})  # records from before runs had ids
