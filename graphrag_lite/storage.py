"""The output folder: Parquet tables named as in Microsoft GraphRAG, JSON files, all written atomically."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from graphrag_lite.errors import OutputLocked


@contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """Yield a temporary path beside `target`; on success it replaces `target` in one rename, so readers
    (and a run killed half-way) only ever see the old file or the complete new one."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600 files; tables should get the usual mode
    try:
        yield tmp
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def link_or_copy(source: Path, target: Path) -> None:
    """A hard link (no copy; tables are replaced, never rewritten in place, so a later write to either side
    leaves the other as it was); a copy where links are not possible (another file system)."""
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def write_json(path: Path, data: Any) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n", encoding="utf-8")


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def file_digest(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, lambda: hashlib.blake2b(digest_size=16)).hexdigest()


class OutputStore:
    """Tables of one index: `<base_dir>/<name>.parquet`."""

    def __init__(self, base_dir: Path) -> None:
        self.base_dir = base_dir

    def path(self, name: str) -> Path:
        return self.base_dir / f"{name}.parquet"

    def has(self, name: str) -> bool:
        return self.path(name).is_file()

    def read(self, name: str, columns: list[str] | None = None) -> pd.DataFrame:
        """A table, or only `columns` of it (without reading the others from disk)."""
        path = self.path(name)
        if not path.is_file():
            raise FileNotFoundError(f"table '{name}' not found in {self.base_dir}")
        return pd.read_parquet(path, columns=columns)

    def rows(self, name: str) -> int:
        """A table's row count, from the Parquet footer (without reading the table)."""
        return int(pq.ParquetFile(self.path(name)).metadata.num_rows)

    def write(self, name: str, table: pd.DataFrame) -> str:
        """Write a table atomically; returns the digest of the file written."""
        with atomic_path(self.path(name)) as tmp:
            table.to_parquet(tmp, index=False)
        return file_digest(self.path(name))

    def digest(self, name: str) -> str | None:
        return file_digest(self.path(name)) if self.has(name) else None


LOCK_FILE = ".graphrag-lite.lock"


class OutputLock:
    """An exclusive lock on an output folder for the length of a run, so two runs never write the same
    tables (and pay twice for the same calls). The lock file names its holder; the operating system
    releases the lock when the holder exits, even when it is killed."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / LOCK_FILE
        self._handle: Any = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 (held open until release)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown process"
            handle.close()
            raise OutputLocked(f"another graphrag-lite run is writing to {self.path.parent} ({holder}); wait for "
                               "it to finish, or stop it, then run this command again") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}, started {time.strftime('%Y-%m-%d %H:%M:%S')}: {' '.join(sys.argv)[:300]}")
        handle.flush()
        self._handle = handle

    def held_by_another(self) -> bool:
        """Whether a run holds the lock now (a reader's check: the lock is taken and given back at once)."""
        if not self.path.is_file():
            return False
        with open(self.path, "a", encoding="utf-8") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(handle, fcntl.LOCK_UN)
        return False

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()  # closing releases the lock
            self._handle = None
