"""A real S3-compatible server for the object-storage tests: moto in server mode on 127.0.0.1 (a random free
port), started once per test worker; each test gets its own bucket. The credentials are test values, set in
the environment the way a user sets them, and checked never to appear in what the program writes."""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Iterator

import pytest

ACCESS_KEY = "AKIATESTSECRETACCESS1"
SECRET_KEY = "test-secret-key-never-shown-0123456789abcd"


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request otherwise
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture
def bucket(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A new bucket on the local server, with the environment pointing at it (as a user's would)."""
    import boto3

    for name, value in {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
                        "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": s3_endpoint}.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    name = f"index-{uuid.uuid4().hex[:12]}"
    boto3.client("s3").create_bucket(Bucket=name)
    return name


def subprocess_env(endpoint: str) -> dict[str, str]:
    """The environment of a command run as a separate process against the local server."""
    return {**os.environ, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint}
