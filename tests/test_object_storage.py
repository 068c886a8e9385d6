"""An index on object storage (s3://), against a real S3-compatible server on 127.0.0.1 (moto, tests/s3_server.py):
the same tables as on local disk, queries from the CLI, resume after kill -9, update, serve following a new
commit, a second run refused, and no credential in anything the program writes or says."""

from __future__ import annotations

import os
from pathlib import Path

import boto3
import pandas as pd
from typer.testing import CliRunner

from graphrag_lite.cli import app
from tests.conftest import SAMPLE, add_inputs, check_index, write_settings

pytest_plugins = ["tests.s3_server"]  # the local S3 server and a bucket per test

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

    # another machine: the same settings, no working copy yet; the query pulls the committed index
    fresh = remote_project(tmp_path / "fresh", f"s3://{bucket}/pepys")
    answer = run("query", "local", "Who went to Woolwich with Sir W. Pen?", "--root", fresh)
    assert answer.exit_code == 0, answer.output
    pulled = working_copy(fresh, bucket, "pepys")
    same_tables(local / "output", pulled)
    code, report = check_index(pulled, "--method", "fast")
    assert code == 0, report
