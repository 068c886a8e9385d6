"""The objects under one `s3://bucket/prefix`, through boto3 (the `[s3]` extra): the standard environment
and profiles give the credentials, region and endpoint (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE,
AWS_REGION, AWS_ENDPOINT_URL), so any S3-compatible store works. boto3 rather than pyarrow.fs, which reads
the same environment: a listing here carries each object's ETag (the MD5 of an object written in one part,
what the mirror compares), and writes can be conditional (If-None-Match, If-Match), which the lease needs.
No message says a credential: errors name the bucket, the key and S3's error code only."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from graphrag_lite.errors import GraphragLiteError
from graphrag_lite.object_storage.uris import split_uri

CONDITION_FAILED = {"PreconditionFailed", "ConditionalRequestConflict", "412", "409"}
MISSING = {"NoSuchKey", "404", "NotFound"}


class ObjectStorageError(GraphragLiteError):
    """The object store cannot be reached, or refuses what is asked of it: a set-up error (a bucket, the
    credentials, the endpoint), exit code 2 as for the other set-up errors."""

    exit_code = 2


@dataclass(frozen=True)
class Listed:
    etag: str
    modified: float  # seconds since the epoch: a fetched file gets it as its time (documents' creation_date)


@dataclass
class Fetched:
    """An object read whole: its bytes, ETag, when it was last written and the server's time (the lease
    compares the two: no clock of this machine is involved)."""

    data: bytes
    etag: str
    modified: datetime
    server_now: datetime


def md5_of(path: Path) -> str:
    """The MD5 of a file, as S3 gives it for an object written in one part (its ETag)."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "md5").hexdigest()


class ObjectStore:
    def __init__(self, uri: str) -> None:
        self.uri = uri
        _, self.bucket, self.prefix = split_uri(uri)
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            try:
                import boto3
                from botocore.config import Config
            except ImportError:
                raise ObjectStorageError(f"{self.uri}: an index on s3:// needs boto3: pip install "
                                         "'graphrag-lite[s3]'") from None
            self._client = boto3.client("s3", config=Config(retries={"max_attempts": 5, "mode": "standard"},
                                                            connect_timeout=10, read_timeout=120))
        return self._client

    def key(self, relative: str) -> str:
        return f"{self.prefix}/{relative}" if self.prefix else relative

    def listing(self, under: str = "") -> dict[str, Listed]:
        """Every object under the prefix (or under `under` inside it), by relative path."""
        start = self.key(under) if under else (f"{self.prefix}/" if self.prefix else "")
        found: dict[str, Listed] = {}
        with self._said("list", under):
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=start):
                for item in page.get("Contents", []):
                    found[item["Key"][len(self.prefix) + 1 if self.prefix else 0:]] = Listed(
                        item["ETag"].strip('"'), item["LastModified"].timestamp())
        return found

    def fetch(self, relative: str) -> Fetched | None:
        """An object read whole (None when there is none)."""
        with self._said("read", relative):
            try:
                reply = self.client.get_object(Bucket=self.bucket, Key=self.key(relative))
            except Exception as err:
                if _code(err) in MISSING:
                    return None
                raise
            data = reply["Body"].read()
        stamp = reply["ResponseMetadata"]["HTTPHeaders"].get("date")
        server_now = _http_date(stamp) if stamp else reply["LastModified"]
        return Fetched(data, reply["ETag"].strip('"'), reply["LastModified"], server_now)

    def download(self, relative: str, target: Path) -> None:
        """An object to a local file that appears whole (a temporary file renamed)."""
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        os.close(fd)
        try:
            with self._said("read", relative), open(temporary, "wb") as handle:
                self.client.download_fileobj(self.bucket, self.key(relative), handle)
            os.replace(temporary, target)
        finally:
            Path(temporary).unlink(missing_ok=True)

    def upload(self, source: Path, relative: str) -> str:
        """A local file as one object, written in one part (its ETag is then its MD5); returns the ETag."""
        with self._said("write", relative), open(source, "rb") as handle:
            reply = self.client.put_object(Bucket=self.bucket, Key=self.key(relative), Body=handle)
        return str(reply["ETag"]).strip('"')

    def put(self, relative: str, data: bytes, *, if_absent: bool = False, if_etag: str | None = None) -> str | None:
        """Write an object; with `if_absent`, only when there is none, with `if_etag`, only when it is still
        that version. Returns its new ETag, None when the condition failed."""
        condition = {"IfNoneMatch": "*"} if if_absent else {"IfMatch": f'"{if_etag}"'} if if_etag else {}
        with self._said("write", relative):
            try:
                reply = self.client.put_object(Bucket=self.bucket, Key=self.key(relative), Body=data, **condition)
            except Exception as err:
                if condition and _code(err) in CONDITION_FAILED | MISSING:
                    return None
                raise
        return str(reply["ETag"]).strip('"')

    def delete(self, relative: str, if_etag: str | None = None) -> bool:
        """Delete an object (only when it is still version `if_etag`, if given); False when the condition
        failed."""
        condition = {"IfMatch": f'"{if_etag}"'} if if_etag else {}
        with self._said("delete", relative):
            try:
                self.client.delete_object(Bucket=self.bucket, Key=self.key(relative), **condition)
            except Exception as err:
                if condition and _code(err) in CONDITION_FAILED | MISSING:
                    return False
                raise
        return True

    @contextmanager
    def _said(self, action: str, relative: str) -> Iterator[None]:
        """boto3's errors as ObjectStorageError naming the object and S3's code (never a credential)."""
        try:
            yield
        except ObjectStorageError:
            raise
        except Exception as err:
            module = type(err).__module__ or ""
            if not module.startswith(("botocore", "boto3", "urllib3")):
                raise
            where = f"{self.uri}/{relative}" if relative else self.uri
            raise ObjectStorageError(f"cannot {action} {where}: {_reason(err)}; check the bucket, "
                                     "the credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
                                     "AWS_PROFILE) and the endpoint (AWS_ENDPOINT_URL), then run the command "
                                     "again") from None


def _code(err: Exception) -> str:
    response = getattr(err, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def _reason(err: Exception) -> str:
    """What went wrong, from S3's error code and HTTP status, or the kind of failure (no credentials, no
    connection); not the exception's text, which could quote a request."""
    response = getattr(err, "response", None)
    if response:
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode", "?")
        return f"{_code(err) or 'error'} (HTTP {status})"
    return {"NoCredentialsError": "no credentials found", "EndpointConnectionError": "the endpoint cannot be reached",
            "ConnectTimeoutError": "the endpoint did not answer in time", "ReadTimeoutError": "the endpoint "
            "stopped answering"}.get(type(err).__name__, type(err).__name__)


def _http_date(text: str) -> datetime:
    from email.utils import parsedate_to_datetime

    return parsedate_to_datetime(text)
