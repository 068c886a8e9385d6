"""Scores of one question: which gold evidence a context holds, and how an answer compares with the gold
answers. Pure functions over plain rows; the index tables map text units to their documents.

Evidence sentences are matched fuzzily (gold evidence is often paraphrased, as in GraphRAG-Bench): one is
found when a single sentence of the context covers at least half of its content words (words of three
letters or more, stopwords aside). Answers are scored as in SQuAD and HotpotQA (exact match and token F1
after lower-casing and removing punctuation and articles), plus `contains`: a gold answer appears in the
answer, which suits the long answers GraphRAG prompts ask for.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import pandas as pd

from graphrag_lite.evaluation.questions import Question
from graphrag_lite.nlp.extractor import sentences
from graphrag_lite.tables import unit_documents
from graphrag_lite.words import STOPWORDS


def content_words(text: str) -> frozenset[str]:
    return frozenset(w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 2 and w not in STOPWORDS)


@cache
def sentence_words(text: str) -> tuple[frozenset[str], ...]:
    return tuple(content_words(s) for s in sentences(text))


def found_sentences(evidence: Sequence[str], texts: Iterable[str]) -> set[int]:
    """Indexes of the evidence sentences that one sentence of the texts covers at least half of."""
    context = [words for text in texts for words in sentence_words(text)]
    wanted = [content_words(item) for item in evidence]
    return {i for i, want in enumerate(wanted) if want and any(2 * len(want & words) >= len(want) for words in context)}


@dataclass(frozen=True)
class UnitLookup:
    """Text units by the id a context row shows (human_readable_id), with their documents' ids and titles."""

    unit_ids: dict[int, str]
    documents: dict[int, tuple[str, str]]  # human_readable_id -> (document id, document title)

    @staticmethod
    def of(text_units: pd.DataFrame, documents: pd.DataFrame | None) -> UnitLookup:
        found = unit_documents(text_units, documents)
        readable = dict(zip((int(i) for i in text_units["human_readable_id"]), text_units["id"], strict=True))
        return UnitLookup(readable, {r: (str(found[u][0]), str(found[u][1] or "")) for r, u in readable.items()})


@dataclass(frozen=True)
class Retrieval:
    gold: int  # gold items of the question
    found: int  # of them, in the context (evaluate.summary_table gives recall and all-gold)


def score_retrieval(question: Question, rows: list[dict[str, Any]], units: UnitLookup) -> Retrieval:
    """How many of the question's gold items (sentences, documents, text units) the source rows hold."""
    readable = [int(row["id"]) for row in rows if str(row.get("id", "")).isdigit()]
    documents = {name for r in readable if r in units.documents for name in units.documents[r]}
    unit_ids = {str(r) for r in readable} | {units.unit_ids[r] for r in readable if r in units.unit_ids}
    found = len(found_sentences(question.evidence, (str(row.get("text", "")) for row in rows)))
    found += sum(d in documents for d in question.evidence_documents)
    found += sum(u in unit_ids for u in question.evidence_text_units)
    return Retrieval(len(question.evidence) + len(question.evidence_documents) + len(question.evidence_text_units),
                     found)


def normalize_answer(text: str) -> str:
    text = "".join(c for c in text.lower() if c not in string.punctuation)
    return " ".join(w for w in text.split() if w not in ("a", "an", "the"))


def exact_match(answer: str, golds: Sequence[str]) -> float:
    return float(any(normalize_answer(answer) == normalize_answer(g) for g in golds))


def token_f1(answer: str, golds: Sequence[str]) -> float:
    return max((_f1(normalize_answer(answer).split(), normalize_answer(g).split()) for g in golds), default=0.0)


def contains_answer(answer: str, golds: Sequence[str]) -> float:
    said = f" {normalize_answer(answer)} "
    return float(any(normalize_answer(g) and f" {normalize_answer(g)} " in said for g in golds))


def _f1(predicted: list[str], gold: list[str]) -> float:
    common = sum((Counter(predicted) & Counter(gold)).values())
    if not common:
        return 0.0
    precision, recall = common / len(predicted), common / len(gold)
    return 2 * precision * recall / (precision + recall)
