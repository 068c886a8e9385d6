"""An index on object storage (s3://), against a real S3-compatible server on 127.0.0.1 (moto, tests/s3_server.py):
the same tables as on local disk, queries from the CLI, resume after kill -9, update, serve following a new
commit, a second run refused, and no credential in anything the program writes or says."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from graphrag_lite.cli import app
from tests.conftest import DATA, SAMPLE, add_inputs, check_index, write_settings

pytest_plugins = ["tests.s3_server"]  # the local S3 server and a bucket per test (its names are imported where
# used, after pytest has loaded it as a plugin)

NO_MODELS = ("embed_text:\n  model_id: null\n"
             "local_search:\n  chat_model_id: null\n  embedding_model_id: null\n"
             "global_search:\n  chat_model_id: null\n"
             "basic_search:\n  chat_model_id: null\n  embedding_model_id: null\n")
TABLES = ("documents", "text_units", "entities", "relationships", "communities", "community_reports")


def run(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def sample_inputs(root: Path) -> Path:
    """The bundled sample, its files dated as in the repository (a document's creation_date is its file's)."""
    add_inputs(root, SAMPLE)
    for document in SAMPLE:
        os.utime(root / "input" / document.name, (document.stat().st_mtime, document.stat().st_mtime))
    return root


def remote_project(root: Path, uri: str, settings: str = NO_MODELS) -> Path:
    sample_inputs(root)
    write_settings(root, settings + f"output:\n  base_dir: {uri}\n")
    return root


def objects(bucket_name: str, prefix: str = "") -> dict[str, bytes]:
    client = boto3.client("s3")
    listing = client.list_objects_v2(Bucket=bucket_name, Prefix=prefix).get("Contents", [])
    return {item["Key"]: client.get_object(Bucket=bucket_name, Key=item["Key"])["Body"].read() for item in listing}


def working_copy(root: Path, bucket_name: str, prefix: str) -> Path:
    return root / ".graphrag-lite" / "remote" / "s3" / bucket_name / prefix


def same_tables(one: Path, other: Path) -> None:
    for name in TABLES:
        left, right = pd.read_parquet(one / f"{name}.parquet"), pd.read_parquet(other / f"{name}.parquet")
        pd.testing.assert_frame_equal(left, right, check_like=False, obj=name)


def test_a_fast_index_on_s3_equals_the_local_one_and_answers_from_a_fresh_machine(tmp_path, bucket):
    local = sample_inputs(tmp_path / "local")
    write_settings(local, NO_MODELS)
    assert run("index", "--root", local, "--method", "fast").exit_code == 0
    remote = remote_project(tmp_path / "remote", f"s3://{bucket}/pepys")
    result = run("index", "--root", remote, "--method", "fast")
    assert result.exit_code == 0, result.output
    stored = objects(bucket, "pepys/")
    assert "pepys/index.json" in stored and any(k.startswith("pepys/tables/entities.") for k in stored)
    assert not any(k.endswith(".lease") for k in stored)  # released at the end
    same_tables(local / "output", working_copy(remote, bucket, "pepys"))
    effective = yaml.safe_load(objects(bucket, "pepys/settings.effective.yaml")["pepys/settings.effective.yaml"])
    assert effective["output"]["base_dir"] == f"s3://{bucket}/pepys"  # builds the same index, from any machine
    assert effective["vector_store"]["db_uri"] is None

    # another machine: the same settings, no working copy yet; the query pulls the committed index
    fresh = remote_project(tmp_path / "fresh", f"s3://{bucket}/pepys")
    answers = {method: run("query", method, "Who went to Woolwich with Sir W. Pen?", "--root", fresh)
               for method in ("local", "global", "basic")}
    for method, answer in answers.items():
        assert answer.exit_code == 0 and "Pen" in answer.output, (method, answer.output)
    pulled = working_copy(fresh, bucket, "pepys")
    same_tables(local / "output", pulled)
    code, report = check_index(pulled, "--method", "fast")
    assert code == 0, report
    exporter = remote_project(tmp_path / "exporter", f"s3://{bucket}/pepys")  # export and show pull it too
    exported = run("export", "graphml", "--root", exporter, "--out", tmp_path / "pepys.graphml")
    assert exported.exit_code == 0 and (tmp_path / "pepys.graphml").stat().st_size > 0, exported.output
    shown = run("show", "--root", remote_project(tmp_path / "shower", f"s3://{bucket}/pepys"))
    assert shown.exit_code == 0 and "entities 149" in shown.output, shown.output
    checked = run("check", "--root", remote_project(tmp_path / "checker", f"s3://{bucket}/pepys"))
    assert checked.exit_code == 0 and "19 tables and 3 LanceDB tables checked\nintact" in checked.output, checked.output
    no_secret_anywhere([remote, fresh, exporter], bucket, [result.output, *(a.output for a in answers.values()),
                                                           exported.output, shown.output])


# ------------------------------------------------------------------ the standard method, killed, resumed, updated

DULCE = DATA / "operation-dulce" / "dulce.txt"
UNRELATED = sorted((DATA / "unrelated-documents").glob("*.txt"))
DATED = ("creation_date", "inputs_digest")  # the copy's file dates; what a report was written from


def standard_settings(hold: Path, output: str, extra: str = "") -> str:
    """The fake model, stalled while `hold` exists (the model string, and so every fingerprint, is the same
    whether it exists or not); small text units, so the run has several of them."""
    return (f"models:\n  default_chat_model:\n    model: fake/default?hold={hold}\n    max_retry_wait: 0.01\n"
            "  default_embedding_model:\n    model: fake/embedding\n"
            f"chunking:\n  size: 300\n  overlap: 30\noutput:\n  base_dir: {output}\n{extra}")


def dulce_project(root: Path, hold: Path, output: str, extra: str = "") -> Path:
    (root / "input").mkdir(parents=True, exist_ok=True)
    shutil.copy2(DULCE, root / "input" / DULCE.name)
    write_settings(root, standard_settings(hold, output, extra))
    return root


@pytest.fixture(scope="module")
def local_dulce(tmp_path_factory) -> Path:
    """The standard method on local disk: what the same run on s3:// must equal."""
    root = tmp_path_factory.mktemp("local-dulce")
    dulce_project(root, root / "no-hold", "output")
    result = run("index", "--root", root)
    assert result.exit_code == 0, result.output
    return root / "output"


def committed_tables(output: Path) -> dict[str, pd.DataFrame]:
    commit = json.loads((output / "index.json").read_text(encoding="utf-8"))["tables"]
    return {name: pd.read_parquet(output / "tables" / f"{name}.{digest}.parquet") for name, digest in commit.items()}


def assert_same_index(one: Path, other: Path) -> None:
    left, right = committed_tables(one), committed_tables(other)
    assert left.keys() == right.keys()
    for name in left:
        dated = [c for c in DATED if c in left[name]]
        pd.testing.assert_frame_equal(left[name].drop(columns=dated), right[name].drop(columns=dated), obj=name)


def wait_for(condition, what: str, limit_s: float = 120) -> None:
    """Poll until `condition()` holds (a bound on waiting, not a timing assertion)."""
    deadline = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def remote_state(bucket_name: str, prefix: str) -> dict:
    try:
        body = boto3.client("s3").get_object(Bucket=bucket_name, Key=f"{prefix}/pipeline_state.json")["Body"]
    except boto3.client("s3").exceptions.NoSuchKey:
        return {}
    return json.loads(body.read())


def test_a_standard_run_killed_mid_stage_resumes_on_another_machine_then_updates(tmp_path, bucket, s3_endpoint,
                                                                                 local_dulce):
    from tests.s3_server import subprocess_env

    uri, hold = f"s3://{bucket}/dulce", tmp_path / "hold"
    lease = "object_storage:\n  lease_seconds: 9\n"
    first = dulce_project(tmp_path / "first", hold, uri, lease)
    hold.write_text("the model stalls while this file exists")
    log = (tmp_path / "killed.log").open("w")
    killed = subprocess.Popen([sys.executable, "-m", "graphrag_lite", "index", "--root", str(first)],
                              env=subprocess_env(s3_endpoint), stdout=log, stderr=subprocess.STDOUT)
    try:  # chunk_text is pushed, and extract_graph waits on the stalled model: kill -9 inside that stage
        wait_for(lambda: "chunk_text" in remote_state(bucket, "dulce") or killed.poll() is not None, "chunk_text")
        assert killed.poll() is None, (tmp_path / "killed.log").read_text()
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.wait()
    hold.unlink()
    assert "extract_graph" not in remote_state(bucket, "dulce")

    second = dulce_project(tmp_path / "second", hold, uri, lease)  # another machine: no working copy yet
    asked = run("query", "local", "Who is Dr. Elena Vargas?", "--root", second, "--no-model")
    assert asked.exit_code == 2 and f"no finished index in {uri} yet: its first run" in asked.output and \
        "is still running" in asked.output, \
        asked.output  # its lease has not expired yet: as far as anyone can tell, it runs
    refused = run("index", "--root", second)  # nor for this run
    assert refused.exit_code == 5 and "another graphrag-lite run is writing to" in refused.output, refused.output
    deadline = time.monotonic() + 60  # a bound on waiting for the killed run's lease to expire
    while (resumed := run("index", "--root", second)).exit_code == 5:
        assert time.monotonic() < deadline, resumed.output
        time.sleep(0.5)
    assert resumed.exit_code == 0, resumed.output
    stats = json.loads((working_copy(second, bucket, "dulce") / "stats.json").read_text(encoding="utf-8"))
    assert stats["stages"]["chunk_text"]["status"] == "unchanged, reused"  # finished before the kill: reused
    assert stats["stages"]["extract_graph"]["status"] == "ran"
    assert_same_index(local_dulce, working_copy(second, bucket, "dulce"))
    code, report = check_index(working_copy(second, bucket, "dulce"))
    assert code == 0, report

    # update from a third machine: one more document
    third = dulce_project(tmp_path / "third", hold, uri, lease)
    extra = UNRELATED[0]
    shutil.copy2(extra, third / "input" / extra.name)
    updated = run("update", "--root", third)
    assert updated.exit_code == 0, updated.output
    commit = json.loads(objects(bucket, "dulce/index.json")["dulce/index.json"])
    assert commit["number"] == 2 and commit["rows"]["documents"] == 2
    named = {f"dulce/tables/{n}.{d}.parquet" for tables in (commit["tables"], *(k["tables"] for k in commit["kept"]))
             for n, d in tables.items()}
    state = remote_state(bucket, "dulce")
    named |= {f"dulce/tables/{n}.{d}.parquet" for entry in state.values() for n, d in entry["outputs"].items()}
    assert set(objects(bucket, "dulce/tables/")) <= named  # versions no kept commit needs are deleted remotely

    # the second machine's working copy is behind: a query pulls the new commit first
    answer = run("query", "local", "Who is Dr. Elena Vargas?", "--root", second, "--no-model")
    assert answer.exit_code == 0, answer.output
    assert json.loads((working_copy(second, bucket, "dulce") / "index.json").read_text())["number"] == 2
    no_secret_anywhere([first, second, third], bucket, [refused.output, updated.output, answer.output])


def no_secret_anywhere(roots: list[Path], bucket_name: str, said: list[str]) -> None:
    """Neither credential appears in any file of the projects (working copies, logs, stats.json, the lock),
    in any object of the bucket, or in what the commands said."""
    from tests.s3_server import ACCESS_KEY, SECRET_KEY

    texts = [*said, *(body.decode("utf-8", "replace") for body in objects(bucket_name).values())]
    for root in roots:
        texts += [p.read_bytes().decode("utf-8", "replace") for p in root.rglob("*") if p.is_file()]
    for secret in (ACCESS_KEY, SECRET_KEY):
        assert not any(secret in text for text in texts)


# ------------------------------------------------------------------ the lease, serve, input and cache on s3://


def test_a_second_run_is_refused_while_a_live_run_holds_the_lease(tmp_path, bucket):
    from graphrag_lite.object_storage.lease import LEASE_OBJECT, Lease
    from graphrag_lite.object_storage.s3 import ObjectStore

    held = Lease(ObjectStore(f"s3://{bucket}/pepys"), 30, "graphrag-lite index")
    held.acquire()
    try:
        refused = run("index", "--root", remote_project(tmp_path / "p", f"s3://{bucket}/pepys"), "--method", "fast")
        assert refused.exit_code == 5, refused.output
        assert f"another graphrag-lite run is writing to s3://{bucket}/pepys" in refused.output
        assert "graphrag-lite index" in refused.output  # who holds it
        assert "pepys/index.json" not in objects(bucket)  # the refused run wrote nothing
    finally:
        held.release()
    assert f"pepys/{LEASE_OBJECT}" not in objects(bucket)
    no_secret_anywhere([tmp_path], bucket, [refused.output])


def test_serve_follows_a_new_commit_pushed_from_another_machine(tmp_path, bucket):
    import asyncio

    from fastapi.testclient import TestClient

    from graphrag_lite.serve.app import create_app
    from graphrag_lite.serve.holder import IndexHolder

    uri = f"s3://{bucket}/pepys"
    writer = remote_project(tmp_path / "writer", uri)
    assert run("index", "--root", writer, "--method", "fast").exit_code == 0
    server = remote_project(tmp_path / "server", uri)  # the server's machine: it pulls the committed index
    holder = IndexHolder(server, None, ["object_storage.poll_seconds=0.001"])
    with TestClient(create_app(holder, watch=False), base_url="http://127.0.0.1") as client:
        before = client.get("/stats").json()["index"]["rows"]["documents"]
        assert asyncio.run(holder.reload_if_changed()) is False  # nothing new on the remote
        shutil.copy2(UNRELATED[0], writer / "input" / UNRELATED[0].name)
        assert run("update", "--root", writer).exit_code == 0
        assert asyncio.run(holder.reload_if_changed()) is True
        assert client.get("/stats").json()["index"]["rows"]["documents"] == before + 1


def test_input_and_cache_on_s3(tmp_path, bucket):
    client = boto3.client("s3")
    for document in [DULCE, *UNRELATED[:2]]:
        client.put_object(Bucket=bucket, Key=f"docs/{document.name}", Body=document.read_bytes())
    settings = (FAKE_CHAT + f"input:\n  base_dir: s3://{bucket}/docs\ncache:\n  base_dir: s3://{bucket}/cache\n"
                f"output:\n  base_dir: s3://{bucket}/index\n")
    first = write_settings(tmp_path / "first", settings).parent
    built = run("index", "--root", first)
    assert built.exit_code == 0, built.output
    documents = pd.read_parquet(working_copy(first, bucket, "index") / "documents.parquet")
    assert sorted(documents["title"]) == sorted(d.name for d in [DULCE, *UNRELATED[:2]])  # relative to the prefix
    assert "cache/llm_cache.sqlite" in objects(bucket, "cache/")

    # another machine, another run from scratch: every model answer comes from the cache on s3://
    second = write_settings(tmp_path / "second", settings).parent
    rebuilt = run("index", "--root", second, "--force")
    assert rebuilt.exit_code == 0, rebuilt.output
    stats = json.loads((working_copy(second, bucket, "index") / "stats.json").read_text(encoding="utf-8"))
    assert stats["llm"]["calls"] == stats["llm"]["cache_hits"] > 0
    assert stats["object_storage"]["output"]["objects_sent"] > 0

    client.delete_object(Bucket=bucket, Key=f"docs/{UNRELATED[1].name}")
    updated = run("update", "--root", second)
    assert updated.exit_code == 0, updated.output
    documents = pd.read_parquet(working_copy(second, bucket, "index") / "documents.parquet")
    assert UNRELATED[1].name not in set(documents["title"])  # deleted on the remote: gone from the mirror too
    no_secret_anywhere([first, second], bucket, [built.output, rebuilt.output, updated.output])


FAKE_CHAT = ("models:\n  default_chat_model:\n    model: fake/default\n    max_retry_wait: 0.01\n"
             "  default_embedding_model:\n    model: fake/embedding\n")


def test_what_cannot_be_reached_or_is_not_supported_is_said_without_a_credential(tmp_path, bucket):
    missing = remote_project(tmp_path / "missing", "s3://no-such-bucket-here/pepys")
    result = run("index", "--root", missing, "--method", "fast")
    assert result.exit_code == 2  # a set-up error, as the exit-code table says
    assert "s3://no-such-bucket-here/pepys" in result.output and "NoSuchBucket" in result.output, result.output
    assert "pepys//" not in result.output
    google = remote_project(tmp_path / "google", "gs://some-bucket/pepys")
    refused = run("index", "--root", google, "--method", "fast")
    assert refused.exit_code == 2 and "output.base_dir: gs:// is not supported yet" in refused.output, refused.output
    no_secret_anywhere([tmp_path], bucket, [result.output, refused.output])


def test_serve_workers_each_follow_new_commits_on_s3(tmp_path, bucket, s3_endpoint):
    """`serve --workers 2` (real uvicorn on loopback): two processes over one index on s3://, each loading the
    committed version and each swapping in a commit pushed from another machine."""
    import urllib.request

    from tests.s3_server import subprocess_env

    uri = f"s3://{bucket}/pepys"
    writer = remote_project(tmp_path / "writer", uri)
    assert run("index", "--root", writer, "--method", "fast").exit_code == 0
    server = remote_project(tmp_path / "server", uri)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = (tmp_path / "serve.log").open("w")
    serving = subprocess.Popen([sys.executable, "-m", "graphrag_lite", "serve", "--root", str(server), "--port",
                                str(port), "--workers", "2", "--set", "object_storage.poll_seconds=0.2"],
                               env=subprocess_env(s3_endpoint), stdout=log, stderr=subprocess.STDOUT)
    seen: dict[int, int] = {}  # worker pid -> the commit it answered from last

    def health() -> None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as reply:
                answer = json.loads(reply.read())
            seen[answer["worker"]] = answer["commit"]
        except OSError:
            assert serving.poll() is None, (tmp_path / "serve.log").read_text()

    try:
        wait_for(lambda: health() or len(seen) == 2, "both workers answering")
        assert set(seen.values()) == {1}
        shutil.copy2(UNRELATED[0], writer / "input" / UNRELATED[0].name)
        assert run("update", "--root", writer).exit_code == 0
        wait_for(lambda: health() or set(seen.values()) == {2}, "both workers on the new commit")
    finally:
        serving.terminate()
        serving.wait(timeout=30)
    assert len(seen) == 2


def test_a_dry_run_over_an_index_on_s3_writes_nothing_there(tmp_path, bucket):
    """The dry run runs the model-free stages in a scratch copy of the working copy: nothing of it is sent."""
    root = remote_project(tmp_path / "p", f"s3://{bucket}/pepys")
    assert run("index", "--root", root, "--method", "fast").exit_code == 0
    before = objects(bucket)
    (root / "input" / "more.txt").write_text("Sir W. Pen and Mr. Coventry went to Deptford. " * 30)
    estimated = run("update", "--root", root, "--dry-run")
    assert estimated.exit_code == 0, estimated.output
    assert objects(bucket) == before


def test_a_readers_working_copy_lets_go_of_versions_no_kept_commit_needs(tmp_path, bucket):
    uri = f"s3://{bucket}/pepys"
    writer = remote_project(tmp_path / "writer", uri)
    reader = remote_project(tmp_path / "reader", uri)
    assert run("index", "--root", writer, "--method", "fast").exit_code == 0
    assert run("show", "--root", reader).exit_code == 0  # commit 1 pulled
    for document in UNRELATED[:2]:  # commits 2 and 3
        shutil.copy2(document, writer / "input" / document.name)
        assert run("update", "--root", writer).exit_code == 0
    assert run("show", "--root", reader).exit_code == 0  # commit 3 pulled
    commit = json.loads((working_copy(reader, bucket, "pepys") / "index.json").read_text(encoding="utf-8"))
    assert commit["number"] == 3
    named = {f"{n}.{d}.parquet" for tables in (commit["tables"], *(k["tables"] for k in commit["kept"]))
             for n, d in tables.items()}
    here = {p.name for p in (working_copy(reader, bucket, "pepys") / "tables").iterdir()}
    assert here <= named, here - named  # commit 1's versions, no longer kept, are gone here as on the remote


def test_a_lease_not_renewed_expires_and_a_holder_that_lost_it_stops(bucket):
    from graphrag_lite.errors import OutputLocked
    from graphrag_lite.object_storage.lease import LEASE_OBJECT, Lease
    from graphrag_lite.object_storage.s3 import ObjectStore

    store = ObjectStore(f"s3://{bucket}/idx")
    client = boto3.client("s3")
    def lease_of(holder: str, seconds: int) -> None:
        client.put_object(Bucket=bucket, Key=f"idx/{LEASE_OBJECT}",
                          Body=json.dumps({"holder": holder, "seconds": seconds}).encode())

    taker = Lease(store, 3, "graphrag-lite index")
    lease_of("pid 1 on alive: graphrag-lite index", 3600)  # a live holder's lease (an hour: however slow the machine)
    with pytest.raises(OutputLocked, match="pid 1 on alive"):
        taker.acquire()
    # a holder that stopped renewing (a killed run): its lease, written once, runs out at once
    lease_of("pid 1 on gone: graphrag-lite index", 0)

    def taken() -> bool:
        try:
            taker.acquire()
        except OutputLocked:
            return False
        return True

    wait_for(taken, "the stale lease to expire", limit_s=30)
    taker.check()  # renewing
    # another run takes it over (as if this one had stalled past its expiry): this one notices, and stops
    client.put_object(Bucket=bucket, Key=f"idx/{LEASE_OBJECT}", Body=b'{"holder": "another", "seconds": 60}')
    wait_for(lambda: taker.lost is not None, "the lost renewal", limit_s=30)
    with pytest.raises(OutputLocked, match="lost its lease"):
        taker.check()
    taker.release()  # leaves the other run's lease alone
    assert b"another" in client.get_object(Bucket=bucket, Key=f"idx/{LEASE_OBJECT}")["Body"].read()
