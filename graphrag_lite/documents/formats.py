"""Input files' formats: the text of a text file (its encoding checked), the rows of a CSV, JSON, JSON Lines
or Parquet file, the text of a PDF (a `[page N]` line before each page's text), a DOCX (paragraphs, and table
rows with cells joined by " | ") or an HTML file (no scripts, styles or tags). PDF, DOCX and HTML need the
`documents` extra. A file that cannot be used raises UnusableFile with the reason."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any

import pandas as pd

from graphrag_lite.tables import records

TEXT_SUFFIXES = {".txt", ".md"}

TABLE_SUFFIXES = {".csv", ".json", ".jsonl", ".parquet"}

DOCUMENT_SUFFIXES = {".pdf", ".docx", ".html", ".htm"}

SUPPORTED_SUFFIXES = TEXT_SUFFIXES | TABLE_SUFFIXES | DOCUMENT_SUFFIXES

BINARY_PROBE = 8192

DOCUMENTS_EXTRA = "pip install 'graphrag-lite[documents]'"

HTML_HIDDEN = {"script", "style", "noscript", "template"}

_BLOCK_END = object()  # where a block element ends, in html_text's walk

# elements that start a new line in a browser; inline ones (b, a, span) keep their text in the sentence
HTML_BLOCKS = {"address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt", "figcaption", "footer",
               "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "main", "nav", "ol", "p", "pre",
               "section", "table", "td", "th", "title", "tr", "ul"}


@dataclass(frozen=True)
class InputProblem:
    source: str
    reason: str
    limit: str | None = None  # the input setting a file went over (limits.py)

    def __str__(self) -> str:
        return f"{self.source}: {self.reason}"


class UnusableFile(Exception):
    """A file no document can come from; the message says why and what to do."""


def decode(data: bytes, encoding: str) -> str:
    if b"\x00" in data[:BINARY_PROBE]:
        raise UnusableFile("binary file (contains NUL bytes), not a text document")
    codec = "utf-8-sig" if encoding.lower().replace("_", "-") in ("utf-8", "utf8") else encoding
    try:
        return data.decode(codec)
    except UnicodeDecodeError as err:  # (an unknown encoding is refused when the settings load)
        raise UnusableFile(f"not valid {encoding} (byte {err.start}: {err.reason}); "
                            "set input.encoding to the file's encoding") from None


def read_parquet(data: bytes) -> pd.DataFrame:
    try:
        return pd.read_parquet(io.BytesIO(data))
    except Exception as err:  # pyarrow's errors for a damaged file have no common base; any means unusable
        raise UnusableFile(f"not a readable Parquet file: {err}") from None


def extract_document(data: bytes, suffix: str, encoding: str) -> tuple[str, dict[str, Any] | None]:
    """Text (and metadata) of a PDF, DOCX or HTML file."""
    try:
        if suffix == ".pdf":
            return pdf_text(data)
        text = docx_text(data) if suffix == ".docx" else html_text(decode(data, encoding))
    except UnusableFile:
        raise
    except Exception as err:  # the parsers fail in many ways on damaged files; one such file must not stop a run
        raise UnusableFile(f"not a readable {suffix[1:].upper()} file: {err}") from None
    if not text.strip():
        raise UnusableFile("no text in it")
    return text, None


def _missing_library(package: str, kind: str) -> UnusableFile:
    return UnusableFile(f"reading {kind} files needs the {package} library, which is not installed: "
                         f"{DOCUMENTS_EXTRA} (or leave such files out with input.file_pattern)")


def pdf_text(data: bytes) -> tuple[str, dict[str, Any]]:
    """The text of every page after a `[page N]` line, and {"pages": count} as metadata."""
    try:
        from pypdf import PdfReader
    except ImportError:
        raise _missing_library("pypdf", "PDF") from None
    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted and not reader.decrypt(""):  # many PDFs are encrypted with an empty password
        raise UnusableFile("encrypted PDF that needs a password; save a copy without one")
    pages = [(page.extract_text() or "").strip() for page in reader.pages]
    text = "\n\n".join(f"[page {number}]\n{page}" for number, page in enumerate(pages, start=1) if page)
    if not text:
        raise UnusableFile(f"no text in its {len(pages)} pages (scanned images? run OCR on it first)")
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
        from bs4 import BeautifulSoup, CData, NavigableString, Tag
    except ImportError:
        raise _missing_library("beautifulsoup4", "HTML") from None
    # the page is walked once, with a stack, not recursion: a page nested 100,000 deep is read like another, and
    # no element is moved or removed (bs4 finds an element among its siblings one by one: quadratic in a page)
    parts: list[str] = []
    pending: list[Any] = list(reversed(BeautifulSoup(html, "html.parser").contents))
    while pending:
        node = pending.pop()
        if node is _BLOCK_END:
            parts.append("\n")
        elif isinstance(node, Tag) and node.name not in HTML_HIDDEN:
            if node.name in HTML_BLOCKS:
                parts.append("\n")
                pending.append(_BLOCK_END)
            pending.extend(reversed(node.contents))
        elif type(node) in (NavigableString, CData):  # not comments, doctypes or processing instructions
            parts.append(node)
    lines = (" ".join(line.split()) for line in "".join(parts).splitlines())
    return "\n".join(line for line in lines if line)


def parse_rows(text: str, suffix: str, source: str) -> tuple[list[dict[str, Any]], list[InputProblem]]:
    """Rows of a .csv, .json (a list of objects, or one object) or .jsonl file."""
    if suffix == ".csv":
        try:
            frame = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
        except (pd.errors.ParserError, pd.errors.EmptyDataError) as err:
            raise UnusableFile(f"not a readable CSV file: {str(err).strip()}") from None
        return records(frame), []
    if suffix == ".json":
        return _parse_json(text, source)
    return _parse_jsonl(text, source)


def _parse_json(text: str, source: str) -> tuple[list[dict[str, Any]], list[InputProblem]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise UnusableFile(f"not valid JSON (line {err.lineno}: {err.msg})") from None
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
