"""Each input file read once per command. What a read gave is kept while the file's size and modification
time stay the same: its digest, its bytes until they are parsed (within KEEP_BYTES in all), and its documents
while a later pass of the same command needs them. An update lists what changed before any stage runs (a
digest pass, then a parse pass when something did), the runner digests the folder to decide whether
load_documents runs, and the stage parses it: they share one read of each file."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KEEP_BYTES = 256 * 2**20  # bytes kept between a file's digest and its parse; past this, a file is read again


@dataclass
class FileRead:
    stamp: tuple[int, int]  # size and modification time (ns) when read
    digest: bytes
    data: bytes | None = None  # kept until parsed
    parsed: dict[str, Any] = field(default_factory=dict)  # the file's settings (JSON) -> what they gave


_READS: dict[Path, FileRead] = {}
_KEPT = [0]  # bytes kept in all


def file_digest(path: Path) -> bytes:
    """The digest of the file's content, read only when it changed since it was last read here."""
    return (_current(path) or _read(path, keep_bytes=True)[0]).digest


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


def forget_parsed() -> None:
    """Drop the documents and bytes kept (the stage has read the folder); digests stay."""
    for known in _READS.values():
        known.parsed.clear()
        known.data = None
    _KEPT[0] = 0


def _current(path: Path) -> FileRead | None:
    known = _READS.get(path)
    return known if known is not None and known.stamp == _stamp(path) else None


def _read(path: Path, keep_bytes: bool) -> tuple[FileRead, bytes]:
    """The file read now, remembered (its bytes too, with `keep_bytes`, within KEEP_BYTES); and its bytes."""
    stamp = _stamp(path)
    data = path.read_bytes()
    previous = _READS.pop(path, None)
    if previous is not None and previous.data is not None:
        _KEPT[0] -= len(previous.data)
    kept = data if keep_bytes and _KEPT[0] + len(data) <= KEEP_BYTES else None
    _KEPT[0] += len(kept or b"")
    read = _READS[path] = FileRead(stamp, hashlib.blake2b(data, digest_size=16).digest(), kept)
    return read, data


def _stamp(path: Path) -> tuple[int, int]:
    status = path.stat()
    return status.st_size, status.st_mtime_ns
