"""A document's text in pieces for the tokenizer, so that a large document is never tokenized whole: its
tokens as Python integers take about 40 bytes each, 1.8 GB for a 200 MB text.

A piece ends where every tiktoken encoding's pre-tokenizer ends a piece too: before a space that follows a
non-space character, or after a line break that follows a non-space character and comes before a letter. No
encoding's pre-tokenizer pattern joins the characters on either side of such a place, nor looks past it, so
the pieces' tokens are the whole text's (tests/test_input_guards.py checks it for several encodings). A stretch
of PIECE_BYTES with no such place (a base64 blob) is cut anyway at its end, where a token may then differ from
the whole text's; nothing is lost."""

from __future__ import annotations

import re
from collections.abc import Iterator

PIECE_BYTES = 2**20  # about 250,000 tokens of English

_PIECE_END = re.compile(r"\S(?= )|\S\n(?=[^\W\d_])")  # what ends a piece: a match's end is a safe place


def text_pieces(data: bytes | memoryview) -> Iterator[str]:
    """The UTF-8 text in consecutive pieces of at most 2 * PIECE_BYTES bytes, each ending at the first safe
    place in its second half; only a piece at a time is a Python string."""
    view, start = memoryview(data), 0
    while len(view) - start > 2 * PIECE_BYTES:
        stop = start + 2 * PIECE_BYTES
        while view[stop] & 0xC0 == 0x80:  # a UTF-8 continuation byte: back to its character's first byte
            stop -= 1
        window = str(view[start:stop], "utf-8")
        safe = _PIECE_END.search(window, len(window) // 2)
        piece = window[:safe.end()] if safe else window
        yield piece
        start += len(piece.encode("utf-8")) if safe else stop - start
    if start < len(view):
        yield str(view[start:], "utf-8")
