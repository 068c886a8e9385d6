"""Which entries of the input folder are read, and what is done with symbolic links and special files.

The folder is walked, sorted, without hidden files and folders (.git, .DS_Store: never documents):
- a regular file whose path (relative to base_dir) matches input.file_pattern is listed;
- a symbolic link whose target is inside the input folder is read as a file under its own name (a copy of a
  document there is then reported as a duplicate); a link to a folder inside it is not followed, since that
  folder's files are read under their own path (and a link to a parent folder would loop);
- a link that leads outside the input folder is skipped unless input.follow_outside_links is true: a link can
  pull any file the user can read into an index that may be served to others. Followed, a folder outside is
  walked once, so a loop among folders outside ends;
- a broken link, a link loop, a FIFO, a socket or a device is never opened (reading a FIFO waits forever).
Every entry not read, except hidden ones and files file_pattern leaves out, is named with its reason (an entry
a pattern could match only when it is a file: links to folders, folders that cannot be read, always)."""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from graphrag_lite.config import InputConfig
from graphrag_lite.documents.formats import InputProblem
from graphrag_lite.errors import InputError

OUTSIDE = "set input.follow_outside_links: true to read it"

SPECIAL_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                 (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


@dataclass
class InputListing:
    files: list[Path] = field(default_factory=list)  # as named under base_dir (a link by its own name), sorted
    unmatched: int = 0  # files not matching input.file_pattern
    not_read: list[InputProblem] = field(default_factory=list)  # links and special files, with the reason


@dataclass(frozen=True)
class _Entry:
    kind: str  # "file", "folder" or "skip"
    reason: str = ""
    real: Path | None = None  # a folder's real path
    folder: bool = False  # a skipped link to a folder: named whatever file_pattern says


def walk_input(cfg: InputConfig) -> InputListing:
    """The input folder's files to read, and the entries not read with their reasons."""
    if not cfg.base_dir.is_dir():
        raise InputError(f"input folder {cfg.base_dir} does not exist; put documents there or set input.base_dir")
    root = cfg.base_dir.resolve()
    pattern = re.compile(cfg.file_pattern)  # checked when the settings load
    listing = InputListing()
    walked, folders = {root}, [cfg.base_dir]
    while folders:
        folder = folders.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as err:
            listing.not_read.append(InputProblem(_relative(folder, cfg), f"folder cannot be read: {err.strerror}"))
            continue
        for entry in (e for e in entries if not e.name.startswith(".")):
            path = Path(entry.path)
            relative = _relative(path, cfg)
            found = _entry(path, root, cfg.follow_outside_links)
            if found.kind == "folder":
                if found.real in walked:
                    listing.not_read.append(InputProblem(relative, "a link to a folder already read (a loop)"))
                else:
                    walked.add(found.real or path)
                    folders.append(path)
            elif not found.folder and not pattern.search(relative):
                listing.unmatched += 1
            elif found.kind == "file":
                listing.files.append(path)
            else:
                listing.not_read.append(InputProblem(relative, found.reason))
    listing.files.sort()
    listing.not_read.sort(key=lambda p: p.source)
    return listing


def _relative(path: Path, cfg: InputConfig) -> str:
    return path.relative_to(cfg.base_dir).as_posix() if path != cfg.base_dir else "."


def _entry(path: Path, root: Path, follow_outside: bool) -> _Entry:
    """What an entry is to the walk; a link is judged by its target, once, so a loop is found here."""
    try:
        status = path.lstat()
    except OSError as err:
        return _Entry("skip", f"cannot be read: {err.strerror}")
    if not stat.S_ISLNK(status.st_mode):
        if stat.S_ISDIR(status.st_mode):
            return _Entry("folder", real=path.resolve())
        return _by_mode(status.st_mode, "") or _Entry("file")
    try:
        target = path.resolve(strict=True)
        status = target.stat()
    except FileNotFoundError:
        return _Entry("skip", f"a broken symbolic link (to {os.readlink(path)}, which does not exist)")
    except (RuntimeError, OSError):  # Python 3.11 says RuntimeError for a loop, later versions OSError (ELOOP)
        return _Entry("skip", "a symbolic link loop (it leads back to itself)")
    inside = target.is_relative_to(root)
    if special := _by_mode(status.st_mode, "a link to "):
        return special
    if stat.S_ISDIR(status.st_mode):
        if inside:
            return _Entry("skip", "a link to a folder inside the input folder, not followed: its files are read "
                          "under their own path", folder=True)
        if not follow_outside:
            return _Entry("skip", f"a link to a folder outside the input folder ({target}); {OUTSIDE}", folder=True)
        return _Entry("folder", real=target)
    if not inside and not follow_outside:
        return _Entry("skip", f"a link to a file outside the input folder ({target}); {OUTSIDE}")
    return _Entry("file")


def _by_mode(mode: int, prefix: str) -> _Entry | None:
    """A FIFO, socket or device, never opened; None for a file or folder."""
    for test, kind in SPECIAL_KINDS:
        if test(mode):
            return _Entry("skip", f"{prefix}{kind}, not a regular file: not read")
    return None
