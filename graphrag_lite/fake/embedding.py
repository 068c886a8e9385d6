"""The fake embedding model: a deterministic vector per text that keeps lexical similarity."""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from collections import Counter
from typing import Any

import numpy as np


def embed_text(text: str, dim: int) -> list[float]:
    """A deterministic vector that keeps lexical similarity: hashed words and character trigrams. The fake
    stands in for a remote server, whose work should cost the indexing process as little as it can: the
    trigrams are counted as integer codes with numpy, and each distinct feature is hashed once per process
    (a word and the trigram that spells the same text share a hash, as one feature)."""
    lowered = text.lower()
    words = Counter(re.findall(r"\w+", lowered))
    trigrams, trigram_counts = _trigram_codes(lowered)
    votes = _VOTES.get(dim)
    if votes is None:
        votes = _VOTES[dim] = _Votes(dim)
    signed = np.fromiter(itertools.chain(map(votes.__getitem__, words), map(votes.__getitem__, trigrams.tolist())),
                         dtype=np.int64, count=len(words) + len(trigrams))
    counts = np.concatenate([np.fromiter(words.values(), dtype=np.float64, count=len(words)), trigram_counts])
    # counts are whole numbers, so these sums are exact in any order: the vector is the one that adding a
    # feature at a time gives
    vector = np.bincount(np.abs(signed) - 1, weights=np.sign(signed) * counts, minlength=dim)
    norm = math.sqrt(float(np.dot(vector, vector))) or 1.0
    return (vector / norm).tolist()


def _trigram_codes(lowered: str) -> tuple[np.ndarray, np.ndarray]:
    """The distinct character trigrams of `lowered` as integers (three 21-bit code points), and their counts."""
    if len(lowered) < 3:
        return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.float64)
    points = np.frombuffer(lowered.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).astype(np.uint64)
    codes = (points[:-2] << np.uint64(42)) | (points[1:-1] << np.uint64(21)) | points[2:]
    distinct, counts = np.unique(codes, return_counts=True)
    return distinct, counts.astype(np.float64)


class _Votes(dict[Any, int]):
    """Each feature's bucket and sign for one dimension, as one signed number (the sign times bucket + 1), hashed
    on first sight and remembered: a word by its text, a trigram by its code."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def __missing__(self, feature: str | int) -> int:
        if len(self) >= 1 << 19:  # a bound on the memory (about 50 MB), as a long-running fake server needs
            self.clear()
        text = feature if isinstance(feature, str) else \
            chr(feature >> 42) + chr((feature >> 21) & 0x1FFFFF) + chr(feature & 0x1FFFFF)
        self[feature] = _feature_vote(text, self.dim)
        return self[feature]


_VOTES: dict[int, _Votes] = {}


def _feature_vote(feature: str, dim: int) -> int:
    digest = hashlib.blake2b(feature.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    bucket = int.from_bytes(digest[:4], "little") % dim
    return bucket + 1 if digest[4] & 1 else -(bucket + 1)
