"""Documents split into token windows (text units). Windows never cross document boundaries. Each document
is tokenized once, in pieces (token_stream.py: a large document is never held as tokens whole); a window's
text is cut from the document's UTF-8 bytes at the token boundaries (moved outwards to whole characters), so
no text is lost or mangled and a unit's text is exactly a slice of its document."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator

import numpy as np
import pandas as pd
from tiktoken import Encoding

from graphrag_lite.config import ChunkingConfig
from graphrag_lite.documents.token_stream import text_pieces
from graphrag_lite.documents.utf8_columns import Utf8Column, utf8_values
from graphrag_lite.errors import ConfigError
from graphrag_lite.tokens import get_encoding, token_byte_lengths

TEXT_UNIT_COLUMNS = ["id", "human_readable_id", "text", "n_tokens", "document_id"]


def chunk_documents(documents: pd.DataFrame, cfg: ChunkingConfig) -> pd.DataFrame:
    """The text_units table: token windows of every document, with stable ids and token counts."""
    encoding = get_encoding(cfg.encoding_model)
    byte_lengths = token_byte_lengths(cfg.encoding_model)
    ids: list[str] = []
    texts = Utf8Column()  # a large document's units never all become Python strings
    n_tokens: list[int] = []
    document_ids: list[str] = []
    for doc, data in zip(documents[["id", "title", "metadata"]].itertuples(index=False),
                         utf8_values(documents["text"]), strict=True):
        header = metadata_header(str(doc.title), doc.metadata) if cfg.prepend_metadata else ""
        header_tokens = len(encoding.encode_ordinary(header)) if header else 0
        body_size = cfg.size - header_tokens
        if body_size <= cfg.overlap:
            raise ConfigError(f"document '{doc.title}': its metadata header takes {header_tokens} of "
                              f"chunking.size={cfg.size} tokens; raise chunking.size or set "
                              "chunking.prepend_metadata: false")
        seen: set[str] = set()
        windows = TokenWindows(byte_lengths, body_size, cfg.overlap, cfg.min_tail_tokens)
        for piece, count in windows.split(encoding, text_pieces(data)):
            unit_text = header.encode("utf-8") + piece
            ids.append(_unit_id(str(doc.id), unit_text, seen))
            texts.append(unit_text)
            n_tokens.append(count + header_tokens)
            document_ids.append(str(doc.id))
    return pd.DataFrame({"id": ids, "human_readable_id": range(len(ids)), "text": texts.series(),
                         "n_tokens": n_tokens, "document_id": document_ids}, columns=TEXT_UNIT_COLUMNS)


class TokenWindows:
    """Windows of `size` tokens, each starting `size - overlap` tokens after the previous one; the last
    window ends at the end of the text. A window after which fewer than `min_tail` tokens remain takes
    them too (a window of them would repeat `overlap` tokens to add those few, at the cost of a whole
    extraction). The text comes in pieces (token_stream.py), and only what the windows still need is held:
    the byte offsets of the tokens from the current window's start on, and the text's bytes from there."""

    def __init__(self, byte_lengths: np.ndarray, size: int, overlap: int, min_tail: int = 0):
        self.byte_lengths, self.size, self.step, self.min_tail = byte_lengths, size, size - overlap, min_tail
        self.first = 0  # the first token held, counted from the text's start
        self.bounds = np.zeros(1, dtype=np.int64)  # byte offset of each token held, and of the end of the last
        self.data, self.data_start = b"", 0  # the text's UTF-8 bytes from byte data_start on

    @property
    def end(self) -> int:
        """The number of tokens read so far."""
        return self.first + len(self.bounds) - 1

    def split(self, encoding: Encoding, pieces: Iterable[str]) -> Iterator[tuple[bytes, int]]:
        """(UTF-8 text, number of tokens) of each window."""
        pending = iter(pieces)
        more, start = True, 0
        while True:
            # a window's end, and whether it takes the tail, are known once min_tail tokens past it are read
            while more and self.end <= start + self.size + self.min_tail:
                piece = next(pending, None)
                more = piece is not None
                if piece is not None:
                    self._add(piece, encoding.encode_ordinary(piece), keep_from=start)
            if self.end == 0:
                return
            end = min(start + self.size, self.end)
            if not more and self.end - end < self.min_tail:
                end = self.end
            yield self._text(start, end), end - start
            if end == self.end and not more:
                return
            start += self.step

    def _add(self, piece: str, tokens: list[int], keep_from: int) -> None:
        """A piece's tokens and bytes added; those before token `keep_from` let go."""
        dropped = keep_from - self.first
        # the first byte of the character a window starts in is at most 3 bytes before its first token's
        keep_byte = max(int(self.bounds[dropped]) - 3, self.data_start)
        self.data = self.data[keep_byte - self.data_start:] + piece.encode("utf-8")
        self.data_start = keep_byte
        ends = self.bounds[-1] + np.cumsum(self.byte_lengths[np.asarray(tokens, dtype=np.int64)])
        self.bounds = np.concatenate((self.bounds[dropped:], ends))
        self.first = keep_from

    def _text(self, start: int, end: int) -> bytes:
        """The window's text: its tokens' bytes, moved outwards to whole characters."""
        begin = _char_boundary(self.data, int(self.bounds[start - self.first]) - self.data_start, -1)
        stop = _char_boundary(self.data, int(self.bounds[end - self.first]) - self.data_start, 1)
        return self.data[begin:stop]


def _char_boundary(data: bytes, position: int, step: int) -> int:
    """Move a byte offset back (step -1) to the first byte of the UTF-8 character it falls in, or forward
    (step 1) past it."""
    while 0 < position < len(data) and data[position] & 0xC0 == 0x80:  # a continuation byte
        position += step
    return position


def metadata_header(title: str, metadata_json: object) -> str:
    """The title and metadata lines a unit starts with (a document without metadata has None, not JSON)."""
    lines = [f"title: {title}"]
    if isinstance(metadata_json, str) and metadata_json:
        lines += [f"{key}: {value}" for key, value in json.loads(metadata_json).items()]
    return "\n".join(lines) + "\n\n"


def _unit_id(document_id: str, text: bytes, seen: set[str]) -> str:
    """Hash of the document id and the unit's text (UTF-8); a text repeated within one document gets a counter."""
    key = document_id.encode("utf-8") + b"\n" + text
    unit_id, repeat = hashlib.sha256(key).hexdigest(), 0
    while unit_id in seen:
        repeat += 1
        unit_id = hashlib.sha256(key + f"\n{repeat}".encode()).hexdigest()
    seen.add(unit_id)
    return unit_id
