"""Each input file read once per command. An update lists what changed before any stage runs (a digest pass,
then, when something changed, a parse pass), the runner digests the folder to decide whether load_documents
runs, and the stage parses it: they share one read of each file.

What a read gave is kept while the file is the one read (its size, modification and change times, inode and
device are the same: `cp -p` or `touch -r` cannot fake the change time): its digest; its bytes from the
digest pass to the parse pass, only while `keeping_bytes()` (the plan of an update) and within KEEP_BYTES in
all; its documents, for the stage, only when the pass that parsed them asks to keep them. The command that
reads (api.py) starts and ends with `forget()`, so nothing outlives it in a long-lived process."""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KEEP_BYTES = 256 * 2**20  # bytes kept between a file's digest and its parse; past this, a file is read again


@dataclass
class FileRead:
    stamp: tuple[int, ...]  # the file as read: size, modification and change times (ns), inode, device
    digest: bytes
    data: bytes | None = None  # kept until parsed
    parsed: dict[str, Any] = field(default_factory=dict)  # the file's settings (JSON) -> what they gave


_READS: dict[Path, FileRead] = {}
_KEPT = [0]  # bytes kept in all
_KEEPING_BYTES = [False]


def file_digest(path: Path) -> bytes:
    """The digest of the file's content, read only when it changed since it was last read here."""
    return (_current(path) or _read(path, keep_bytes=_KEEPING_BYTES[0])[0]).digest


def file_bytes(path: Path) -> bytes:
    """The file's content, from the digest pass when it kept it (given up here: a file is parsed once)."""
    known = _current(path)
    if known is None or known.data is None:
        return _read(path, keep_bytes=False)[1]
    data, known.data = known.data, None
    _KEPT[0] -= len(data)
    return data


def parsed(path: Path, settings: str) -> Any | None:
    """What the file gave with these settings in an earlier pass of this command, if the file is unchanged."""
    known = _current(path)
    return known.parsed.get(settings) if known is not None else None


def keep_parsed(path: Path, settings: str, value: Any) -> None:
    if (known := _current(path)) is not None:
        known.parsed[settings] = value


@contextlib.contextmanager
def keeping_bytes() -> Iterator[None]:
    """Within it, a digest pass keeps each file's bytes for the parse pass that follows (within KEEP_BYTES)."""
    _KEEPING_BYTES[0] = True
    try:
        yield
    finally:
        _KEEPING_BYTES[0] = False


def forget_parsed() -> None:
    """Let go of the documents and bytes kept (their pass has come, or will not); digests stay."""
    for known in _READS.values():
        known.parsed.clear()
        known.data = None
    _KEPT[0] = 0


def forget() -> None:
    """Forget every read: a command starts and ends with nothing kept."""
    _READS.clear()
    _KEPT[0] = 0


def _current(path: Path) -> FileRead | None:
    known = _READS.get(path.resolve())
    return known if known is not None and known.stamp == _stamp(path) else None


def _read(path: Path, keep_bytes: bool) -> tuple[FileRead, bytes]:
    """The file read now, remembered (its bytes too, with `keep_bytes`, within KEEP_BYTES); and its bytes."""
    key, stamp = path.resolve(), _stamp(path)
    data = path.read_bytes()
    previous = _READS.pop(key, None)
    if previous is not None and previous.data is not None:
        _KEPT[0] -= len(previous.data)
    kept = data if keep_bytes and _KEPT[0] + len(data) <= KEEP_BYTES else None
    _KEPT[0] += len(kept or b"")
    read = _READS[key] = FileRead(stamp, hashlib.blake2b(data, digest_size=16).digest(), kept)
    return read, data


def _stamp(path: Path) -> tuple[int, ...]:
    status = os.stat(path)
    return status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino, status.st_dev
