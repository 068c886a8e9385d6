"""A local folder kept equal to a prefix on object storage, file by file: a file is sent or fetched only when
its MD5 differs from the object's ETag (what S3 gives for an object written in one part), and a table
version, whose name holds its digest and is never rewritten, only when the other side lacks it. The digests
of the local files are kept in the folder (SUMS, with each file's size and time), so a command does not read
every file again to learn that it has not changed: a file fetched is known by the ETag it came with."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from graphrag_lite.object_storage.s3 import ObjectStore, md5_of

LOCAL_ONLY = (".graphrag-lite.lock",)  # the local run lock: the remote has its own, the lease
SUMS = ".mirror-sums.json"  # relative path -> [size, mtime_ns, MD5 or the ETag it was fetched with]


class Mirror:
    def __init__(self, store: ObjectStore, local: Path) -> None:
        self.store = store
        self.local = local
        self.known: dict[str, str] = {}  # relative path -> ETag of the object, as far as this mirror knows
        self.modified: dict[str, float] = {}  # relative path -> when the object was written (listed objects)
        self._sums: dict[str, tuple[int, int, str]] = _read_sums(local / SUMS)  # see SUMS
        self.sent = self.fetched = self.deleted = 0
        self.bytes_sent = self.bytes_fetched = 0

    def refresh(self, under: str = "") -> dict[str, str]:
        """List the remote (everything, or what is `under` a folder); returns the listing."""
        listed = self.store.listing(under)
        found = {relative: item.etag for relative, item in listed.items()}
        self.modified.update({relative: item.modified for relative, item in listed.items()})
        if not under:
            self.known = dict(found)
        else:
            self.known = {k: v for k, v in self.known.items() if not k.startswith(under)} | found
        return found

    def pull(self, relatives: Iterable[str]) -> int:
        """Fetch the listed objects whose local copy differs (those the remote lacks are left); returns how
        many were fetched."""
        count = 0
        for relative in relatives:
            etag = self.known.get(relative)
            if etag is None or self._local_md5(relative) == etag:
                continue
            self.store.download(relative, self.local / relative)
            if relative in self.modified:  # the object's time, not the fetch's: a document's date stays its own
                os.utime(self.local / relative, (self.modified[relative], self.modified[relative]))
            stat = (self.local / relative).stat()
            self._sums[relative] = (stat.st_size, stat.st_mtime_ns, etag)
            self.fetched, count = self.fetched + 1, count + 1
            self.bytes_fetched += stat.st_size
        self._keep_sums()
        return count

    def pull_everything(self, skip: Iterable[str] = ()) -> int:
        """Make the local folder equal to the remote: fetch what differs, delete local files the remote does
        not hold (but the local lock and temporary files). `skip`: objects not to fetch (the lease)."""
        self.refresh()
        left_out = set(skip)
        fetched = self.pull(r for r in sorted(self.known) if r not in left_out)
        for relative in self._local_files():
            if relative not in self.known:
                (self.local / relative).unlink(missing_ok=True)
                self._sums.pop(relative, None)
        return fetched

    def push(self, relatives: Iterable[str]) -> int:
        """Send the local files whose object differs; returns how many were sent."""
        count = 0
        for relative in relatives:
            path = self.local / relative
            if not path.is_file() or relative in LOCAL_ONLY:
                continue
            if relative in self.known and (_named_by_digest(relative) or self.known[relative] == self._local_md5(
                    relative)):
                continue
            self.known[relative] = self.store.upload(path, relative)
            self.sent, count = self.sent + 1, count + 1
            self.bytes_sent += path.stat().st_size
        self._keep_sums()
        return count

    def push_folder(self, folder: str = "", leave: Iterable[str] = ()) -> int:
        """Send every changed file under a folder of the working copy (all of it: ""), but those in `leave`."""
        left = set(leave)
        return self.push(r for r in self._local_files(folder) if r not in left)

    def prune(self, folder: str) -> int:
        """Delete the objects under `folder` whose local file is gone (versions no kept commit needs)."""
        present = set(self._local_files(folder))
        gone = [r for r in self.known if r.startswith(f"{folder}/") and r not in present]
        for relative in gone:
            self.store.delete(relative)
            self.known.pop(relative, None)
        self.deleted += len(gone)
        return len(gone)

    def figures(self) -> dict[str, int]:
        return {"objects_sent": self.sent, "bytes_sent": self.bytes_sent, "objects_fetched": self.fetched,
                "bytes_fetched": self.bytes_fetched, "objects_deleted": self.deleted}

    def _local_files(self, folder: str = "") -> list[str]:
        root = self.local / folder if folder else self.local
        if not root.is_dir():
            return []
        return sorted(p.relative_to(self.local).as_posix() for p in root.rglob("*")
                      if p.is_file() and not p.name.startswith(".") and p.name not in LOCAL_ONLY)

    def _local_md5(self, relative: str) -> str | None:
        """The MD5 of a local file, remembered while its size and time are unchanged (None: no such file)."""
        path = self.local / relative
        try:
            stat = path.stat()
        except FileNotFoundError:
            return None
        cached = self._sums.get(relative)
        if cached is not None and cached[:2] == (stat.st_size, stat.st_mtime_ns):
            return cached[2]
        digest = md5_of(path)
        self._sums[relative] = (stat.st_size, stat.st_mtime_ns, digest)
        return digest


    def _keep_sums(self) -> None:
        """SUMS written anew (whole, by a rename), for the files still here; a folder that cannot be written
        keeps none (the next command reads the files again)."""
        if not self.local.is_dir():
            return
        kept = {r: list(s) for r, s in self._sums.items() if (self.local / r).is_file()}
        temporary = self.local / f"{SUMS}.{os.getpid()}.tmp"
        with contextlib.suppress(OSError):
            temporary.write_text(json.dumps(kept), encoding="utf-8")
            os.replace(temporary, self.local / SUMS)


def _read_sums(path: Path) -> dict[str, tuple[int, int, str]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {str(r): (int(s[0]), int(s[1]), str(s[2])) for r, s in data.items()}
    except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError):
        return {}


def _named_by_digest(relative: str) -> bool:
    """A table version (`tables/<name>.<digest>.parquet`): its name says its content."""
    return relative.startswith("tables/") and relative.count(".") >= 2
