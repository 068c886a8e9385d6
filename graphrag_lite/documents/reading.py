"""Reading the input folder into documents.

Text files (.txt, .md) are one document each, titled by their path relative to the input folder. Tabular
files (.csv, .json, .jsonl, .parquet) give one document per row. PDF, DOCX and HTML files (.pdf, .docx,
.html, .htm) are one document each too, read with the optional libraries of the `documents` extra (pypdf,
python-docx, beautifulsoup4); without them such a file is skipped with the pip command that installs them.
A PDF's text has a line `[page N]` before the text of each page N (pages without text are left out), and its
metadata is `{"pages": <page count>}`, so a text unit shows the page it starts on or crosses into. HTML loses
its scripts, styles and tags; DOCX keeps paragraphs and table rows (cells joined by " | ") in order.

`input.files` gives per-file rules: a file takes the first rule whose pattern matches its path, and the
rule's keys (encoding, text_column, title_column, id_column, metadata) replace the section's for that file.

Which files are read, and what is done with links and special files, is listing.py's. Anything that cannot be
used (unreadable, binary, undecodable, empty, over a limit of the input section (limits.py), a row without
text, a duplicate) is reported with its file and reason and skipped; the run goes on. Every file that gives no
document is named in the stage's summary and first in its problems, then every link or special file not read,
so the terminal never hides a dropped file. A document's id is a hash of its text (or the id column), so it is
stable.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from graphrag_lite.config import GraphRagConfig, InputConfig
from graphrag_lite.documents import file_reads
from graphrag_lite.documents.file_reads import file_bytes, file_digest
from graphrag_lite.documents.formats import (
    DOCUMENT_SUFFIXES,
    SUPPORTED_SUFFIXES,
    TEXT_SUFFIXES,
    InputProblem,
    UnusableFile,
    decode,
    extract_document,
    parse_rows,
    read_parquet,
)
from graphrag_lite.documents.limits import OverLimit, check_size, check_text, too_large
from graphrag_lite.documents.listing import walk_input
from graphrag_lite.errors import InputError
from graphrag_lite.tables import records


@dataclass(frozen=True)
class RawDocument:
    source: str  # file (and row) it came from
    title: str
    text: str
    creation_date: str
    document_id: str | None = None  # from input.id_column
    row: dict[str, Any] | None = None  # the source row, for tabular input
    metadata: dict[str, Any] | None = None  # PDF pages; a row's columns (input.metadata, else all but the text)


@dataclass
class LoadedInput:
    table: pd.DataFrame  # input_documents, numbered 0, 1, 2, ...
    files: list[Path]
    dropped: list[str]  # files that gave no document
    problems: list[InputProblem]  # dropped files first, then the entries not read
    unmatched: int  # files not matching input.file_pattern
    not_read: list[InputProblem] = field(default_factory=list)  # links and special files (listing.py)

    @property
    def over_limits(self) -> int:
        """Files skipped for being over a limit of the input section (limits.py)."""
        return sum(p.limit is not None for p in self.problems)


def read_documents(cfg: InputConfig, track: Callable[[list[Path]], Iterable[Path]],
                   known: frozenset[str] = frozenset(), keep: bool = False) -> LoadedInput:
    """Every input file read, checked and turned into documents; `track` wraps the files in a progress bar.
    Of two files with the same text, one titled as a `known` document (indexed before) is kept: a copy of
    an indexed file is the duplicate, not the original. `keep`: the documents are kept for a later read in
    this command (file_reads.py); without it, what earlier reads kept is let go once used."""
    listing = walk_input(cfg)
    files = listing.files
    raw: list[RawDocument] = []
    problems: list[InputProblem] = []
    origin: dict[str, str] = {}  # document source -> its file, to find the files that gave no document
    for path in track(files):
        documents, file_problems = read_input_file(path, cfg, keep)
        origin.update((doc.source, path.relative_to(cfg.base_dir).as_posix()) for doc in documents)
        raw.extend(documents)
        problems.extend(file_problems)
    if not keep:
        file_reads.forget_parsed()
    raw = sorted(raw, key=lambda doc: doc.title not in known)  # stable: the known ones first
    table, duplicates = build_documents(raw)
    problems.extend(duplicates)
    if table.empty:
        raise InputError(_nothing_usable(cfg, files, listing.not_read + problems))
    duplicated = {p.source for p in duplicates}
    kept = {origin[doc.source] for doc in raw if doc.source not in duplicated}
    dropped = [name for name in (f.relative_to(cfg.base_dir).as_posix() for f in files) if name not in kept]
    problems = dropped_files_first(dropped, problems)
    problems[len(dropped):len(dropped)] = listing.not_read  # after the dropped files, before the rows
    return LoadedInput(table, files, dropped, problems, listing.unmatched, listing.not_read)


def input_digest(config: GraphRagConfig) -> str:
    """Digest of the names and contents of the input files, so an edited document re-runs the pipeline."""
    digest = hashlib.blake2b(digest_size=16)
    listing = walk_input(config.input)
    for path in listing.files:
        digest.update(path.relative_to(config.input.base_dir).as_posix().encode() + b"\0")
        try:
            status = path.stat()
            # a file over the size limit is skipped unread: its size and time tell a change
            digest.update(f"{status.st_size} {status.st_mtime_ns}".encode() if too_large(status.st_size, config.input)
                          else file_digest(path))
        except OSError as err:
            digest.update(str(err).encode())
    digest.update(str(listing.not_read).encode())  # a link or FIFO made a file is a change
    return digest.hexdigest()


def list_input_files(cfg: InputConfig) -> tuple[list[Path], int]:
    """The files to read (listing.py says which, and what is done with links and special files), sorted; and
    how many did not match file_pattern."""
    listing = walk_input(cfg)
    return listing.files, listing.unmatched


def read_input_file(path: Path, cfg: InputConfig, keep: bool = False
                    ) -> tuple[list[RawDocument], list[InputProblem]]:
    """The documents of one file, read with the settings of its input.files rule (or the section's); `keep`:
    for a later pass of this command (file_reads.py)."""
    relative = path.relative_to(cfg.base_dir).as_posix()
    cfg = file_settings(cfg, relative)
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        return [], [InputProblem(relative, f"unsupported file type '{suffix}' (supported: "
                                 f"{', '.join(sorted(SUPPORTED_SUFFIXES))})")]
    settings = cfg.model_dump_json()  # what a file gives depends on its settings
    try:
        check_size(path.stat().st_size, cfg)
        if (known := file_reads.parsed(path, settings)) is not None:
            return known
        data = file_bytes(path)
        created = datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat(timespec="seconds")
    except OSError as err:
        return [], [InputProblem(relative, f"cannot be read: {err.strerror or err}")]
    except OverLimit as err:
        return [], [InputProblem(relative, str(err), limit=err.setting)]
    found = _documents_in(data, suffix, relative, created, cfg)
    if keep:
        file_reads.keep_parsed(path, settings, found)
    return found


def _documents_in(data: bytes, suffix: str, relative: str, created: str, cfg: InputConfig
                  ) -> tuple[list[RawDocument], list[InputProblem]]:
    if not data.strip():
        return [], [InputProblem(relative, "empty file")]
    try:
        if suffix == ".parquet":
            return rows_to_documents(records(read_parquet(data)), relative, created, cfg)
        if suffix in DOCUMENT_SUFFIXES:
            text, metadata = extract_document(data, suffix, cfg.encoding)
            return [RawDocument(source=relative, title=relative, text=text, creation_date=created,
                                metadata=metadata)], []
        text = decode(data, cfg.encoding)
        if not text.strip():
            return [], [InputProblem(relative, "empty file")]
        check_text(text, suffix, cfg)
        if suffix in TEXT_SUFFIXES:
            return [RawDocument(source=relative, title=relative, text=text, creation_date=created)], []
        rows, problems = parse_rows(text, suffix, relative)
        documents, row_problems = rows_to_documents(rows, relative, created, cfg)
        return documents, problems + row_problems
    except OverLimit as err:
        return [], [InputProblem(relative, str(err), limit=err.setting)]
    except UnusableFile as err:
        return [], [InputProblem(relative, str(err))]


def file_settings(cfg: InputConfig, relative: str) -> InputConfig:
    """The section's settings with the keys of the first input.files rule whose pattern matches this path
    (its columns decide the file's metadata too); the section's when no rule does."""
    for rule in cfg.files or ():
        if re.search(rule.pattern, relative):  # patterns were checked when the settings loaded
            return cfg.model_copy(update=rule.model_dump(exclude={"pattern"}, exclude_none=True))
    return cfg


def rows_to_documents(rows: list[dict[str, Any]], source: str, created: str,
                      cfg: InputConfig) -> tuple[list[RawDocument], list[InputProblem]]:
    columns = list(dict.fromkeys(key for row in rows for key in row))
    for role, column in (("text_column", cfg.text_column), ("title_column", cfg.title_column),
                         ("id_column", cfg.id_column)):
        if column is not None and rows and column not in columns:
            close = difflib.get_close_matches(column, [str(c) for c in columns], n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise UnusableFile(f"no column '{column}' (columns: {', '.join(map(str, columns))}); "
                                f"{hint}set input.{role}, or the {role} of the input.files rule for this file")
    documents, problems = [], []
    # as text_column defaults to "text", a "title" column is the title when no title_column is set
    title_column = cfg.title_column or ("title" if "title" in columns and cfg.text_column != "title" else None)
    for index, row in enumerate(rows):
        where = f"{source} row {index + 1}"
        text = row.get(cfg.text_column)
        if not isinstance(text, str) or not text.strip():
            problems.append(InputProblem(where, f"no text in column '{cfg.text_column}'"))
            continue
        document_id = None
        if cfg.id_column is not None:
            document_id = _clean_str(row.get(cfg.id_column))
            if not document_id:
                problems.append(InputProblem(where, f"no value in id column '{cfg.id_column}'"))
                continue
        title = _clean_str(row.get(title_column)) if title_column else ""
        documents.append(RawDocument(source=where, title=title or where, text=text, creation_date=created,
                                     document_id=document_id, row=row,
                                     metadata=row_metadata(row, cfg.metadata, cfg.text_column)))
    return documents, problems


def build_documents(raw: list[RawDocument]) -> tuple[pd.DataFrame, list[InputProblem]]:
    """The input_documents table: stable ids, duplicates reported and dropped, metadata as JSON."""
    seen: dict[str, str] = {}
    rows: list[dict[str, Any]] = []
    problems: list[InputProblem] = []
    for doc in raw:
        doc_id = doc.document_id or text_digest(doc.text)
        if doc_id in seen:
            problems.append(InputProblem(doc.source, f"duplicate of {seen[doc_id]} (same "
                                         f"{'id' if doc.document_id else 'text'}); skipped"))
            continue
        seen[doc_id] = doc.source
        rows.append({
            "id": doc_id,
            "human_readable_id": len(rows),
            "title": doc.title,
            "text": doc.text,
            "creation_date": doc.creation_date,
            "raw_data": _to_json(doc.row),
            "metadata": _to_json(doc.metadata),
        })
    columns = ["id", "human_readable_id", "title", "text", "creation_date", "raw_data", "metadata"]
    return pd.DataFrame(rows, columns=columns), problems


def text_digest(text: str, piece: int = 2**20) -> str:
    """The SHA-256 of the text's UTF-8, encoded a piece at a time: a large document is not copied whole."""
    digest = hashlib.sha256()
    for start in range(0, len(text), piece):
        digest.update(text[start:start + piece].encode("utf-8"))
    return digest.hexdigest()


def row_metadata(row: dict[str, Any], metadata_columns: list[str] | None, text_column: str) -> dict[str, Any]:
    """The columns kept as a row's metadata: `metadata_columns`, or all but the text."""
    keep = metadata_columns if metadata_columns is not None else [c for c in row if c != text_column]
    return {c: row.get(c) for c in keep if c in row}


def dropped_files_first(dropped: list[str], problems: list[InputProblem]) -> list[InputProblem]:
    """One line per file that gave no document, then the rest: the terminal shows only the first few problems."""
    names = set(dropped)
    own = {p.source: p for p in problems if p.source in names}
    head = []
    for name in dropped:
        rows = sum(p.source.startswith(f"{name} ") for p in problems)
        head.append(own.get(name) or InputProblem(name, f"none of its {rows} rows could be used (listed below)"
                                                  if rows else "no rows in it"))
    shown = set(head)
    return head + [p for p in problems if p not in shown]


def _clean_str(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):  # None or NaN
        return ""
    return str(value).strip()


def _to_json(value: dict[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, default=str)


def _nothing_usable(cfg: InputConfig, files: list[Path], problems: list[InputProblem]) -> str:
    if not files and problems:  # links and special files only
        shown = "; ".join(str(p) for p in problems[:3])
        return f"no usable documents in {cfg.base_dir}: {len(problems)} entries were not read ({shown})"
    if not files:
        return (f"no input files in {cfg.base_dir} match input.file_pattern '{cfg.file_pattern}'; "
                "add documents there or change the pattern")
    shown = "; ".join(str(p) for p in problems[:3])
    return f"no usable documents in {cfg.base_dir}: all {len(files)} files were skipped ({shown})"
