"""Documents split into token windows (text units). Windows never cross document boundaries. Each document
is tokenized once; a window's text is cut from the document's UTF-8 bytes at the token boundaries (moved
outwards to whole characters), so no text is lost or mangled and a unit's text is exactly a slice of its
document."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd

from graphrag_lite.config import ChunkingConfig
from graphrag_lite.errors import ConfigError
from graphrag_lite.tokens import get_encoding, token_byte_lengths

TEXT_UNIT_COLUMNS = ["id", "human_readable_id", "text", "n_tokens", "document_id"]


def chunk_documents(documents: pd.DataFrame, cfg: ChunkingConfig) -> pd.DataFrame:
    """The text_units table: token windows of every document, with stable ids and token counts."""
    encoding = get_encoding(cfg.encoding_model)
    byte_lengths = token_byte_lengths(cfg.encoding_model)
    texts = documents["text"].tolist()
    all_tokens = encoding.encode_ordinary_batch(texts)
    rows: list[dict[str, object]] = []
    for doc, text, tokens in zip(documents.itertuples(index=False), texts, all_tokens, strict=True):
        header = metadata_header(str(doc.title), doc.metadata) if cfg.prepend_metadata else ""
        header_tokens = len(encoding.encode_ordinary(header)) if header else 0
        body_size = cfg.size - header_tokens
        if body_size <= cfg.overlap:
            raise ConfigError(f"document '{doc.title}': its metadata header takes {header_tokens} of "
                              f"chunking.size={cfg.size} tokens; raise chunking.size or set "
                              "chunking.prepend_metadata: false")
        seen: set[str] = set()
        for piece, n_tokens in split_tokens(text, np.asarray(tokens, dtype=np.int64), byte_lengths,
                                            body_size, cfg.overlap, cfg.min_tail_tokens):
            unit_text = header + piece
            unit_id = _unit_id(str(doc.id), unit_text, seen)
            rows.append({"id": unit_id, "human_readable_id": len(rows), "text": unit_text,
                         "n_tokens": n_tokens + header_tokens, "document_id": doc.id})
    return pd.DataFrame(rows, columns=TEXT_UNIT_COLUMNS)


def split_tokens(text: str, tokens: np.ndarray, byte_lengths: np.ndarray, size: int, overlap: int,
                 min_tail: int = 0) -> list[tuple[str, int]]:
    """Windows of `size` tokens, each starting `size - overlap` tokens after the previous one; the last
    window ends at the end of the text. A window after which fewer than `min_tail` tokens remain takes
    them too (a window of them would repeat `overlap` tokens to add those few, at the cost of a whole
    extraction). Returns (text, number of tokens) per window."""
    if len(tokens) == 0:
        return []
    data = text.encode("utf-8")
    offsets = np.concatenate(([0], np.cumsum(byte_lengths[tokens])))
    step = size - overlap
    windows = []
    for start in range(0, len(tokens), step):
        end = min(start + size, len(tokens))
        if len(tokens) - end < min_tail:
            end = len(tokens)
        begin_byte = _char_boundary(data, int(offsets[start]), -1)
        end_byte = _char_boundary(data, int(offsets[end]), 1)
        windows.append((data[begin_byte:end_byte].decode("utf-8"), end - start))
        if end == len(tokens):
            break
    return windows


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


def _unit_id(document_id: str, text: str, seen: set[str]) -> str:
    """Hash of the document id and the unit's text; a text repeated within one document gets a counter."""
    key = f"{document_id}\n{text}"
    unit_id, repeat = hashlib.sha256(key.encode("utf-8")).hexdigest(), 0
    while unit_id in seen:
        repeat += 1
        unit_id = hashlib.sha256(f"{key}\n{repeat}".encode()).hexdigest()
    seen.add(unit_id)
    return unit_id
