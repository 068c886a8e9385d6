"""Stage load_documents: read the input folder into the `input_documents` table.

Text files (.txt, .md) are one document each, titled by their path relative to the input folder. Tabular
files (.csv, .json, .jsonl, .parquet) give one document per row. Anything that cannot be used (unreadable,
binary, undecodable, empty, a row without text, a duplicate) is reported with its file and reason and
skipped; the run goes on. A document's id is a hash of its text (or the id column), so it is stable.
"""

from __future__ import annotations

import difflib
import hashlib
import io
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from graphrag_lite.config import GraphRagConfig, InputConfig
from graphrag_lite.errors import InputError
from graphrag_lite.pipeline import Stage, StageContext, StageResult
from graphrag_lite.tables import records

TEXT_SUFFIXES = {".txt", ".md"}
TABLE_SUFFIXES = {".csv", ".json", ".jsonl", ".parquet"}
BINARY_PROBE = 8192


@dataclass(frozen=True)
class RawDocument:
    source: str  # file (and row) it came from
    title: str
    text: str
    creation_date: str
    document_id: str | None = None  # from input.id_column
    row: dict[str, Any] | None = None  # the source row, for tabular input


@dataclass(frozen=True)
class InputProblem:
    source: str
    reason: str

    def __str__(self) -> str:
        return f"{self.source}: {self.reason}"


# ---------------------------------------------------------------- I/O wrapper


def run(ctx: StageContext) -> StageResult:
    cfg = ctx.config.input
    files, unmatched = list_input_files(cfg)
    raw: list[RawDocument] = []
    problems: list[InputProblem] = []
    for path in ctx.track(files, total=len(files), what="files"):
        documents, file_problems = read_input_file(path, cfg)
        raw.extend(documents)
        problems.extend(file_problems)
    table, duplicates = build_documents(raw, cfg.metadata, cfg.text_column)
    problems.extend(duplicates)
    if table.empty:
        raise InputError(_nothing_usable(cfg, files, problems))
    summary = f"{len(files)} files -> {len(table)} documents"
    if problems:
        summary += f", {len(problems)} skipped (listed below and in stats.json)"
    if unmatched:
        summary += f"; {unmatched} files ignored (not matching input.file_pattern)"
    return StageResult(tables={"input_documents": table}, summary=summary,
                       problems=[str(p) for p in problems],
                       details={"files": len(files), "files_not_matching_pattern": unmatched})


def input_digest(config: GraphRagConfig) -> str:
    """Digest of the names and contents of the input files, so an edited document re-runs the pipeline."""
    digest = hashlib.blake2b(digest_size=16)
    files, _ = list_input_files(config.input)
    for path in files:
        digest.update(path.relative_to(config.input.base_dir).as_posix().encode() + b"\0")
        try:
            digest.update(hashlib.blake2b(path.read_bytes(), digest_size=16).digest())
        except OSError as err:
            digest.update(str(err).encode())
    return digest.hexdigest()


def list_input_files(cfg: InputConfig) -> tuple[list[Path], int]:
    """Files under base_dir whose relative path matches file_pattern, sorted; and how many did not match."""
    if not cfg.base_dir.is_dir():
        raise InputError(f"input folder {cfg.base_dir} does not exist; put documents there or set input.base_dir")
    pattern = re.compile(cfg.file_pattern)  # checked when the settings load
    matched, unmatched = [], 0
    for path in sorted(p for p in cfg.base_dir.rglob("*") if p.is_file()):
        relative = path.relative_to(cfg.base_dir).as_posix()
        if any(part.startswith(".") for part in Path(relative).parts):
            continue  # hidden files and folders (.git, .DS_Store) are never documents
        if pattern.search(relative):
            matched.append(path)
        else:
            unmatched += 1
    return matched, unmatched


def read_input_file(path: Path, cfg: InputConfig) -> tuple[list[RawDocument], list[InputProblem]]:
    relative = path.relative_to(cfg.base_dir).as_posix()
    suffix = path.suffix.lower()
    if suffix not in TEXT_SUFFIXES | TABLE_SUFFIXES:
        return [], [InputProblem(relative, f"unsupported file type '{suffix}' (supported: "
                                 f"{', '.join(sorted(TEXT_SUFFIXES | TABLE_SUFFIXES))})")]
    try:
        data = path.read_bytes()
        created = datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat(timespec="seconds")
    except OSError as err:
        return [], [InputProblem(relative, f"cannot be read: {err.strerror or err}")]
    try:
        if suffix == ".parquet":
            frame = pd.read_parquet(io.BytesIO(data))
            return rows_to_documents(records(frame), relative, created, cfg)
        text = decode(data, cfg.encoding)
        if not text.strip():
            return [], [InputProblem(relative, "empty file")]
        if suffix in TEXT_SUFFIXES:
            return [RawDocument(source=relative, title=relative, text=text, creation_date=created)], []
        rows, problems = parse_rows(text, suffix, relative)
        documents, row_problems = rows_to_documents(rows, relative, created, cfg)
        return documents, problems + row_problems
    except _UnusableFile as err:
        return [], [InputProblem(relative, str(err))]


# ---------------------------------------------------------------- pure core


class _UnusableFile(Exception):
    pass


def decode(data: bytes, encoding: str) -> str:
    if b"\x00" in data[:BINARY_PROBE]:
        raise _UnusableFile("binary file (contains NUL bytes), not a text document")
    codec = "utf-8-sig" if encoding.lower().replace("_", "-") in ("utf-8", "utf8") else encoding
    try:
        return data.decode(codec)
    except UnicodeDecodeError as err:  # (an unknown encoding is refused when the settings load)
        raise _UnusableFile(f"not valid {encoding} (byte {err.start}: {err.reason}); "
                            "set input.encoding to the file's encoding") from None


def parse_rows(text: str, suffix: str, source: str) -> tuple[list[dict[str, Any]], list[InputProblem]]:
    """Rows of a .csv, .json (a list of objects, or one object) or .jsonl file."""
    if suffix == ".csv":
        try:
            frame = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
        except (pd.errors.ParserError, pd.errors.EmptyDataError) as err:
            raise _UnusableFile(f"not a readable CSV file: {str(err).strip()}") from None
        return records(frame), []
    if suffix == ".json":
        return _parse_json(text, source)
    return _parse_jsonl(text, source)


def _parse_json(text: str, source: str) -> tuple[list[dict[str, Any]], list[InputProblem]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise _UnusableFile(f"not valid JSON (line {err.lineno}: {err.msg})") from None
    items = data if isinstance(data, list) else [data]
    problems = [InputProblem(f"{source} item {i}", "not a JSON object") for i, item in enumerate(items)
                if not isinstance(item, dict)]
    return [item for item in items if isinstance(item, dict)], problems


def _parse_jsonl(text: str, source: str) -> tuple[list[dict[str, Any]], list[InputProblem]]:
    rows: list[dict[str, Any]] = []
    problems: list[InputProblem] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            problems.append(InputProblem(f"{source} line {number}", f"not valid JSON ({err.msg})"))
            continue
        if isinstance(row, dict):
            rows.append(row)
        else:
            problems.append(InputProblem(f"{source} line {number}", "not a JSON object"))
    return rows, problems


def rows_to_documents(rows: list[dict[str, Any]], source: str, created: str,
                      cfg: InputConfig) -> tuple[list[RawDocument], list[InputProblem]]:
    columns = list(dict.fromkeys(key for row in rows for key in row))
    for role, column in (("text_column", cfg.text_column), ("title_column", cfg.title_column),
                         ("id_column", cfg.id_column)):
        if column is not None and rows and column not in columns:
            close = difflib.get_close_matches(column, [str(c) for c in columns], n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise _UnusableFile(f"no column '{column}' (columns: {', '.join(map(str, columns))}); "
                                f"{hint}set input.{role}")
    documents, problems = [], []
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
        title = _clean_str(row.get(cfg.title_column)) if cfg.title_column else ""
        documents.append(RawDocument(source=where, title=title or where, text=text, creation_date=created,
                                     document_id=document_id, row=row))
    return documents, problems


def build_documents(raw: list[RawDocument], metadata_columns: list[str] | None,
                    text_column: str) -> tuple[pd.DataFrame, list[InputProblem]]:
    """The input_documents table: stable ids, duplicates reported and dropped, metadata as JSON."""
    seen: dict[str, str] = {}
    rows: list[dict[str, Any]] = []
    problems: list[InputProblem] = []
    for doc in raw:
        doc_id = doc.document_id or hashlib.sha256(doc.text.encode("utf-8")).hexdigest()
        if doc_id in seen:
            problems.append(InputProblem(doc.source, f"duplicate of {seen[doc_id]} (same "
                                         f"{'id' if doc.document_id else 'text'}); skipped"))
            continue
        seen[doc_id] = doc.source
        metadata = None
        if doc.row is not None:
            keep = metadata_columns if metadata_columns is not None else [c for c in doc.row if c != text_column]
            metadata = {c: doc.row.get(c) for c in keep if c in doc.row}
        rows.append({
            "id": doc_id,
            "human_readable_id": len(rows),
            "title": doc.title,
            "text": doc.text,
            "creation_date": doc.creation_date,
            "raw_data": _to_json(doc.row),
            "metadata": _to_json(metadata),
        })
    columns = ["id", "human_readable_id", "title", "text", "creation_date", "raw_data", "metadata"]
    return pd.DataFrame(rows, columns=columns), problems


def _clean_str(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):  # None or NaN
        return ""
    return str(value).strip()


def _to_json(value: dict[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, default=str)


def _nothing_usable(cfg: InputConfig, files: list[Path], problems: list[InputProblem]) -> str:
    if not files:
        return (f"no input files in {cfg.base_dir} match input.file_pattern {cfg.file_pattern!r}; "
                "add documents there or change the pattern")
    shown = "; ".join(str(p) for p in problems[:3])
    return f"no usable documents in {cfg.base_dir}: all {len(files)} files were skipped ({shown})"


STAGE = Stage(
    name="load_documents",
    description="read the input folder into documents, reporting and skipping what cannot be used",
    reads=(),
    writes=("input_documents",),
    config_sections=("input",),
    run=run,
    external_digest=input_digest,
)
