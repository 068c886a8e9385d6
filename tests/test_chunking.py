import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from graphrag_lite.config import ChunkingConfig
from graphrag_lite.documents.chunking import chunk_documents
from graphrag_lite.tokens import get_encoding

ENCODING = "o200k_base"


def documents(*texts, titles=None, metadata=None):
    return pd.DataFrame({
        "id": [f"doc{i}" for i in range(len(texts))],
        "title": titles or [f"t{i}" for i in range(len(texts))],
        "text": list(texts),
        "metadata": metadata or [None] * len(texts),
    })


def numbered_words(n):
    # " w0 w1 ..." — check the token count by hand below rather than trusting it
    return "".join(f" w{i}" for i in range(n))


def test_windows_and_overlap_match_hand_computed_token_counts():
    encoding = get_encoding(ENCODING)
    text = " alpha" * 25  # " alpha" is a single token in o200k_base
    assert len(encoding.encode(" alpha")) == 1 and len(encoding.encode(text)) == 25
    units = chunk_documents(documents(text), ChunkingConfig(size=10, overlap=3, encoding_model=ENCODING))
    # starts at 0, 7, 14, 21: windows of 10, 10, 10 and the last 4 tokens
    assert units["n_tokens"].tolist() == [10, 10, 10, 4]
    assert units["text"].tolist() == [" alpha" * 10, " alpha" * 10, " alpha" * 10, " alpha" * 4]


def test_overlap_is_exactly_shared_tokens():
    encoding = get_encoding(ENCODING)
    text = numbered_words(300)
    tokens = encoding.encode(text)
    units = chunk_documents(documents(text), ChunkingConfig(size=50, overlap=10, encoding_model=ENCODING))
    for i, unit in enumerate(units["text"]):
        start = i * 40
        assert unit == encoding.decode(tokens[start:start + 50])
    assert units["n_tokens"].sum() == len(tokens) + 10 * (len(units) - 1)


def test_chunks_never_cross_documents_and_cover_each_document():
    texts = [numbered_words(120), "Short one.", numbered_words(33)]
    units = chunk_documents(documents(*texts), ChunkingConfig(size=40, overlap=0, encoding_model=ENCODING))
    for i, text in enumerate(texts):
        own = units[units["document_id"] == f"doc{i}"]["text"].tolist()
        assert "".join(own) == text  # with no overlap, the units rebuild the document exactly
    assert units["human_readable_id"].tolist() == list(range(len(units)))


def test_multibyte_characters_are_never_split():
    text = "日本語のテキスト。" * 80 + "🙂" * 50
    units = chunk_documents(documents(text), ChunkingConfig(size=17, overlap=0, encoding_model=ENCODING))
    assert all("\ufffd" not in u for u in units["text"])
    assert "".join(units["text"]).count("🙂") >= 50
    assert set("".join(units["text"])) == set(text)


def test_ids_are_stable_and_depend_on_document_and_text():
    docs = documents(numbered_words(100), numbered_words(100))
    cfg = ChunkingConfig(size=30, overlap=5, encoding_model=ENCODING)
    first, second = chunk_documents(docs, cfg), chunk_documents(docs, cfg)
    assert first["id"].tolist() == second["id"].tolist()
    assert first["id"].is_unique  # same text in two documents still gives two ids


def test_repeated_text_within_a_document_gets_distinct_ids():
    units = chunk_documents(documents(" alpha" * 40), ChunkingConfig(size=10, overlap=0, encoding_model=ENCODING))
    assert units["id"].is_unique and len(units) == 4


def test_prepended_metadata_counts_in_the_size():
    meta = ['{"author": "Ann"}']
    docs = documents(" alpha" * 60, titles=["Report"], metadata=meta)
    units = chunk_documents(docs, ChunkingConfig(size=30, overlap=0, prepend_metadata=True, encoding_model=ENCODING))
    header = "title: Report\nauthor: Ann\n\n"
    assert all(u.startswith(header) for u in units["text"])
    encoding = get_encoding(ENCODING)
    assert all(len(encoding.encode(u)) <= 30 for u in units["text"])
    assert units["n_tokens"].max() == 30


def test_overlap_not_smaller_than_size_is_refused_by_the_settings_themselves():
    with pytest.raises(ValidationError, match=r"overlap \(10\) must be smaller than size \(10\)"):
        ChunkingConfig(size=10, overlap=10, encoding_model=ENCODING)


def test_a_tail_of_few_new_tokens_joins_the_unit_before_it_and_nothing_is_lost():
    text = " alpha" * 25  # windows 10, 10, 10 and a last one of 4: 3 repeated tokens and 1 new
    joined = chunk_documents(documents(text), ChunkingConfig(size=10, overlap=3, min_tail_tokens=2,
                                                             encoding_model=ENCODING))
    assert joined["n_tokens"].tolist() == [10, 10, 11]
    assert joined["text"].tolist()[-1] == " alpha" * 11
    kept = chunk_documents(documents(text), ChunkingConfig(size=10, overlap=3, min_tail_tokens=1,
                                                           encoding_model=ENCODING))
    assert kept["n_tokens"].tolist() == [10, 10, 10, 4]  # 1 new token is not fewer than 1
    words = numbered_words(300)
    for tail in (0, 5, 40):  # every word stays, in order, whatever joins
        units = chunk_documents(documents(words), ChunkingConfig(size=50, overlap=0, min_tail_tokens=tail,
                                                                 encoding_model=ENCODING))
        assert "".join(units["text"]) == words and units["n_tokens"].max() < 50 + max(tail, 1)


def test_a_tail_threshold_above_one_step_is_refused_by_the_settings_themselves():
    with pytest.raises(ValidationError, match=r"min_tail_tokens \(8\) must be at most size - overlap \(10 - 3 = 7,"):
        ChunkingConfig(size=10, overlap=3, min_tail_tokens=8, encoding_model=ENCODING)


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_token_byte_lengths_from_tiktoken_tables_match_decoding_every_token(name):
    from graphrag_lite.tokens import _decoded_lengths, token_byte_lengths

    encoding = get_encoding(name)
    fast = token_byte_lengths(name)
    assert (fast == _decoded_lengths(encoding, np.zeros(encoding.n_vocab, dtype=np.int64))).all()
    assert fast[encoding.eot_token] == len("<|endoftext|>")
