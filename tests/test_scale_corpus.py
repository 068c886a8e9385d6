"""The scale benchmark's corpus (bench/scale_corpus.py, read by bench/scale.py): deterministic for a seed, a
smaller corpus the start of a larger one, every name it writes found as written by the fast method's
extractor, names that grow with the corpus as real ones do, and a cache that writes a corpus once."""

from __future__ import annotations

import importlib
import sys
from collections import Counter
from pathlib import Path

import pytest

from graphrag_lite.nlp.extractor import capitalised_mid_sentence, extract_mentions

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
scale_corpus = importlib.import_module("scale_corpus")


@pytest.fixture(scope="module")
def corpus():
    return list(scale_corpus.documents(400, seed=1))


def test_a_seed_gives_one_corpus_and_a_smaller_one_is_its_start(corpus):
    again = list(scale_corpus.documents(50, seed=1))
    assert [d.text for d in again] == [d.text for d in corpus[:50]]
    assert [d.names for d in again] == [d.names for d in corpus[:50]]
    assert [d.text for d in scale_corpus.documents(5, seed=2)] != [d.text for d in corpus[:5]]


def test_the_extractor_finds_every_name_as_written(corpus):
    known = capitalised_mid_sentence(d.text for d in corpus)
    for document in corpus:
        found = {m.name for m in extract_mentions(document.text, known)}
        assert found == {name.replace(".", "").upper() for name in document.names}, document.number


def test_documents_are_prose_of_a_few_hundred_to_a_few_thousand_words(corpus):
    words = sorted(len(d.text.split()) for d in corpus)
    assert words[0] >= scale_corpus.MIN_WORDS and words[-1] <= scale_corpus.MAX_WORDS + 150  # a paragraph more
    assert 500 <= words[len(words) // 2] <= 1000 and words[-1] > 2000
    assert all(len(d.text.split("\n\n")) > 1 for d in corpus)


def test_names_grow_with_the_corpus_many_rare_a_few_frequent(corpus):
    frequency: Counter[str] = Counter()
    distinct = {}
    for document in corpus:
        frequency.update(document.names)
        distinct[document.number + 1] = len(frequency)
    growth = distinct[400] / distinct[100]
    assert 2 < growth < 3.5  # 4 times the documents: about 4 ** 0.7 the names (Heaps' law), not 4 nor 1
    assert sum(n == 1 for n in frequency.values()) > len(frequency) / 2  # most names are rare
    assert frequency.most_common(1)[0][1] > 0.05 * len(corpus)  # and a few are everywhere
    topics = Counter(d.topic for d in corpus)
    assert len(topics) > 20 and topics.most_common(1)[0][1] > 4 * len(corpus) / len(topics)


def test_a_corpus_is_written_once_per_size_and_seed(tmp_path, monkeypatch):
    folder, figures, written = scale_corpus.cached_corpus(tmp_path, 12, seed=3)
    assert written and figures["documents"] == 12 and len(list(folder.rglob("*.txt"))) == 12
    texts = [d.text for d in scale_corpus.documents(12, seed=3)]
    assert [p.read_text(encoding="utf-8") for p in sorted(folder.rglob("*.txt"))] == texts
    monkeypatch.setattr(scale_corpus, "write_corpus", lambda *_: pytest.fail("written again"))
    assert scale_corpus.cached_corpus(tmp_path, 12, seed=3) == (folder, figures, False)


def test_a_capped_corpus_stops_making_names():
    capped = list(scale_corpus.documents(200, seed=3, max_names=40))
    free = list(scale_corpus.documents(200, seed=3))
    assert len({name for document in capped for name in document.names}) <= 40
    assert len({name for document in free for name in document.names}) > 40
