"""The output folder: Parquet tables named as in Microsoft GraphRAG, JSON files, all written atomically."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import io
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from graphrag_lite.errors import IndexDamaged, OutputLocked, OutputUnwritable

T = TypeVar("T")

# What the machine, not the program, is short of when a write fails: said as what to do, not as a crash.
UNWRITABLE = {errno.ENOSPC: "free space on its disk", errno.EDQUOT: "free space within your disk quota",
              errno.EROFS: "make its file system writable", errno.EACCES: "make it writable",
              errno.EPERM: "make it writable", errno.EFBIG: "raise the file size limit (ulimit -f)"}


@contextmanager
def writing(target: Path) -> Iterator[None]:
    """Turn a write that fails for want of space or permission into OutputUnwritable, naming the file."""
    try:
        yield
    except OSError as err:
        if err.errno not in UNWRITABLE:
            raise
        raise OutputUnwritable(f"cannot write {target} ({err.strerror}): {UNWRITABLE[err.errno]}, then run the same "
                               "command again; the index committed before is unchanged and finished stages are "
                               "kept") from None


@contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """Yield a temporary path beside `target`; on success it replaces `target` in one rename, so readers
    (and a run killed half-way) only ever see the old file or the complete new one."""
    with writing(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        os.close(fd)
    tmp = Path(tmp_name)
    try:
        with writing(target):
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600 files; tables should get the usual mode
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


TABLES_DIR = "tables"  # the table versions: <name>.<digest>.parquet, never rewritten


class OutputStore:
    """Tables of one index. A versioned store (`versions`: table name -> digest of the version it sees) reads
    `<base_dir>/tables/<name>.<digest>.parquet`, checks each file against its digest as it reads it (a damaged
    table is reported, never served) and writes a new version beside the others. A store without versions
    reads `<base_dir>/<name>.parquet` as it is (an index built before versioned commits, or by Microsoft
    GraphRAG): what it reads cannot be checked."""

    def __init__(self, base_dir: Path, versions: dict[str, str] | None = None) -> None:
        self.base_dir = base_dir
        self.versions = versions

    def path(self, name: str) -> Path:
        if self.versions is None:
            return self.base_dir / f"{name}.parquet"
        versioned = self.base_dir / TABLES_DIR / f"{name}.{self.versions.get(name)}.parquet"
        legacy = self.base_dir / f"{name}.parquet"  # a table written before versioned commits, checked by digest
        return legacy if not versioned.is_file() and legacy.is_file() else versioned

    def has(self, name: str) -> bool:
        """Whether the store has the table (a versioned store: whether it names a version of it; a file that
        is then missing is damage, reported when it is read)."""
        return name in self.versions if self.versions is not None else self.path(name).is_file()

    def read(self, name: str, columns: list[str] | None = None) -> pd.DataFrame:
        """A table, or only `columns` of it; IndexDamaged when its file is missing, does not match its digest
        or cannot be read as Parquet."""
        return self._parsed(name, lambda data: pd.read_parquet(data, columns=columns))

    def read_arrow(self, name: str, columns: list[str] | None = None) -> pa.Table:
        """`read` as an Arrow table: large text columns stay in Arrow buffers, not one Python string per row."""
        return self._parsed(name, lambda data: pq.read_table(data, columns=columns))

    def _parsed(self, name: str, parse: Callable[[io.BytesIO], T]) -> T:
        path = self.path(name)
        if not self.has(name):
            raise FileNotFoundError(f"table '{name}' not found in {self.base_dir}")
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise IndexDamaged(f"{path}: the file of table '{name}' is missing", path) from None
        if self.versions is not None and _digest(data) != self.versions[name]:
            raise IndexDamaged(f"{path}: table '{name}' does not match the digest the index recorded for it "
                               "(changed or damaged on disk)", path)
        try:
            return parse(io.BytesIO(data))
        except (OSError, ValueError, KeyError, IndexError, TypeError) as err:  # pyarrow's errors are OSError and
            # ValueError subclasses; a footer that parses but lies gives the others
            raise IndexDamaged(f"{path}: table '{name}' cannot be read ({type(err).__name__}: "
                               f"{str(err)[:200]})", path) from None

    def rows(self, name: str) -> int:
        """A table's row count, from the Parquet footer (without reading the table)."""
        return int(pq.ParquetFile(self.path(name)).metadata.num_rows)

    def write(self, name: str, table: pd.DataFrame) -> str:
        """Write a new version of a table beside the others (a file that appears whole, by one rename) and
        see it from now on; returns its digest. An unversioned store becomes versioned with its first write."""
        folder = self.base_dir / TABLES_DIR
        with writing(folder):
            folder.mkdir(parents=True, exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
            os.close(fd)
        tmp = Path(tmp_name)
        try:
            with writing(folder / f"{name}.parquet"):
                table.to_parquet(tmp, index=False)
                with open(tmp, "rb") as handle:
                    os.fsync(handle.fileno())
            digest = file_digest(tmp)
            target = folder / f"{name}.{digest}.parquet"
            if not _intact(target, digest):  # the same version already there (a re-run) is kept
                os.chmod(tmp, 0o666 & ~_umask())
                os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        self.versions = {**(self.versions or {}), name: digest}
        return digest

    def digest(self, name: str) -> str | None:
        """The digest of the table's file as it is on disk (None when the store has no such table or its
        file is missing)."""
        path = self.path(name)
        return file_digest(path) if self.has(name) and path.is_file() else None

    def files(self) -> set[Path]:
        """The files of the versions this store sees."""
        return {self.path(name) for name in (self.versions or {})}


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _intact(path: Path, digest: str) -> bool:
    return path.is_file() and file_digest(path) == digest


def read_record(path: Path) -> Any:
    """A JSON record of the output folder; IndexDamaged (naming the file) when it cannot be read."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise IndexDamaged(f"{path}: not a readable JSON record ({type(err).__name__}: {str(err)[:160]})",
                           path) from None


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
        # the command's name only: its arguments may hold a key (--set models.x.api_key=...)
        handle.write(f"pid {os.getpid()}, started {time.strftime('%Y-%m-%d %H:%M:%S')}: {command_name()}")
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


def command_name() -> str:
    """"graphrag-lite index": the program and its subcommand, never the options that follow."""
    words = [Path(sys.argv[0]).name, *sys.argv[1:2]] if sys.argv else ["graphrag-lite"]
    return " ".join(w for w in words if not w.startswith("-"))[:80]
