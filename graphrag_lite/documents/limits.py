"""Per-file limits of the input section, each keeping one file from stopping or swamping a whole run:
- input.max_file_mb: a run holds a document in memory several times over (its bytes, its text, the tables that
  carry it), so a larger file is skipped before it is read;
- input.max_nesting_depth: Python's JSON reader recurses once per level of a JSON or JSON Lines file, and a
  file nested deeper than the interpreter's stack stops the process, not just the file;
- input.max_line_length: a line longer than that in a text, Markdown, CSV or JSON Lines file is data (base64,
  a dump without line breaks), not prose. JSON and HTML, often minified on one line, are not checked.
A file over a limit raises OverLimit: it is skipped and named with the limit and the setting that raises it."""

from __future__ import annotations

import re

import numpy as np

from graphrag_lite.config import InputConfig
from graphrag_lite.documents.formats import UnusableFile

MB = 2**20

LINE_SUFFIXES = {".txt", ".md", ".csv", ".jsonl"}

JSON_SUFFIXES = {".json", ".jsonl"}

_JSON_STRING = re.compile(r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"')  # a string has no raw line break in valid JSON

_NOT_A_BRACKET = re.compile(r"[^\[\]{}\n]+")


class OverLimit(UnusableFile):
    """A file over one of the input section's limits; `setting` names it."""

    def __init__(self, message: str, setting: str):
        super().__init__(message)
        self.setting = setting


def too_large(size: int, cfg: InputConfig) -> bool:
    return size > cfg.max_file_mb * MB


def check_size(size: int, cfg: InputConfig) -> None:
    if too_large(size, cfg):
        raise OverLimit(f"too large: {size / MB:.1f} MB, over the limit input.max_file_mb ({cfg.max_file_mb:g} MB); "
                        "raise it to index this file (a run holds a document in memory several times over)",
                        "max_file_mb")


def check_text(text: str, suffix: str, cfg: InputConfig) -> None:
    """The limits on a decoded file's lines and nesting."""
    if suffix in LINE_SUFFIXES and (start := long_line_start(text, cfg.max_line_length)) is not None:
        line = text.count("\n", 0, start) + 1
        raise OverLimit(f"line {line} is over input.max_line_length ({cfg.max_line_length:,} characters): a line "
                        "that long is seldom prose (base64 or a dump without line breaks?); raise the limit to "
                        "index this file", "max_line_length")
    if suffix in JSON_SUFFIXES:
        depth, line = json_depth(text, per_line=suffix == ".jsonl")
        if depth > cfg.max_nesting_depth:
            raise OverLimit(f"nested {depth} levels deep (line {line}), over the limit input.max_nesting_depth "
                            f"({cfg.max_nesting_depth}); raise it (up to 500) to read this file, or flatten its "
                            "records", "max_nesting_depth")


def long_line_start(text: str, limit: int) -> int | None:
    """Where the first line longer than `limit` characters starts, or None. The search jumps to the last line
    break within `limit + 1` characters, so it takes len(text) / limit steps, not one a line."""
    start = 0
    while len(text) - start > limit:
        newline = max(text.rfind("\n", start, start + limit + 1), text.rfind("\r", start, start + limit + 1))
        if newline < 0:
            return start
        start = newline + 1
    return None


def json_depth(text: str, per_line: bool) -> tuple[int, int]:
    """The deepest nesting of arrays and objects in JSON text (of any one line, `per_line`: JSON Lines), and
    the line it is on; brackets inside strings do not count. The text's brackets are counted with numpy, with
    no recursion, so a file too deep for Python's parser is measured all the same."""
    skeleton = _NOT_A_BRACKET.sub("", _JSON_STRING.sub("", text))
    codes = np.frombuffer(skeleton.encode("ascii"), dtype=np.uint8)
    if not len(codes):
        return 0, 1
    newline = codes == ord("\n")
    opening = (codes == ord("[")) | (codes == ord("{"))
    depth = np.cumsum(np.where(opening, 1, np.where(newline, 0, -1)), dtype=np.int64)
    if per_line:  # each line starts from nothing: the depth at its line break is taken off
        last_break = np.maximum.accumulate(np.where(newline, np.arange(len(codes)), -1))
        depth -= np.where(last_break >= 0, depth[np.maximum(last_break, 0)], 0)
    deepest = int(np.argmax(depth))
    return int(depth[deepest]), int(newline[:deepest].sum()) + 1
