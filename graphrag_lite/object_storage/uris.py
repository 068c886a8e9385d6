"""Where a folder of the settings is: a local path, or a URI on object storage (`s3://bucket/prefix`), whose
local working copy is a folder keyed by the URI under `object_storage.local_dir`. The working copies this
process placed are remembered, so that code given only a local folder (a reader opening the committed index)
can find the remote it mirrors."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

SUPPORTED = ("s3",)  # gs:// and az:// are known, not yet supported (see LATER)
LATER = ("gs", "az", "gcs", "abfs", "abfss")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")

_working_copies: dict[Path, str] = {}


def scheme_of(value: str) -> str | None:
    """The URI scheme of a setting's value (`s3`), None for a plain path."""
    found = _SCHEME.match(value)
    return found.group(1).lower() if found else None


def as_location(value: str, key: str) -> str | Path:
    """A setting's value as a local Path (a plain path, or `file://`) or an object-storage URI (a str, without
    a trailing slash); ValueError naming what to do for a scheme that is not supported."""
    scheme = scheme_of(value)
    if scheme is None:
        return Path(value)
    if scheme == "file":
        return Path(unquote(urlsplit(value).path))
    if scheme in LATER:
        raise ValueError(f"{key}: {scheme}:// is not supported yet; use a local folder or s3:// (any S3-compatible "
                         "store, reached by AWS_ENDPOINT_URL; Google Cloud Storage has one at "
                         "https://storage.googleapis.com with HMAC keys)")
    if scheme not in SUPPORTED:
        raise ValueError(f"{key}: {scheme}:// is not a storage this program knows; use a local folder, file:// or "
                         "s3://bucket/prefix")
    parts = urlsplit(value)
    if not parts.netloc:
        raise ValueError(f"{key}: {value!r} names no bucket; write s3://bucket/prefix")
    return f"{scheme}://{parts.netloc}/{parts.path.strip('/')}".rstrip("/")


def split_uri(uri: str) -> tuple[str, str, str]:
    """(scheme, bucket, prefix) of an object-storage URI; the prefix has no leading or trailing slash."""
    parts = urlsplit(uri)
    return parts.scheme, parts.netloc, parts.path.strip("/")


def working_copy(local_dir: Path, uri: str) -> Path:
    """The local folder that mirrors `uri`: <local_dir>/<scheme>/<bucket>/<prefix>."""
    scheme, bucket, prefix = split_uri(uri)
    return local_dir / scheme / bucket / PurePosixPath(prefix or "_")


def remember(local: Path, uri: str) -> None:
    """Note that `local` is the working copy of `uri` (the loader does, for every folder it places)."""
    _working_copies[local] = uri


def remote_of(local: Path) -> str | None:
    """The URI whose working copy `local` is; None for a plain local folder."""
    return _working_copies.get(local)
