"""Stage load_documents: read the input folder into the `input_documents` table.

Text files (.txt, .md) are one document each, titled by their path relative to the input folder. Tabular
files (.csv, .json, .jsonl, .parquet) give one document per row. PDF, DOCX and HTML files (.pdf, .docx,
.html, .htm) are one document each too, read with the optional libraries of the `documents` extra (pypdf,
python-docx, beautifulsoup4); without them such a file is skipped with the pip command that installs them.
A PDF's text has a line `[page N]` before the text of each page N (pages without text are left out), and its
metadata is `{"pages": <page count>}`, so a text unit shows the page it starts on or crosses into. HTML loses
its scripts, styles and tags; DOCX keeps paragraphs and table rows (cells joined by " | ") in order.

`input.files` gives per-file rules: a file takes the first rule whose pattern matches its path, and the
rule's keys (encoding, text_column, title_column, id_column, metadata) replace the section's for that file.

Anything that cannot be used (unreadable, binary, undecodable, empty, a row without text, a duplicate) is
reported with its file and reason and skipped; the run goes on. Every file that gives no document is named in
the stage's summary and first in its problems, so the terminal never hides a dropped file. A document's id is
a hash of its text (or the id column), so it is stable.
"""

from __future__ import annotations

import difflib
import hashlib
import io
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from graphrag_lite.config import GraphRagConfig, InputConfig
from graphrag_lite.errors import InputError
from graphrag_lite.ids import kept_numbers
from graphrag_lite.pipeline.contract import Stage, StageContext, StageResult
from graphrag_lite.pipeline.fingerprints import stage_fingerprint
from graphrag_lite.pipeline.records import read_state
from graphrag_lite.storage import OutputStore
from graphrag_lite.tables import records

TEXT_SUFFIXES = {".txt", ".md"}
TABLE_SUFFIXES = {".csv", ".json", ".jsonl", ".parquet"}
DOCUMENT_SUFFIXES = {".pdf", ".docx", ".html", ".htm"}
SUPPORTED_SUFFIXES = TEXT_SUFFIXES | TABLE_SUFFIXES | DOCUMENT_SUFFIXES
BINARY_PROBE = 8192
DOCUMENTS_EXTRA = "pip install 'graphrag-lite[documents]'"
# elements that start a new line in a browser; inline ones (b, a, span) keep their text in the sentence
HTML_BLOCKS = ["address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt", "figcaption", "footer",
               "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "main", "nav", "ol", "p", "pre",
               "section", "table", "td", "th", "title", "tr", "ul"]


@dataclass(frozen=True)
class RawDocument:
    source: str  # file (and row) it came from
    title: str
    text: str
    creation_date: str
    document_id: str | None = None  # from input.id_column
    row: dict[str, Any] | None = None  # the source row, for tabular input
    metadata: dict[str, Any] | None = None  # PDF pages; a row's columns (input.metadata, else all but the text)


@dataclass(frozen=True)
class InputProblem:
    source: str
    reason: str

    def __str__(self) -> str:
        return f"{self.source}: {self.reason}"


# ---------------------------------------------------------------- I/O wrapper


def run(ctx: StageContext) -> StageResult:
    cfg = ctx.config.input
    # the last run's documents by id, number and title only (and texts when ids are given, to tell an edit):
    # their texts are not needed to tell what changed
    previous = ctx.previous("input_documents", ["id", "human_readable_id", "title", *_texts_if_ids_given(cfg)])
    loaded = read_documents(cfg, lambda files: ctx.track(files, total=len(files), what="files"),
                            known=frozenset(previous["title"]) if previous is not None else frozenset())
    table, files, dropped, problems = loaded.table, loaded.files, loaded.dropped, loaded.problems
    summary = f"{len(files)} files -> {len(table)} documents"
    if dropped:
        summary += f"; {len(dropped)} files dropped: {', '.join(dropped)} (why below and in stats.json)"
    if skipped := len(problems) - len(dropped):
        summary += f"; {skipped} rows skipped (listed in stats.json)"
    if loaded.unmatched:
        summary += f"; {loaded.unmatched} files ignored (not matching input.file_pattern)"
    if previous is not None:
        table["human_readable_id"] = kept_numbers(table["id"], document_numbers(previous, table))
        table = table.sort_values("human_readable_id", kind="stable").reset_index(drop=True)
    changes = document_changes(previous, table)
    if changes:
        summary += "; since the last run: " + describe_changes(changes)
    return StageResult(tables={"input_documents": table}, summary=summary,
                       problems=[str(p) for p in problems],
                       details={"files": len(files), "files_dropped": len(dropped),
                                "files_not_matching_pattern": loaded.unmatched, "documents_since_last_run": changes})


@dataclass
class LoadedInput:
    table: pd.DataFrame  # input_documents, numbered 0, 1, 2, ...
    files: list[Path]
    dropped: list[str]  # files that gave no document
    problems: list[InputProblem]  # dropped files first
    unmatched: int  # files not matching input.file_pattern


def read_documents(cfg: InputConfig, track: Callable[[list[Path]], Iterable[Path]],
                   known: frozenset[str] = frozenset()) -> LoadedInput:
    """Every input file read, checked and turned into documents; `track` wraps the files in a progress bar.
    Of two files with the same text, one titled as a `known` document (indexed before) is kept: a copy of
    an indexed file is the duplicate, not the original."""
    files, unmatched = list_input_files(cfg)
    raw: list[RawDocument] = []
    problems: list[InputProblem] = []
    origin: dict[str, str] = {}  # document source -> its file, to find the files that gave no document
    for path in track(files):
        documents, file_problems = read_input_file(path, cfg)
        origin.update((doc.source, path.relative_to(cfg.base_dir).as_posix()) for doc in documents)
        raw.extend(documents)
        problems.extend(file_problems)
    raw = sorted(raw, key=lambda doc: doc.title not in known)  # stable: the known ones first
    table, duplicates = build_documents(raw)
    problems.extend(duplicates)
    if table.empty:
        raise InputError(_nothing_usable(cfg, files, problems))
    duplicated = {p.source for p in duplicates}
    kept = {origin[doc.source] for doc in raw if doc.source not in duplicated}
    dropped = [name for name in (f.relative_to(cfg.base_dir).as_posix() for f in files) if name not in kept]
    return LoadedInput(table, files, dropped, dropped_files_first(dropped, problems), unmatched)


def changes_since_last_run(config: GraphRagConfig) -> dict[str, list[str]] | None:
    """What `update` will find, before any stage runs: the input's documents against the last run's (None
    when there is no index yet)."""
    store = OutputStore(config.output.base_dir)
    if not store.has("input_documents"):
        return None
    last = read_state(config.output.base_dir).get(STAGE.name, {})
    if last.get("fingerprint") == stage_fingerprint(STAGE, config, {}):
        return {kind: [] for kind in CHANGE_KINDS}  # the same files, bytes and settings: nothing to parse again
    previous = store.read("input_documents", ["id", "title", *_texts_if_ids_given(config.input)])
    try:
        loaded = read_documents(config.input, iter, frozenset(previous["title"]))
    except InputError as err:
        raise InputError(f"{err}. The index in {config.output.base_dir} is left as it was (it still answers from "
                         "its documents); to start over, delete that folder") from None
    return document_changes(previous, loaded.table)


def _texts_if_ids_given(cfg: InputConfig) -> list[str]:
    """["text"] when documents may have ids from a column, which then do not change with their text."""
    return ["text"] if cfg.id_column or any(rule.id_column for rule in cfg.files or []) else []


def describe_changes(changes: dict[str, list[str]], shown: int = 3) -> str:
    """'1 added (a.txt), 0 changed, ...': the counts, and the first few titles of each kind."""
    return ", ".join(f"{len(names)} {kind}" + (f" ({', '.join(names[:shown])}{', ...' if len(names) > shown else ''})"
                                               if names else "") for kind, names in changes.items())


CHANGE_KINDS = ("added", "changed", "deleted", "renamed")


def document_numbers(previous: pd.DataFrame, current: pd.DataFrame) -> dict[str, int]:
    """The last run's numbers by document id, and an edited document's (new id, same title) by its title."""
    numbers = dict(zip(previous["id"], previous["human_readable_id"], strict=True))
    present = set(current["id"])
    gone = {title: number for doc_id, title, number in zip(previous["id"], previous["title"],
                                                           previous["human_readable_id"], strict=True)
            if doc_id not in present}
    for doc_id, title in zip(current["id"], current["title"], strict=True):
        if doc_id not in numbers and title in gone:
            numbers[doc_id] = gone.pop(title)  # once: two documents may share a title (a title column)
    return numbers


def document_changes(previous: pd.DataFrame | None, current: pd.DataFrame) -> dict[str, list[str]]:
    """What changed since the last run, documents being known by content (id, a hash) and by title (path):
    added, changed (a title whose content is new), deleted, renamed (a content under a new title); {} on a
    first run."""
    if previous is None:
        return {}
    old = dict(zip(previous["id"], previous["title"], strict=True))
    new = dict(zip(current["id"], current["title"], strict=True))
    old_titles, new_titles = set(old.values()), set(new.values())
    edited = set()  # ids from a column stay when the text changes: compare the texts (read only then)
    if "text" in previous:
        old_texts = dict(zip(previous["id"], previous["text"], strict=True))
        edited = {t for i, t, text in zip(current["id"], current["title"], current["text"], strict=True)
                  if i in old_texts and old_texts[i] != text}
    return {"added": sorted(t for i, t in new.items() if i not in old and t not in old_titles),
            "changed": sorted({t for i, t in new.items() if i not in old and t in old_titles} | edited),
            "deleted": sorted(t for i, t in old.items() if i not in new and t not in new_titles),
            "renamed": sorted(f"{old[i]} -> {t}" for i, t in new.items() if i in old and old[i] != t)}


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
    """The documents of one file, read with the settings of its input.files rule (or the section's)."""
    relative = path.relative_to(cfg.base_dir).as_posix()
    cfg = file_settings(cfg, relative)
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        return [], [InputProblem(relative, f"unsupported file type '{suffix}' (supported: "
                                 f"{', '.join(sorted(SUPPORTED_SUFFIXES))})")]
    try:
        data = path.read_bytes()
        created = datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat(timespec="seconds")
    except OSError as err:
        return [], [InputProblem(relative, f"cannot be read: {err.strerror or err}")]
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


def file_settings(cfg: InputConfig, relative: str) -> InputConfig:
    """The section's settings with the keys of the first input.files rule whose pattern matches this path
    (its columns decide the file's metadata too); the section's when no rule does."""
    for rule in cfg.files or ():
        if re.search(rule.pattern, relative):  # patterns were checked when the settings loaded
            return cfg.model_copy(update=rule.model_dump(exclude={"pattern"}, exclude_none=True))
    return cfg


def decode(data: bytes, encoding: str) -> str:
    if b"\x00" in data[:BINARY_PROBE]:
        raise _UnusableFile("binary file (contains NUL bytes), not a text document")
    codec = "utf-8-sig" if encoding.lower().replace("_", "-") in ("utf-8", "utf8") else encoding
    try:
        return data.decode(codec)
    except UnicodeDecodeError as err:  # (an unknown encoding is refused when the settings load)
        raise _UnusableFile(f"not valid {encoding} (byte {err.start}: {err.reason}); "
                            "set input.encoding to the file's encoding") from None


def read_parquet(data: bytes) -> pd.DataFrame:
    try:
        return pd.read_parquet(io.BytesIO(data))
    except Exception as err:  # pyarrow's errors for a damaged file have no common base; any means unusable
        raise _UnusableFile(f"not a readable Parquet file: {err}") from None


def extract_document(data: bytes, suffix: str, encoding: str) -> tuple[str, dict[str, Any] | None]:
    """Text (and metadata) of a PDF, DOCX or HTML file."""
    try:
        if suffix == ".pdf":
            return pdf_text(data)
        text = docx_text(data) if suffix == ".docx" else html_text(decode(data, encoding))
    except _UnusableFile:
        raise
    except Exception as err:  # the parsers fail in many ways on damaged files; one such file must not stop a run
        raise _UnusableFile(f"not a readable {suffix[1:].upper()} file: {err}") from None
    if not text.strip():
        raise _UnusableFile("no text in it")
    return text, None


def _missing_library(package: str, kind: str) -> _UnusableFile:
    return _UnusableFile(f"reading {kind} files needs the {package} library, which is not installed: "
                         f"{DOCUMENTS_EXTRA} (or leave such files out with input.file_pattern)")


def pdf_text(data: bytes) -> tuple[str, dict[str, Any]]:
    """The text of every page after a `[page N]` line, and {"pages": count} as metadata."""
    try:
        from pypdf import PdfReader
    except ImportError:
        raise _missing_library("pypdf", "PDF") from None
    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted and not reader.decrypt(""):  # many PDFs are encrypted with an empty password
        raise _UnusableFile("encrypted PDF that needs a password; save a copy without one")
    pages = [(page.extract_text() or "").strip() for page in reader.pages]
    text = "\n\n".join(f"[page {number}]\n{page}" for number, page in enumerate(pages, start=1) if page)
    if not text:
        raise _UnusableFile(f"no text in its {len(pages)} pages (scanned images? run OCR on it first)")
    return text, {"pages": len(pages)}


def docx_text(data: bytes) -> str:
    """Paragraphs and table rows (cells joined by " | "), in document order, one a line."""
    try:
        from docx import Document
        from docx.table import Table
    except ImportError:
        raise _missing_library("python-docx", "DOCX") from None
    lines = []
    for block in Document(io.BytesIO(data)).iter_inner_content():
        if isinstance(block, Table):
            lines += [" | ".join(cell.text.strip() for cell in row.cells) for row in block.rows]
        else:
            lines.append(block.text.strip())
    return "\n".join(line for line in lines if line)


def html_text(html: str) -> str:
    """The visible text: no scripts, styles or tags; one line per paragraph, heading, list item or cell."""
    try:
        from bs4 import BeautifulSoup
    except ImportError:
        raise _missing_library("beautifulsoup4", "HTML") from None
    soup = BeautifulSoup(html, "html.parser")
    for hidden in soup(["script", "style", "noscript", "template"]):
        hidden.decompose()
    for block in soup(HTML_BLOCKS):
        block.insert_before("\n")
        block.insert_after("\n")
    lines = (" ".join(line.split()) for line in soup.get_text().splitlines())
    return "\n".join(line for line in lines if line)


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
                                f"{hint}set input.{role}, or the {role} of the input.files rule for this file")
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
                                     document_id=document_id, row=row,
                                     metadata=row_metadata(row, cfg.metadata, cfg.text_column)))
    return documents, problems


def build_documents(raw: list[RawDocument]) -> tuple[pd.DataFrame, list[InputProblem]]:
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
    if not files:
        return (f"no input files in {cfg.base_dir} match input.file_pattern '{cfg.file_pattern}'; "
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
